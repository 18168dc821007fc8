"""The network servers' own definitions (issue 27 item 6): ChirpStack v4 uplink
events made with the official ``chirpstack-api`` protobufs through both of its
MQTT marshalers, read by the real ``mss aggregate --lorawan chirpstack:APP``
from a real Mosquitto; The Things Stack events held to its documented shape.
The sample events of docs/lorawan.md and tools/lorawan_samples.py: see
tests/test_lorawan_samples.py.
"""
import json
import random
import time

import numpy as np
import pytest
from chirpstack_api import integration

from brokers import mosquitto  # noqa: F401 (fixture)
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.lorawan import UPLINK_FIELDS, UplinkError, parse_spec
from mss_aggregator.devices.network_server import TTS_UPLINK_FIELDS, chirpstack_event, marshal, tts_uplink
from mss_protocol.codec import codec
from mss_protocol.counts import Counts
from test_collect_lorawan import APP, GRR, PERIOD, SPECS, TENANT, eui, run

CS = parse_spec(SPECS["chirpstack"])


def test_the_fields_read_are_chirpstacks_own():
    """Each field the binary reader parses has the official descriptor's number and type."""
    official = {"UplinkEvent": integration.UplinkEvent.DESCRIPTOR, "DeviceInfo": integration.DeviceInfo.DESCRIPTOR}
    for message, fields in UPLINK_FIELDS.items():
        for name, (number, kind, type_name) in fields.items():
            f = official[message].fields_by_name[name]
            assert (f.number, f.type) == (number, kind), (message, name)
            if type_name:
                assert f.message_type.full_name == type_name.lstrip("."), (message, name)


@pytest.mark.parametrize("marshaler", ["json", "protobuf", "mixed"])
def test_both_marshalers_count_the_same(tmp_path, mosquitto, marshaler):
    """30 devices x 2 epochs through either marshaler (or both, alternating) store
    the offline truth; a JoinEvent on the up topic, a truncated protobuf event
    and random bytes are quarantined with their reasons, their bytes kept."""
    rng = np.random.default_rng(5)
    now_epoch = int(time.time()) // PERIOD
    events, truth = [], []
    for d in range(30):
        for back in range(2):
            epoch, fcnt = now_epoch - back, 10 * d + 2 - back
            frame = codec(GRR).encode(int(rng.integers(GRR.k)))
            topic, event = chirpstack_event(APP, eui(d), 1, fcnt, frame, epoch * PERIOD + 60.0 * d)
            how = marshaler if marshaler != "mixed" else ("json", "protobuf")[(d + back) % 2]
            events.append((topic, marshal(event, how)))
            truth.append((eui(d), epoch, fcnt, frame))
    topic, event = chirpstack_event(APP, eui(40), 1, 7, codec(GRR).encode(1), time.time())
    join = integration.JoinEvent(deduplication_id="j", device_info=event.device_info, dev_addr="d0000028",
                                 region_config_id="us915_0")
    whole = marshal(event, "protobuf")
    cut = whole[:whole.index(event.device_info.SerializeToString()) + 10]  # inside deviceInfo
    bad = [(topic, join.SerializeToString()), (topic, cut), (topic, random.Random(3).randbytes(60))]
    c, online, keys, rows = run(tmp_path, mosquitto, "chirpstack", GRR, events + bad, len(events) + 3)
    offline = Counts(GRR).add(codec(GRR).decode(frame, dev, epoch) for dev, epoch, _, frame in truth)
    assert c["accepted"] == c["received"] - 3 == 60 and c["duplicate"] == 0
    assert keys == {(dev, epoch, fcnt) for dev, epoch, fcnt, _ in truth}
    assert online.c.tolist() == offline.c.tolist()
    assert [r.split(":")[0] for r, _ in rows] == ["lorawan_fport", "lorawan_protobuf", "lorawan_protobuf"]
    assert "FPort 0" in rows[0][0] and "integration.UplinkEvent" in rows[1][0]
    assert [bytes(p) for _, p in rows] == [doc for _, doc in bad]


def test_binary_events_read_as_the_json_ones():
    clock = 1_700_000_000.0
    ingest = Ingest(GRR, "t", PERIOD, lorawan=CS, ports=(1, 3), clock=lambda: clock)
    frame = codec(GRR).encode(3)

    def both(event, topic=None):
        t = topic or f"application/{APP}/device/{event.device_info.dev_eui}/event/up"
        return [ingest.from_lorawan(t.encode(), marshal(event, m)) for m in ("json", "protobuf")]

    _, event = chirpstack_event(APP, eui(5), 1, 70_001, frame, clock - PERIOD)
    for r in both(event):
        assert (r["device_id"], r["report"].epoch, r["report"].seq) == (eui(5), int(clock) // PERIOD - 1, 70_001 % 65536)
    event.time.seconds = 10 ** 15  # out of Timestamp's range: the clock, as for an unreadable JSON time
    assert CS.uplink(f"application/{APP}/device/{eui(5)}/event/up", marshal(event, "protobuf"), 1).time is None
    _, event = chirpstack_event(APP, eui(5).upper(), 1, 1, frame, None)  # no time; the DevEUI in capitals
    assert [r["report"].epoch for r in both(event)] == [int(clock) // PERIOD] * 2
    assert [r["device_id"] for r in both(event)] == [eui(5)] * 2
    for change, reason, text in [(lambda e: e.device_info.ClearField("dev_eui"), "lorawan_field", "deviceInfo.devEui"),
                                 (lambda e: setattr(e, "f_port", 2), "lorawan_fport", "FPort 2"),
                                 (lambda e: e.ClearField("data"), "wire_length", "")]:
        _, event = chirpstack_event(APP, eui(6), 1, 1, frame, clock)
        change(event)
        for r in both(event, f"application/{APP}/device/{eui(6)}/event/up"):
            assert r["reason"] == reason and text in r["detail"], r
    _, event = chirpstack_event(APP, eui(6), 1, 1, frame, clock)
    for r in both(event, f"application/{APP}/device/{eui(7)}/event/up"):  # another device's topic
        assert r["reason"] == "topic"
    with pytest.raises(UplinkError, match="lorawan_field: deviceInfo.devEui"):  # an empty message parses
        CS.uplink(f"application/{APP}/device/{eui(6)}/event/up", b"", 1)
    for junk in [b"[1]", b"\x0a\xff", bytes(range(256))]:
        with pytest.raises(UplinkError, match="lorawan_protobuf: neither a JSON object nor a protobuf"):
            CS.uplink(f"application/{APP}/device/{eui(6)}/event/up", junk, 1)


def _paths(doc, prefix=()):
    for k, v in doc.items():
        yield prefix + (k,)
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, dict):
                yield from _paths(item, prefix + (k,))


def test_tts_events_have_the_documented_shape():
    """Every field of the emulated TTS uplink is one its documentation names, the
    ones the aggregator reads among them; such an event is accepted, and one
    without frm_payload carries no report (an empty frame: ``wire_length``)."""
    topic, doc = tts_uplink(APP, TENANT, eui(1), 1, 9, codec(GRR).encode(2), time.time())
    assert set(_paths(doc)) <= TTS_UPLINK_FIELDS
    tts = parse_spec(SPECS["tts"])
    read = {tts.DEV_EUI, tts.FPORT, tts.FCNT, tts.DATA, *tts.TIMES}
    assert read <= TTS_UPLINK_FIELDS and read <= set(_paths(doc))
    ingest = Ingest(GRR, "t", PERIOD, lorawan=tts, ports=(1, 3))
    ok = ingest.from_lorawan(topic.encode(), json.dumps(doc).encode())
    assert ok["device_id"] == eui(1) and ok["report"].seq == 9
    del doc["uplink_message"]["frm_payload"]
    assert ingest.from_lorawan(topic.encode(), json.dumps(doc).encode())["reason"] == "wire_length"

