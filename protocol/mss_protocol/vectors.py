"""Shared test vectors of every protocol: config + byte stream + value -> exact report bytes.

Every implementation of the device side must reproduce ``report_hex`` bit
for bit when its client reads its random bytes from ``random_hex`` (SPEC.md
section 6), and every decoder must decode it to ``j`` and ``subset`` and
reject each ``rejected`` input with its ``reason``.  Files live in
``protocol/vectors/<protocol>/``.  ``python -m mss_protocol.all_vectors
--write protocol/vectors`` regenerates them from the fixed list below (with
the other families of vectors); ``--check`` verifies them.

Configs with a memo (olh ``seed: device``, and every config with an
instantaneous layer ``irr``) also pin the memo: each vector's
``memo_body_hex`` is the body of the permanent draw y' the device memoizes
(the report's own body without an IRR; ``Client.fresh``), and ``replays``
re-send it: ``{"memo_body_hex", "epoch", "seq", "random_hex",
"bytes_consumed", "report_hex"}``, the report a device makes from that memo
body reading ``random_hex`` (a fresh IRR draw; nothing without one).
"""
import hashlib
import json
import math
from pathlib import Path

from mss_device.frame import HEADER, KINDS, TAG_MASK, VERSION
from mss_device.params import Params
from mss_device.rng import ByteRng
from mss_protocol import registry
from mss_protocol.codec import codec
from mss_protocol.configs import load_dict
from mss_protocol.frames import WireError
from mss_protocol.oracle_config import OracleConfig

ROOT = Path(__file__).resolve().parents[1] / "vectors"  # protocol/vectors
DIR = ROOT / "mss"
DEVICE_ID = "vec-device-1"  # every vector's device id (OLH's seed depends on it)

# (protocol, file name, k, epsilon, MSS moduli (None: the planner's), frame, values[, extras]);
# extras: OracleConfig's seed and irr_epsilon
CASES = [
    ("mss", "k8_eps1_m5_7", 8, 1.0, [5, 7], "full", [0, 3, 7]),
    ("mss", "k64_eps1", 64, 1.0, None, "full", [0, 1, 31, 63]),
    ("mss", "k64_eps4", 64, 4.0, None, "full", [0, 17, 63]),
    ("mss", "k64_eps4_compact", 64, 4.0, None, "compact", [0, 63]),
    ("mss", "k64_eps4_compact_epoch", 64, 4.0, None, "compact-epoch", [5, 40]),
    ("mss", "k300_eps2_m256_257", 300, 2.0, [256, 257], "full", [0, 255, 256, 299]),  # 1- and 2-byte draws
    ("mss", "k1024_eps4", 1024, 4.0, None, "full", [0, 5, 511, 1023]),
    ("mss", "k1024_eps4_8bits_m", 1024, 4.0, [521, 541, 562, 613, 671, 691, 701, 719, 725, 777], "full",
     [0, 700]),
    ("mss", "k22000_eps5", 22000, 5.0, None, "full", [0, 21999]),
    ("mss", "k70000_eps8_m65537_65539", 70000, 8.0, [65537, 65539], "full", [0, 69999]),  # 3-byte draws, 7-bit limbs
    ("ss", "k16_eps2", 16, 2.0, [16], "compact", [0, 15]),
    ("ss", "k16_eps2_compact_epoch", 16, 2.0, [16], "compact-epoch", [3, 12]),
    ("ss", "k2_eps1", 2, 1.0, [2], "full", [0, 1]),  # m = 2: Floyd's below(1) reads nothing
    ("mss", "k6_eps1_m2_3", 6, 1.0, [2, 3], "full", [0, 5]),
]
# The list of vector files is data, named file by file: the names below choose which files
# exist (olh's seed makes its own cases), they decide no behaviour
for _name in ("grr", "rappor", "sue", "olh", "hr", "pgr"):
    CASES += [(_name, "k5_eps1", 5, 1.0, None, "full", [0, 4]),
              # olh: never compact (its seed needs the drawing epoch, SPEC.md section 4)
              (_name, "k64_eps2" + ("" if _name == "olh" else "_compact"), 64, 2.0, None,
               "full" if _name == "olh" else "compact", [0, 33, 63]),
              (_name, "k1024_eps4_compact_epoch", 1024, 4.0, None, "compact-epoch", [0, 1023])]
CASES += [("pgr", "k300_eps6", 300, 6.0, None, "full", [0, 299]),  # q = 409: 2-byte draws
          ("grr", "k257_eps3", 257, 3.0, None, "full", [0, 256])]  # below(256): one byte
# olh with its seed per device (compact allowed), and an instantaneous layer on each one-output protocol
CASES += [("olh", "k64_eps2_seed_device_compact", 64, 2.0, None, "compact", [0, 33, 63], {"seed": "device"}),
          ("grr", "k16_eps3_irr1", 16, 3.0, None, "full", [0, 7, 15], {"irr_epsilon": 1.0}),
          ("olh", "k64_eps3_seed_device_irr1_5", 64, 3.0, None, "compact-epoch", [0, 63],
           {"seed": "device", "irr_epsilon": 1.5}),
          ("hr", "k16_eps2_irr1_compact", 16, 2.0, None, "compact", [0, 15], {"irr_epsilon": 1.0}),
          ("pgr", "k64_eps4_irr2", 64, 4.0, None, "full", [0, 33, 63], {"irr_epsilon": 2.0})]
# olh's seed per device in the two other frame kinds (compact above), and the instantaneous
# layer in every (protocol, frame kind) pair the config allows (olh compact: seed device only)
CASES += [("olh", "k16_eps2_seed_device", 16, 2.0, None, "full", [0, 15], {"seed": "device"}),
          ("olh", "k16_eps2_seed_device_compact_epoch", 16, 2.0, None, "compact-epoch", [0, 15],
           {"seed": "device"})]
for _name, _eps, _irr in (("grr", 3.0, 1.0), ("olh", 3.0, 1.0), ("hr", 2.0, 1.0), ("pgr", 4.0, 2.0)):
    _stem = f"k16_eps{_eps:g}_irr{_irr:g}"
    for _frame in ("full", "compact", "compact-epoch"):
        if (_name, _frame) in (("grr", "full"), ("hr", "compact"), ("pgr", "full")):
            continue  # k16_eps3_irr1, k16_eps2_irr1_compact and k64_eps4_irr2 above
        _seeds = ["epoch", "device"] if _name == "olh" and _frame != "compact" else \
            ["device"] if _name == "olh" else [None]
        for _seed in _seeds:
            _extras = {"irr_epsilon": _irr} if _seed is None else {"irr_epsilon": _irr, "seed": _seed}
            _file = _stem + ("_seed_device" if _seed == "device" else "") + \
                {"full": "", "compact": "_compact", "compact-epoch": "_compact_epoch"}[_frame]
            CASES.append((_name, _file, 16, _eps, None, _frame, [0, 15], _extras))


def stream_reader(data):
    """``read(n)`` over a fixed byte string (short at its end)."""
    pos = 0

    def read(n):
        nonlocal pos
        out = data[pos:pos + n]
        pos += len(out)
        return out

    return read


def report_from_stream(config, value, stream, epoch, seq, device_id=DEVICE_ID):
    """(report bytes, bytes consumed) from the device client of ``config`` (a dict)."""
    rng = ByteRng(stream_reader(stream))
    client = Params(config).client()
    client.device_id = device_id
    return client.report(value, rng, epoch, seq), rng.consumed


def fresh_from_stream(config, value, stream, epoch, seq, device_id=DEVICE_ID):
    """(report bytes, memo body, bytes consumed) of the device's memoizing draw (``Client.fresh``)."""
    rng = ByteRng(stream_reader(stream))
    client = Params(config).client()
    client.device_id = device_id
    report, body = client.fresh(value, rng, epoch, seq)
    return report, body, rng.consumed


def replay_from_stream(config, body, stream, epoch, seq, device_id=DEVICE_ID):
    """(report bytes, bytes consumed) of a memo body re-sent (``Client.replay``)."""
    rng = ByteRng(stream_reader(stream))
    client = Params(config).client()
    client.device_id = device_id
    return client.replay(body, rng, epoch, seq), rng.consumed


def memoized(config):
    """A config whose vectors pin the memo: olh with seed device, and every other config with an
    instantaneous layer (olh with its epoch seed never memoizes: the board refuses memoize)."""
    if registry.protocol_class(config.get("protocol", "mss")).has_seed:
        return config.get("seed") == "device"
    return "irr" in config


def label_stream(label, nbytes):
    """``nbytes`` fixed bytes named by ``label`` (SHA-256 of ``label/0``, ``label/1``, ...): a vector's random bytes."""
    out = b""
    counter = 0
    while len(out) < nbytes:
        out += hashlib.sha256(f"{label}/{counter}".encode()).digest()
        counter += 1
    return out[:nbytes]


def build(protocol, k, eps, moduli, frame, extras=None):
    from mss_protocol.mss.config import MssConfig

    if registry.protocol_class(protocol).config_kind != "mss":
        return OracleConfig(protocol, k, eps, frame, **(extras or {}))
    if moduli is None:
        from mss_protocol.mss.planner import plan

        return MssConfig.from_dict(plan(k, eps)["config"]).with_frame(frame)
    return MssConfig.build(k, eps, moduli).with_frame(frame)


def _body(cfg, code, nbytes, nbits):
    """A body: ``code`` in ``nbits`` bits, left-aligned in ``nbytes`` bytes."""
    return (code << (8 * nbytes - nbits)).to_bytes(nbytes, "big")


def _headers(cfg, epoch, seq):
    """The header of each frame kind for ``cfg`` (SPEC.md section 4)."""
    cid = cfg.config_id
    return [bytes([VERSION]) + cid + epoch.to_bytes(4, "big") + seq.to_bytes(2, "big"),
            bytes([0x80 | cid[0] & TAG_MASK]), bytes([0xC0 | cid[0] & TAG_MASK]) + (epoch & 0xFFFF).to_bytes(2, "big")]


def _bodies(cfg):
    """(what, body, reason) of malformed bodies of ``cfg``, where the config allows one."""
    out = []
    if registry.from_config(cfg).config_kind == "mss":
        sizes = [math.comb(m, w) for m, w in zip(cfg.moduli, cfg.omegas)]
        bits = [cfg.jbits + b for b in cfg.rank_bits]
        nbytes = [(b + 7) // 8 for b in bits]
        if cfg.l < 1 << cfg.jbits:
            out.append(("block index l", _body(cfg, cfg.l << cfg.rank_bits[0], nbytes[0], bits[0]), "block"))
        other = [j for j in range(1, cfg.l) if nbytes[j] != nbytes[0]]
        if other:  # block 0's body cut to another block's length
            out.append(("block 0 in another block's length", bytes(nbytes[other[0]]), "length"))
        if sizes[0] < 1 << cfg.rank_bits[0]:
            out.append(("rank C(m_0, w_0)", _body(cfg, sizes[0], nbytes[0], bits[0]), "rank"))
        if 8 * nbytes[0] > bits[0]:
            out.append(("lowest padding bit set", _body(cfg, 0, nbytes[0], bits[0])[:-1] + b"\x01", "padding"))
        return out
    c = codec(cfg)
    nbytes = (c.nbits + 7) // 8
    if 8 * nbytes > c.nbits:
        out.append(("lowest padding bit set", _body(cfg, 0, nbytes, c.nbits)[:-1] + b"\x01", "padding"))
    if not c.unary and c.n < 1 << c.nbits:
        out.append((f"value {c.n}", _body(cfg, c.n, nbytes, c.nbits), "value"))
    return out


def _rejected(cfg, report, epoch, seq):
    """Inputs every decoder must reject, each with the link epoch and device id
    it is decoded with and the reason of the first failed check (SPEC.md
    section 4), several faults at once included."""
    kind, dev = cfg.frame, DEVICE_ID
    head = HEADER[kind]
    body = report[head:]
    link = epoch if kind else None
    heads = _headers(cfg, epoch, seq)
    wrong = bytes([report[0] ^ 0x01]) + report[1:] if kind else report[:1] + bytes(4) + report[5:]
    cases = [("not bytes (a hex string)", report.hex(), link, dev),
             ("empty", b"", link, dev),
             ("version 2", b"\x02" + report[1:], link, dev),
             ("reserved kind 0b01", b"\x40" + report[1:], link, dev),
             ("version 2 and too short", b"\x02", link, dev)]
    cases += [(f"a {KINDS[i]} frame", heads[i] + body, link, dev) for i in range(3) if i != kind]
    other = heads[(kind + 1) % 3]
    other = other[:1] + bytes([other[1] ^ 1]) + other[2:] if kind == 2 else bytes([other[0] ^ 1]) + other[1:]
    cases += [("another kind, another config", other + body, link, dev),
              ("header only", report[:head], link, dev),
              ("another config", wrong, link, dev),
              ("another config and one byte more", wrong + b"\0", link, dev),
              ("one byte more", report + b"\0", link, dev)]
    if len(body) > 1:
        cases.append(("one byte less", report[:-1], link, dev))
    if kind:
        cases += [("no link epoch", report, None, dev), ("link epoch -1", report, -1, dev),
                  ("link epoch 2**32", report, 1 << 32, dev), ("link epoch a string", report, str(epoch), dev),
                  ("one byte more and no link epoch", report + b"\0", None, dev)]
    seeded = registry.from_config(cfg).has_seed  # its seed needs the device id
    if seeded:
        cases += [("no device id", report, link, None), ("empty device id", report, link, ""),
                  ("non-ASCII device id", report, link, "d\u00e9vice-1"), ("65-character device id", report, link, "d" * 65),
                  ("device id with a slash", report, link, "dev/1")]
    for what, bad, reason in _bodies(cfg):
        cases.append((what, report[:head] + bad, link, dev))
        if kind:
            cases.append((what + " and no link epoch", report[:head] + bad, None, dev))
        if seeded:
            cases.append((what + " and no device id", report[:head] + bad, link, None))
    out = []
    c = codec(cfg)
    for what, data, link_epoch, device_id in cases:
        try:
            c.decode(data, device_id, link_epoch)
        except WireError as exc:
            entry = {"what": what, "link_epoch": link_epoch, "device_id": device_id, "reason": exc.reason}
            entry.update({"report": data} if isinstance(data, str) else {"report_hex": data.hex()})
            out.append(entry)
            continue
        raise AssertionError(f"{cfg.name}: {what}: {data!r} was accepted")
    return out


# compact-epoch: epochs either side of a 2**16 boundary and at the top of
# the u32 range, each decoded against a link epoch on the other side
EDGES = [(131071, 131072), (131072, 131071), (4294967295, 4294967290)]


def make_case(protocol, name, k, eps, moduli, frame, values, extras=None):
    cfg = build(protocol=protocol, k=k, eps=eps, moduli=moduli, frame=frame, extras=extras)
    d = cfg.to_dict()
    c = codec(cfg)
    draws = [(x, 70000 + i, 70000 + i) for i, x in enumerate(values)]  # above 65536
    if cfg.frame == 2:
        draws += [(values[i % len(values)], e, link) for i, (e, link) in enumerate(EDGES)]
    vectors = []
    for i, (x, epoch, link) in enumerate(draws):
        stream = label_stream(f"{protocol}/{name}/{i}", 64 + 8 * max(getattr(cfg, "omegas", [k])) + 8 * k)
        seq = 0 if cfg.frame else i  # compact kinds carry no sequence
        report, used = report_from_stream(config=d, value=x, stream=stream, epoch=epoch, seq=seq)
        r = c.decode(report, DEVICE_ID, link)
        vectors.append({"value": x, "epoch": epoch, "link_epoch": link, "seq": seq, "device_id": DEVICE_ID,
                        "random_hex": stream[:used].hex(), "bytes_consumed": used,
                        "j": r.j, "subset": list(r.subset), "report_hex": report.hex()})
        if memoized(d):
            _, body, _ = fresh_from_stream(config=d, value=x, stream=stream, epoch=epoch, seq=seq)
            vectors[-1]["memo_body_hex"] = body.hex()
    x, epoch, _ = draws[len(values) - 1]
    report = bytes.fromhex(vectors[len(values) - 1]["report_hex"])
    out = {"name": name, "protocol": protocol, "config": d, "vectors": vectors,
           "rejected": _rejected(cfg, report, epoch, vectors[len(values) - 1]["seq"])}
    if memoized(d):
        replays = []
        for i, v in enumerate(vectors):
            body = bytes.fromhex(v["memo_body_hex"])
            epoch, seq = (v["epoch"] + 1) & 0xFFFFFFFF, 0 if cfg.frame else v["seq"] + 1
            stream = label_stream(f"{protocol}/{name}/replay/{i}", 64)
            report, used = replay_from_stream(config=d, body=body, stream=stream, epoch=epoch, seq=seq)
            replays.append({"memo_body_hex": body.hex(), "epoch": epoch, "seq": seq, "device_id": DEVICE_ID,
                            "random_hex": stream[:used].hex(), "bytes_consumed": used,
                            "report_hex": report.hex()})
        out["replays"] = replays
    return out


def check_file(path):
    """Mismatch messages (empty when every vector reproduces, decodes and is rejected as stated)."""
    d = json.loads(Path(path).read_text())
    cfg = load_dict(d["config"], source=str(path))
    c = codec(cfg)
    errors = []
    for v in d["vectors"]:
        report, used = report_from_stream(config=d["config"], value=v["value"], stream=bytes.fromhex(v["random_hex"]),
                                          epoch=v["epoch"], seq=v["seq"], device_id=v["device_id"])
        if (report.hex(), used) != (v["report_hex"], v["bytes_consumed"]):
            errors.append(f"{path}: value {v['value']}: got {report.hex()} (used {used})")
        r = c.decode(report, v["device_id"], v["link_epoch"])
        if (r.j, list(r.subset), r.epoch, r.seq) != (v["j"], v["subset"], v["epoch"], v["seq"]):
            errors.append(f"{path}: value {v['value']}: decoded to {r}")
        if "memo_body_hex" in v:
            report, body, used = fresh_from_stream(config=d["config"], value=v["value"],
                                                   stream=bytes.fromhex(v["random_hex"]), epoch=v["epoch"],
                                                   seq=v["seq"], device_id=v["device_id"])
            if (report.hex(), body.hex(), used) != (v["report_hex"], v["memo_body_hex"], v["bytes_consumed"]):
                errors.append(f"{path}: value {v['value']}: memoizing draw gave {report.hex()}, "
                              f"memo {body.hex()} (used {used})")
    for rp in d.get("replays", []):
        report, used = replay_from_stream(config=d["config"], body=bytes.fromhex(rp["memo_body_hex"]),
                                          stream=bytes.fromhex(rp["random_hex"]), epoch=rp["epoch"], seq=rp["seq"],
                                          device_id=rp["device_id"])
        if report is None or (report.hex(), used) != (rp["report_hex"], rp["bytes_consumed"]):
            errors.append(f"{path}: replay of {rp['memo_body_hex']}: got {report and report.hex()} (used {used})")
            continue
        r = c.decode(report, rp["device_id"], rp["epoch"])
        if (r.epoch, r.seq) != (rp["epoch"], rp["seq"]):
            errors.append(f"{path}: replay of {rp['memo_body_hex']}: decoded to {r}")
    for bad in d["rejected"]:
        data = bad["report"] if "report" in bad else bytes.fromhex(bad["report_hex"])
        try:
            c.decode(data, bad["device_id"], bad["link_epoch"])
            errors.append(f"{path}: {bad['what']}: accepted")
        except WireError as exc:
            if exc.reason != bad["reason"]:
                errors.append(f"{path}: {bad['what']}: reason {exc.reason}, not {bad['reason']}")
    return errors


# directories of vectors that are not one protocol's (mss_protocol.all_vectors writes them): serial
# lines (mss_protocol.serial_lines), configs (.config_vectors), shuffled batches (.shuffled_vectors);
# LoRaWAN uplinks and MQTT messages, the aggregator's (mss_aggregator.collect.link_vectors, written
# and checked by its own --write, --check)
OTHER_DIRS = ("serial", "configs", "shuffled", "lorawan", "mqtt")


def files(root=ROOT):
    """Every protocol's vector files (not those of :data:`OTHER_DIRS`)."""
    return sorted(p for p in Path(root).glob("*/*.json") if p.parent.name not in OTHER_DIRS)
