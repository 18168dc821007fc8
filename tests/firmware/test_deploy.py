"""mss deploy: the dry run shows every mpremote step (secrets ***); bad settings stop it with one
line and the exit status of the failed step; the fields both ends read are written back to the
campaign config (or refused); --sensor; several ports; the board probe (unique_id, arch, Wi-Fi).

No board here: the probe runs on the MicroPython unix port directly (mpremote cannot drive the
unix port's REPL: it has no raw REPL), and its output is parsed as mpremote returns it; a real
mpremote is run against ports with no board behind them."""
import json
import subprocess

import pytest

from collect_helpers import mss
from micropython_runner import FIRMWARE, require_micropython
from mss_aggregator.campaign import Campaign
from mss_aggregator.deploy import BOARD, CONFIG, WRITE_BACK, DeployError, flash, merge
from mss_protocol.budget import budget_section
from mss_protocol.mss.config import MssConfig
from mss_protocol.sealed import load_key

BUDGET = budget_section(4.0, 30)
WIFI = ["--set", "wifi.ssid=greenhouse-net"]
PICO_W = FIRMWARE / "examples" / "sensor_pico_w.py"


def _config(tmp_path, device=None, **extra):
    """A config as mss plan --device-config writes it: with a budget (issue 25)."""
    path = tmp_path / "cfg.json"
    device = {"budget": BUDGET, "period_s": 3600} if device is None else device
    MssConfig.build(64, 1.0, [59, 61, 63]).save(path, dict({"device": device}, **extra))
    return path


def deploy(*args):
    """``mss deploy ...`` run in-process: its exit code, stdout and stderr line by line as printed."""
    return mss("deploy", *args, unwrap=False)


def _steps(out):
    return [line for line in out.splitlines() if not line.startswith("#")]


def _flashed(out):
    """The device section of the dry run's config.json line."""
    return json.loads(out.splitlines()[-1].split("config.json: ", 1)[1].rsplit(" config_id", 1)[0])


def _modules_line(out):
    return next(line for line in out.splitlines() if line.startswith("# ") and " modules, " in line)


def test_dry_run_lists_the_steps(tmp_path):
    out = deploy("--config", _config(tmp_path), "--port", "/dev/ttyACM0", "--mpy", "--set", "transport=mqtt",
                 "--set", "mqtt.host=10.1.2.3", "--set", "device_id=b1", *WIFI, "--dry-run")
    assert out.returncode == 0, out.stderr
    lines = _steps(out.stdout)
    assert lines[0] == "mpremote connect /dev/ttyACM0 mip install umqtt.simple"
    for name in ("mss_device", "mss_node"):
        assert any(line.endswith(f"/lib/{name} :lib") and " cp -r " in line for line in lines)
    for name in ("boot.py", "main.py", "sensor.py", "config.json"):
        assert any(line.endswith(f":{name}") for line in lines)
    assert f"{FIRMWARE / 'sensor.py'} :sensor.py" in out.stdout  # the tracked one by default
    assert lines[-1] == "mpremote connect /dev/ttyACM0 reset"
    assert _flashed(out.stdout) == {"budget": BUDGET, "period_s": 3600, "transport": "mqtt", "device_id": "b1",
                                    "mqtt": {"host": "10.1.2.3", "user": "b1"},  # the user is the id
                                    "wifi": {"ssid": "greenhouse-net"}}
    assert "-O3" in _modules_line(out.stdout) and "-O2" not in out.stdout  # the level mpy-cross is given


def test_dry_run_masks_every_secret(tmp_path):
    """mqtt.password, wifi.password and the fleet key are *** on every line printed, errors too."""
    key = tmp_path / "fleet.key"
    key.write_text("00112233445566778899aabbccddeeff\n")
    secret = ["--set", "mqtt.password=broker-Pw-7", "--set", "wifi.password=wifi-Pw-8"]
    out = deploy("--config", _config(tmp_path), "--set", "transport=mqtt", "--set", "mqtt.host=10.1.2.3", *WIFI,
                 *secret, "--fleet-key-file", key, "--dry-run")
    assert out.returncode == 0, out.stderr
    printed = out.stdout + out.stderr
    for clear in ("broker-Pw-7", "wifi-Pw-8", load_key(key).hex()):
        assert clear not in printed
    dev = _flashed(out.stdout)
    assert dev["mqtt"]["password"] == dev["wifi"]["password"] == dev["fleet_key"] == "***"
    out = deploy("--config", _config(tmp_path), "--set", "transport=mqtt", "--set", "mqtt.host=10.1.2.3", *WIFI,
                 *secret, "--set", "device_id=b1", "--set", "mqtt.user=broker-Pw-7", "--dry-run")  # quoted in an error
    assert out.returncode == CONFIG and "mqtt.user '***' is not device_id 'b1'" in out.stderr, out.stderr
    assert "broker-Pw-7" not in out.stdout + out.stderr


def test_serial_deploy_skips_mip(tmp_path):
    out = deploy("--config", _config(tmp_path), "--dry-run")
    assert out.returncode == 0 and "mip install" not in out.stdout, out.stderr


def test_invalid_settings_stop_before_copying(tmp_path):
    out = deploy("--config", _config(tmp_path), "--set", "period_s=-5", "--dry-run")
    assert out.returncode == CONFIG and "period_s" in out.stderr and "mpremote" not in out.stdout
    assert out.stderr.startswith("error: ") and len(out.stderr.strip().splitlines()) == 1, out.stderr
    out = deploy("--config", _config(tmp_path), "--set", "period_s", "--dry-run")
    assert out.returncode == CONFIG and "KEY=VALUE" in out.stderr


@pytest.mark.parametrize("sets,named", [
    ([], "device.mqtt.host"),  # the loader's default 127.0.0.1 is the board itself
    (["--set", "mqtt.host=10.1.2.3"], "device.wifi.ssid"),
    (["--set", "mqtt.host=10.1.2.3", *WIFI, "--set", "device_id=b1", "--set", "mqtt.user=b2"], "is not device_id"),
])
def test_an_mqtt_board_that_could_not_report_is_refused(tmp_path, sets, named):
    """No broker, no Wi-Fi network, or a user the shipped ACL drops without a word: one line, exit 3."""
    out = deploy("--config", _config(tmp_path), "--set", "transport=mqtt", *sets, "--dry-run")
    assert out.returncode == CONFIG and named in out.stderr and not _steps(out.stdout), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_lorawan_board_holds_its_other_configs(tmp_path):
    other = tmp_path / "cfg-b.json"
    MssConfig.build(64, 2.0, [59, 61, 63]).save(other)
    out = deploy("--config", _config(tmp_path), "--port", "/dev/ttyACM0", "--set", "transport=lorawan", "--set",
                 "lorawan.uart=1", "--set", "lorawan.tx=4", "--set", "lorawan.rx=5", "--hold", other, "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "mip install" not in out.stdout and "device_id and" not in out.stdout  # the modem's DevEUI is its id
    assert f"mpremote connect /dev/ttyACM0 fs cp {other} :cfg-b.json" in out.stdout.splitlines()
    device = _flashed(out.stdout)
    assert device["configs"] == ["cfg-b.json"] and device["lorawan"] == {"uart": 1, "tx": 4, "rx": 5}


def test_held_config_with_the_same_switch_prefix_is_refused(tmp_path):
    cfg = _config(tmp_path)
    out = deploy("--config", cfg, "--set", "transport=lorawan", "--set", "lorawan.uart=1", "--hold", cfg, "--dry-run")
    assert out.returncode == CONFIG and "start alike" in out.stderr and "mpremote" not in out.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(json.loads(cfg.read_text()), config_id="00000000")))
    out = deploy("--config", cfg, "--hold", bad, "--dry-run")
    assert out.returncode == CONFIG and "held config" in out.stderr and "mpremote" not in out.stdout


def test_dry_run_names_the_modules_and_the_arch(tmp_path):
    """Only the config's modules are staged; --arch goes to mpy-cross; without it the
    arch is read from the board (sys.implementation._mpy), shown in the dry run."""
    base = ["--config", _config(tmp_path), "--port", "/dev/ttyACM0", "--dry-run", "--mpy"]
    out = deploy(*base, "--arch", "armv6m").stdout
    line = _modules_line(out)
    assert "mpy-cross -O3 -march=armv6m" in line and "mss_node/serial_link.py" in line and "mqtt_link" not in line
    assert "mss_device/grr.py" not in line and "mss_node/tls.py" not in line
    out = deploy(*base, "--set", "transport=lorawan", "--set", "lorawan.uart=1", "--set", "lorawan.modem=rn2483").stdout
    assert "-march: sys.implementation._mpy) with mpremote connect /dev/ttyACM0 exec" in out
    line = _modules_line(out)
    assert "mss_node/modem/rn2483.py" in line and "rak3172" not in line and "serial_link" not in line
    assert "@micropython.viper/native removed" in _modules_line(deploy(*base, "--arch", "none").stdout)


def test_no_native_strips_the_decorators():
    src = "import micropython\n@micropython.viper\ndef f(n: int) -> int:\n    return n + 1\n"
    assert flash.is_native(src) and not flash.is_native(flash.plain(src))
    assert flash.plain(src) == "import micropython\ndef f(n: int) -> int:\n    return n + 1\n"


def test_a_config_without_a_budget_is_refused_unless_told(tmp_path):
    """Issue 25 item 3: a board reports every period, so a config without device.budget is
    refused (exit 2, naming the fixes) before anything is copied; --no-budget deploys it as it
    is, --budget EPS/DAYS adds one (exactly mss plan's, written back), and a bad one is named."""
    bare = _config(tmp_path, device={"period_s": 600})
    out = deploy("--config", bare, "--dry-run")
    message = " ".join(out.stderr.split())
    assert out.returncode == 2 and "mpremote" not in out.stdout, out
    for fix in ("no device.budget", "mss plan --device-config", "--budget EPS/DAYS", "--no-budget"):
        assert fix in message, fix
    out = deploy("--config", bare, "--dry-run", "--no-budget")
    assert out.returncode == 0 and _flashed(out.stdout) == {"period_s": 600}, out.stderr
    out = deploy("--config", bare, "--dry-run", "--budget", "3/7")
    assert out.returncode == 0 and _flashed(out.stdout) == {"period_s": 600, "budget": budget_section(3.0, 7)}
    assert f"# would write device.budget back to {bare}" in out.stdout
    for args, named in ((["--budget", "3"], "EPS/DAYS"), (["--budget", "3/0"], "days"),
                        (["--budget", "3/7", "--no-budget"], "--no-budget"),
                        (["--budget", "0.5/7"], "device.budget.epsilon")):  # below one draw at epsilon 1
        out = deploy("--config", bare, "--dry-run", *args)
        assert out.returncode != 0 and named in out.stderr and "mpremote" not in out.stdout, (args, out.stderr)


def test_shared_fields_are_written_back_or_refused(tmp_path):
    """--set of a field the aggregator reads (period_s, ...) goes into the campaign config too,
    labels and all else kept, never in a dry run nor when no board was flashed; per-board fields
    never; --no-write-back refuses a value that would differ (exit 4, naming the key)."""
    cfg = _config(tmp_path, labels=[f"item{i}" for i in range(64)])
    before = cfg.read_text()
    items = ["period_s=600", "device.epoch_origin=1700000000", "device_id=b1"]
    sets = [a for item in items for a in ("--set", item)]
    out = deploy("--config", cfg, *sets, "--dry-run")
    assert out.returncode == 0 and "# would write device.period_s, device.epoch_origin back to" in out.stdout
    assert cfg.read_text() == before
    out = deploy("--config", cfg, *sets, "--no-write-back", "--dry-run")
    assert out.returncode == WRITE_BACK and "device.period_s: the boards would get 600" in out.stderr, out.stderr
    assert "3600" in out.stderr
    out = deploy("--config", cfg, *sets, "--port", "/dev/mss-no-such-board")  # nothing flashed: nothing written
    assert out.returncode == BOARD and cfg.read_text() == before
    out = deploy("--config", cfg, "--set", "period_s=3600", "--set", "device_id=b1", "--no-write-back", "--dry-run")
    assert out.returncode == 0 and "write" not in out.stdout, out.stderr  # the same value: nothing differs
    # what mss deploy writes once the first board is probed and checked
    campaign = Campaign.read(cfg)
    board = merge.merged_config(campaign.document, str(cfg), items, require_budget=True)
    written, text = merge.write_back(campaign.document, str(cfg), board,
                                     merge.shared_changes(items + ["wifi.ssid=x"], None), check=campaign.rewritten)
    assert written == ["period_s", "epoch_origin"]
    merge.write_atomically(cfg, text)
    after = json.loads(cfg.read_text())
    assert after["device"] == {"budget": BUDGET, "period_s": 600, "epoch_origin": 1700000000}
    assert after["labels"] == json.loads(before)["labels"]  # the host's names stay in the host's copy
    assert "labels" not in board
    with pytest.raises(DeployError) as refused:  # the aggregator would refuse it: so does the write-back
        merge.write_back(Campaign.read(cfg).document, str(cfg), board, [("budget", {"epsilon": 4.0})],
                         check=campaign.rewritten)
    assert refused.value.status == WRITE_BACK and "device.budget" in str(refused.value)


def test_a_board_file_apart_from_the_campaign_config(tmp_path):
    """mss provision's boards/ID.json: --campaign-config names the aggregator's file; --set
    writes there, and a shared field the board's file holds apart is refused, naming it."""
    campaign = _config(tmp_path)
    (tmp_path / "boards").mkdir()
    board = _config(tmp_path / "boards", device={"budget": BUDGET, "period_s": 3600, "device_id": "dev1"})
    out = deploy("--config", board, "--campaign-config", campaign, "--set", "period_s=60", "--dry-run")
    assert out.returncode == 0 and f"# would write device.period_s back to {campaign}" in out.stdout, out.stderr
    board.write_text(json.dumps(dict(json.loads(board.read_text()), device={"budget": BUDGET, "period_s": 600})))
    out = deploy("--config", board, "--campaign-config", campaign, "--dry-run")
    assert out.returncode == WRITE_BACK and "device.period_s" in out.stderr and "--set period_s=VALUE" in out.stderr
    assert not _steps(out.stdout)


def test_sensor_file(tmp_path):
    """--sensor FILE is copied as sensor.py; a file without read_category() is refused."""
    out = deploy("--config", _config(tmp_path), "--sensor", PICO_W, "--dry-run")
    assert out.returncode == 0, out.stderr
    assert f"mpremote connect auto fs cp {PICO_W} :sensor.py" in out.stdout.splitlines()
    bad = tmp_path / "sensor.py"
    bad.write_text("def read():\n    return 0\n")
    out = deploy("--config", _config(tmp_path), "--sensor", bad, "--dry-run")
    assert out.returncode == CONFIG and "read_category" in out.stderr and "mpremote" not in out.stdout


def test_pico_w_example_buckets_like_the_readme(tmp_path):
    """The Pico W example on the unix port (its ADC made only when read): 2-degree buckets
    from -20 C, clamped into k = 32."""
    script = ("import sys\nsys.path.insert(0, %r)\nimport sensor_pico_w as s\n"
              "print(s.K, [s.category_of(r) for r in (0, 14000, 14600, 65535)])" % str(PICO_W.parent))
    out = subprocess.run([require_micropython(), "-c", script], capture_output=True, text=True, check=True).stdout
    # 14000 -> 704 mV -> 28.2 C -> bucket 24; 14600 -> 735 mV -> 10.2 C -> 15; the ends clamp
    assert out.split(None, 1) == ["32", "[31, 24, 15, 0]\n"]


def test_several_ports_each_get_a_result_line(tmp_path):
    """Boards are flashed one after another: a port with no board is one line naming it (no
    traceback), the others are still tried, and the exit status is that of the failed step."""
    out = deploy("--config", _config(tmp_path), "--port", "/dev/mss-none-1", "--port", "/dev/mss-none-2")
    lines = out.stderr.strip().splitlines()
    assert out.returncode == BOARD and "Traceback" not in out.stderr, out.stderr
    assert [line.split(":", 2)[1].strip() for line in lines] == ["/dev/mss-none-1", "/dev/mss-none-2"]
    assert all(line.startswith("error: ") and "no board answers" in line for line in lines)
    ports = tmp_path / "ports.txt"
    ports.write_text("# the bench\n/dev/ttyACM0\n\n/dev/ttyACM1  # second\n")
    out = deploy("--config", _config(tmp_path), "--ports-file", ports, "--dry-run")
    assert [line for line in out.stdout.splitlines() if line.endswith(" reset")] == \
        ["mpremote connect /dev/ttyACM0 reset", "mpremote connect /dev/ttyACM1 reset"]
    out = deploy("--config", _config(tmp_path), "--ports-file", ports, "--set", "device_id=b1", "--dry-run")
    assert out.returncode == 2 and "--set" in out.stderr and "same device" in out.stderr


def test_the_probe_reads_the_board():
    """The probe runs on MicroPython (here the unix port: no unique_id, no Wi-Fi) and is read
    from mpremote's output; a board's unique_id becomes its device id and broker user."""
    out = subprocess.run([require_micropython(), "-c", flash.PROBE], capture_output=True, text=True, check=True)
    mpy = int(subprocess.run([require_micropython(), "-c", "import sys; print(sys.implementation._mpy)"],
                             capture_output=True, text=True, check=True).stdout)
    assert flash.parse_probe(out.stdout) == (mpy, None, False)
    assert flash.board_arch(mpy) in ("x64", "x86", "armv7emsp", "armv6m", "xtensawin")  # the runner's arch
    board = "Connected to MicroPython at /dev/ttyACM0\r\nmss-probe 4870 e66130100f2a6d2b 1\r\n"
    assert flash.parse_probe(board) == (4870, "e66130100f2a6d2b", True)
    assert flash.board_arch(4870, (6, 3)) == "armv6m"  # a Pico W on 1.23: .mpy 6.3, arch index 4
    assert flash.mpy_cross_version() == (mpy & 0xFF, (mpy >> 8) & 3)  # the unix port and mpy-cross agree
    for older in (5 | 4 << 10, 6 | 2 << 8 | 4 << 10):  # MicroPython 1.18, 1.22 on a Pico W
        with pytest.raises(DeployError) as old:
            flash.board_arch(older, (6, 3))
        assert old.value.status == BOARD and "1.23" in str(old.value) and "v6.3" in str(old.value)
    with pytest.raises(DeployError) as silent:
        flash.parse_probe("Traceback (most recent call last):\n")
    assert silent.value.status == BOARD
    cfg = dict(MssConfig.build(64, 1.0, [59, 61, 63]).to_dict(),
               device={"transport": "mqtt", "mqtt": {"host": "h"}, "wifi": {"ssid": "n"}})
    assert merge.for_board(cfg, "e66130100f2a6d2b", True)["device"]["mqtt"]["user"] == "e66130100f2a6d2b"
    assert "device_id" not in cfg["device"]  # the campaign's config is left as it was
    with pytest.raises(DeployError) as other_user:
        merge.for_board(dict(cfg, device=dict(cfg["device"], mqtt={"host": "h", "user": "dev0"})), "e661", True)
    assert other_user.value.status == CONFIG and "dev0" in str(other_user.value)
    no_network = dict(cfg, device=dict(cfg["device"], wifi={}))
    with pytest.raises(DeployError) as no_ssid:  # a board with Wi-Fi and no network named
        merge.for_board(no_network, "e661", True)
    assert "wifi.ssid" in str(no_ssid.value)
    assert merge.for_board(no_network, "e661", False)["device"]["device_id"] == "e661"  # a board without Wi-Fi



def test_a_lorawan_id_that_is_not_the_dev_eui_is_refused_before_flashing(tmp_path):
    """SPEC.md section 4, "Device ids": a LoRaWAN board seeds with its modem's DevEUI, so mss deploy
    and mss device-sim --check-only (the board's own loader, under MicroPython) refuse any other
    device.device_id, and take the DevEUI in capitals as lowercase."""
    from click.testing import CliRunner

    from mss_cli.main import main

    for device_id, refused in (("board-07", True), ("70b3d57e-d000-0001", True), ("70B3D57ED0000001", False),
                               (None, False)):
        device = {"budget": BUDGET, "period_s": 3600, "transport": "lorawan", "lorawan": {"uart": 1}}
        if device_id is not None:
            device["device_id"] = device_id
        cfg = str(_config(tmp_path, device))
        out = CliRunner().invoke(main, ["deploy", "--config", cfg, "--dry-run"])
        check = CliRunner().invoke(main, ["device-sim", "--check-only", "--config", cfg])
        if refused:
            assert out.exit_code != 0 and "device.device_id" in out.output and "mpremote" not in out.output, out.output
            assert check.exit_code == 1 and "device.device_id" in check.output, check.output
        else:
            assert out.exit_code == 0, out.output
            assert check.exit_code == 0 and "accepted by the board" in check.output, check.output
            assert f"device id {'70b3d57ed0000001' if device_id else 'None'}," in check.output, check.output
