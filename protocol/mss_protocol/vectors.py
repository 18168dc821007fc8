"""Shared test vectors of every protocol: config + byte stream + value -> exact report bytes.

Every implementation of the device side must reproduce ``report_hex`` bit
for bit when its client reads its random bytes from ``random_hex`` (SPEC.md
section 6), and every decoder must decode it to ``j`` and ``subset`` and
reject each ``rejected`` input with its ``reason``.  Files live in
``protocol/vectors/<protocol>/``.  ``python -m mss_protocol.vectors --write
protocol/vectors`` regenerates them from the fixed list below; ``--check``
verifies them.
"""
import argparse
import hashlib
import json
import sys
from pathlib import Path

from mss_device.params import Params
from mss_device.rng import ByteRng
from mss_protocol.frames import WireError
from mss_protocol.oracle_config import OracleConfig, codec, load_dict

ROOT = Path(__file__).resolve().parents[1] / "vectors"  # protocol/vectors
DIR = ROOT / "mss"
DEVICE_ID = "vec-device-1"  # every vector's device id (OLH's seed depends on it)

# (protocol, file name, k, epsilon, MSS moduli (None: the planner's), frame, values)
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
    ("ss", "k2_eps1", 2, 1.0, [2], "full", [0, 1]),  # m = 2: Floyd's below(1) reads nothing
    ("mss", "k6_eps1_m2_3", 6, 1.0, [2, 3], "full", [0, 5]),
]
for _name in ("grr", "rappor", "sue", "olh", "hr", "pgr"):
    CASES += [(_name, "k5_eps1", 5, 1.0, None, "full", [0, 4]),
              (_name, "k64_eps2_compact", 64, 2.0, None, "compact", [0, 33, 63]),
              (_name, "k1024_eps4_compact_epoch", 1024, 4.0, None, "compact-epoch", [0, 1023])]
CASES += [("pgr", "k300_eps6", 300, 6.0, None, "full", [0, 299]),  # q = 409: 2-byte draws
          ("grr", "k257_eps3", 257, 3.0, None, "full", [0, 256])]  # below(256): one byte


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


def _stream(label, nbytes):
    out = b""
    counter = 0
    while len(out) < nbytes:
        out += hashlib.sha256(f"{label}/{counter}".encode()).digest()
        counter += 1
    return out[:nbytes]


def build(protocol, k, eps, moduli, frame):
    from mss_protocol.mss.config import MssConfig

    if protocol not in ("mss", "ss"):
        return OracleConfig(protocol, k, eps, frame)
    if moduli is None:
        from mss_protocol.mss.planner import plan

        return MssConfig.from_dict(plan(k, eps)["config"]).with_frame(frame)
    return MssConfig.build(k, eps, moduli).with_frame(frame)


def _rejected(cfg, report, epoch):
    """Malformed variants of a valid report and the reason a decoder must give."""
    c = codec(cfg)
    variants = [report[:-1], report + b"\0", b"\x02" + report[1:], b"\x40" + report[1:],
                bytes([report[0] ^ 0x01]) + report[1:] if report[0] >> 6 else report[:1] + bytes(4) + report[5:],
                report[:-1] + bytes([report[-1] | 1]),  # lowest bit: padding, or the value's last bit
                report[:-1] + bytes([0xFF])]
    out = []
    for data in variants:
        try:
            c.decode(data, DEVICE_ID, epoch)
        except WireError as exc:
            out.append({"report_hex": data.hex(), "reason": exc.reason})
    return out


def make_case(protocol, name, k, eps, moduli, frame, values):
    cfg = build(protocol, k, eps, moduli, frame)
    d = cfg.to_dict()
    c = codec(cfg)
    vectors = []
    for i, x in enumerate(values):
        stream = _stream(f"{protocol}/{name}/{i}", 64 + 8 * max(getattr(cfg, "omegas", [k])) + 8 * k)
        epoch = 70000 + i  # above 65536: the compact-epoch frame carries its low 16 bits
        report, used = report_from_stream(d, x, stream, epoch, i)
        r = c.decode(report, DEVICE_ID, epoch)
        vectors.append({"value": x, "epoch": epoch, "seq": i, "device_id": DEVICE_ID,
                        "random_hex": stream[:used].hex(), "bytes_consumed": used,
                        "j": r.j, "subset": list(r.subset), "report_hex": report.hex()})
    return {"name": name, "protocol": protocol, "config": d, "vectors": vectors,
            "rejected": _rejected(cfg, report, epoch)}


def check_file(path):
    """Mismatch messages (empty when every vector reproduces, decodes and is rejected as stated)."""
    d = json.loads(Path(path).read_text())
    cfg = load_dict(d["config"], source=str(path))
    c = codec(cfg)
    errors = []
    for v in d["vectors"]:
        report, used = report_from_stream(d["config"], v["value"], bytes.fromhex(v["random_hex"]),
                                          v["epoch"], v["seq"], v["device_id"])
        if (report.hex(), used) != (v["report_hex"], v["bytes_consumed"]):
            errors.append(f"{path}: value {v['value']}: got {report.hex()} (used {used})")
        r = c.decode(report, v["device_id"], v["epoch"])
        if (r.j, list(r.subset), r.epoch) != (v["j"], v["subset"], v["epoch"]):
            errors.append(f"{path}: value {v['value']}: decoded to {r}")
    for bad in d["rejected"]:
        try:
            c.decode(bytes.fromhex(bad["report_hex"]), DEVICE_ID, d["vectors"][-1]["epoch"])
            errors.append(f"{path}: {bad['report_hex']} was accepted")
        except WireError as exc:
            if exc.reason != bad["reason"]:
                errors.append(f"{path}: {bad['report_hex']}: reason {exc.reason}, not {bad['reason']}")
    return errors


def files(root=ROOT):
    return sorted(Path(root).glob("*/*.json"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", metavar="DIR", help="write every protocol's vectors under DIR/<protocol>/")
    ap.add_argument("--check", metavar="DIR")
    args = ap.parse_args(argv)
    if args.write:
        for case in CASES:
            out = Path(args.write) / case[0]
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{case[1]}.json").write_text(json.dumps(make_case(*case), indent=1) + "\n")
    if args.check:
        errors = [e for p in files(args.check) for e in check_file(p)]
        print("\n".join(errors) or f"all vectors reproduce ({len(files(args.check))} files)")
        return 1 if errors else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
