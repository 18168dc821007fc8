"""`mss demo` (embedded broker, aggregator, firmware fleet) and a CPython fleet
through the embedded broker: the path taken on a machine without Mosquitto
or without the MicroPython binary."""
import subprocess
import sys
import time

from collect_helpers import AggregatorProcess, wait_for
from mss_aggregator.collect.embedded_broker import EmbeddedBroker
from mss_protocol.mss.config import MssConfig


def test_demo_end_to_end(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mss_cli", "demo", "--devices", "40",
                          "--plot", str(tmp_path / "demo.png")], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "40 reports from 40 of 40 devices" in out.stdout
    assert (tmp_path / "demo.png").read_bytes()[:4] == b"\x89PNG"


def test_cpython_fleet_through_embedded_broker(tmp_path):
    broker = EmbeddedBroker().start()
    try:
        cfg = tmp_path / "cfg.json"
        MssConfig.build(64, 2.0, [59, 61, 63]).save(cfg)
        store = tmp_path / "s.sqlite"
        agg = AggregatorProcess(tmp_path, cfg, store, broker=broker.url).start().ready()
        out = subprocess.run([sys.executable, "-m", "mss_cli", "fleet", "--broker", broker.url,
                              "--campaign", "t", "--config", str(cfg), "--devices", "12",
                              "--runtime", "cpython"], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        c = wait_for(store, lambda c: c["accepted"] >= 12)
        agg.stop()
        assert c["accepted"] == 12 and c["rejected"] == 0
    finally:
        broker.stop()


def test_demo_shows_the_dashboard_until_stopped(tmp_path):
    import json
    import signal
    import urllib.request

    from mss_aggregator.ports import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mss_cli", "demo", "--devices", "30", "--plot",
                             str(tmp_path / "demo.png"), "--http", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.time() + 300
    n = 0
    while n < 30:
        assert time.time() < deadline and proc.poll() is None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/estimates", timeout=5) as r:
                n = json.loads(r.read())["n"]
        except OSError:
            pass
        time.sleep(0.3)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
        assert b"<svg id=\"chart\"" in r.read()
    time.sleep(1.0)  # the demo prints its tables, then keeps serving
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "30 reports from 30 of 30 devices" in out and "dashboard still at" in out
