"""The device application writing report lines (``$MSS2,<device id>,...``) to a
serial line (a socat pty pair), read by a gateway with pyserial; plus safe
idle, bad sensor values and device ids refused at config load.  Each runs
under the real MicroPython unix port and under CPython."""
import json
import subprocess
import sys
import threading
import time

import pytest
import serial

from micropython_runner import run
from mss_device.framing import crc16, frame
from mss_device.gateway import DEVICE_ID, LineError, parse
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
    text = received.decode()
    assert text.endswith("\n") and "\r" not in text
    parsed = [parse(line) for line in text.split("\n")[:-1]]
    assert {device for device, _ in parsed} == {"s1"}
    reports = [WireCodec(CFG).decode(report) for _, report in parsed]
    assert 2 <= len(reports) <= 3 and [r.seq for r in reports] == list(range(len(reports)))


def test_line_round_trip_and_rejections():
    report = WireCodec(CFG).encode(0, list(range(CFG.omegas[0])))
    line = frame("s1", report)
    assert line == "$MSS2,s1,%s,%04x\n" % (report.hex(), crc16(("$MSS2,s1," + report.hex()).encode()))
    assert parse(line) == parse(line[:-1]) == parse(line[:-1] + "\r\n") == parse(line.encode()) == ("s1", report)
    assert crc16(b"123456789") == 0x29B1  # CRC-16/CCITT-FALSE's check value
    flipped = line[:10] + ("0" if line[10] != "0" else "1") + line[11:]
    with pytest.raises(LineError, match="checksum") as exc:
        parse(flipped)
    assert exc.value.reason == "checksum"
    with pytest.raises(LineError, match="checksum"):
        parse(line.replace("s1", "s2"))  # the device id is under the CRC
    with pytest.raises(LineError, match="format 1.*no device id.*reflash") as exc:
        parse("$MSS1,%s,%04x\n" % (report.hex(), crc16(report)))
    assert exc.value.reason == "frame"
    for bad in ("$MSS2,s1,zz,0000", "$MSS2,s1,00", "$MSS2,s1,00,00000", "$MSS2,s1,00,+fff", "$MSS", "$MSS2",
                line[:-1] + " ", line[:-1] + "\r\r", "$MSS2,s1,0,0000", "$MSS2,,00,0000", "$MSS2,s\xff,00,0000",
                b"$MSS2,s\xff,00,0000"):
        with pytest.raises(LineError, match="frame"):
            parse(bad)
    for console in ("hello", "", "\r\n", " " + line, b"\xff\xfe log", "$mss2,s1,00,0000"):
        assert parse(console) is None


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("transport", ["serial", "mqtt", "lorawan"])
@pytest.mark.parametrize("device_id", ["a b", "d" * 65, "", "board-\u00e9", "a/b", "a\n", 7])
def test_a_bad_device_id_is_refused_at_config_load(tmp_path, runtime, transport, device_id):
    """The id is on serial lines, in MQTT topics and in OLH's seed: any transport refuses it."""
    path = write_config(tmp_path, transport=transport, device_id=device_id)
    out = run_node(runtime, tmp_path, path, tmp_path / "state.json", 9, 1, "fast")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "idle:" in out.stdout and "device.device_id must be 1-64 of" in out.stdout, out.stdout


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_device_id_character_and_64_of_them_are_taken(tmp_path, runtime):
    device_id = ("AZaz09_.:-" * 7)[:64]
    assert DEVICE_ID.match(device_id)
    path = write_config(tmp_path, device_id=device_id, serial={"path": str(tmp_path / "out.txt")})
    out = run_node(runtime, tmp_path, path, tmp_path / "state.json", 9, 1, "fast")
    assert out.returncode == 0, out.stdout + out.stderr
    assert [parse(line)[0] for line in (tmp_path / "out.txt").read_text().split("\n")[:-1]] == [device_id]


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
