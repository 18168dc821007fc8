"""The device application under MicroPython, publishing through a real Mosquitto
with micropython-lib's umqtt.simple (1.3.4 from PyPI, pinned by sha256)."""
import json
import subprocess
import time

import paho.mqtt.client as mqtt
import pytest

from brokers import Mosquitto, free_port, mosquitto  # noqa: F401 (fixture)
from micropython_runner import MPLIB, ROOT, run
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import plan
from mss_protocol.mss.wire import WireCodec
from mss_protocol.privacy import cap
from mss_protocol.sealed import seal

KEY = bytes.fromhex("00112233445566778899aabbccddeeff")

NODE = r"""
import sys, time
from mss_node import app
app.run(sys.argv[1], sys.argv[2], sensor=lambda: int(sys.argv[3]), ticks=int(sys.argv[4]))
"""


@pytest.fixture(scope="module", autouse=True)
def umqtt():
    subprocess.run(["sh", str(ROOT / "tools" / "get_umqtt.sh"), str(MPLIB)], check=True,
                   env={"PYTHON": __import__("sys").executable, "PATH": "/usr/bin:/bin"})


def device_config(tmp_path, port, cfg, **device):
    d = cfg.to_dict()
    d["device"] = dict({"campaign": "t", "device_id": "dev1", "period_s": 1, "poll_s": 1,
                        "transport": "mqtt", "mqtt": {"host": "127.0.0.1", "port": port,
                                                      "timeout_s": 2, "backoff_max_s": 1}},
                       **device)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(d))
    return path


class Listener:
    def __init__(self, port, topics=("mss/v1/t/#",)):
        self.msgs = []
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="test-listener")
        self.client.on_message = lambda c, u, m: self.msgs.append((m.topic, bytes(m.payload), m.retain))
        self.client.connect("127.0.0.1", port)
        for t in topics:
            self.client.subscribe(t, qos=1)
        self.client.loop_start()
        time.sleep(0.2)

    def reports(self):
        return [p for t, p, _ in self.msgs if t.endswith("/report")]

    def status(self):
        return [p for t, p, _ in self.msgs if t.endswith("/status")]

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


@pytest.fixture(scope="module")
def cfg():
    return MssConfig.from_dict(plan(64, 2.0)["config"])


def test_reports_status_and_will(tmp_path, mosquitto, cfg):
    path = device_config(tmp_path, mosquitto.port, cfg)
    listener = Listener(mosquitto.port)
    out = run(NODE, cwd=tmp_path, args=[str(path), str(tmp_path / "state.json"), "5", "3"])
    assert out.returncode == 0, out.stdout + out.stderr
    time.sleep(0.5)
    listener.close()
    codec = WireCodec(cfg)
    reports = [codec.decode(p) for p in listener.reports()]
    assert [r.seq for r in reports] == list(range(len(reports))) and 2 <= len(reports) <= 3
    assert len({r.epoch for r in reports}) == len(reports)  # one report per epoch
    assert listener.status()[0] == b"online" and listener.status()[-1] == b"offline"  # the will


def test_reports_queue_while_broker_is_down(tmp_path, cfg):
    port = free_port()
    path = device_config(tmp_path, port, cfg)
    state = tmp_path / "state.json"
    out = run(NODE, cwd=tmp_path, args=[str(path), str(state), "7", "3"])
    assert out.returncode == 0 and "mqtt down" in out.stdout, out.stdout + out.stderr
    queued = json.loads(state.read_text())["queue"]
    assert len(queued) >= 2
    broker = Mosquitto(tmp_path, port=port).start()
    try:
        listener = Listener(port)
        out = run(NODE, cwd=tmp_path, args=[str(path), str(state), "7", "2"])
        time.sleep(0.5)
        listener.close()
    finally:
        broker.stop()
    got = [p.hex() for p in listener.reports()]
    assert got[:len(queued)] == queued  # the queued ones first, oldest first, none lost
    assert json.loads(state.read_text())["queue"] == []


def test_pushed_config_is_adopted(tmp_path, mosquitto, cfg):
    """Signed with the fleet key, within the board's cap: adopted (SPEC.md section 5)."""
    new = MssConfig.from_dict(plan(64, 1.0)["config"])
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    pub.connect("127.0.0.1", mosquitto.port)
    pub.loop_start()
    pub.publish("mss/v1/t/config", seal(new.to_dict(), KEY, "t", 7), qos=1, retain=True).wait_for_publish()
    path = device_config(tmp_path, mosquitto.port, cfg, fleet_key=KEY.hex(), max_epsilon=2.0,
                         max_ratio=cap(2.0))
    listener = Listener(mosquitto.port)
    out = run(NODE, cwd=tmp_path, args=[str(path), str(tmp_path / "state.json"), "3", "4"])
    time.sleep(0.5)
    listener.close()
    pub.loop_stop()
    assert out.returncode == 0 and "now using config " + new.config_id_hex in out.stdout, out.stdout
    adopted = json.loads(path.read_text())
    assert adopted["config_id"] == new.config_id_hex and adopted["device"]["device_id"] == "dev1"
    assert adopted["issued"] == 7 and adopted["device"]["fleet_key"] == KEY.hex()
    ids = {p[1:5].hex() for p in listener.reports()}
    assert new.config_id_hex in ids


def test_bad_pushed_config_is_ignored(tmp_path, mosquitto, cfg):
    """Signed, but the loader refuses it (its id does not match): the board keeps its config."""
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    pub.connect("127.0.0.1", mosquitto.port)
    pub.loop_start()
    bad = dict(cfg.to_dict(), moduli=[59, 61], config_id="00000000")
    pub.publish("mss/v1/t/config", seal(bad, KEY, "t", 7), qos=1, retain=True).wait_for_publish()
    pub.loop_stop()
    path = device_config(tmp_path, mosquitto.port, cfg, fleet_key=KEY.hex(), max_epsilon=2.0,
                         max_ratio=cap(2.0))
    out = run(NODE, cwd=tmp_path, args=[str(path), str(tmp_path / "state.json"), "3", "2"])
    assert out.returncode == 0 and "rejected pushed config" in out.stdout, out.stdout
    assert json.loads(path.read_text())["config_id"] == cfg.config_id_hex


def test_refused_connection_backs_off_without_crashing(tmp_path, cfg):
    """umqtt raises MQTTException (not OSError) on a refused CONNACK; the board
    must back off and keep its report queued, not reset."""
    broker = Mosquitto(tmp_path, anonymous=False).start()
    try:
        path = device_config(tmp_path, broker.port, cfg)
        out = run(NODE, cwd=tmp_path, args=[str(path), str(tmp_path / "state.json"), "5", "2"])
    finally:
        broker.stop()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "mqtt down" in out.stdout and "tick failed" not in out.stdout
    assert len(json.loads((tmp_path / "state.json").read_text())["queue"]) >= 1
