"""Test vectors of shuffled batches (SPEC.md section 12): ``protocol/vectors/shuffled/batches.json``.

::

    {"name": "shuffled-batches", "key_hex", "configs": {name: config},
     "batches":  [{"what", "config", "batch_id_hex", "epoch", "first_epoch", "colluding", "batch_hex",
                   "bodies": [{"body_hex", "j", "subset"} | {"body_hex", "reason", "quarantine"}]}],
     "rejected": [{"what", "config", "key_hex"?, "batch_hex" | "batch", "reason", "quarantine"}],
     "unencodable": [{"what", "config", "batch_id_hex", "epoch", "first_epoch", "bodies_hex", "reason"}]}

A receiver of config ``configs[config]`` holding the shuffle key ``key_hex``
must accept each of ``batches`` (its config id, batch id, epochs, colluding
devices and bodies as listed) and decode each body in frame kind ``compact`` at the batch's
``epoch`` with no device id, to block ``j`` and ``subset`` (as in the
protocol vector files) or refusing that body alone with ``reason`` (a
WireError reason of section 4; the aggregator quarantines it as
``quarantine`` = ``wire_<reason>`` and counts the batch's other bodies).  A
writer given the batch's fields and bodies must write ``batch_hex`` exactly.
Each of ``rejected`` (its own ``key_hex`` when given; ``batch`` instead of
``batch_hex``: a text string, not bytes) must be refused whole with
``reason``, the first failed check of section 12; the aggregator quarantines
it as ``quarantine`` (``batch_<reason>``; null where no message can carry it:
a text is no MQTT payload, a short key stops the aggregator at its start).
Each of ``unencodable`` must be refused by a writer (reason ``batch``).
:func:`make` draws every body with the device client, :func:`check` verifies
the file against :mod:`mss_protocol.shuffled_batch` and the codecs::

    python -m mss_protocol.all_vectors --write protocol/vectors   # this file too
    python -m mss_protocol.shuffled_vectors --check protocol/vectors/shuffled/batches.json
"""
import hashlib
import hmac
import json
import struct
import sys
from pathlib import Path

from mss_protocol.codec import codec
from mss_protocol.configs import load_dict
from mss_protocol.frames import WireError
from mss_protocol.mss.config import MssConfig
from mss_protocol.oracle_config import OracleConfig
from mss_protocol.shuffled_batch import (BATCH_ID_BYTES, MAGIC, MIN_KEY_BYTES, VERSION, BatchError, compact_body,
                                         decode_batch, encode_batch)
from mss_protocol.vector_cli import vector_main

PATH = Path(__file__).resolve().parents[1] / "vectors" / "shuffled" / "batches.json"
KEY = hashlib.sha256(b"mss-shuffle-vectors/key").digest()
HEAD = struct.Struct(">4sB4s16sIIII")  # SPEC.md section 12: magic, version, config id, batch id, epochs, colluding, n


def _configs():
    return {"grr": OracleConfig("grr", 5, 1.0), "mss": MssConfig.build(8, 1.0, [5, 7]),
            "olh": OracleConfig("olh", 5, 1.0)}


def _bodies(cfg, values, label):
    """Compact bodies of reports of ``values`` drawn by the device client of ``cfg`` (a full frame each)."""
    from mss_protocol.vectors import label_stream, report_from_stream

    out = []
    for i, x in enumerate(values):
        report, _ = report_from_stream(config=cfg.to_dict(), value=x, stream=label_stream(f"shuffled/{label}/{i}", 256),
                                       epoch=70000 + i, seq=i)
        out.append(compact_body(cfg, "full", report))
    return out


def _batch_id(label):
    return hashlib.sha256(f"mss-shuffle-vectors/batch/{label}".encode()).digest()[:BATCH_ID_BYTES]


def raw_batch(cid, batch_id, epoch, first_epoch, n, parts, version=VERSION, colluding=0):
    """A batch of any fields (``parts``: the bytes after the head, lengths included), MAC'd under
    :data:`KEY` (a bad magic or another key: the vectors edit a good batch's bytes)."""
    data = HEAD.pack(MAGIC, version, cid, batch_id, epoch, first_epoch, colluding, n) + parts
    return data + hmac.new(KEY, data, hashlib.sha256).digest()


def _parts(bodies):
    return b"".join(struct.pack(">H", len(b)) + b for b in bodies)


def _decode_body(cfg, body, epoch):
    try:
        r = codec(cfg.with_frame("compact")).decode(body, None, epoch)
    except WireError as exc:
        return {"reason": exc.reason, "quarantine": f"wire_{exc.reason}"}
    return {"j": r.j, "subset": list(r.subset)}


def make():
    """The document (see the module doc)."""
    cfgs = _configs()
    grr, mss, olh = cfgs["grr"], cfgs["mss"], cfgs["olh"]
    good = _bodies(grr, [0, 2, 4, 1], "grr")
    tag = good[0][:1]
    batches = []
    for what, name, bodies, epoch, first, colluding in [
            ("grr: four reports of two epochs", "grr", good, 70001, 70000, 0),
            ("mss: both blocks, one epoch, 2 devices assumed colluding", "mss", _bodies(mss, [0, 3, 7, 5], "mss"),
             70000, 70000, 2),
            ("grr: one report at the top epoch, every count the top u32", "grr", good[:1], (1 << 32) - 1, 0,
             (1 << 32) - 1),
            ("grr: bad bodies inside a good batch (each refused alone, the rest counted)", "grr",
             [good[0], tag + b"\xa0", bytes([tag[0] ^ 1]) + good[1][1:], b"\x01" + good[1][1:],
              good[1] + b"\0", b"\x40" + good[1][1:], tag, good[2]], 70000, 70000, 0)]:
        cfg, bid = cfgs[name], _batch_id(what)
        data = encode_batch(key=KEY, config=cfg, batch_id=bid, epoch=epoch, first_epoch=first, bodies=bodies,
                            colluding=colluding)
        batches.append({"what": what, "config": name, "batch_id_hex": bid.hex(), "epoch": epoch,
                        "first_epoch": first, "colluding": colluding, "batch_hex": data.hex(),
                        "bodies": [dict(body_hex=b.hex(), **_decode_body(cfg, b, epoch)) for b in bodies]})
    cid, bid = grr.config_id, _batch_id("rejected")
    ok = encode_batch(key=KEY, config=grr, batch_id=bid, epoch=70000, first_epoch=70000, bodies=good[:2])
    other_key = hashlib.sha256(b"another shuffle key").digest()

    def remac(data):
        return data[:-32] + hmac.new(KEY, data[:-32], hashlib.sha256).digest()

    bad = ok[:30] + bytes([ok[30] ^ 1]) + ok[31:]
    rejected = [
        ("a text string, not bytes", "grr", ok.hex(), None),
        ("a 31-byte key at the receiver", "grr", ok, KEY[:MIN_KEY_BYTES - 1]),
        ("empty", "grr", b"", None),
        ("72 bytes: shorter than a head and a MAC", "grr", ok[:72], None),
        ("72 bytes with a bad magic: the length first", "grr", b"XXXX" + ok[4:72], None),
        ("a header bit flipped", "grr", bad, None),
        ("a body bit flipped", "grr", ok[:-33] + bytes([ok[-33] ^ 1]) + ok[-32:], None),
        ("the MAC of another key", "grr", ok[:-32] + hmac.new(other_key, ok[:-32], hashlib.sha256).digest(), None),
        ("a bad magic and the old MAC: the MAC first", "grr", b"MSSX" + ok[4:], None),
        ("magic MSSX", "grr", remac(b"MSSX" + ok[4:]), None),
        ("magic MSSX and version 3: the magic first", "grr", remac(b"MSSX\x03" + ok[5:]), None),
        ("version 3", "grr", remac(ok[:4] + b"\x03" + ok[5:]), None),
        ("version 1 (its n counted reports, not devices)", "grr",
         remac(ok[:4] + b"\x01" + ok[5:37] + ok[41:]), None),
        ("version 3 and first_epoch after epoch: the version first", "grr",
         raw_batch(cid=cid, batch_id=bid, epoch=70000, first_epoch=70001, n=2, parts=_parts(good[:2]),
                   version=3), None),
        ("first_epoch after epoch", "grr", raw_batch(cid=cid, batch_id=bid, epoch=70000, first_epoch=70001, n=2,
                                                     parts=_parts(good[:2])), None),
        ("first_epoch after epoch and another config: the epoch first", "grr",
         raw_batch(cid=mss.config_id, batch_id=bid, epoch=70000, first_epoch=70001, n=2, parts=_parts(good[:2])), None),
        ("another config (mss) at a grr receiver", "grr", encode_batch(key=KEY, config=mss, batch_id=bid, epoch=70000,
                                                                       first_epoch=70000, bodies=good[:2]), None),
        ("an olh batch at a grr receiver (no receiver takes olh)", "grr",
         encode_batch(key=KEY, config=olh, batch_id=bid, epoch=70000, first_epoch=70000,
                      bodies=[bytes([0x80 | olh.config_id[0] & 0x3F, 0x40])]), None),
        ("another config and n = 0: the config first", "grr", raw_batch(cid=mss.config_id, batch_id=bid, epoch=70000,
                                                                        first_epoch=70000, n=0, parts=b""),
         None),
        ("n = 0", "grr", raw_batch(cid=cid, batch_id=bid, epoch=70000, first_epoch=70000, n=0, parts=b""), None),
        ("n = 0 and a body: the count first", "grr", raw_batch(cid=cid, batch_id=bid, epoch=70000, first_epoch=70000,
                                                               n=0, parts=_parts(good[:1])), None),
        ("n = 3, two bodies", "grr", raw_batch(cid=cid, batch_id=bid, epoch=70000, first_epoch=70000, n=3,
                                               parts=_parts(good[:2])), None),
        ("n = 3, two bodies and one byte (no room for a length)", "grr",
         raw_batch(cid=cid, batch_id=bid, epoch=70000, first_epoch=70000, n=3, parts=_parts(good[:2]) + b"\0"), None),
        ("a body of length 0", "grr", raw_batch(cid=cid, batch_id=bid, epoch=70000, first_epoch=70000, n=2,
                                                parts=_parts(good[:1]) + b"\0\0"), None),
        ("the last body's length past the end", "grr",
         raw_batch(cid=cid, batch_id=bid, epoch=70000, first_epoch=70000, n=2,
                   parts=_parts(good[:1]) + b"\0\x09" + good[1]), None),
        ("one byte after the last body", "grr", raw_batch(cid=cid, batch_id=bid, epoch=70000, first_epoch=70000, n=2,
                                                          parts=_parts(good[:2]) + b"\0"),
         None),
        ("one body less than the bytes hold", "grr", raw_batch(cid=cid, batch_id=bid, epoch=70000, first_epoch=70000,
                                                               n=1, parts=_parts(good[:2])), None),
    ]
    out = []
    for what, name, data, key in rejected:
        try:
            decode_batch(KEY if key is None else key, data, cfgs[name])
        except BatchError as exc:
            reason = exc.reason
        else:
            raise AssertionError(f"shuffled vectors: {what}: accepted")
        entry = {"what": what, "config": name}
        if key is not None:
            entry["key_hex"] = key.hex()
        entry.update({"batch": data} if isinstance(data, str) else {"batch_hex": data.hex()})
        message = isinstance(data, bytes) and key is None
        out.append(dict(entry, reason=reason, quarantine=f"batch_{reason}" if message else None))
    unencodable = []
    for what, bodies, epoch, first, batch_id in [
            ("no bodies", [], 70000, 70000, bid), ("an empty body", [good[0], b""], 70000, 70000, bid),
            ("first_epoch after epoch", good[:1], 70000, 70001, bid), ("epoch 2**32", good[:1], 1 << 32, 0, bid),
            ("a 15-byte batch id", good[:1], 70000, 70000, bid[:15])]:
        try:
            encode_batch(key=KEY, config=grr, batch_id=batch_id, epoch=epoch, first_epoch=first, bodies=bodies)
        except BatchError as exc:
            unencodable.append({"what": what, "config": "grr", "batch_id_hex": batch_id.hex(), "epoch": epoch,
                                "first_epoch": first, "bodies_hex": [b.hex() for b in bodies], "reason": exc.reason})
        else:
            raise AssertionError(f"shuffled vectors: {what}: encoded")
    return {"name": "shuffled-batches", "key_hex": KEY.hex(),
            "configs": {name: cfg.to_dict() for name, cfg in cfgs.items()},
            "batches": batches, "rejected": out, "unencodable": unencodable}


def write(path=PATH):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(make(), indent=1) + "\n")


def load(path=PATH):
    """(document, {name: config object}) of the file."""
    d = json.loads(Path(path).read_text())
    return d, {name: load_dict(c, source=f"{path}: {name}") for name, c in d["configs"].items()}


def check(path=PATH):
    """Mismatch messages (empty when the writer, decode_batch and the codecs agree with the file)."""
    d, cfgs = load(path)
    key, errors = bytes.fromhex(d["key_hex"]), []
    for b in d["batches"]:
        cfg, data = cfgs[b["config"]], bytes.fromhex(b["batch_hex"])
        bodies = [bytes.fromhex(x["body_hex"]) for x in b["bodies"]]
        written = encode_batch(key=key, config=cfg, batch_id=bytes.fromhex(b["batch_id_hex"]), epoch=b["epoch"],
                               first_epoch=b["first_epoch"], bodies=bodies, colluding=b["colluding"])
        if written != data:
            errors.append(f"{path}: {b['what']}: the writer wrote {written.hex()}")
        try:
            got = decode_batch(key, data, cfg)
        except BatchError as exc:
            errors.append(f"{path}: {b['what']}: refused ({exc})")
            continue
        if (got.config_id, got.batch_id.hex(), got.epoch, got.first_epoch, got.colluding, list(got.bodies)) != (
                cfg.config_id, b["batch_id_hex"], b["epoch"], b["first_epoch"], b["colluding"], bodies):
            errors.append(f"{path}: {b['what']}: read as {got}")
        for pos, x in enumerate(b["bodies"]):
            want = {k: v for k, v in x.items() if k != "body_hex"}
            got_body = _decode_body(cfg, bytes.fromhex(x["body_hex"]), b["epoch"])
            if got_body != want:
                errors.append(f"{path}: {b['what']}: body {pos} decoded to {got_body}, not {want}")
    for r in d["rejected"]:
        data = r["batch"] if "batch" in r else bytes.fromhex(r["batch_hex"])
        try:
            decode_batch(bytes.fromhex(r["key_hex"]) if "key_hex" in r else key, data, cfgs[r["config"]])
            errors.append(f"{path}: {r['what']}: accepted")
        except BatchError as exc:
            if exc.reason != r["reason"]:
                errors.append(f"{path}: {r['what']}: reason {exc.reason}, not {r['reason']}")
    for u in d["unencodable"]:
        try:
            encode_batch(key=key, config=cfgs[u["config"]], batch_id=bytes.fromhex(u["batch_id_hex"]), epoch=u["epoch"],
                         first_epoch=u["first_epoch"], bodies=[bytes.fromhex(x) for x in u["bodies_hex"]])
            errors.append(f"{path}: {u['what']}: encoded")
        except BatchError as exc:
            if exc.reason != u["reason"]:
                errors.append(f"{path}: {u['what']}: reason {exc.reason}, not {u['reason']}")
    return errors


def main(argv=None):
    return vector_main(argv=argv, doc=__doc__, write=write, check=check,
                       ok=lambda path: f"all shuffled batches read as stated ({path})")


if __name__ == "__main__":
    sys.exit(main())
