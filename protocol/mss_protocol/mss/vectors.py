"""Shared test vectors: config + random byte stream + value -> exact report bytes.

Every implementation of the device side must reproduce ``report_hex`` bit
for bit when its randomiser reads its bytes from ``random_hex`` (SPEC.md
section 6).  ``python -m mss_protocol.mss.vectors --write DIR`` regenerates the
files from the fixed list below; ``--check DIR`` verifies them.
"""
import argparse
import hashlib
import json
import sys
from pathlib import Path

from mss_device.encoder import encode
from mss_device.randomiser import is_set, privatise
from mss_device.rng import ByteRng
from mss_protocol.mss.config import MssConfig

DIR = Path(__file__).resolve().parents[2] / "vectors" / "mss"  # protocol/vectors/mss

# (file name, k, epsilon, moduli or None for the planner's choice, values)
CASES = [
    ("k8_eps1_m5_7", 8, 1.0, [5, 7], [0, 3, 7]),
    ("k64_eps1", 64, 1.0, None, [0, 1, 31, 63]),
    ("k64_eps4", 64, 4.0, None, [0, 17, 63]),
    ("k1024_eps4", 1024, 4.0, None, [0, 5, 511, 1023]),
    ("k1024_eps4_8bits_m", 1024, 4.0, [521, 541, 562, 613, 671, 691, 701, 719, 725, 777], [0, 700]),
    ("k22000_eps5", 22000, 5.0, None, [0, 21999]),
]


def stream_reader(data):
    """``read(n)`` over a fixed byte string (short at its end)."""
    pos = 0

    def read(n):
        nonlocal pos
        out = data[pos:pos + n]
        pos += len(out)
        return out

    return read


def report_from_stream(cfg, value, stream, epoch, seq):
    """(report bytes, j, sorted subset, bytes consumed) from the device code."""
    rng = ByteRng(stream_reader(stream))
    mark = bytearray((max(cfg.moduli) + 7) // 8)
    j = privatise(cfg, value, rng, mark)
    subset = [v for v in range(cfg.moduli[j]) if is_set(mark, v)]
    return encode(cfg, j, mark, epoch, seq), j, subset, rng.consumed


def _stream(label, nbytes):
    out = b""
    counter = 0
    while len(out) < nbytes:
        out += hashlib.sha256(f"{label}/{counter}".encode()).digest()
        counter += 1
    return out[:nbytes]


def make_case(name, k, eps, moduli, values):
    if moduli is None:
        from mss_protocol.mss.planner import plan

        cfg = MssConfig.from_dict(plan(k, eps)["config"])
    else:
        cfg = MssConfig.build(k, eps, moduli)
    vectors = []
    for i, x in enumerate(values):
        stream = _stream(f"{name}/{i}", 64 + 8 * max(cfg.omegas))
        report, j, subset, used = report_from_stream(cfg, x, stream, epoch=1000 + i, seq=i)
        vectors.append({"value": x, "epoch": 1000 + i, "seq": i, "random_hex": stream.hex(),
                        "bytes_consumed": used, "j": j, "subset": subset,
                        "report_hex": report.hex()})
    return {"name": name, "config": cfg.to_dict(), "vectors": vectors}


def check_file(path):
    """Return a list of mismatch messages (empty when every vector reproduces)."""
    d = json.loads(Path(path).read_text())
    cfg = MssConfig.from_dict(d["config"], source=str(path))
    errors = []
    for v in d["vectors"]:
        report, j, subset, used = report_from_stream(
            cfg, v["value"], bytes.fromhex(v["random_hex"]), v["epoch"], v["seq"])
        if (report.hex(), j, subset, used) != (v["report_hex"], v["j"], v["subset"], v["bytes_consumed"]):
            errors.append(f"{path}: value {v['value']}: got {report.hex()} (j={j}, used={used})")
    return errors


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", metavar="DIR")
    ap.add_argument("--check", metavar="DIR")
    args = ap.parse_args(argv)
    if args.write:
        out = Path(args.write)
        out.mkdir(parents=True, exist_ok=True)
        for case in CASES:
            (out / f"{case[0]}.json").write_text(json.dumps(make_case(*case), indent=1) + "\n")
    if args.check:
        errors = [e for p in sorted(Path(args.check).glob("*.json")) for e in check_file(p)]
        print("\n".join(errors) or "all vectors reproduce")
        return 1 if errors else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
