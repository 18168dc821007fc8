#!/usr/bin/env python3
"""MSE against bytes on the wire, every protocol, full and compact frames.

For k in {16, 256, 1024, 22000} x epsilon in {0.5, 1, 2, 4, 5}: each
protocol's predicted per-item MSE (uniform prior, n = 10^4; MSE x n is
constant in n) and its whole report size in full (11-byte header) and
compact (1-byte) frames, from ``mss plan``'s candidates; then the planner's
``auto`` choice for an 11-byte compact frame (LoRaWAN US915 DR0) is
simulated (trials of n devices through its sampler and decoder) and its
simulated MSE compared with SubsetSelection's (unbudgeted).  Target: at every
k and eps >= 1, auto fits 11 bytes with simulated MSE <= 1.05 x SS's.  (MSS's own bit saving against
SS, simulated: tools/bench_frontier.py.)  Prints a table, writes JSON
(--json) and a plot (--plot); tools/docs_tables.py renders the JSON into
docs/benchmarks.md and README.md.

    python tools/bench_bytes.py [--quick] [--json out.json] [--plot out.png]
"""
import argparse
import json
import platform
import time

import numpy as np

from mss_protocol import registry
from mss_protocol.choose import Limits, Question, choose
from mss_protocol.configs import load_dict
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import plan

KS = (16, 256, 1024, 22000)
EPS = (0.5, 1.0, 2.0, 4.0, 5.0)
N = 10000


def simulated_mse(cfg, n, trials, seed, budget_s=20.0, rel_se=0.01):
    """(MSE at n = N, its standard error): at least ``trials`` trials, more
    (up to 2,000) while the relative SE is above ``rel_se`` and time is left."""
    proto = registry.from_config(cfg)
    values = np.repeat(np.arange(cfg.k), max(1, n // cfg.k))
    truth = np.bincount(values, minlength=cfg.k) / values.size
    rng = np.random.default_rng(seed)
    mse, t0 = [], time.perf_counter()
    while len(mse) < trials or (len(mse) < 2000 and time.perf_counter() - t0 < budget_s
                                and np.std(mse, ddof=1) / np.sqrt(len(mse)) > rel_se * np.mean(mse)):
        mse.append(float(np.mean((proto.decode(proto.sample_counts(values, rng), values.size).raw - truth) ** 2)))
    scale = values.size / N
    return float(np.mean(mse)) * scale, float(np.std(mse, ddof=1) / np.sqrt(len(mse))) * scale


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="k <= 1024 and 3 trials")
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--json")
    ap.add_argument("--plot")
    args = ap.parse_args()
    ks = KS[:3] if args.quick else KS
    trials = 3 if args.quick else args.trials
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}; "
          f"MSE per item at n = {N} (uniform prior)")
    rows, cells = [], []
    for k in ks:
        for eps in EPS:
            t0 = time.perf_counter()
            full = choose(k, eps, "auto", question=Question(n=N))
            compact = {c["protocol"]: c for c in choose(k, eps, "auto", limits=Limits(max_bits=1 << 20, frame="compact"),
                                                        question=Question(n=N))["candidates"]}
            best11 = choose(k, eps, "auto", limits=Limits(max_bytes=11, frame="compact"), question=Question(n=N))
            ss = next(c for c in full["candidates"] if c["protocol"] == "ss")
            for c in full["candidates"]:
                if c["predicted_mse"] is None:
                    continue
                rows.append({"k": k, "epsilon": eps, "protocol": c["protocol"], "predicted_mse": c["predicted_mse"],
                             "ratio_vs_ss": c["variance_ratio_vs_ss"], "full_bytes": c["frame_bytes"],
                             "compact_bytes": compact.get(c["protocol"], {}).get("frame_bytes"),
                             "excluded": c.get("excluded")})
            sim, sim_se = simulated_mse(load_dict(best11["config"]), N, trials, [k, int(10 * eps)])
            ss_sim, ss_se = simulated_mse(MssConfig.subset_selection(k, eps), N, trials, [k, int(10 * eps), 1])
            cell = {"k": k, "epsilon": eps, "auto_11_compact": best11["protocol"],
                    "auto_predicted_ratio": best11["variance_ratio_vs_ss"],
                    "auto_bytes": best11["frame_bytes"], "auto_simulated_mse": sim, "auto_se": sim_se,
                    "ss_simulated_mse": ss_sim, "ss_se": ss_se, "ratio": sim / ss_sim,
                    "ss_bytes_full": ss["frame_bytes"], "seconds": time.perf_counter() - t0}
            cell["target_met"] = bool(eps < 1 or (cell["auto_bytes"] <= 11 and cell["ratio"] <= 1.05))
            cells.append(cell)
            print(f"k={k:5d} eps={eps:3.1f}: auto(11 B compact) = {best11['protocol']:6s} "
                  f"{best11['frame_bytes']:2d} B, simulated MSE {sim:.3g} = {cell['ratio']:.3f} "
                  f"(+-{1.96 * np.hypot(sim_se / sim, ss_se / ss_sim) * cell['ratio']:.3f}) x SS's "
                  f"({ss['frame_bytes']} B full){'' if cell['target_met'] else '  MISSED'}")
    print("\nprotocol table (predicted MSE x 1e6 at n = 1e4; bytes full / compact):")
    for k in ks:
        for eps in EPS:
            line = [f"{r['protocol']}:{r['predicted_mse'] * 1e6:.3g}@{r['full_bytes']}/{r['compact_bytes']}"
                    + ("*" if r["excluded"] else "") for r in rows if r["k"] == k and r["epsilon"] == eps]
            print(f"  k={k} eps={eps}: " + "  ".join(line))
    met = sum(c["target_met"] for c in cells)
    print(f"\ntarget (eps >= 1: auto fits 11 B compact, simulated MSE <= 1.05 x SS): {met} of {len(cells)} cells")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cells": cells, "rows": rows}, fh, indent=1)
    if args.plot:
        plot(rows, ks, args.plot)


def plot(rows, ks, path):
    """Per k: each protocol's compact report bytes against its MSE / SS's at eps = 1
    (circles) and 4 (triangles), and MSS's planned (bits, MSE) frontier as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    names = sorted({r["protocol"] for r in rows})
    colours = dict(zip(names, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    fig, axes = plt.subplots(1, len(ks), figsize=(4.4 * len(ks), 4.2))
    for ax, k in zip(np.atleast_1d(axes), ks):
        for eps, marker in ((1.0, "o"), (4.0, "^")):
            for r in rows:
                if r["k"] == k and r["epsilon"] == eps and r["compact_bytes"]:
                    ax.scatter(r["compact_bytes"], r["ratio_vs_ss"], marker=marker, s=30, color=colours[r["protocol"]])
            p = plan(k, eps, n=N, protocol="mss")
            pts = sorted((1 + (f["bits_per_report"]["max"] + 7) // 8, f["predicted_mse"] / p["ss_variance"])
                         for f in p["frontier"])
            ax.plot(*zip(*pts), color=colours["mss"], lw=0.8, ls="-" if eps == 1 else "--")
        ax.axvline(11, color="grey", ls="--", lw=0.8)
        ax.axhline(1.05, color="grey", ls=":", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(ScalarFormatter())
            axis.set_minor_formatter(NullFormatter())
        ax.set_title(f"k = {k}")
        ax.set_xlabel("compact report bytes (11: LoRaWAN US915 DR0)")
    first = np.atleast_1d(axes)[0]
    first.set_ylabel("predicted MSE / SubsetSelection's")
    for name in names:
        first.scatter([], [], color=colours[name], label=name)
    first.scatter([], [], marker="o", color="k", label="eps = 1")
    first.scatter([], [], marker="^", color="k", label="eps = 4")
    first.plot([], [], color=colours["mss"], label="MSS frontier (budgets)")
    first.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
