"""The sensor files: the soil-moisture example's buckets on the MicroPython unix port (its ADC
made only when read), and mss deploy's warning when it would flash the placeholder sensor.py
(whose read_category() returns 0 for ever).  About 1 s."""
import subprocess

from click.testing import CliRunner

from micropython_runner import FIRMWARE, require_micropython
from mss_cli.main import main
from mss_protocol.budget import budget_section
from mss_protocol.mss.config import MssConfig

SOIL = FIRMWARE / "examples" / "sensor_soil_moisture.py"


def test_soil_moisture_buckets_between_dry_and_wet():
    script = ("import sys\nsys.path.insert(0, %r)\nimport sensor_soil_moisture as s\n"
              "print(s.K, [s.category_of(r) for r in (65535, 49650, 49000, 35750, 25000, 21850, 0)])"
              % str(SOIL.parent))
    out = subprocess.run([require_micropython(), "-c", script], capture_output=True, text=True, check=True).stdout
    # 49000: 2 % -> 0; 35750: 50 % -> 5; 25000: 88 % -> 8; wetter than WET and drier than DRY clamp
    assert out.split(None, 1) == ["10", "[0, 0, 0, 5, 8, 9, 9]\n"]


def test_deploy_warns_before_flashing_the_placeholder(tmp_path):
    cfg = tmp_path / "cfg.json"
    MssConfig.build(64, 1.0, [59, 61, 63]).save(cfg, {"device": {"budget": budget_section(4.0, 30),
                                                                  "period_s": 3600}})
    said = {}
    for sensor in ([], ["--sensor", str(SOIL)]):
        r = CliRunner().invoke(main, ["deploy", "--config", str(cfg), "--dry-run", *sensor])
        assert r.exit_code == 0, r.stderr
        said[bool(sensor)] = " ".join(r.stderr.split())
    assert "warning: no --sensor: the boards get firmware/sensor.py, whose read_category() always returns 0" \
        in said[False]
    assert "warning" not in said[True]
