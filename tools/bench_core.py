#!/usr/bin/env python3
"""Speed figures of the core protocol (issue: core). Prints medians and the machine.

Targets (checked and marked in the output, never asserted in tests):
* decode k = 22000 from counts: < 0.05 s median;
* ``mss simulate --k 1024 --epsilon 4 --n 10000000``: < 60 s on 2 cores;
* wire decoding (bytes -> j, Z), k = 1024: >= 20,000 reports/s at eps = 4 (eps = 1 reported);
* planning k = 22000 (no cache): < 30 s;
* counting decoded reports is vectorised (reports/s reported).

Usage: python tools/bench_core.py [--quick] [--json out.json]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy

from mss_aggregator.distributions import parse
from mss_protocol.counts import Counts
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.decoder import Decoder
from mss_protocol.mss.planner import plan
from mss_protocol.mss.sampler import sample_counts, sample_reports
from mss_protocol.mss.wire import WireCodec


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "scipy": scipy.__version__}


def timed(fn, repeat):
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def bench_decode(eps_list, repeat):
    rows = []
    for eps in eps_list:
        cfg = MssConfig.from_dict(plan(22000, eps)["config"])
        rng = np.random.default_rng(1)
        values = rng.choice(22000, size=10000, p=parse("zipf:1.1", 22000))
        counts = Counts(cfg, *sample_counts(cfg, values, rng))
        cold = timed(lambda: Decoder(cfg).decode(counts), 3)
        dec = Decoder(cfg)
        warm = timed(lambda: dec.decode(counts), repeat)
        rows.append({"eps": eps, "warm_s": warm, "cold_s": cold, "target_s": 0.05,
                     "ok": warm < 0.05})
    return rows


def bench_wire(eps, seconds=2.0):
    cfg = MssConfig.from_dict(plan(1024, eps)["config"])
    codec = WireCodec(cfg)
    j, subsets = sample_reports(cfg, np.arange(2000) % 1024, np.random.default_rng(2))
    blobs = [codec.encode(int(a), z) for a, z in zip(j, subsets)]
    codec.decode(blobs[0])
    for b in range(cfg.l):  # build the unranking tables outside the timing
        codec.unrank(b, 0)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for b in blobs:
            codec.decode(b)
        done += len(blobs)
    rate = done / (time.perf_counter() - t0)
    reports = [codec.decode(b) for b in blobs] * 50
    count_rate = len(reports) / timed(lambda: Counts(cfg).add(reports), 5)
    return {"eps": eps, "decode_reports_per_s": rate, "count_reports_per_s": count_rate,
            "ok": rate >= 20000 if eps == 4 else None}


def bench_simulate(n):
    cmd = [sys.executable, "-m", "mss_cli", "simulate", "--k", "1024", "--epsilon", "4",
           "--n", str(n), "--json"]
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    secs = time.perf_counter() - t
    return {"n": n, "seconds": secs, "mse": json.loads(out.stdout)["mse"],
            "ok": secs < 60 if n >= 10_000_000 else None}


def bench_plan(eps_list):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MSS_CACHE_DIR"] = tmp
        for eps in eps_list:
            t = time.perf_counter()
            r = plan(22000, eps)
            secs = time.perf_counter() - t
            t = time.perf_counter()
            plan(22000, eps)
            cached = time.perf_counter() - t
            rows.append({"eps": eps, "seconds": secs, "cached_seconds": cached,
                         "ratio_vs_ss": r["variance_ratio_vs_ss"], "ok": secs < 30})
        del os.environ["MSS_CACHE_DIR"]
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller n and fewer settings")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    eps_list = [1.0, 4.0] if args.quick else [0.5, 1.0, 2.0, 3.0, 4.0, 5.0]
    res = {"machine": machine()}
    print("machine:", json.dumps(res["machine"]))
    res["decode_k22000"] = bench_decode(eps_list, 5 if args.quick else 21)
    for r in res["decode_k22000"]:
        print(f"decode k=22000 eps={r['eps']}: median {r['warm_s'] * 1e3:.1f} ms "
              f"(cold incl. set-up {r['cold_s'] * 1e3:.1f} ms) target < 50 ms "
              f"{'OK' if r['ok'] else 'MISSED'}")
    res["wire_k1024"] = [bench_wire(4.0), bench_wire(1.0)]
    for r in res["wire_k1024"]:
        mark = "" if r["ok"] is None else (" target >= 20000 " + ("OK" if r["ok"] else "MISSED"))
        print(f"wire decode k=1024 eps={r['eps']}: {r['decode_reports_per_s']:,.0f} reports/s"
              f"{mark}; counting {r['count_reports_per_s']:,.0f} reports/s")
    res["simulate"] = bench_simulate(1_000_000 if args.quick else 10_000_000)
    r = res["simulate"]
    print(f"mss simulate k=1024 eps=4 n={r['n']:,}: {r['seconds']:.1f} s"
          + ("" if r["ok"] is None else f" target < 60 s {'OK' if r['ok'] else 'MISSED'}"))
    res["plan_k22000"] = bench_plan(eps_list)
    for r in res["plan_k22000"]:
        print(f"plan k=22000 eps={r['eps']}: {r['seconds']:.1f} s uncached, "
              f"{r['cached_seconds'] * 1e3:.0f} ms cached, ratio vs SS {r['ratio_vs_ss']:.4f} "
              f"target < 30 s {'OK' if r['ok'] else 'MISSED'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
