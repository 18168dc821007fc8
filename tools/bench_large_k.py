#!/usr/bin/env python3
"""Planning and decoding for large domains, k = 2^10 .. 2^20 (issue: scale).

For each k: the planner's time (uncached, then cached), and the median
decode time from counts (3 runs) of MSS (the planned config) and SS, with
the process's peak memory; then the growth exponent b of decode time
~ k^b fitted on log-log (least squares over the k >= 2^14 points, where
fixed overheads no longer dominate; the MSS paper's cost is
Theta(n + r k l), i.e. b = 1 for a fixed number r of LSMR iterations).
Counts are synthetic (each block's inclusion counts drawn as Binomial(n_j, q_j)
around a uniform truth): decode time depends on k, l and the iterations,
not on the values.  Targets at k = 2^20: plan < 120 s, decode < 3 s,
memory < 4 GB.

Usage: python tools/bench_large_k.py [--epsilon 4] [--kmin 10] [--kmax 20] [--json out.json]
"""
import argparse
import json
import os
import platform
import resource
import tempfile
import time

import numpy as np

from mss_protocol.counts import Counts
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.decoder import Decoder


def synthetic_counts(cfg, n, rng):
    """Counts of n reports of a uniform population (exact binomial margins)."""
    n_j = rng.multinomial(n, np.full(cfg.l, 1 / cfg.l))
    g = np.repeat(1 / np.array(cfg.moduli), cfg.moduli)  # class frequency under a uniform truth
    p_rows, q_rows = (np.repeat(a, cfg.moduli) for a in (cfg.p, cfg.q))
    rows = np.repeat(n_j, cfg.moduli)
    return Counts(cfg, n_j, rng.binomial(rows, q_rows + (p_rows - q_rows) * g))


def decode_seconds(cfg, n, rng, repeats=3):
    dec = Decoder(cfg)
    counts = synthetic_counts(cfg, n, rng)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        dec.decode(counts)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--kmin", type=int, default=10)
    ap.add_argument("--kmax", type=int, default=20)
    ap.add_argument("--n", type=int, default=100_000, help="reports behind the counts")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--plot", help="write a PNG of decode time vs k here")
    args = ap.parse_args()
    from mss_protocol.mss.planner import plan

    os.environ.setdefault("MSS_CACHE_DIR", tempfile.mkdtemp(prefix="mss-plans-"))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}; "
          f"epsilon={args.epsilon}, n={args.n}; plan cache {os.environ['MSS_CACHE_DIR']}")
    rng = np.random.default_rng(0)
    rows = []
    for e in range(args.kmin, args.kmax + 1, 2):
        k = 1 << e
        t0 = time.perf_counter()
        p = plan(k, args.epsilon)
        t_plan = time.perf_counter() - t0
        t0 = time.perf_counter()
        plan(k, args.epsilon)
        t_cached = time.perf_counter() - t0
        mss = MssConfig.from_dict(p["config"])
        ss = MssConfig.subset_selection(k, args.epsilon)
        row = {"k": k, "epsilon": args.epsilon, "moduli": list(mss.moduli), "plan_seconds": t_plan,
               "plan_cached_seconds": t_cached, "variance_ratio_vs_ss": p["variance_ratio_vs_ss"],
               "bits_max": mss.bits_per_report["max"],
               "mss_decode_seconds": decode_seconds(mss, args.n, rng),
               "ss_decode_seconds": decode_seconds(ss, args.n, rng),
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
        rows.append(row)
        print(f"k=2^{e:<2} plan {t_plan:7.2f} s (cached {t_cached * 1e3:5.1f} ms), l={mss.l}, "
              f"ratio vs SS {row['variance_ratio_vs_ss']:.5f}, bits {row['bits_max']:>7}; decode MSS "
              f"{row['mss_decode_seconds']:.3f} s, SS {row['ss_decode_seconds']:.3f} s; "
              f"peak RSS {row['peak_rss_mb']:.0f} MB", flush=True)
    fit = {}
    for name in ("mss", "ss"):  # the two protocols this benchmark compares (its rows' columns)
        pts = [(r["k"], r[f"{name}_decode_seconds"]) for r in rows if r["k"] >= 1 << 14]
        if len(pts) >= 2:
            fit[name] = float(np.polyfit(np.log([p[0] for p in pts]), np.log([p[1] for p in pts]), 1)[0])
    last = rows[-1]
    print("decode time ~ k^b, k >= 2^14: " + ", ".join(f"{n.upper()} b = {b:.2f}" for n, b in fit.items()))
    print(f"targets at k={last['k']}: plan {last['plan_seconds']:.1f} s (< 120: "
          f"{'OK' if last['plan_seconds'] < 120 else 'MISSED'}), decode {last['mss_decode_seconds']:.2f} s "
          f"(< 3: {'OK' if last['mss_decode_seconds'] < 3 else 'MISSED'}), peak memory "
          f"{last['peak_rss_mb']:.0f} MB (< 4096: {'OK' if last['peak_rss_mb'] < 4096 else 'MISSED'})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "growth_exponent": fit}, fh, indent=1)
    if args.plot:
        plot(rows, fit, args.plot)


def plot(rows, fit, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ks = [r["k"] for r in rows]
    for name in ("mss", "ss"):  # the two protocols compared, a curve each
        ax.plot(ks, [r[f"{name}_decode_seconds"] for r in rows], marker="o",
                label=f"{name.upper()} (k^{fit.get(name, float('nan')):.2f})")
    ax.plot(ks, [r["plan_seconds"] for r in rows], marker="s", ls="--", color="grey", label="planning (uncached)")
    ax.axhline(3, color="black", lw=0.8, ls=":", label="decode target 3 s")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("k")
    ax.set_ylabel("seconds (median)")
    ax.set_title(f"decode from counts and planning, eps={rows[0]['epsilon']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
