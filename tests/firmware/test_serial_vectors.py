"""The board's serial writer under real MicroPython writes every line and status line of
protocol/vectors/serial/lines.json (SPEC.md section 8) byte for byte."""
import json

from micropython_runner import run
from mss_protocol import serial_lines

SCRIPT = r"""
import json, sys
from mss_device.framing import frame, status_line

d = json.load(open(sys.argv[1]))
for v in d["lines"]:
    print(json.dumps(frame(v["device_id"], bytes.fromhex(v["report_hex"]))))
for v in d["statuses"]:
    print(json.dumps(status_line(v["device_id"], v["word"])))
"""


def test_the_board_writes_the_serial_vectors():
    out = run(SCRIPT, args=[str(serial_lines.PATH)])
    assert out.returncode == 0, out.stderr
    d = json.loads(serial_lines.PATH.read_text())
    got = [json.loads(line) for line in out.stdout.splitlines()]
    want = [v["line"].replace("\r\n", "\n") for v in d["lines"]] + [v["line"] for v in d["statuses"]]
    assert got == want and len(got) > 40
