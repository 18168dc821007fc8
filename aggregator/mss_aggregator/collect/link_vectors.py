"""The aggregator's test vectors (SPEC.md sections 6, 8, 9, 11, 12): what arrives on a link ->
the report it is stored as, or the quarantine reason, as :class:`~.ingest.Ingest` and
:class:`~.shuffled.ShuffledIngest` classify it.

``protocol/vectors/lorawan/uplinks.json`` (section 11: DevEUI as device id, FCnt as sequence,
the network server's time as epoch, the time probe and the skip byte, FPort, the event's
format) and ``protocol/vectors/mqtt/messages.json`` (section 9 topics, the payload bound, the
window of accepted epochs; shuffled batches on their topic, section 12), both::

    {"name", "sets": [{"what", "config", "device": {"period_s", "epoch_origin"[, "lorawan"]},
                       "accept_past_epochs", "now", "campaign", "server" (lorawan) | "receiver" (mqtt),
                       "key_hex" (shuffled), "messages": [{"what", "topic" | "topic_hex",
                       "payload" | "payload_hex", ..., "result"}]}]}

``result`` is one of ``{"device_id", "epoch", "seq", "j", "subset"}`` (a report, stored under that
device, epoch and sequence), ``{"reason"}`` (quarantined), ``{"time_probe": true}`` (counted, not
stored), ``{"skipped_epoch": E}`` (a skipped epoch counted; null: outside the window, not
counted) or, for a shuffled batch, ``{"batch_id_hex", "reports": [[position, j, subset]],
"bad": [[position, reason]]}``.  This module also checks the aggregator's side of
``serial/lines.json`` (what a status line does) and ``shuffled/batches.json`` (the quarantine
reasons)::

    python -m mss_aggregator.collect.link_vectors --write protocol/vectors
    python -m mss_aggregator.collect.link_vectors --check protocol/vectors
"""
import base64
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from mss_aggregator.collect.allow_list import AllowList
from mss_aggregator.collect.collectors import skipped
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.lorawan import parse_spec, uplink_event_class
from mss_aggregator.collect.shuffled import ShuffledIngest
from mss_protocol import shuffled_batch, shuffled_vectors
from mss_protocol.configs import load_dict
from mss_protocol.mss.config import MssConfig
from mss_protocol.oracle_config import OracleConfig
from mss_protocol.shuffled_batch import BatchError
from mss_protocol.vector_cli import vector_main
from mss_protocol.vectors import ROOT, label_stream, report_from_stream

CAMPAIGN = "vec-campaign"
PERIOD_S, ORIGIN = 3600, 1704067200  # 2024-01-01T00:00:00Z
NOW_EPOCH = 70000
NOW = ORIGIN + NOW_EPOCH * PERIOD_S + 1800  # half way through epoch 70000
EUI = "70B3D57ED0000A01"  # as a network server may write it: upper case
DEVICE = {"period_s": PERIOD_S, "epoch_origin": ORIGIN}
LORAWAN = {"fport": 1, "time_fport": 3}


def _time(epoch, into=600.5):
    """RFC 3339 (as ChirpStack writes it) of ``into`` seconds into ``epoch``."""
    t = datetime.fromtimestamp(ORIGIN + epoch * PERIOD_S + into, timezone.utc)
    return t.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _draw(cfg, value, epoch, seq, device_id, label):
    return report_from_stream(config=cfg.to_dict(), value=value, stream=label_stream(f"links/{label}", 256),
                              epoch=epoch, seq=seq, device_id=device_id)[0]


def _chirpstack(eui=EUI, fport=1, fcnt=7, data=b"", time=None, **extra):
    doc = {"deviceInfo": {"devEui": eui}, "fPort": fport, "fCnt": fcnt,
           "data": base64.b64encode(data).decode() if isinstance(data, bytes) else data}
    if time is not None:
        doc["time"] = time
    doc.update(extra)
    return json.dumps(doc)


def _up_topic(eui=EUI):
    return f"application/vec-app/device/{eui.lower()}/event/up"


def _lorawan_sets():
    grr = OracleConfig("grr", 5, 1.0, "compact")
    good = _draw(cfg=grr, value=2, epoch=0, seq=0, device_id=None, label="grr-compact")
    bad_value = bytes([good[0], 0xA0])  # value 5 of k = 5
    ep = NOW_EPOCH - 1
    proto = uplink_event_class()()
    proto.device_info.dev_eui = EUI.lower()
    proto.f_port, proto.f_cnt, proto.data = 1, 70000, good
    proto.time.FromJsonString(_time(ep))
    compact = [
        ("a compact report: DevEUI (upper case) -> device id, FCnt mod 2**16 -> sequence, time -> epoch",
         _up_topic(), _chirpstack(fcnt=65536 + 9, data=good, time=_time(ep))),
        ("the same uplink from another gateway: the same (device, epoch, sequence), a duplicate",
         _up_topic(), _chirpstack(fcnt=65536 + 9, data=good, time=_time(ep, 601.25))),
        ("no time in the event: the aggregator's clock", _up_topic(), _chirpstack(fcnt=10, data=good)),
        ("time at the window's first epoch", _up_topic(), _chirpstack(fcnt=11, data=good, time=_time(NOW_EPOCH - 32))),
        ("time one epoch before the window", _up_topic(), _chirpstack(fcnt=12, data=good,
                                                                      time=_time(NOW_EPOCH - 33))),
        ("time two epochs ahead", _up_topic(), _chirpstack(fcnt=13, data=good, time=_time(NOW_EPOCH + 2))),
        ("an unparsable time: the aggregator's clock", _up_topic(),
         _chirpstack(fcnt=14, data=good, time="yesterday")),
        ("the binary (protobuf) marshaler", _up_topic(), proto.SerializeToString()),
        ("a time probe (FPort time_fport, byte 00)", _up_topic(), _chirpstack(fport=3, fcnt=1, data=b"\0")),
        ("a skipped epoch (FPort time_fport, byte 01), dated by the network", _up_topic(),
         _chirpstack(fport=3, fcnt=2, data=b"\1", time=_time(ep))),
        ("a skipped epoch outside the window: not counted", _up_topic(),
         _chirpstack(fport=3, fcnt=3, data=b"\1", time=_time(NOW_EPOCH - 40))),
        ("FPort 2 (not the reports')", _up_topic(), _chirpstack(fport=2, data=good, time=_time(ep))),
        ("FPort 0 (MAC commands only)", _up_topic(), _chirpstack(fport=0, data=b"", time=_time(ep))),
        ("longer than any frame of the config", _up_topic(), _chirpstack(data=good + bytes(11), time=_time(ep))),
        ("a bad value in the body", _up_topic(), _chirpstack(data=bad_value, time=_time(ep))),
        ("a full frame of another config", _up_topic(),
         _chirpstack(data=bytes(12), time=_time(ep))),
        ("another application's topic", "application/other-app/device/%s/event/up" % EUI.lower(),
         _chirpstack(data=good, time=_time(ep))),
        ("the topic names another DevEUI", _up_topic("70b3d57ed0000a02"), _chirpstack(data=good, time=_time(ep))),
        ("not JSON", _up_topic(), "{not json"),
        ("a JSON array (not '{': read as protobuf)", _up_topic(), "[1, 2]"),
        ("neither JSON nor a protobuf UplinkEvent", _up_topic(), b"\x0a\xff"),
        ("no DevEUI", _up_topic(), json.dumps({"fPort": 1, "fCnt": 1, "data": "gA=="})),
        ("a DevEUI of 15 digits", _up_topic(), _chirpstack(eui=EUI[:15], data=good)),
        ("fCnt a string", _up_topic(), _chirpstack(fcnt="7", data=good)),
        ("data not base64", _up_topic(), _chirpstack(data="gA=*")),
    ]
    olh = OracleConfig("olh", 16, 2.0, "compact", seed="device")
    olh_report = _draw(cfg=olh, value=9, epoch=0, seq=0, device_id=EUI.lower(), label="olh-compact")
    olh_epoch = OracleConfig("olh", 16, 2.0, "compact-epoch")
    crossed = _draw(cfg=olh_epoch, value=9, epoch=ep, seq=0, device_id=EUI.lower(), label="olh-compact-epoch")
    full = OracleConfig("grr", 5, 1.0)
    full_report = _draw(cfg=full, value=3, epoch=ep, seq=4242, device_id=EUI.lower(), label="grr-full")
    old_full = _draw(cfg=full, value=3, epoch=NOW_EPOCH - 33, seq=4243, device_id=EUI.lower(), label="grr-full-old")
    tts = "tts:vec-app@vec-tenant"
    tts_doc = {"end_device_ids": {"device_id": "board-07", "dev_eui": EUI},
               "received_at": _time(ep, 900),
               "uplink_message": {"f_port": 1, "f_cnt": 5, "frm_payload": base64.b64encode(good).decode(),
                                  "received_at": _time(ep)}}
    return [
        ("grr k = 5, eps = 1, compact frames, ChirpStack", grr, "chirpstack:vec-app", compact),
        ("olh seed device, compact: the seed is the DevEUI's", olh, "chirpstack:vec-app",
         [("a report seeded with the lowercase DevEUI", _up_topic(),
           _chirpstack(fcnt=20, data=olh_report, time=_time(ep)))]),
        ("olh seed epoch, compact-epoch: the drawing epoch from the network's time", olh_epoch,
         "chirpstack:vec-app",
         [("drawn in epoch E, received in E + 1", _up_topic(),
           _chirpstack(fcnt=21, data=crossed, time=_time(ep + 1)))]),
        ("grr full frames: the frame's own epoch and sequence", full, "chirpstack:vec-app",
         [("a full frame (its sequence, not FCnt)", _up_topic(), _chirpstack(fcnt=22, data=full_report,
                                                                              time=_time(ep + 1))),
          ("a full frame of an epoch before the window", _up_topic(),
           _chirpstack(fcnt=23, data=old_full, time=_time(ep)))]),
        ("grr compact, The Things Stack: uplink_message.received_at", grr, tts,
         [("a compact report", "v3/vec-app@vec-tenant/devices/board-07/up", json.dumps(tts_doc)),
          ("no uplink_message.received_at: received_at", "v3/vec-app@vec-tenant/devices/board-07/up",
           json.dumps(dict(tts_doc, received_at=_time(ep + 1),
                           uplink_message={k: v for k, v in tts_doc["uplink_message"].items()
                                           if k != "received_at"}))),
          ("a JSON array", "v3/vec-app@vec-tenant/devices/board-07/up", "[1, 2]")]),
    ]


def _mqtt_sets():
    grr = OracleConfig("grr", 5, 1.0)
    mss = MssConfig.build(8, 1.0, [5, 7]).with_frame("compact-epoch")
    topic = f"mss/v1/{CAMPAIGN}/board-07/report"
    now = _draw(cfg=grr, value=2, epoch=NOW_EPOCH, seq=45, device_id="board-07", label="mqtt-now")
    reports = [
        ("a full report of the current epoch", topic, now),
        ("a full report of the next epoch (a clock a little ahead)", topic,
         _draw(cfg=grr, value=2, epoch=NOW_EPOCH + 1, seq=46, device_id="board-07", label="mqtt-next")),
        ("the window's first epoch", topic, _draw(cfg=grr, value=1, epoch=NOW_EPOCH - 32, seq=47,
                                                  device_id="board-07", label="mqtt-first")),
        ("an epoch before the window", topic, _draw(cfg=grr, value=1, epoch=NOW_EPOCH - 33, seq=48,
                                                    device_id="board-07", label="mqtt-old")),
        ("two epochs ahead", topic, _draw(cfg=grr, value=1, epoch=NOW_EPOCH + 2, seq=49,
                                          device_id="board-07", label="mqtt-ahead")),
        ("longer than any frame of the config", topic, now + b"\0"),
        ("a frame of another config", topic, now[:1] + bytes(4) + now[5:]),
        ("another campaign", "mss/v1/other/board-07/report", now),
        ("a device id with a bad character", f"mss/v1/{CAMPAIGN}/board 07/report", now),
        ("a 65-character device id", f"mss/v1/{CAMPAIGN}/{'d' * 65}/report", now),
        ("the status topic", f"mss/v1/{CAMPAIGN}/board-07/status", now),
        ("a topic that is not UTF-8", f"mss/v1/{CAMPAIGN}/board-07/report".encode()[:-1] + b"\xff", now),
    ]
    ce = [("a compact-epoch report: the epoch from the clock and the frame's low bits", topic,
           _draw(cfg=mss, value=3, epoch=NOW_EPOCH - 1, seq=0, device_id="board-07", label="mqtt-ce"))]
    d, cfgs = shuffled_vectors.load(ROOT / "shuffled" / "batches.json")
    good = bytes.fromhex(d["batches"][3]["batch_hex"])
    stopic = shuffled_batch.topic(CAMPAIGN)
    shuffled = [("a batch with bad bodies: the rest stored", stopic, good),
                ("a batch on another campaign's topic", shuffled_batch.topic("other"), good),
                ("a batch on the report topic", topic, good),
                ("a batch whose MAC fails", stopic, good[:-1] + bytes([good[-1] ^ 1]))]
    allowed = [("a device on the allow-list", topic, now),
               ("a device not on it", f"mss/v1/{CAMPAIGN}/board-08/report",
                _draw(cfg=grr, value=2, epoch=NOW_EPOCH, seq=45, device_id="board-08", label="mqtt-not-allowed"))]
    return [("grr k = 5, eps = 1, full frames", grr, "reports", reports),
            ("grr k = 5, eps = 1, an allow-list of board-07 (mss aggregate --allow-list)", grr, "allow-list", allowed),
            ("mss k = 8, compact-epoch frames", mss, "reports", ce),
            ("shuffled batches of grr k = 5 (shuffled/batches.json's key and config)", cfgs["grr"], "shuffled",
             shuffled)]


def _as_text(key, value):
    """{key: text} when ``value`` is UTF-8 text, else {key_hex: hex}."""
    if isinstance(value, str):
        return {key: value}
    try:
        return {key: value.decode("utf-8")} if key == "topic" else {key + "_hex": value.hex()}
    except UnicodeDecodeError:
        return {key + "_hex": value.hex()}


def _ingest(s, cfg):
    dev = s["device"]
    kwargs = {}
    if "lorawan" in dev:
        kwargs = dict(lorawan=parse_spec(s["server"]), ports=(dev["lorawan"]["fport"], dev["lorawan"]["time_fport"]))
    ing = Ingest(cfg, s["campaign"], dev["period_s"], dev["epoch_origin"], clock=lambda: s["now"],
                 past_epochs=s["accept_past_epochs"], **kwargs)
    if "allow_list" in s:  # the set's provisioned ids (SPEC.md section 6, reason not_allowed)
        ing.allowed = AllowList(frozenset(s["allow_list"]))
    return ing


def _result(out):
    """The vector form of one classification result."""
    if out is None:
        return {"ignored": True}
    if "reason" in out:
        return {"reason": out["reason"]}
    if out.get("ignored") == "time_probes":
        return {"time_probe": True}
    if "skip" in out:
        return {"skipped_epoch": out["epoch"]}
    if "batch" in out:
        return {"batch_id_hex": out["batch"].batch_id_hex,
                "reports": [[pos, r.j, list(r.subset)] for pos, r in out["reports"]],
                "bad": [[int(b["detail"].split(" body ")[1].split(":")[0]), b["reason"]] for b in out["bad"]]}
    r = out["report"]
    return {"device_id": out["device_id"], "epoch": r.epoch, "seq": r.seq, "j": r.j, "subset": list(r.subset)}


def classify(s, cfg, m):
    """What the aggregator makes of message ``m`` of set ``s`` (a vector's ``result``)."""
    topic = m["topic"].encode() if "topic" in m else bytes.fromhex(m["topic_hex"])
    payload = m["payload"].encode() if "payload" in m else bytes.fromhex(m["payload_hex"])
    if s.get("receiver") == "shuffled":
        ing = ShuffledIngest(cfg, s["campaign"], bytes.fromhex(s["key_hex"]))
        return _result(ing.decode_batch([ing.receive_mqtt(topic, payload)])[0])
    ing = _ingest(s, cfg)
    if s.get("server"):
        return _result(ing.from_lorawan(topic, payload))
    return _result(ing.from_mqtt(topic, payload))


def _make_set(what, cfg, messages, **fields):
    s = dict({"what": what, "config": cfg.to_dict(), "campaign": CAMPAIGN, "now": NOW,
              "accept_past_epochs": 32, "device": dict(DEVICE)}, **fields)
    out = []
    for m_what, topic, payload in messages:
        m = dict({"what": m_what}, **_as_text("topic", topic), **_as_text("payload", payload))
        out.append(dict(m, result=classify(s, cfg, m)))
    return dict(s, messages=out)


def make_lorawan():
    sets = [_make_set(what, cfg, msgs, server=server, device=dict(DEVICE, lorawan=LORAWAN))
            for what, cfg, server, msgs in _lorawan_sets()]
    return {"name": "lorawan-uplinks", "sets": sets}


def make_mqtt():
    sets = []
    for what, cfg, receiver, msgs in _mqtt_sets():
        extra = {"receiver": receiver}
        if receiver == "allow-list":
            extra = {"receiver": "reports", "allow_list": ["board-07"]}
        if receiver == "shuffled":
            extra["key_hex"] = shuffled_vectors.KEY.hex()
        sets.append(_make_set(what, cfg, msgs, **extra))
    return {"name": "mqtt-messages", "sets": sets}


PATHS = {"lorawan/uplinks.json": make_lorawan, "mqtt/messages.json": make_mqtt}


def write(root=ROOT):
    for rel, make in PATHS.items():
        path = Path(root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(make(), indent=1) + "\n")


def check_messages(path):
    errors = []
    for s in json.loads(Path(path).read_text())["sets"]:
        cfg = load_dict(s["config"], source=str(path))
        for m in s["messages"]:
            got = classify(s, cfg, m)
            if got != m["result"]:
                errors.append(f"{path}: {s['what']}: {m['what']}: got {got}, not {m['result']}")
    return errors


def status_effect(word):
    """What the aggregator makes of a serial status ``word`` (SPEC.md section 8): ``no_clock``,
    ``clock``, ``skipped`` (with the epoch) or ``ignored``."""
    epoch = skipped(word)
    if epoch is not None:
        return "skipped", epoch
    return {"no-clock": "no_clock", "online": "clock"}.get(word, "ignored"), None


def check_serial(path):
    """The aggregator's side of serial/lines.json: each status's effect."""
    errors = []
    for v in json.loads(Path(path).read_text())["statuses"]:
        if status_effect(v["word"]) != (v["effect"], v.get("epoch")):
            errors.append(f"{path}: status {v['word']!r}: {status_effect(v['word'])}, not {v['effect']}")
    return errors


def check_shuffled(path):
    """The aggregator's side of shuffled/batches.json: each quarantine reason, and bad bodies alone."""
    d, cfgs = shuffled_vectors.load(path)
    key, topic, errors = bytes.fromhex(d["key_hex"]), shuffled_batch.topic(CAMPAIGN).encode(), []
    for r in d["rejected"]:
        try:
            ing = ShuffledIngest(cfgs[r["config"]], CAMPAIGN, bytes.fromhex(r.get("key_hex", d["key_hex"])))
        except BatchError as exc:
            got = None if exc.reason == r["reason"] else exc.reason
        else:
            got = None if "batch" in r else ing.receive_mqtt(topic, bytes.fromhex(r["batch_hex"])).get("reason")
        if got != r["quarantine"]:
            errors.append(f"{path}: {r['what']}: quarantined as {got}, not {r['quarantine']}")
    for b in d["batches"]:
        ing = ShuffledIngest(cfgs[b["config"]], CAMPAIGN, key)
        out = ing.decode_batch([ing.receive_mqtt(topic, bytes.fromhex(b["batch_hex"]))])[0]
        want_bad = [[i, x["quarantine"]] for i, x in enumerate(b["bodies"]) if "reason" in x]
        want_ok = [[i, x["j"], x["subset"]] for i, x in enumerate(b["bodies"]) if "reason" not in x]
        got = _result(out)
        if (got.get("reports"), got.get("bad")) != (want_ok, want_bad):
            errors.append(f"{path}: {b['what']}: stored {got}")
    return errors


def check(root=ROOT):
    root = Path(root)
    errors = [e for rel in PATHS for e in check_messages(root / rel)]
    return errors + check_serial(root / "serial" / "lines.json") + check_shuffled(root / "shuffled" / "batches.json")


def main(argv=None):
    return vector_main(argv=argv, doc=__doc__, write=write, check=check,
                       ok=lambda path: (f"the aggregator classifies every link vector as stated ({path}: "
                                        f"{', '.join(PATHS)}, serial status lines, shuffled batch quarantines)"))


if __name__ == "__main__":
    sys.exit(main())
