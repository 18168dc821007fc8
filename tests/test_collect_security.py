"""docs/mosquitto's password file + ACL: a device can publish only under its
own id, and only the aggregator can read reports."""
import time
from pathlib import Path

import paho.mqtt.client as mqtt

from brokers import Mosquitto, password_file

DOCS = Path(__file__).resolve().parent.parent / "docs" / "mosquitto"


def _client(port, user, received=None, subscribe=None):
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=user)
    c.username_pw_set(user, f"pw-{user}")
    if received is not None:
        c.on_message = lambda cl, u, m: received.append((m.topic, bytes(m.payload)))
    c.connect("127.0.0.1", port)
    c.loop_start()
    if subscribe:
        c.subscribe(subscribe, qos=1)
    time.sleep(0.3)
    return c


def test_devices_cannot_impersonate_or_read(tmp_path):
    passwd = password_file(tmp_path / "passwd", ["aggregator", "dev1", "dev2"])
    acl = tmp_path / "acl"
    acl.write_text((DOCS / "acl").read_text())
    broker = Mosquitto(tmp_path, anonymous=False,
                       extra=f"password_file {passwd}\nacl_file {acl}\n")
    acl.chmod(0o644)
    broker.start()
    try:
        agg_got, dev2_got = [], []
        agg = _client(broker.port, "aggregator", agg_got, "mss/v1/greenhouse/+/report")
        dev2 = _client(broker.port, "dev2", dev2_got, "mss/v1/greenhouse/+/report")
        dev1 = _client(broker.port, "dev1")
        dev1.publish("mss/v1/greenhouse/dev1/report", b"own", qos=1).wait_for_publish(5)
        dev1.publish("mss/v1/greenhouse/dev2/report", b"forged", qos=1).wait_for_publish(5)
        time.sleep(1.0)
        assert agg_got == [("mss/v1/greenhouse/dev1/report", b"own")]  # forged one dropped
        assert dev2_got == []  # devices cannot read reports
        refused = []
        anon = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
        anon.on_connect = lambda c, u, f, reason, p: refused.append(reason.is_failure)
        anon.connect("127.0.0.1", broker.port)
        anon.loop_start()
        time.sleep(0.5)
        anon.loop_stop()
        assert refused and refused[0]  # anonymous clients are refused
        for c in (agg, dev1, dev2):
            c.loop_stop()
            c.disconnect()
    finally:
        broker.stop()
