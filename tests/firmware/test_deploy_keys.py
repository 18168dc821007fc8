"""mss deploy --keys: a board's OTAA keys from mss provision's output go into its modem through
the board, are read back where the modem allows it, are never printed, and a modem holding other
keys is refused unless --overwrite-keys.

The board is the MicroPython unix port.  Once, the whole command: a folder is the board's
filesystem, behind a stand-in for mpremote (``exec``, ``run``, ``fs cp``; ``mip`` and ``reset`` do
nothing), the deploy copies the firmware into it and the modem script runs on what it copied.
Each other dialect: the library's modem script run on the unix port with the firmware.  The modem
is the project's emulator of each dialect on a pty, the board's ``device.lorawan.path``."""
import json
import os
import stat
import sys

import pytest
from click.testing import CliRunner

from micropython_runner import require_micropython, run
from mss_aggregator.deploy import BOARD, CONFIG, DeployError, keys
from mss_aggregator.devices.modem import emulator
from mss_cli.deploy import worded
from mss_cli.main import main
from mss_protocol.budget import budget_section
from mss_protocol.mss.config import MssConfig

EUI = "70b3d57ed0000001"
JOIN_EUI = "0102030405060708"
APP_KEY = "2b7e151628aed2a6abf7158809cf4f3c"
KEYS = keys.OtaaKeys(EUI, JOIN_EUI, APP_KEY)
FAKE_MPREMOTE = """#!{python} -S
import os, shutil, subprocess, sys
board, args = os.environ["MSS_TEST_BOARD"], sys.argv[3:]  # after: connect PORT
env = dict(os.environ, MICROPYPATH=os.path.join(board, "lib") + os.pathsep + ".frozen")
if args[0] in ("exec", "run"):
    code = ["-c", args[1]] if args[0] == "exec" else [args[1]]
    sys.exit(subprocess.run([os.environ["MSS_TEST_MICROPYTHON"], *code], cwd=board, env=env).returncode)
if args[:2] == ["fs", "cp"]:
    src, dest = args[-2], os.path.join(board, args[-1][1:])
    if os.path.isdir(src):
        shutil.copytree(src, os.path.join(dest, os.path.basename(src)), dirs_exist_ok=True)
    else:
        shutil.copy(src, dest)
"""


@pytest.fixture
def board(tmp_path, monkeypatch):
    """A board's filesystem (a folder) behind a stand-in mpremote on PATH."""
    bin_dir, fs = tmp_path / "bin", tmp_path / "board"
    bin_dir.mkdir()
    fs.mkdir()
    tool = bin_dir / "mpremote"
    tool.write_text(FAKE_MPREMOTE.format(python=sys.executable))
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("MSS_TEST_BOARD", str(fs))
    monkeypatch.setenv("MSS_TEST_MICROPYTHON", require_micropython())
    return fs


def _provisioned(tmp_path, modem, path):
    """mss provision's output for one LoRaWAN board on ``modem`` at the pty ``path``: the folder."""
    campaign = tmp_path / "campaign.json"
    MssConfig.build(64, 1.0, [59, 61, 63]).save(campaign, {"device": {"budget": budget_section(4.0, 30),
                                                                       "period_s": 3600}})
    fleet = tmp_path / "fleet.csv"
    fleet.write_text(f"device_id,dev_eui,join_eui,app_key,transport,lorawan.modem,lorawan.path\n"
                     f"orchard-01,{EUI.upper()},{JOIN_EUI},{APP_KEY},lorawan,{modem},{path}\n")
    out = tmp_path / "out"
    done = CliRunner().invoke(main, ["provision", str(fleet), "--config", str(campaign), "--campaign", "orchard",
                                     "--out", str(out)])
    assert done.exit_code == 0, done.output
    return out


def deploy(out, *args):
    return CliRunner().invoke(main, ["deploy", "--config", str(out / "boards" / f"{EUI}.json"), "--port",
                                     "/dev/ttyACM0", "--keys", str(out), *args])


def _held(modem):
    return modem.dev_eui, modem.join_eui, modem.app_key


def on_board(script):
    """Run the modem script as ``mpremote run`` would, on the MicroPython unix port with the firmware."""
    return run(script, timeout=30).stdout


def test_deploy_writes_the_keys_through_the_board(tmp_path, board):
    """The whole command: the firmware copied onto the board, then the keys, before the reset; the
    Wio-E5 echoes the AppKey when it takes it, and it is printed masked."""
    modem = emulator("wio-e5", EUI)
    modem.start()
    try:
        out = _provisioned(tmp_path, "wio-e5", modem.path)
        done = deploy(out)
    finally:
        modem.stop()
    assert done.exit_code == 0, done.output
    assert _held(modem) == (EUI, JOIN_EUI, APP_KEY)
    assert APP_KEY not in done.output.lower()
    assert ("modem keys: DevEUI, JoinEUI read back equal; AppKey written (the wio-e5 cannot read it back: not "
            "compared)") in done.output, done.output
    lines = done.output.splitlines()
    assert lines[lines.index("mpremote connect /dev/ttyACM0 reset") - 1].startswith("/dev/ttyACM0: modem keys:")
    assert (board / "lib" / "mss_node" / "modem" / "wio_e5.py").exists() and (board / "config.json").exists()


@pytest.mark.parametrize("dialect", ["rak3172", "rak3172-old", "rn2483"])
def test_each_dialect_stores_and_reads_back(dialect):
    modem = emulator(dialect, EUI)
    modem.start()
    try:
        lorawan = {"modem": dialect.replace("-old", ""), "path": modem.path}
        done = keys.write_keys(KEYS, lorawan, on_board)
        assert _held(modem) == (EUI, JOIN_EUI, APP_KEY)
        if dialect == "rn2483":  # mac save: the keys outlive a power cycle
            modem.power_off()
            assert _held(modem) == (EUI, JOIN_EUI, APP_KEY)
    finally:
        modem.stop()
    readable = "DevEUI, JoinEUI, AppKey" if dialect.startswith("rak") else "DevEUI, JoinEUI"
    assert done[0].startswith(f"{readable} read back equal"), done
    assert ("AppKey written (the rn2483 cannot read it back" in done[0]) == (dialect == "rn2483")
    assert APP_KEY not in repr(KEYS) and all(APP_KEY not in line.lower() for line in done)


def test_a_modem_with_other_keys_is_refused_unless_told():
    modem = emulator("rak3172", EUI)
    modem.join_eui, modem.app_key = "aa" * 8, "bb" * 16  # another board's
    modem.start()
    try:
        lorawan = {"modem": "rak3172", "path": modem.path}
        with pytest.raises(DeployError) as refused:
            keys.write_keys(KEYS, lorawan, on_board)
        assert refused.value.status == CONFIG and refused.value.option == "overwrite_keys"
        assert "another JoinEUI and AppKey" in str(refused.value) and "bb" * 16 not in str(refused.value).lower()
        assert worded(refused.value).startswith("--overwrite-keys: ")
        assert _held(modem) == (EUI, "aa" * 8, "bb" * 16)  # untouched
        done = keys.write_keys(KEYS, lorawan, on_board, overwrite=True)
        assert done[0] == "overwrote the modem's JoinEUI and AppKey"
        assert _held(modem) == (EUI, JOIN_EUI, APP_KEY)
    finally:
        modem.stop()


def test_a_modem_that_does_not_answer():
    with pytest.raises(DeployError) as silent:
        keys.answers("mss-keys awake 0\n", 2)
    assert silent.value.status == BOARD and "the modem did not answer the board" in str(silent.value)


def test_dry_run_shows_the_commands_with_the_key_masked(tmp_path):
    out = _provisioned(tmp_path, "wio-e5", "/dev/ttyS9")
    done = deploy(out, "--dry-run")
    assert done.exit_code == 0, done.output
    assert APP_KEY not in done.output.lower()
    assert (f'# modem keys, write: AT+ID=DevEui,"{EUI.upper()}"; AT+ID=AppEui,"{JOIN_EUI.upper()}"; '
            'AT+KEY=APPKEY,"***", then read back: AT+ID=DevEui; AT+ID=AppEui') in done.output
    lines = done.output.splitlines()
    keys_at = max(i for i, line in enumerate(lines) if line.startswith("# modem keys"))
    assert lines[keys_at + 1] == "mpremote connect /dev/ttyACM0 reset"  # after the firmware, before the reset


def test_keys_are_refused_where_they_cannot_go(tmp_path):
    out = _provisioned(tmp_path, "rak3172", "/dev/ttyS9")
    two = deploy(out, "--port", "/dev/ttyACM1", "--dry-run")
    assert two.exit_code == 2 and "one board's keys for 2 boards" in two.output, two.output
    cfg = out / "boards" / f"{EUI}.json"
    doc = json.loads(cfg.read_text())
    other = tmp_path / "orchard-02.json"
    other.write_text(json.dumps(doc))
    unknown = CliRunner().invoke(main, ["deploy", "--config", str(other), "--keys", str(out), "--dry-run"])
    assert unknown.exit_code == CONFIG and "no device 'orchard-02'" in unknown.output, unknown.output
    doc["device"] = dict(doc["device"], transport="serial", device_id="b1")
    doc["device"].pop("lorawan")
    serial = tmp_path / "orchard-01.json"
    serial.write_text(json.dumps(doc))
    not_lorawan = CliRunner().invoke(main, ["deploy", "--config", str(serial), "--keys", str(out), "--dry-run"])
    assert not_lorawan.exit_code == 2 and "only a LoRaWAN board's modem" in not_lorawan.output, not_lorawan.output
    alone = CliRunner().invoke(main, ["deploy", "--config", str(cfg), "--overwrite-keys", "--dry-run"])
    assert alone.exit_code == 2 and "--overwrite-keys without --keys" in alone.output, alone.output


def test_keys_from_either_list(tmp_path):
    """mss provision's ChirpStack list holds the same keys as its TTS file; a board is named by its
    DevEUI (any case) or its end-device id."""
    listed = tmp_path / "chirpstack-devices.json"
    listed.write_text(json.dumps([{"device": {"devEui": EUI, "name": "orchard-01", "joinEui": JOIN_EUI},
                                   "deviceKeys": {"nwkKey": APP_KEY}}]))
    assert keys.read_keys(listed, EUI.upper()) == keys.read_keys(listed, "orchard-01") == KEYS
    with pytest.raises(DeployError, match="no device 'orchard-02'"):
        keys.read_keys(listed, "orchard-02")
