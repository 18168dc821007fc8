"""tools/deploy.py: the dry run shows every mpremote step; bad settings stop it."""
import json
import subprocess
import sys

from micropython_runner import ROOT
from mss_protocol.budget import budget_section
from mss_protocol.mss.config import MssConfig

DEPLOY = [sys.executable, str(ROOT / "tools" / "deploy.py")]


BUDGET = budget_section(4.0, 30)


def _config(tmp_path, device=None):
    """A config as mss plan --device-config writes it: with a budget (issue 25)."""
    path = tmp_path / "cfg.json"
    MssConfig.build(64, 1.0, [59, 61, 63]).save(path, {"device": {"budget": BUDGET} if device is None else device})
    return path


def test_dry_run_lists_the_steps(tmp_path):
    out = subprocess.run(DEPLOY + ["--config", _config(tmp_path), "--port", "/dev/ttyACM0", "--mpy",
                                   "--set", "transport=mqtt", "--set", "mqtt.host=10.1.2.3",
                                   "--set", "period_s=600", "--dry-run"],
                         capture_output=True, text=True, check=True).stdout
    lines = [line for line in out.splitlines() if not line.startswith("# -march") and "modules, mpy-cross" not in line]
    assert lines[0] == "mpremote connect /dev/ttyACM0 mip install umqtt.simple"
    for name in ("mss_device", "mss_node"):
        assert any(line.endswith(f"/lib/{name} :lib") and " cp -r " in line for line in lines)
    for name in ("boot.py", "main.py", "sensor.py", "config.json"):
        assert any(line.endswith(f":{name}") for line in lines)
    assert lines[-2] == "mpremote connect /dev/ttyACM0 reset"
    device = json.loads(lines[-1].split("config.json: ", 1)[1].rsplit(" config_id", 1)[0])
    assert device == {"transport": "mqtt", "mqtt": {"host": "10.1.2.3"}, "period_s": 600, "budget": BUDGET}


def test_serial_deploy_skips_mip(tmp_path):
    out = subprocess.run(DEPLOY + ["--config", _config(tmp_path), "--dry-run"],
                         capture_output=True, text=True, check=True).stdout
    assert "mip install" not in out


def test_invalid_settings_stop_before_copying(tmp_path):
    out = subprocess.run(DEPLOY + ["--config", _config(tmp_path), "--set", "period_s=-5", "--dry-run"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "period_s" in out.stderr and "mpremote" not in out.stdout


def test_lorawan_board_holds_its_other_configs(tmp_path):
    other = tmp_path / "cfg-b.json"
    MssConfig.build(64, 2.0, [59, 61, 63]).save(other)
    out = subprocess.run(DEPLOY + ["--config", _config(tmp_path), "--port", "/dev/ttyACM0", "--set",
                                   "transport=lorawan", "--set", "lorawan.uart=1", "--set", "lorawan.tx=4",
                                   "--set", "lorawan.rx=5", "--hold", str(other), "--dry-run"],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert "mip install" not in out
    assert f"mpremote connect /dev/ttyACM0 fs cp {other} :cfg-b.json" in lines
    device = json.loads(lines[-1].split("config.json: ", 1)[1].rsplit(" config_id", 1)[0])
    assert device["configs"] == ["cfg-b.json"] and device["lorawan"] == {"uart": 1, "tx": 4, "rx": 5}


def test_held_config_with_the_same_switch_prefix_is_refused(tmp_path):
    cfg = _config(tmp_path)
    out = subprocess.run(DEPLOY + ["--config", cfg, "--set", "transport=lorawan", "--set", "lorawan.uart=1",
                                   "--hold", str(cfg), "--dry-run"], capture_output=True, text=True)
    assert out.returncode != 0 and "start alike" in out.stderr and "mpremote" not in out.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(json.loads(cfg.read_text()), config_id="00000000")))
    out = subprocess.run(DEPLOY + ["--config", cfg, "--hold", str(bad), "--dry-run"], capture_output=True, text=True)
    assert out.returncode != 0 and "config" in out.stderr and "mpremote" not in out.stdout


def _modules_line(out):
    return next(line for line in out.splitlines() if line.startswith("# ") and " modules, " in line)


def test_dry_run_names_the_modules_and_the_arch(tmp_path):
    """Only the config's modules are staged; --arch goes to mpy-cross; without it the
    arch is read from the board (sys.implementation._mpy), shown in the dry run."""
    base = DEPLOY + ["--config", _config(tmp_path), "--port", "/dev/ttyACM0", "--dry-run", "--mpy"]
    out = subprocess.run(base + ["--arch", "armv6m"], capture_output=True, text=True, check=True).stdout
    line = _modules_line(out)
    assert "-march=armv6m" in line and "mss_node/serial_link.py" in line and "mqtt_link" not in line
    assert "mss_device/grr.py" not in line and "mss_node/tls.py" not in line
    out = subprocess.run(base + ["--set", "transport=lorawan", "--set", "lorawan.uart=1", "--set",
                                 "lorawan.modem=rn2483"], capture_output=True, text=True, check=True).stdout
    assert "# -march: read from the board with mpremote connect /dev/ttyACM0 exec" in out and "_mpy" in out
    line = _modules_line(out)
    assert "mss_node/modem/rn2483.py" in line and "rak3172" not in line and "serial_link" not in line
    out = subprocess.run(base + ["--arch", "none"], capture_output=True, text=True, check=True).stdout
    assert "@micropython.viper/native removed" in _modules_line(out)


def test_no_native_strips_the_decorators(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    import deploy

    src = "import micropython\n@micropython.viper\ndef f(n: int) -> int:\n    return n + 1\n"
    assert deploy.is_native(src) and not deploy.is_native(deploy.plain(src))
    assert deploy.plain(src) == "import micropython\ndef f(n: int) -> int:\n    return n + 1\n"


def test_a_config_without_a_budget_is_refused_unless_told(tmp_path):
    """Issue 25 item 3: a board reports every period, so a config without device.budget is
    refused (exit 2, naming the fixes) before anything is copied; --no-budget deploys it as it
    is, --budget EPS/DAYS adds one (exactly mss plan's), and a bad one is named."""
    bare = _config(tmp_path, device={"period_s": 600})
    out = subprocess.run(DEPLOY + ["--config", bare, "--dry-run"], capture_output=True, text=True)
    message = " ".join(out.stderr.split())
    assert out.returncode == 2 and "mpremote" not in out.stdout, out
    for fix in ("no device.budget", "mss plan --device-config", "--budget EPS/DAYS", "--no-budget"):
        assert fix in message, fix
    out = subprocess.run(DEPLOY + ["--config", bare, "--dry-run", "--no-budget"], capture_output=True, text=True,
                         check=True).stdout
    device = json.loads(out.splitlines()[-1].split("config.json: ", 1)[1].rsplit(" config_id", 1)[0])
    assert device == {"period_s": 600}
    out = subprocess.run(DEPLOY + ["--config", bare, "--dry-run", "--budget", "3/7"], capture_output=True,
                         text=True, check=True).stdout
    device = json.loads(out.splitlines()[-1].split("config.json: ", 1)[1].rsplit(" config_id", 1)[0])
    assert device == {"period_s": 600, "budget": budget_section(3.0, 7)}
    for args, named in ((["--budget", "3"], "EPS/DAYS"), (["--budget", "3/0"], "days"),
                        (["--budget", "3/7", "--no-budget"], "--no-budget"),
                        (["--budget", "0.5/7"], "device.budget.epsilon")):  # below one draw at epsilon 1
        out = subprocess.run(DEPLOY + ["--config", bare, "--dry-run", *args], capture_output=True, text=True)
        assert out.returncode != 0 and named in out.stderr and "mpremote" not in out.stdout, (args, out.stderr)
