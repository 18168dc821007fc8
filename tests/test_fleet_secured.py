"""`mss fleet` against the secured broker the docs recommend: a real Mosquitto with a
password file, docs/mosquitto/acl as shipped and client id = username, the real
aggregator and the firmware on MicroPython.  Each device logging in as itself
(--user-template, --password-file) delivers every report of every epoch; the old way,
one shared user, is reported as the shortfall it is (the broker PUBACKs what its ACL
drops); nothing the fleet made is left retained."""
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from brokers import Mosquitto, mosquitto, password_file  # noqa: F401 (a fixture)
from collect_helpers import AggregatorProcess, clocked
from mss_aggregator.collect.store import open_store
from mss_protocol.mss.config import MssConfig

DOCS = Path(__file__).resolve().parent.parent / "docs" / "mosquitto"
CAMPAIGN = "greenhouse"  # the shipped ACL's
DEVICES = 5


@pytest.fixture
def secured(tmp_path):
    """(broker, aggregator, config, store): the shipped ACL, a password file for the
    aggregator and dev0..dev4 (password pw-<user>), the aggregator running."""
    passwd = password_file(tmp_path / "passwd", ["aggregator"] + [f"dev{i}" for i in range(DEVICES)])
    acl = tmp_path / "acl"
    acl.write_text((DOCS / "acl").read_text())
    acl.chmod(0o644)
    broker = Mosquitto(tmp_path, anonymous=False, extra=f"use_username_as_clientid true\npassword_file {passwd}\n"
                                                        f"acl_file {acl}\n").start()
    cfg, store = tmp_path / "cfg.json", tmp_path / "s.sqlite"
    MssConfig.build(64, 2.0, [59, 61, 63]).save(cfg, clocked(last_epoch=5))  # epochs 3..5 for --epochs 3
    agg = AggregatorProcess(tmp_path, cfg, store, campaign=CAMPAIGN,
                            broker=f"mqtt://aggregator:pw-aggregator@127.0.0.1:{broker.port}").start().ready()
    yield broker, agg, cfg, store
    agg.stop()
    broker.stop()


def fleet(broker, cfg, store, *args):
    return subprocess.run([sys.executable, "-m", "mss_cli", "fleet", "--campaign", CAMPAIGN, "--config", str(cfg),
                           "--devices", str(DEVICES), "--store", str(store), "--json", *args],
                          capture_output=True, text=True, timeout=600)


def retained(port, user="aggregator"):
    """{topic: payload} of the retained messages ``user`` may read under mss/v1/."""
    got, subscribed = {}, threading.Event()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=user, protocol=mqtt.MQTTv311)
    c.username_pw_set(user, f"pw-{user}")
    c.on_message = lambda cl, u, m: got.__setitem__(m.topic, bytes(m.payload)) if m.retain else None
    c.on_subscribe = lambda *a: subscribed.set()
    c.on_connect = lambda cl, *a: cl.subscribe("#", qos=1)
    c.connect("127.0.0.1", port)
    c.loop_start()
    assert subscribed.wait(10)
    time.sleep(1.0)  # retained messages follow the SUBACK
    c.disconnect()
    c.loop_stop()
    return got


def test_each_device_its_own_user_over_several_epochs(secured, tmp_path):
    broker, agg, cfg, store = secured
    (tmp_path / "devices.pw").write_text("# mosquitto_passwd -U input\n"
                                         + "".join(f"dev{i}:pw-dev{i}\n" for i in range(DEVICES)))
    before = retained(broker.port)
    assert not any(t.endswith("/status") for t in before)
    out = fleet(broker, cfg, store, "--broker", f"mqtt://127.0.0.1:{broker.port}", "--user-template", "dev{i}",
                "--password-file", str(tmp_path / "devices.pw"), "--epochs", "3")
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert doc["sent"] == doc["pubacked"] == doc["stored"] == 3 * DEVICES and doc["retained_left"] == []
    epochs = doc["epochs"]
    assert len(epochs) == 3 and epochs == list(range(epochs[0], epochs[0] + 3))
    s = open_store(store)
    try:
        rows = s.report_epochs()
        assert s.counters()["rejected"] == 0
    finally:
        s.close()
    per_device = {}
    for device, epoch, status in rows:
        assert status == "accepted"
        per_device.setdefault(device, []).append(epoch)
    assert {d: sorted(e) for d, e in per_device.items()} == {f"dev{i}": epochs for i in range(DEVICES)}
    # the devices' retained statuses were there (each board publishes "online") and are deleted
    assert [t for t in retained(broker.port) if t.endswith("/status")] == []


def test_one_shared_user_is_a_shortfall(secured):
    """The measured failure: every device as dev0 (the broker makes dev0 the client id of
    all, the ACL drops the other four's reports with a normal PUBACK)."""
    broker, agg, cfg, store = secured
    out = fleet(broker, cfg, store, "--broker", f"mqtt://dev0:pw-dev0@127.0.0.1:{broker.port}", "--parallel", "1",
                "--wait", "3")
    assert out.returncode == 1, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert doc["pubacked"] == DEVICES and doc["stored"] == 1, doc
    assert "error: the aggregator stored 1 of 5 reports (5 PUBACKed)" in out.stderr
    assert "--user-template" in out.stderr and "Traceback" not in out.stderr
    assert [t for t in retained(broker.port) if t.endswith("/status")] == []


def test_result_line_and_bad_logins(secured, tmp_path):
    broker, agg, cfg, store = secured
    url = f"mqtt://127.0.0.1:{broker.port}"
    pw = tmp_path / "devices.pw"
    pw.write_text("dev0:pw-dev0\n")
    out = fleet(broker, cfg, store, "--broker", url, "--user-template", "dev{i}", "--password-file", str(pw))
    assert out.returncode == 3 and "error: --password-file" in out.stderr and "no password for dev1" in out.stderr
    out = fleet(broker, cfg, store, "--broker", url, "--user-template", "dev")
    assert out.returncode == 2 and "--user-template" in out.stderr and "{i}" in out.stderr
    out = fleet(broker, cfg, store, "--broker", url, "--password-file", str(pw))
    assert out.returncode == 2 and "--password-file needs --user-template" in out.stderr
    out = fleet(broker, cfg, store, "--broker", url, "--epochs", "40")
    assert out.returncode == 2 and "--epochs" in out.stderr and "accept_past_epochs" in out.stderr
    pw.write_text("".join(f"dev{i}:pw-dev{i}\n" for i in range(DEVICES)))
    out = subprocess.run([sys.executable, "-m", "mss_cli", "fleet", "--campaign", CAMPAIGN, "--config", str(cfg),
                          "--devices", "2", "--store", str(store), "--broker", url, "--user-template", "dev{i}",
                          "--password-file", str(pw)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "2 of 2 reports stored (2 PUBACKed; 2 devices" in out.stderr


def test_counted_from_the_dashboard(mosquitto, tmp_path):
    """--aggregator-url: the rise of the dashboard's accepted counter (mss aggregate --http)."""
    from mss_aggregator.ports import free_port

    cfg, store, port = tmp_path / "cfg.json", tmp_path / "s.sqlite", free_port()
    MssConfig.build(64, 2.0, [59, 61, 63]).save(cfg, clocked(last_epoch=3))
    agg = AggregatorProcess(tmp_path, cfg, store, campaign="t", broker=f"mqtt://127.0.0.1:{mosquitto.port}",
                            extra=("--http", f"127.0.0.1:{port}")).start().ready()
    try:
        out = subprocess.run([sys.executable, "-m", "mss_cli", "fleet", "--campaign", "t", "--config", str(cfg),
                              "--devices", "3", "--epochs", "2", "--broker", f"mqtt://127.0.0.1:{mosquitto.port}",
                              "--aggregator-url", f"http://127.0.0.1:{port}"],
                             capture_output=True, text=True, timeout=600)
    finally:
        agg.stop()
    assert out.returncode == 0, out.stderr
    assert "6 of 6 reports stored (6 PUBACKed; 3 devices, epochs 2..3)" in out.stderr
