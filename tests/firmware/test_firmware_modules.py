"""mss_aggregator.deploy.modules lists what a board needs: a board folder holding
exactly those modules (compiled the way mss deploy --mpy does, for the
unix port's arch), boot.py, main.py and sensor.py runs the firmware app under
the MicroPython unix port and reports; take any listed module away and it
does not."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from brokers import Mosquitto
from micropython_runner import FIRMWARE, MPLIB, ROOT, require_micropython
from mss_aggregator.deploy import ARCHS
from mss_aggregator.deploy import flash as deploy
from mss_aggregator.deploy import modules as firmware_modules
from mss_aggregator.devices.modem import emulator
from mss_device.gateway import parse
from mss_protocol.choose import Limits, choose
from mss_protocol.privacy import cap

T0 = 1_800_000_000
KEY_HEX = "00112233445566778899aabbccddeeff"
# the board's own boot.py, its sensor.py, and the app on a virtual clock (one epoch a tick)
NODE = r"""
import sys
import boot
from mss_node import app
from sensor import read_category
import mss_node.app
print("FROM", mss_node.app.__file__)
t = [int(sys.argv[2])]
def sleep(s):
    t[0] += s
node = app.run("config.json", "state.json", sensor=read_category, clock=lambda: t[0], sleep=sleep,
               ticks=int(sys.argv[1]))
print("SEQ", node.state.seq, "QUEUE", len(node.state.queue))
"""


def _config(protocol, frame="full", **device):
    d = dict(choose(16, 2.0, protocol, limits=Limits(frame=frame))["config"])
    d["device"] = dict({"campaign": "t", "device_id": "b1", "period_s": 1, "poll_s": 1}, **device)
    return d


def _arch():
    out = subprocess.run([require_micropython(), "-c", "import sys; print(sys.implementation._mpy)"],
                         capture_output=True, text=True, check=True).stdout
    return ARCHS[int(out) >> 10]


def _board(folder, cfg):
    """A board's flash: the listed modules (compiled), the top files, config.json."""
    deploy.stage(folder, firmware_modules.modules(cfg), True, _arch())
    for name in firmware_modules.TOP_FILES:
        (folder / name).write_text((FIRMWARE / name).read_text())
    (folder / "config.json").write_text(json.dumps(cfg))


def _run(folder, ticks=4):
    env = dict(os.environ, MICROPYPATH=os.pathsep.join([str(folder), str(MPLIB), ".frozen"]))
    out = subprocess.run([require_micropython(), "-c", NODE, str(ticks), str(T0)], capture_output=True,
                         text=True, timeout=120, cwd=folder, env=env)
    return out.stdout + out.stderr


def _sent(log, ticks=4):
    assert "FROM lib/mss_node/app.mpy" in log, log
    assert f"SEQ {ticks} QUEUE 0" in log, log


@pytest.mark.parametrize("protocol,options", [
    ("mss", {}), ("olh", {}), ("pgr", {}),
    ("mss", {"memoize": True, "fleet_key": KEY_HEX, "max_epsilon": 2.0, "max_ratio": cap(2.0)})])
def test_serial_board(tmp_path, protocol, options):
    out = tmp_path / "serial.txt"
    cfg = _config(protocol, serial={"path": str(out)}, **options)
    listed = firmware_modules.modules(cfg)
    for name in ("memo", "auth", "cap"):
        assert (f"mss_node/{name}.py" in listed) == bool(options)
    _board(tmp_path, cfg)
    _sent(_run(tmp_path))
    lines = out.read_text().split("\n")
    assert len(lines) == 5 and lines[-1] == "" and {parse(line)[0] for line in lines[:-1]} == {"b1"}


@pytest.mark.parametrize("protocol,dialect", [("grr", "rn2483"), ("hr", "wio-e5"), ("sue", "rak3172")])
def test_lorawan_board(tmp_path, protocol, dialect):
    m = emulator(dialect, "70b3d57ed0000001")
    m.start()
    try:
        cfg = _config(protocol, "compact", transport="lorawan", device_id=None,
                      lorawan={"modem": dialect, "path": m.path, "retry_s": 1, "backoff_max_s": 2,
                               "join_timeout_s": 2, "tx_timeout_s": 1})
        del cfg["device"]["device_id"]
        _board(tmp_path, cfg)
        _sent(_run(tmp_path))
        assert len(m.uplinks) == 4
    finally:
        m.stop()


@pytest.mark.parametrize("signed", [False, True])
def test_mqtt_board(tmp_path, signed):
    subprocess.run(["sh", str(ROOT / "tools" / "get_umqtt.sh"), str(MPLIB)], check=True,
                   env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"})
    (tmp_path / "broker").mkdir()
    broker = Mosquitto(tmp_path / "broker")
    broker.start()
    try:
        extra = {"fleet_key": KEY_HEX * 2} if signed else {}
        cfg = _config("rappor", transport="mqtt", mqtt={"host": "127.0.0.1", "port": broker.port,
                                                        "timeout_s": 2, "backoff_max_s": 1}, **extra)
        files = firmware_modules.modules(cfg)
        assert ("mss_node/auth.py" in files) == signed and "mss_node/tls.py" not in files
        board = tmp_path / "board"
        board.mkdir()
        _board(board, cfg)
        _sent(_run(board))
    finally:
        broker.stop()


def test_every_listed_module_is_needed(tmp_path):
    """Without any one of its listed modules (package __init__ files aside: MicroPython
    imports a folder without one) the board reports nothing."""
    cfg = _config("mss", serial={"path": str(tmp_path / "serial.txt")})
    files = [f for f in firmware_modules.modules(cfg) if not f.endswith("__init__.py")]
    assert len(files) > 8
    full = tmp_path / "full"
    _board(full, cfg)  # compiled once (mpy-cross is deterministic): each board is a copy less one module
    _sent(_run(full, 2), 2)  # the control: with all of them it reports
    for drop in files:
        board = shutil.copytree(full, tmp_path / drop.replace("/", "_"))
        (board / "lib" / drop).with_suffix(".mpy").unlink()
        log = _run(board, 2)
        assert "SEQ 2 QUEUE 0" not in log, f"the board ran without {drop}"


def test_lists_follow_the_config():
    mods = firmware_modules.modules
    tls = mods({"protocol": "grr", "device": {"transport": "mqtt", "mqtt": {"tls": True}}})
    assert "mss_node/tls.py" in tls and "mss_device/grr.py" in tls and "mss_device/mss.py" not in tls
    lw = mods({"protocol": "olh", "device": {"transport": "lorawan"}})  # default modem: rak3172
    assert "mss_node/modem/rak3172.py" in lw and "mss_node/modem/wio_e5.py" not in lw
    assert "mss_node/mqtt_link.py" not in lw and "mss_node/auth.py" not in lw
    assert firmware_modules.external({"device": {"transport": "mqtt"}}) == ("umqtt.simple",)


def test_every_on_demand_import_is_known():
    """A firmware module imported inside a function is loaded only for some configs: the
    list must know which (firmware_modules.OPTIONS; the link, protocol and modem tables)."""
    listed = set()
    for protocol in ("mss", "grr", "rappor", "olh", "hr", "pgr"):
        for dev in ({"transport": "serial", "memoize": True, "max_epsilon": 1.0, "sleep": "light", "budget": {}},
                    {"transport": "mqtt", "mqtt": {"tls": True}, "fleet_key": "00"},
                    {"transport": "lorawan", "lorawan": {"modem": "rak3172"}},
                    {"transport": "lorawan", "lorawan": {"modem": "wio-e5"}},
                    {"transport": "lorawan", "lorawan": {"modem": "rn2483"}}):
            listed |= set(firmware_modules.modules({"protocol": protocol, "device": dev}))
    assert firmware_modules.on_demand() <= listed
    every = {p.relative_to(firmware_modules.LIB).as_posix() for p in firmware_modules.LIB.rglob("*.py")}
    assert every - listed <= {"mss_node/emit.py", "mss_node/check_config.py",  # host code, never on a board
                              "mss_device/gateway.py"}
