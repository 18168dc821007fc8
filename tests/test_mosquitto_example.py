"""docs/mosquitto starts as shipped: the real Mosquitto on the shipped config,
ACL and (appended) tls.conf, with only the ports and the two folders the files
live in (/etc/mosquitto/mss/, /var/lib/mosquitto/) moved to a temporary one.

It must start and log no warning; an ACL-allowed publish must arrive and a
forbidden one must not; a board must read the campaign's config.  The TLS
listeners run on files made by the openssl recipe of docs/mosquitto/README.md,
run from the page itself (so the page cannot drift from what works).  As root
the broker drops to user "mosquitto", as it does when installed, so the
permissions the README gives are checked too.
"""
import os
import re
import shutil
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from brokers import Mosquitto, mqtt_client, password_file
from mss_aggregator.ports import free_port

DOCS = Path(__file__).resolve().parent.parent / "docs" / "mosquitto"
CAMPAIGN = "greenhouse"  # the shipped ACL's
DEVICE = "dev0001"  # one of the shipped ACL's boards (and the recipe's client certificate)
SHIPPED_PORTS = (1883, 8883, 8884)  # mosquitto.conf's, then tls.conf's
SHUFFLE_ACCOUNTS = ("shuffler", "shuffler-forward", "shuffled-aggregator")  # the shipped ACL's


def recipe():
    """The openssl recipe: the fenced sh block of the README that makes the CA."""
    blocks = re.findall(r"```sh\n(.*?)```", (DOCS / "README.md").read_text(), flags=re.S)
    found = [b for b in blocks if "openssl req -x509" in b]
    assert len(found) == 1, "docs/mosquitto/README.md: one sh block with the CA recipe"
    return found[0]


def as_installed(text, folder, ports):
    """The shipped config with its listener ports and its two folders moved;
    every other line unchanged."""
    for shipped, port in zip(SHIPPED_PORTS, ports):
        text, n = re.subn(rf"(?m)^listener {shipped}\b", f"listener {port}", text)
        assert n == 1, f"listener {shipped}"
    for path in ("/etc/mosquitto/mss/", "/var/lib/mosquitto/"):
        assert path in text
        text = text.replace(path, f"{folder}/" + ("data/" if path.startswith("/var") else ""))
    return text


@pytest.fixture
def folder():
    """A folder the broker can read after dropping to user "mosquitto" (a
    pytest tmp_path is not: its parents are private)."""
    path = Path(tempfile.mkdtemp(prefix="mss-mosquitto-"))
    path.chmod(0o755)
    (path / "data").mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def install(folder, files):
    """Owner root, group mosquitto, as the README's install commands do."""
    if os.geteuid() == 0:
        shutil.chown(folder / "data", "mosquitto")
        for name, mode in files.items():
            shutil.chown(folder / name, "root", "mosquitto")
            (folder / name).chmod(mode)


def start(folder, acl="acl", tls=False):
    """The broker as shipped (mosquitto.conf, plus tls.conf when ``tls``);
    returns it and its ports (plain, TLS, mutual TLS)."""
    ports = [free_port() for _ in SHIPPED_PORTS]
    shutil.copy(DOCS / acl, folder / "acl")
    password_file(folder / "passwd", ["aggregator", *SHUFFLE_ACCOUNTS, DEVICE, "dev0002", "dev0003"])
    install(folder, {"passwd": 0o640, "acl": 0o640, **({"server.key": 0o640} if tls else {})})
    text = (DOCS / "mosquitto.conf").read_text() + ((DOCS / "tls.conf").read_text() if tls else "")
    shipped_listeners = len(re.findall(r"(?m)^listener ", text))
    broker = Mosquitto(folder, port=ports[0], conf=as_installed(text, folder, ports[:shipped_listeners]))
    return broker.start(), ports


def log_of(broker):
    return (broker.workdir / "mosquitto.log").read_text()


def client(port, user, password=None, tls=None, protocol=mqtt.MQTTv311):
    return mqtt_client(port, user, password or f"pw-{user}", tls, protocol)


def subscribe(c, topic):
    """Subscribe at QoS 1; the granted QoS (0x80 and up: refused)."""
    granted = []
    c.on_subscribe = lambda cl, u, mid, codes, p: granted.extend(codes)
    c.subscribe(topic, qos=1)
    deadline = time.time() + 5
    while not granted and time.time() < deadline:
        time.sleep(0.02)
    return granted[0].value


def arrived(c, expected, wait=5.0):
    deadline = time.time() + wait
    while time.time() < deadline and not set(expected) <= set(c.received):
        time.sleep(0.05)
    time.sleep(0.5)  # whatever else was going to arrive has
    return c.received


def report_topic(device):
    return f"mss/v1/{CAMPAIGN}/{device}/report"


def test_starts_without_warning_and_the_acl_holds(folder):
    broker, (port, *_) = start(folder)
    try:
        agg = client(port, "aggregator")
        assert subscribe(agg, f"mss/v1/{CAMPAIGN}/+/report") == 1
        agg.publish(f"mss/v1/{CAMPAIGN}/config", b"{}", qos=1, retain=True).wait_for_publish(5)
        dev = client(port, DEVICE)
        assert subscribe(dev, f"mss/v1/{CAMPAIGN}/config") == 1  # a board reads its config
        dev.publish(report_topic(DEVICE), b"own", qos=1).wait_for_publish(5)
        dev.publish(report_topic("dev0002"), b"forged", qos=1).wait_for_publish(5)
        assert arrived(agg, [(report_topic(DEVICE), b"own")]) == [(report_topic(DEVICE), b"own")]
        assert dev.received == [(f"mss/v1/{CAMPAIGN}/config", b"{}")]
        # MQTT 5 says why: the broker refuses the forbidden publish (0x87, not authorised)
        v5 = client(port, "dev0002", protocol=mqtt.MQTTv5)
        acks = []
        v5.on_publish = lambda cl, u, mid, reason, p: acks.append(reason.value)
        v5.publish(report_topic(DEVICE), b"forged", qos=1).wait_for_publish(5)
        v5.publish(report_topic("dev0002"), b"own", qos=1).wait_for_publish(5)
        assert acks == [0x87, 0]
        # a user without a block of its own may subscribe but gets no config
        other = client(port, "dev0003")
        subscribe(other, f"mss/v1/{CAMPAIGN}/config")
        assert arrived(other, [], wait=0) == []
        with pytest.raises(ConnectionRefusedError):
            client(port, DEVICE, password="wrong")
        for c in (agg, dev, v5, other):
            c.loop_stop()
            c.disconnect()
    finally:
        broker.stop()
    log = log_of(broker)
    assert "running" in log and not re.search(r"(?i)warning|error", log), log


def test_shipped_shuffle_accounts(folder):
    """The shuffler reads reports, its forwarder writes batches (and no report), the shuffled
    aggregator reads batches and never a report: each account on its own connection at once."""
    broker, (port, *_) = start(folder)
    try:
        shuffler, agg, dev = client(port, "shuffler"), client(port, "shuffled-aggregator"), client(port, DEVICE)
        assert subscribe(shuffler, f"mss/v1/{CAMPAIGN}/+/report") == 1
        subscribe(agg, f"mss/v1/{CAMPAIGN}/+/report")  # granted, but nothing of it is delivered
        assert subscribe(agg, f"mss/v1/{CAMPAIGN}/shuffled") == 1
        dev.publish(report_topic(DEVICE), b"report", qos=1).wait_for_publish(5)
        forward = client(port, "shuffler-forward", protocol=mqtt.MQTTv5)
        acks = []
        forward.on_publish = lambda cl, u, mid, reason, p: acks.append(reason.value)
        forward.publish(f"mss/v1/{CAMPAIGN}/shuffled", b"batch", qos=1).wait_for_publish(5)
        forward.publish(report_topic("dev0002"), b"forged", qos=1).wait_for_publish(5)
        assert acks == [0, 0x87]
        assert arrived(agg, [(f"mss/v1/{CAMPAIGN}/shuffled", b"batch")]) == [(f"mss/v1/{CAMPAIGN}/shuffled", b"batch")]
        assert shuffler.received == [(report_topic(DEVICE), b"report")]
        for c in (shuffler, agg, dev, forward):
            c.loop_stop()
            c.disconnect()
    finally:
        broker.stop()


def test_lorawan_acl_starts_without_warning(folder):
    broker, _ = start(folder, acl="acl-lorawan")
    broker.stop()
    log = log_of(broker)
    assert "running" in log and not re.search(r"(?i)warning|error", log), log


def test_tls_listeners_on_the_readme_recipe(folder):
    env = {**os.environ, "BROKER_NAME": "localhost", "BROKER_IP": "127.0.0.1", "DEVICE": DEVICE}
    if shutil.which("openssl") is None:
        if os.environ.get("CI"):
            pytest.fail("openssl is missing under CI")
        pytest.skip("openssl not installed")
    subprocess.run(["sh", "-eu", "-c", recipe()], cwd=folder, env=env, check=True, capture_output=True)
    for block in re.split(r"(?m)^(?=listener )", (DOCS / "tls.conf").read_text())[1:]:
        assert "use_username_as_clientid true\n" in block  # a listener setting: no session takeover
    broker, (port, tls_port, mutual_port) = start(folder, tls=True)
    try:
        agg = client(port, "aggregator")
        assert subscribe(agg, f"mss/v1/{CAMPAIGN}/+/report") == 1
        server_only = ssl.create_default_context(cafile=str(folder / "ca.pem"))
        dev = client(tls_port, DEVICE, tls=server_only)  # the broker's name and CA checked
        dev.publish(report_topic(DEVICE), b"tls", qos=1).wait_for_publish(5)
        with pytest.raises((ConnectionRefusedError, OSError)):  # no client certificate on 8884
            client(mutual_port, "dev0002", tls=server_only)
        mutual = ssl.create_default_context(cafile=str(folder / "ca.pem"))
        mutual.load_cert_chain(folder / f"{DEVICE}.pem", folder / f"{DEVICE}.key")
        dev_mutual = client(mutual_port, DEVICE, tls=mutual)
        dev_mutual.publish(report_topic(DEVICE), b"mutual", qos=1).wait_for_publish(5)
        got = [(report_topic(DEVICE), b"tls"), (report_topic(DEVICE), b"mutual")]
        assert arrived(agg, got) == got
        for c in (agg, dev, dev_mutual):
            c.loop_stop()
            c.disconnect()
    finally:
        broker.stop()
    log = log_of(broker)
    assert "running" in log and "warning" not in log.lower(), log
