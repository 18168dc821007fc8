"""LoRaWAN network servers as the aggregator's source: ChirpStack v4 and The
Things Stack v3 uplink events published to a real Mosquitto, read by the real
``mss aggregate --lorawan``; config-switch downlinks sent by ``mss
switch-config``.  Every check is an exact equality (no statistical test, so
no false alarms).
"""
import base64
import json
import random
import time

import numpy as np
import paho.mqtt.client as mqtt
import pytest

from brokers import mosquitto  # noqa: F401 (fixture)
from collect_helpers import AggregatorProcess, mss, wait_for
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.lorawan import parse_spec, unix_time
from mss_aggregator.collect.store import open_store
from mss_aggregator.devices.network_server import chirpstack_uplink, rfc3339, tts_uplink
from mss_device.olh import seed
from mss_device.rng import ByteRng
from mss_protocol.choose import Limits, choose
from mss_protocol.codec import codec
from mss_protocol.configs import load_dict
from mss_protocol.counts import Counts

PERIOD = 3600
APP, TENANT = "mss-demo", "ttn"
SPECS = {"chirpstack": f"chirpstack:{APP}", "tts": f"tts:{APP}@{TENANT}"}
QOS = {"chirpstack": 1, "tts": 0}


def compact(k, eps, protocol, frame="compact"):
    return load_dict(choose(k, eps, protocol, limits=Limits(frame=frame, max_bytes=11))["config"])


# OLH's seed needs the drawing epoch on the wire: compact-epoch (SPEC.md section 4)
GRR, OLH = compact(16, 2.0, "grr"), compact(64, 2.0, "olh", "compact-epoch")
OTHER = compact(16, 1.0, "grr")  # another config, with another tag
assert GRR.config_id[0] & 0x3F != OTHER.config_id[0] & 0x3F


def save(cfg, path, fport=1, **lorawan):
    cfg.save(path, {"device": {"period_s": PERIOD, "lorawan": {"fport": fport, **lorawan}}})
    return path


def privatise(cfg, value, eui, epoch, rng):
    """The device client's report for ``value`` (OLH: its hash seed from the DevEUI and epoch)."""
    draws = ByteRng(rng.bytes)
    p = cfg.protocol
    if cfg.name == "olh":
        return p.randomise(value, draws, seed(cfg.config_id, epoch, eui, p.P))[2]
    return p.randomise(value, draws)


def chirpstack_event(eui, fcnt, frame, t, fport=1, gateway=0):
    return chirpstack_uplink(APP, eui, fport, fcnt, frame, t, gateway)


def tts_event(eui, fcnt, frame, t, fport=1, gateway=0):
    return tts_uplink(APP, TENANT, eui, fport, fcnt, frame, t, gateway)


EVENT = {"chirpstack": chirpstack_event, "tts": tts_event}


def eui(i):
    return f"70b3d57ed005{i:04x}"


class NetworkServer:
    """Publishes events as the network server's MQTT integration does (ChirpStack QoS 1, TTS 0)."""

    def __init__(self, port, server):
        self.qos = QOS[server]
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"ns-{server}")
        self.c.max_inflight_messages_set(1000)
        self.c.connect("127.0.0.1", port)
        self.c.loop_start()

    def send(self, events):
        infos = [self.c.publish(topic, doc if isinstance(doc, bytes) else json.dumps(doc), qos=self.qos)
                 for topic, doc in events]
        for info in infos:
            info.wait_for_publish(10)
        assert all(info.is_published() for info in infos)

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


def run(tmp_path, broker, server, cfg, events, expect, **lorawan):
    """Start ``mss aggregate --lorawan``, publish ``events``, wait for ``expect``
    received, stop; return (counters, store counts, accepted keys, quarantine rows)."""
    store = tmp_path / "s.sqlite"
    agg = AggregatorProcess(tmp_path, save(cfg, tmp_path / "cfg.json", **lorawan), store,
                            broker=f"mqtt://127.0.0.1:{broker.port}", extra=("--lorawan", SPECS[server]))
    agg.start().ready()
    ns = NetworkServer(broker.port, server)
    try:
        ns.send(events)
        wait_for(store, lambda c: c["received"] >= expect, timeout=30)
        assert agg.proc.poll() is None  # still running, whatever it was sent
    finally:
        ns.close()
        agg.stop()
    s = open_store(store)
    try:
        rows = s.db.execute("SELECT reason, payload FROM quarantine ORDER BY id").fetchall()
        return s.counters(), s.counts(), s.accepted_keys(), rows
    finally:
        s.close()


def retained(port):
    """Every retained message on the broker."""
    got = []
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    c.on_message = lambda cl, u, m: got.append(m.topic)
    c.connect("127.0.0.1", port)
    c.subscribe("#")
    c.loop_start()
    time.sleep(0.5)
    c.loop_stop()
    c.disconnect()
    return got


# -- end to end through Mosquitto ------------------------------------------------

@pytest.mark.parametrize("server,cfg", [("chirpstack", GRR), ("tts", OLH)], ids=["chirpstack-grr", "tts-olh"])
def test_stored_counts_equal_the_offline_truth(tmp_path, mosquitto, server, cfg):
    """40 devices x 3 epochs: the epoch is the event's time (two are past
    epochs), the device the DevEUI (OLH's hash seed), the sequence the FCnt."""
    rng = np.random.default_rng(7)
    now_epoch = int(time.time()) // PERIOD
    events, truth = [], []
    for d in range(40):
        for back in range(3):
            epoch = now_epoch - back
            frame = codec(cfg).encode(privatise(cfg, int(rng.integers(cfg.k)), eui(d), epoch, rng), epoch)
            fcnt = 100 * d + 5 - back  # rising with time
            events.append(EVENT[server](eui(d), fcnt, frame, epoch * PERIOD + float(rng.uniform(0, PERIOD))))
            truth.append((eui(d), epoch, fcnt, frame))
    c, online, keys, rows = run(tmp_path, mosquitto, server, cfg, events, len(events))
    offline = Counts(cfg).add(codec(cfg).decode(frame, dev, epoch) for dev, epoch, _, frame in truth)
    assert c["accepted"] == c["received"] == 120 and c["rejected"] == c["duplicate"] == 0 and rows == []
    assert keys == {(dev, epoch, fcnt) for dev, epoch, fcnt, _ in truth}
    assert online.c.tolist() == offline.c.tolist() and online.total == 120
    assert retained(mosquitto.port) == []  # no mss/v1/<campaign>/config for LoRaWAN devices


@pytest.mark.parametrize("server", ["chirpstack", "tts"])
def test_gateway_copies_count_once_and_a_rejoin_is_an_extra(tmp_path, mosquitto, server):
    """One uplink heard by three gateways (same FCnt, other rx metadata) is
    stored once; a device that rejoins (FCnt 0 again, omitted) and reports
    again in that epoch is an extra, not counted; its next epoch counts."""
    c0 = codec(GRR)
    now = time.time()
    last = (int(now) // PERIOD - 1) * PERIOD + 10.0  # the previous epoch
    copies = [EVENT[server](eui(1), 41, c0.encode(3), last, gateway=g) for g in range(3)]
    assert len({json.dumps(doc) for _, doc in copies}) == 3
    rejoined = EVENT[server](eui(1), 0, c0.encode(9), last + 600)
    assert rejoined[1].get("fCnt") == 0 if server == "chirpstack" else "f_cnt" not in rejoined[1]["uplink_message"]
    after = EVENT[server](eui(1), 1, c0.encode(5), now)
    c, online, keys, _ = run(tmp_path, mosquitto, server, GRR, copies + [rejoined, after], 5)
    assert (c["accepted"], c["duplicate"], c["rejected"], c["rejected_extra_in_epoch"]) == (2, 2, 1, 1)
    epoch = int(last) // PERIOD
    assert keys == {(eui(1), epoch, 41), (eui(1), epoch + 1, 1)}
    assert online.c.tolist() == Counts(GRR).add([c0.decode(c0.encode(3), eui(1), epoch),
                                                 c0.decode(c0.encode(5), eui(1), epoch + 1)]).c.tolist()


def test_new_fcnts_in_one_epoch_store_at_most_extra_max(tmp_path, mosquitto):
    """Issue 23 item 5: one DevEUI sending 100 uplinks with new FCnts in one
    epoch (compact frames, dated by the event's time) stores its accepted
    report and EXTRA_MAX extras; the other 95 are counted, not stored
    (before: 99 extra rows)."""
    from mss_aggregator.collect.store import EXTRA_MAX

    c0 = codec(GRR)
    now = time.time()
    start = (int(now) // PERIOD) * PERIOD + 1.0  # the current epoch, from its first second
    events = [chirpstack_event(eui(7), fcnt, c0.encode(fcnt % GRR.k), start + fcnt * 0.01) for fcnt in range(100)]
    c, online, keys, rows = run(tmp_path, mosquitto, "chirpstack", GRR, events, 100)
    assert (c["received"], c["accepted"], c["rejected_extra_in_epoch"], c["extra_dropped"]) == (100, 1, 99, 95)
    assert {key[:2] for key in keys} == {(eui(7), int(start) // PERIOD)} and online.total == 1 and rows == []
    s = open_store(tmp_path / "s.sqlite")
    try:
        assert s._query("SELECT COUNT(*) FROM reports WHERE status = 'extra'")[0][0] == EXTRA_MAX
    finally:
        s.close()


@pytest.mark.parametrize("server", ["chirpstack", "tts"])
def test_omitted_fields_and_every_quarantine_reason(tmp_path, mosquitto, server):
    """Omitted FCnt = 0 and omitted time = the aggregator clock are accepted;
    omitted FPort = 0 (MAC only) and each malformed event is quarantined with
    its reason and its JSON; the aggregator keeps running and counting."""
    c0, now = codec(GRR), time.time()
    event = EVENT[server]
    good = [event(eui(1), 0, c0.encode(2), now), event(eui(2), 5, c0.encode(4), None)]
    assert "time" not in good[1][1] and "received_at" not in good[1][1]
    topic, doc = event(eui(3), 5, c0.encode(1), now)
    data = "data" if server == "chirpstack" else "frm_payload"

    def variant(change):
        d = json.loads(json.dumps(doc))
        change(d if server == "chirpstack" else d["uplink_message"], d)
        return topic, d

    bad = {
        "lorawan_json": (topic, json.dumps(doc)[:-9].encode()),
        "lorawan_base64": variant(lambda b, d: b.update({data: "not base64!"})),
        "wire_config": variant(lambda b, d: b.update({data: base64.b64encode(codec(OTHER).encode(1)).decode()})),
        "payload": variant(lambda b, d: b.update({data: base64.b64encode(bytes(13)).decode()})),
        "lorawan_field": variant(lambda b, d: (d.get("deviceInfo") or d["end_device_ids"]).pop(
            "devEui" if server == "chirpstack" else "dev_eui")),
        "lorawan_fport": event(eui(3), 5, c0.encode(1), now, fport=0),  # omitted: MAC only
        "topic": ((topic.replace(eui(3), eui(4)), doc) if server == "chirpstack"  # another device's topic
                  else (f"v3/{APP}@{TENANT}/devices//up", doc)),  # + matches an empty level
    }
    mac_only = bad["lorawan_fport"][1]  # ChirpStack writes the zero (pbjson emit_fields), TTS omits it
    assert mac_only.get("fPort") == 0 if server == "chirpstack" else "f_port" not in mac_only["uplink_message"]
    wrong_port = variant(lambda b, d: b.update({"fPort" if server == "chirpstack" else "f_port": 2}))
    probe = variant(lambda b, d: b.update({"fPort" if server == "chirpstack" else "f_port": 3}))  # time_fport
    c, _, keys, rows = run(tmp_path, mosquitto, server, GRR, good + list(bad.values()) + [wrong_port, probe], 11)
    clock_epochs = {int(now) // PERIOD, int(time.time()) // PERIOD}  # the aggregator's clock in between
    assert c["received"] == 11 and c["accepted"] == 2 and c["rejected"] == 8
    assert c["time_probes"] == 1  # a clockless board's time probe: counted, neither stored nor quarantined
    assert {k[len("rejected_"):]: v for k, v in c.items() if k.startswith("rejected_")} == \
        dict(dict.fromkeys(bad, 1), lorawan_fport=2)
    assert len(keys) == 2 and (eui(1), int(now) // PERIOD, 0) in keys  # seq = the omitted FCnt, 0
    assert any((eui(2), e, 5) in keys for e in clock_epochs)
    sent = {reason: e[1] if isinstance(e[1], bytes) else json.dumps(e[1]).encode() for reason, e in bad.items()}
    assert [r.split(":")[0] for r, _ in rows] == list(bad) + ["lorawan_fport"]
    assert [bytes(p) for _, p in rows[:len(bad)]] == list(sent.values())  # the raw JSON kept


@pytest.mark.parametrize("server", ["chirpstack", "tts"])
def test_fuzzed_events_through_mosquitto(tmp_path, mosquitto, server):
    events = list(fuzzed(server, 300, seed=11, topics=False))  # other topics would not be delivered
    c, _, _, rows = run(tmp_path, mosquitto, server, GRR, events, len(events))
    assert c["received"] == len(events) == c["accepted"] + c["duplicate"] + c["rejected"]
    assert len(rows) == c["rejected"] - c.get("rejected_extra_in_epoch", 0)  # the rest are quarantined
    assert c["accepted"] > 0 and len(rows) > 100


# -- fuzzing the classification directly ----------------------------------------

JUNK = [None, True, False, 0, -1, 1.5, float("nan"), 2 ** 64, 10 ** 300, "", "x" * 300, "\udcff", [], {},
        [[[[[]]]]], {"a": {"b": [1, {"c": None}]}}, list(range(50))]
REASONS = {"topic", "lorawan_json", "lorawan_field", "lorawan_base64", "lorawan_fport", "payload", "epoch"}
SERVER_REASONS = {"chirpstack": REASONS | {"lorawan_protobuf"}, "tts": REASONS}  # binary events: ChirpStack's


def _paths(doc, prefix=()):
    for k, v in doc.items():
        yield prefix + (k,)
        if isinstance(v, dict):
            yield from _paths(v, prefix + (k,))


def fuzzed(server, n, seed, topics=True):
    """``n`` (topic, bytes) events: valid ones of GRR mutated by a seeded generator
    (fields dropped or retyped, payloads garbled, documents truncated, random
    bytes, non-UTF-8, deep nesting, huge numbers, oversize documents; with
    ``topics`` a few on other topics)."""
    rnd = random.Random(seed)
    frames = [codec(GRR).encode(v) for v in range(GRR.k)] + [codec(OTHER).encode(1), bytes(20), b""]
    now = time.time()
    for _ in range(n):
        at = rnd.choice([now, now - PERIOD, now + 3 * PERIOD, None])  # + 3 periods: in the future
        topic, doc = EVENT[server](eui(rnd.randrange(64)), rnd.randrange(70000), rnd.choice(frames), at,
                                   fport=rnd.choice([1, 1, 0, 2]))
        kind = rnd.randrange(10)
        if kind < 4 and doc:  # drop or retype one field, anywhere
            path = rnd.choice(list(_paths(doc)))
            parent = doc
            for k in path[:-1]:
                parent = parent[k]
            if rnd.random() < 0.3:
                del parent[path[-1]]
            else:
                parent[path[-1]] = rnd.choice(JUNK)
        raw = json.dumps(doc).encode()
        if kind == 4:
            raw = raw[:rnd.randrange(len(raw))]
        elif kind == 5:
            raw = rnd.randbytes(rnd.randrange(200))
        elif kind == 6:  # a non-UTF-8 or NUL byte somewhere
            pos = rnd.randrange(len(raw))
            raw = raw[:pos] + rnd.choice([b"\xff", b"\xc3", b"\x00", b"\xed\xa0\x80"]) + raw[pos:]
        elif kind == 7:
            raw = rnd.choice([b"[" * 50_000, b'{"a":' * 3000 + b"1" + b"}" * 3000, b"1" * 5000,
                              json.dumps({"pad": "x" * 70_000, **doc}).encode(), b"null", b'"s"', b"[]"])
        elif kind == 8:  # the payload as other base64-ish text
            body = doc if server == "chirpstack" else doc["uplink_message"]
            body["data" if server == "chirpstack" else "frm_payload"] = rnd.choice(
                ["====", "AA", "AA=A", "A\n==", "4pyT", base64.b64encode(rnd.randbytes(30)).decode(), "é"])
            raw = json.dumps(doc).encode()
        if topics and rnd.random() < 0.05:
            topic = rnd.choice([topic.replace("/up", "/join"), topic.replace(APP, "other"), topic + "/x"])
        yield topic, raw


@pytest.mark.parametrize("server", ["chirpstack", "tts"])
def test_ten_thousand_fuzzed_events_classify_without_raising(tmp_path, server):
    ingest = Ingest(GRR, "t", PERIOD, lorawan=parse_spec(SPECS[server]), ports=(1, 3))
    events = list(fuzzed(server, 5000, seed={"chirpstack": 1, "tts": 2}[server]))
    events += [(b"\xff/x", b"{}"), (b"a" * 300, b"{}")]  # not UTF-8, too long
    items = [ingest.from_lorawan(t if isinstance(t, bytes) else t.encode(), raw) for t, raw in events]
    for it in items:
        assert ("report" in it) != ("reason" in it)
        assert "report" in it or it["reason"] in SERVER_REASONS[server] or it["reason"].startswith("wire_")
        assert len(it["payload"]) <= 4096
        if "report" in it:
            assert len(it["device_id"]) == 16 and it["device_id"] == it["device_id"].lower()
    reasons = {it.get("reason") for it in items}
    assert SERVER_REASONS[server] <= reasons and "wire_config" in reasons and None in reasons  # every path taken
    store = open_store(tmp_path / "s.sqlite", GRR)
    for i in range(0, len(items), 500):
        store.write_batch(items[i:i + 500])
    c = store.counters()
    store.close()
    assert c["received"] == len(items) == c["accepted"] + c["duplicate"] + c["rejected"]


# -- classification details -------------------------------------------------------

def test_event_times_and_device_ids():
    clock = 1_700_000_000.0
    cs = Ingest(GRR, "t", PERIOD, lorawan=parse_spec(SPECS["chirpstack"]), ports=(1, 3), clock=lambda: clock)
    frame = codec(GRR).encode(3)
    for at, want in [("2023-11-14T21:00:00Z", 1_699_995_600),
                     ("2023-11-14T22:59:59.999999999+02:00", 1_699_995_599.999999),  # microseconds kept
                     ("2023-11-14t20:00:00.5z", 1_699_992_000.5), ("2023-11-14 20:00:00Z", None),
                     ("2023-02-30T00:00:00Z", None), ("yesterday", None), (1_699_992_000, None)]:
        assert unix_time(at) == want, at
        topic, doc = chirpstack_event(eui(5), 9, frame, clock)
        doc["time"] = at
        r = cs.from_lorawan(topic.encode(), json.dumps(doc).encode())["report"]
        assert r.epoch == int(want or clock) // PERIOD and r.seq == 9
    big = chirpstack_event(eui(5), 70_001, frame, clock)
    assert cs.from_lorawan(big[0].encode(), json.dumps(big[1]).encode())["report"].seq == 70_001 % 65536
    upper = chirpstack_event(eui(5).upper(), 1, frame, clock)  # the topic as ChirpStack writes it, in any case
    assert cs.from_lorawan(upper[0].encode(), json.dumps(upper[1]).encode())["device_id"] == eui(5)
    tts = Ingest(GRR, "t", PERIOD, lorawan=parse_spec(SPECS["tts"]), ports=(1, 3), clock=lambda: clock)
    topic, doc = tts_event(eui(6), 2, frame, clock - PERIOD)
    doc["received_at"] = rfc3339(clock - 2 * PERIOD)  # the application server's time, used only without
    renamed = topic.replace("node-0006", "any-name")  # TTS topics name the end-device id: not compared
    assert tts.from_lorawan(renamed.encode(), json.dumps(doc).encode())["report"].epoch == int(clock) // PERIOD - 1
    del doc["uplink_message"]["received_at"]  # the network server's
    assert tts.from_lorawan(topic.encode(), json.dumps(doc).encode())["report"].epoch == int(clock) // PERIOD - 2
    doc["end_device_ids"]["dev_eui"] = "70B3D57ED00500"  # 14 digits
    out = tts.from_lorawan(topic.encode(), json.dumps(doc).encode())
    assert out["reason"] == "lorawan_field" and "16 hex digits" in out["detail"]
    huge = json.dumps(dict(doc, pad="x" * 5000)).encode()
    out = tts.from_lorawan(topic.encode(), huge)
    assert out["payload"] == huge[:4096] and f"{len(huge)} bytes" in out["detail"]


def test_specs_and_downlink_documents():
    for bad in ["chirpstack:", "tts:app", "tts:app@", "ttn:app@ttn", "chirpstack:a/b", "tts:a+b@ttn",
                "chirpstack:#"]:
        with pytest.raises(ValueError, match="expected chirpstack"):
            parse_spec(bad)
    cs, tts = parse_spec("chirpstack:6f1c1c2e-1d2f-4b5f-9d2e-0a1b2c3d4e5f"), parse_spec("tts:app-1@ttn")
    assert (cs.uplink_topic, cs.qos) == ("application/6f1c1c2e-1d2f-4b5f-9d2e-0a1b2c3d4e5f/device/+/event/up", 1)
    assert (tts.uplink_topic, tts.qos) == ("v3/app-1@ttn/devices/+/up", 0)
    assert tts.downlink("node-1", 2, b"\xbe\xef") == (
        "v3/app-1@ttn/devices/node-1/down/push",
        b'{"downlinks": [{"f_port": 2, "frm_payload": "vu8=", "priority": "NORMAL"}]}')


# -- mss switch-config -------------------------------------------------------------

def test_switch_config_publishes_the_downlinks(tmp_path, mosquitto):
    got = []
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    sub.on_message = lambda cl, u, m: got.append((m.topic, json.loads(m.payload), m.qos))
    sub.connect("127.0.0.1", mosquitto.port)
    sub.subscribe([("application/+/device/+/command/down", 1), ("v3/+/devices/+/down/push", 1)])
    sub.loop_start()
    time.sleep(0.3)
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    to = save(OLH, tmp_path / "to.json", config_fport=7)
    b64 = base64.b64encode(OLH.config_id[:2]).decode()
    code, out, err = mss("switch-config", "--lorawan", SPECS["chirpstack"], "--broker", broker, "--to-config", to,
                         "--device", eui(1), "--device", eui(2).upper())
    assert code == 0, err
    assert out.splitlines() == [
        f"{e}: scheduled {OLH.config_id[:2].hex()} (config {OLH.config_id_hex}) on FPort 7 -> "
        f"application/{APP}/device/{e}/command/down" for e in (eui(1), eui(2))]
    plain = save(OLH, tmp_path / "plain.json")  # no config_fport: 2; --fport overrides
    for args, port in [((), 2), (("--fport", 9), 9)]:
        code, _, err = mss("switch-config", "--lorawan", SPECS["tts"], "--broker", broker, "--to-config", plain,
                           "--device", "node-1", *args)
        assert code == 0, err
    time.sleep(0.5)
    sub.loop_stop()
    sub.disconnect()
    assert got == [(f"application/{APP}/device/{e}/command/down",
                    {"devEui": e, "confirmed": False, "fPort": 7, "data": b64}, 1) for e in (eui(1), eui(2))] + [
        (f"v3/{APP}@{TENANT}/devices/node-1/down/push",
         {"downlinks": [{"f_port": port, "frm_payload": b64, "priority": "NORMAL"}]}, 0) for port in (2, 9)]
    assert len(base64.b64decode(b64)) == 2


def test_cli_errors_name_the_problem(tmp_path):
    cfg = save(GRR, tmp_path / "cfg.json")
    bad_port = save(GRR, tmp_path / "port0.json", fport=0)
    (tmp_path / "junk.json").write_text("{")
    broker = "mqtt://127.0.0.1:1"
    for args, code, text in [
        (("switch-config", "--lorawan", "loriot:x", "--broker", broker, "--to-config", cfg, "--device", eui(1)),
         2, "expected chirpstack:"),
        (("switch-config", "--lorawan", SPECS["chirpstack"], "--broker", broker, "--to-config", cfg,
          "--device", "12"), 2, "16 hex digits"),
        (("switch-config", "--lorawan", SPECS["tts"], "--broker", broker, "--to-config", tmp_path / "junk.json",
          "--device", "n1"), 3, "junk.json"),
        (("switch-config", "--lorawan", SPECS["tts"], "--broker", broker, "--to-config", cfg, "--device", "n1",
          "--fport", 0), 2, "--fport"),
        (("switch-config", "--lorawan", SPECS["tts"], "--broker", broker, "--to-config", cfg, "--device", "n1"),
         3, "cannot connect"),
        (("aggregate", "--lorawan", SPECS["tts"], "--serial", "/dev/null", "--config", cfg,
          "--store", tmp_path / "s.sqlite"), 2, "needs --broker"),
        (("aggregate", "--lorawan", SPECS["tts"], "--broker", broker, "--config", bad_port,
          "--store", tmp_path / "s.sqlite"), 3, "device.lorawan.fport must be an application FPort 1..223"),
    ]:
        got, _, err = mss(*args)
        assert got == code and text in err, (args, err)
