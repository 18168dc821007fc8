"""The device application writing framed reports to a serial line (a socat pty
pair), read by a gateway with pyserial; plus safe idle and bad sensor values.
Each runs under the real MicroPython unix port and under CPython."""
import json
import subprocess
import sys
import threading
import time

import pytest
import serial

from micropython_runner import run
from mss_device.framing import frame
from mss_device.gateway import parse
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.wire import WireCodec
from ptys import pty_pair  # noqa: F401 (fixture)

NODE = r"""
import sys
from mss_node import app
value = sys.argv[3]
app.run(sys.argv[1], sys.argv[2], sensor=lambda: eval(value), ticks=int(sys.argv[4]),
        sleep=(lambda s: None) if sys.argv[5] == "fast" else __import__("time").sleep)
"""
RUNTIMES = ["micropython", "cpython"]
CFG = MssConfig.build(64, 2.0, [59, 61, 63])


def run_node(runtime, cwd, *args):
    args = [str(a) for a in args]
    if runtime == "micropython":
        return run(NODE, cwd=cwd, args=args)
    return subprocess.run([sys.executable, "-c", NODE, *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def write_config(tmp_path, **device):
    d = CFG.to_dict()
    d["device"] = dict({"device_id": "s1", "period_s": 1, "poll_s": 1, "transport": "serial"}, **device)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(d))
    return path


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_framed_reports_over_a_pty(tmp_path, pty_pair, runtime):
    dev, host = pty_pair
    path = write_config(tmp_path, serial={"path": str(dev)})
    received = bytearray()
    with serial.Serial(str(host), 115200, timeout=0.2) as port:
        done = threading.Event()

        def reader():
            while not done.is_set():
                try:
                    received.extend(port.read(4096))
                except serial.SerialException:  # the writer side closed
                    time.sleep(0.05)

        thread = threading.Thread(target=reader)
        thread.start()
        out = run_node(runtime, tmp_path, path, tmp_path / "state.json", 9, 3, "slow")
        time.sleep(0.5)
        done.set()
        thread.join()
    assert out.returncode == 0, out.stdout + out.stderr
    lines = received.decode().splitlines()
    reports = [WireCodec(CFG).decode(parse(line)) for line in lines]
    assert 2 <= len(reports) <= 3 and [r.seq for r in reports] == list(range(len(reports)))


def test_corrupted_frame_is_rejected_by_checksum():
    report = WireCodec(CFG).encode(0, list(range(CFG.omegas[0])))
    line = frame(report)
    assert parse(line) == report
    flipped = line[:8] + ("0" if line[8] != "0" else "1") + line[9:]
    with pytest.raises(ValueError, match="checksum"):
        parse(flipped)
    for bad in ("$MSS1,zz,0000", "$MSS1,00", "hello", "$MSS1,00,00000"):
        with pytest.raises(ValueError, match="frame"):
            parse(bad)


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("content,why", [
    (None, "no config file"),
    ("{not json", "not valid JSON"),
    ('{"format": "mss-config"}', "missing"),
    ("VALID:mqtt", "wrong type"),
])
def test_missing_or_corrupt_config_idles(tmp_path, runtime, content, why):
    path = tmp_path / "config.json"
    if content == "VALID:mqtt":  # valid JSON, a field of the wrong type
        content = json.dumps(dict(CFG.to_dict(), device={"device_id": "x", "mqtt": 5}))
    if content is not None:
        path.write_text(content)
    out = run_node(runtime, tmp_path, path, tmp_path / "state.json", 0, 2, "fast")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "idle:" in out.stdout and why in out.stdout


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("value", ["64", "-1", "None", "2.5", "'3'", "1/0"])
def test_bad_sensor_value_sends_nothing(tmp_path, runtime, value):
    path = write_config(tmp_path, serial={"path": str(tmp_path / "out.txt")})
    out = run_node(runtime, tmp_path, path, tmp_path / "state.json", value, 2, "fast")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no report" in out.stdout
    assert (tmp_path / "out.txt").read_text() == ""
