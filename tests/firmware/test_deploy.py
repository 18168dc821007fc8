"""tools/deploy.py: the dry run shows every mpremote step; bad settings stop it."""
import json
import subprocess
import sys

from micropython_runner import ROOT
from mss_protocol.mss.config import MssConfig

DEPLOY = [sys.executable, str(ROOT / "tools" / "deploy.py")]


def _config(tmp_path):
    path = tmp_path / "cfg.json"
    MssConfig.build(64, 1.0, [59, 61, 63]).save(path)
    return path


def test_dry_run_lists_the_steps(tmp_path):
    out = subprocess.run(DEPLOY + ["--config", _config(tmp_path), "--port", "/dev/ttyACM0", "--mpy",
                                   "--set", "transport=mqtt", "--set", "mqtt.host=10.1.2.3",
                                   "--set", "period_s=600", "--dry-run"],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "mpremote connect /dev/ttyACM0 mip install umqtt.simple"
    for name in ("mss_device", "mss_node"):
        assert any(line.endswith(f"/lib/{name} :lib") and " cp -r " in line for line in lines)
    for name in ("boot.py", "main.py", "sensor.py", "config.json"):
        assert any(line.endswith(f":{name}") for line in lines)
    assert lines[-2] == "mpremote connect /dev/ttyACM0 reset"
    device = json.loads(lines[-1].split("config.json: ", 1)[1].rsplit(" config_id", 1)[0])
    assert device == {"transport": "mqtt", "mqtt": {"host": "10.1.2.3"}, "period_s": 600}


def test_serial_deploy_skips_mip(tmp_path):
    out = subprocess.run(DEPLOY + ["--config", _config(tmp_path), "--dry-run"],
                         capture_output=True, text=True, check=True).stdout
    assert "mip install" not in out


def test_invalid_settings_stop_before_copying(tmp_path):
    out = subprocess.run(DEPLOY + ["--config", _config(tmp_path), "--set", "period_s=-5", "--dry-run"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "period_s" in out.stderr and "mpremote" not in out.stdout
