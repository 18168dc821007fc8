#!/usr/bin/env python3
"""Host decoding speed and memory of every protocol's wire codec.

For each protocol at k in {16, 1024, 22000} x epsilon in {1, 4} (MSS and
SS as planned, the others fixed by (k, epsilon)), then for every
configuration the planner's ``auto`` returns (unbudgeted, and for an 11-byte
compact frame) at k in AUTO_KS x epsilon in AUTO_EPS, on one core:

* decode: ``codec.decode`` of valid reports one by one (a Report with a tuple
  subset each), and ``codec.decode_many`` of the same BATCH reports at once
  (the same checks; subsets kept as arrays: :mod:`mss_protocol.batch`), and
  of a realistic batch of BIG reports (BATCH distinct ones repeated) for the
  auto configurations (target: >= 20,000 reports/s for every ``auto``
  configuration);
* tally: the counts of the decoded batch (``Batch.counts``), done when estimating
  (OLH's is O(k) per report: every item is checked against each report's hash);
* mss plan's per-report parsing model (``choose.ingest_us``, in ``decode_s``)
  against the measured time;
* memory the codec holds once it has decoded the batch (tracemalloc; MSS's
  unranking tables).

Rates are medians of 3 runs of BATCH reports (fewer, at least 20, where
that would take over 2 s).

    python tools/bench_codecs.py [--json out.json] [--quick]
"""
import argparse
import json
import math
import platform
import random
import statistics
import time
import tracemalloc

from mss_device.frame import HEADER, start
from mss_device.params import Params
from mss_device.rng import ByteRng
from mss_protocol import registry
from mss_protocol.choose import CHOICES, Limits, choose, ingest_us
from mss_protocol.codec import codec
from mss_protocol.configs import load_dict
from mss_protocol.counts import Counts
from mss_protocol.oracle_config import OracleConfig

KS = (16, 1024, 22000)
EPS = (1.0, 4.0)
AUTO_KS = (16, 256, 1024, 4096, 22000)
AUTO_EPS = (0.5, 1.0, 2.0, 4.0, 5.0)
BATCH = 3000
BIG = 50_000
TARGET = 20000


def reports(cfg, n, seed):
    """n valid reports of ``cfg``.  MSS bodies are built from a uniform rank
    (the device's encoder would take minutes at k = 22000); the others come
    from the device client."""
    rnd = random.Random(seed)
    p = Params(cfg.to_dict())
    out = []
    if registry.protocol_class(p.protocol).config_kind == "mss":
        for i in range(n):
            j = rnd.randrange(len(p.moduli))
            nbits = p.jbits + p.rank_bits[j]
            buf = start(p, nbits, 1, i & 0xFFFF)
            code = (j << p.rank_bits[j]) | rnd.randrange(math.comb(p.moduli[j], p.omegas[j]))
            buf[HEADER[p.frame]:] = (code << ((-nbits) % 8)).to_bytes((nbits + 7) // 8, "big")
            out.append(bytes(buf))
        return out
    client = p.client()
    client.device_id = "bench"
    rng = ByteRng(rnd.randbytes)
    return [client.report(i % cfg.k, rng, 1, i & 0xFFFF) for i in range(n)]


def rate(n, run):
    """Median reports/s of 3 runs of ``run`` over n reports."""
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return n / statistics.median(times)


def measure(cfg, big=False):
    """{decode, batch, big_batch, tally: reports/s; codec_bytes}: one by one, then
    decode_many, on a batch of BATCH reports, or fewer (at least 20) where decoding
    BATCH one by one would take over 2 s; ``big``: decode_many of BIG reports too."""
    probe, c = reports(cfg, 20, 1), codec(cfg)
    t0 = time.perf_counter()
    for d in probe:
        c.decode(d, "bench", 1)
    per_report = (time.perf_counter() - t0) / len(probe)
    data = reports(cfg, max(20, min(BATCH, int(2.0 / per_report))), 1)
    devices, epochs = ["bench"] * len(data), [1] * len(data)
    tracemalloc.start()
    c = codec(cfg)
    c.decode_many(data, devices, epochs)
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    out = {"decode": rate(len(data), lambda: [c.decode(d, "bench", 1) for d in data]),
           "batch": rate(len(data), lambda: c.decode_many(data, devices, epochs))}
    batch = c.decode_many(data, devices, epochs)
    assert not batch.errors and all(batch.report(r) == c.decode(d, "bench", 1) for r, d in enumerate(data[:20]))
    out["tally"] = rate(len(data), batch.counts)
    if big:
        many = (data * (BIG // BATCH + 1))[:BIG]
        out["big_batch"] = rate(BIG, lambda: c.decode_many(many, ["bench"] * BIG, [1] * BIG))
    out["codec_bytes"] = held
    return out


def config(k, eps, name, limits=Limits()):
    if registry.protocol_class(name).config_kind == "mss":  # planned; the others follow from (k, eps)
        return load_dict(choose(k, eps, name, limits=limits)["config"])
    return OracleConfig(name, k, eps, limits.frame)


def line(label, m, auto=None):
    ok = "" if auto is None else f"  [{auto}: {'OK' if min(m['batch'], m.get('big_batch', m['batch'])) >= TARGET else 'MISSED'} >= {TARGET:,}/s]"
    big = f", {BIG:,}-batch {m['big_batch']:9,.0f}/s" if "big_batch" in m else ""
    return (f"{label}: decode {m['decode']:9,.0f}/s, decode_many {m['batch']:9,.0f}/s{big}, tally {m['tally']:11,.0f}/s, "
            f"codec holds {m['codec_bytes'] / 1e6:6.2f} MB" + ok)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="the auto configurations only")
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, one core; "
          f"{BATCH} reports per run (and {BIG:,} for auto), median of 3")
    rows = []
    for k in () if args.quick else KS:
        for eps in EPS:
            for name in CHOICES[1:]:
                try:
                    cfg = config(k, eps, name)
                except ValueError as exc:
                    print(f"k={k:5d} eps={eps}: {name:6s} -- {exc}")
                    continue
                m = measure(cfg)
                model = ingest_us(cfg)  # mss plan's decode_s model, checked here
                rows.append({"k": k, "epsilon": eps, "protocol": name, "decode_reports_per_s": m["decode"],
                             "decode_many_reports_per_s": m["batch"], "model_us": model,
                             "measured_us": 1e6 / m["decode"], "tally_reports_per_s": m["tally"],
                             "codec_bytes": m["codec_bytes"]})
                print(line(f"k={k:5d} eps={eps}: {name:6s}", m)
                      + f", mss plan's model {model / (1e6 / m['decode']):5.2f}x measured")
    autos, seen = [], {}
    for k in AUTO_KS:
        for eps in AUTO_EPS:
            for label, limits in (("auto", Limits()), ("auto 11 B compact", Limits(max_bytes=11, frame="compact"))):
                plan = choose(k, eps, "auto", limits=limits)
                cfg = load_dict(plan["config"]) if plan["protocol"] in ("mss", "ss") else config(k, eps, plan["protocol"])
                m = seen[cfg.config_id] = seen.get(cfg.config_id) or measure(cfg, big=True)
                met = min(m["batch"], m.get("big_batch", m["batch"])) >= TARGET
                autos.append({"k": k, "epsilon": eps, "choice": label, "protocol": plan["protocol"],
                              "decode_reports_per_s": m["decode"], "decode_many_reports_per_s": m["batch"],
                              "big_batch_reports_per_s": m.get("big_batch"), "tally_reports_per_s": m["tally"],
                              "codec_bytes": m["codec_bytes"], "target_met": met})
                print(line(f"k={k:5d} eps={eps}: {label:17s} {plan['protocol']:6s}", m, label))
    print(f"target: {sum(r['target_met'] for r in autos)} of {len(autos)} auto configurations >= {TARGET:,} "
          f"reports/s (decode_many, {BATCH:,} and {BIG:,} reports)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"protocols": rows, "auto": autos}, fh, indent=1)


if __name__ == "__main__":
    main()
