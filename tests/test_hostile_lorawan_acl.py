"""Forged uplinks on the LoRaWAN integration broker (issue 23, item 9).

An uplink event is plain JSON on an MQTT topic: whoever may publish there makes
up reports under any DevEUI, so the integration broker's write ACL is part of
the trust boundary.  The broker here is a real Mosquitto with a password file
and docs/mosquitto/acl-lorawan as shipped; the aggregator is the real ``mss
aggregate --lorawan chirpstack:...`` with its password from a file.  The
network server's account publishes genuine uplinks; another account (a device,
a gateway, a leaked credential) and the aggregator's own account publish forged
ones, ChirpStack's and The Things Stack's topics: none may reach the aggregator.

The ``no-acl`` variant is the same broker with the password file only (what a
broker without ACL lets through): the forged uplinks are stored, which shows
the test can fail (before: 100 of 100 forged DevEUIs stored).
"""
import json
import time
from pathlib import Path

import numpy as np
import paho.mqtt.client as mqtt
import pytest
from click.testing import CliRunner

from brokers import Mosquitto, password_file
from collect_helpers import AggregatorProcess, wait_for
from mss_aggregator.collect.store import open_store
from mss_aggregator.devices.network_server import chirpstack_uplink, tts_uplink
from mss_cli.main import main
from mss_device.rng import ByteRng
from mss_protocol.choose import Limits, choose
from mss_protocol.codec import codec
from mss_protocol.configs import load_dict

DOCS = Path(__file__).resolve().parent.parent / "docs" / "mosquitto"
APP, TENANT = "orchard", "ttn"
PERIOD = 3600
CFG = load_dict(choose(16, 2.0, "grr", limits=Limits(frame="compact", max_bytes=11))["config"])
USERS = ["chirpstack", "tts", "aggregator", "switcher", "intruder"]
GENUINE, FORGED = 20, 100


def eui(i, forged=False):
    return f"{'dead' if forged else '70b3'}d57ed005{i:04x}"


def frame(rng, epoch):
    return codec(CFG).encode(CFG.protocol.randomise(int(rng.integers(CFG.k)), ByteRng(rng.bytes)), epoch)


def client(port, user, on_message=None, subscribe=()):
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=user)
    c.username_pw_set(user, f"pw-{user}")
    c.max_inflight_messages_set(1000)
    if on_message:
        c.on_message = on_message
    c.connect("127.0.0.1", port)
    c.loop_start()
    for topic in subscribe:
        c.subscribe(topic, qos=1)
    time.sleep(0.3)
    return c


def send(c, events, qos=1):
    infos = [c.publish(topic, json.dumps(doc), qos=qos) for topic, doc in events]
    for info in infos:
        info.wait_for_publish(10)


@pytest.fixture(params=["shipped", "no-acl"])
def variant(request):
    return request.param


def test_only_the_network_server_writes_uplinks(tmp_path, variant):
    passwd = password_file(tmp_path / "passwd", USERS)
    extra = f"password_file {passwd}\n"
    if variant == "shipped":
        acl = tmp_path / "acl"
        acl.write_text((DOCS / "acl-lorawan").read_text())
        acl.chmod(0o644)
        extra += f"acl_file {acl}\n"
    # no use_username_as_clientid here: the test's client on the aggregator's account must not take the
    # aggregator's session over (docs/deployment.md: one broker user per process)
    broker = Mosquitto(tmp_path, anonymous=False, extra=extra).start()
    config, store = tmp_path / "cfg.json", tmp_path / "s.sqlite"
    CFG.save(config, {"device": {"period_s": PERIOD, "lorawan": {"fport": 1}}})
    (tmp_path / "pw").write_text("pw-aggregator\n")
    agg = AggregatorProcess(tmp_path, config, store, broker=f"mqtt://aggregator@127.0.0.1:{broker.port}",
                            extra=["--lorawan", f"chirpstack:{APP}", "--broker-password-file", tmp_path / "pw"])
    rng = np.random.default_rng(3)
    now = time.time()
    epoch = int(now) // PERIOD
    tts_got, clients, real = [], [], (None,)
    try:
        agg.start().ready()
        downlinks = []
        ns = client(broker.port, "chirpstack", lambda c, u, m: downlinks.append(m.topic),
                    [f"application/{APP}/device/+/command/down"])
        intruder = client(broker.port, "intruder")
        own = client(broker.port, "aggregator", lambda c, u, m: tts_got.append(m.topic),
                     [f"v3/{APP}@{TENANT}/devices/+/up"])
        tts = client(broker.port, "tts")
        clients = [ns, intruder, own, tts]
        send(ns, [chirpstack_uplink(APP, eui(i), 1, 7, frame(rng, epoch), now) for i in range(GENUINE - 1)])
        forged = [chirpstack_uplink(APP, eui(i, True), 1, 7, frame(rng, epoch), now) for i in range(FORGED)]
        send(intruder, forged[: FORGED // 2])
        send(own, forged[FORGED // 2:])  # the aggregator's credential may only read
        send(intruder, [tts_uplink(APP, TENANT, eui(i, True), 1, 7, frame(rng, epoch), now) for i in range(10)],
             qos=0)
        real = tts_uplink(APP, TENANT, eui(999), 1, 7, frame(rng, epoch), now)
        send(tts, [real], qos=0)
        # the last genuine uplink: once stored, everything published before it has been delivered
        send(ns, [chirpstack_uplink(APP, eui(GENUINE - 1), 1, 7, frame(rng, epoch), now)])
        wait_for(store, lambda c: c["received"] >= GENUINE, timeout=30)
        # config-switch downlinks: switch-config's account may queue them, the aggregator's may not
        (tmp_path / "switcher.pw").write_text("pw-switcher\n")
        for user in ("switcher", "aggregator"):
            r = CliRunner().invoke(main, ["switch-config", "--lorawan", f"chirpstack:{APP}", "--broker",
                                          f"mqtt://{user}@127.0.0.1:{broker.port}", "--broker-password-file",
                                          str(tmp_path / ("switcher.pw" if user == "switcher" else "pw")),
                                          "--to-config", str(config), "--device", eui(1 if user == "switcher" else 2)])
            assert r.exit_code == 0, r.stderr
        time.sleep(0.5)
    finally:
        for c in clients:
            c.loop_stop()
            c.disconnect()
        agg.stop()
        broker.stop()
    s = open_store(store)
    try:
        devices = {d for d, _, _ in s.accepted_keys()}
        quarantined = s.db.execute("SELECT COUNT(*) FROM quarantine").fetchone()[0]
    finally:
        s.close()
    forged_stored = sum(d.startswith("dead") for d in devices)
    forged_tts = sum(t != real[0] for t in tts_got)
    print(f"{variant}: forged DevEUIs stored {forged_stored} of {FORGED}, genuine "
          f"{len(devices) - forged_stored} of {GENUINE}; forged TTS uplinks delivered {forged_tts} of 10")
    assert quarantined == 0
    switcher_down = f"application/{APP}/device/{eui(1)}/command/down"
    if variant == "shipped":
        assert forged_stored == 0 and devices == {eui(i) for i in range(GENUINE)}
        assert forged_tts == 0 and len(tts_got) == 1  # the aggregator's account reads TTS's own uplink
        assert downlinks == [switcher_down]
    else:  # the attack works without the ACL
        assert forged_stored == FORGED and forged_tts == 10
        assert sorted(downlinks) == [switcher_down, f"application/{APP}/device/{eui(2)}/command/down"]
