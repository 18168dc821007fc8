#!/usr/bin/env python3
"""Predicted vs simulated per-item MSE of every protocol over the range users reach.

Grid: k in {2, 4, 8, 16, 64, 256, 1024, 22000} x epsilon in {0.5, 1, 2, 4, 5, 8}
x every registered protocol (MSS needs k >= 4; PGR is skipped where its
decode would exceed --max-cells, OLH above its hash prime).  Each cell runs
trials of a fixed uniform population of n devices through the protocol's
sampler and decoder and prints simulated / predicted MSE with the 95%
interval of that ratio; target: within 5% everywhere.  Writes JSON with
--json.  Medians and the machine are printed.

    python tools/bench_predicted.py [--n 10000] [--quick] [--k 22000] [--json out.json]
"""
import argparse
import json
import platform
import time

import numpy as np
import scipy

from mss_protocol import registry
from mss_protocol.pgr import field_and_dimension

KS = (2, 4, 8, 16, 64, 256, 1024, 22000)
EPS = (0.5, 1.0, 2.0, 4.0, 5.0, 8.0)


def skip_reason(name, k, eps, max_cells):
    cls = registry.protocol_class(name)
    if k < cls.min_k:
        return cls.min_k_why.format(k=k)
    try:
        registry.make(name, k, eps)  # a protocol refuses the parameters it cannot take (OLH above its prime)
    except ValueError as exc:
        return str(exc)
    if name == "pgr":  # this benchmark's own limit on PGR's decode (its DFT over q^t cells)
        q, t = field_and_dimension(k, eps)
        if q ** t > max_cells:
            return f"decode DFT of q^t = {q ** t:.2e} cells"
    return None


def cell(name, k, eps, n, budget_s, max_trials):
    proto = registry.make(name, k, eps)
    values = np.repeat(np.arange(k), n // k)
    truth = np.bincount(values, minlength=k) / values.size
    rng = np.random.default_rng([k, int(eps * 10)])
    predicted = proto.variance(values.size, truth)
    mse, t0 = [], time.perf_counter()
    while len(mse) < 3 or (len(mse) < max_trials and time.perf_counter() - t0 < budget_s):
        est = proto.decode(proto.sample_counts(values, rng), values.size)
        mse.append(float(np.mean((est.raw - truth) ** 2)))
    ratio = np.mean(mse) / predicted
    half = 1.96 * np.std(mse, ddof=1) / np.sqrt(len(mse)) / predicted
    return {"protocol": name, "k": k, "epsilon": eps, "n": int(values.size), "trials": len(mse),
            "predicted_mse": predicted, "simulated_mse": float(np.mean(mse)), "ratio": float(ratio),
            "ratio_ci95": [float(ratio - half), float(ratio + half)],
            "within_5pct": bool(abs(ratio - 1) <= 0.05), "resolved_5pct": bool(half <= 0.05)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--budget", type=float, default=4.0, help="seconds of trials per cell")
    ap.add_argument("--max-trials", type=int, default=3000)
    ap.add_argument("--max-cells", type=float, default=2e8, help="largest PGR DFT simulated")
    ap.add_argument("--quick", action="store_true", help="k <= 1024 and a 1 s budget")
    ap.add_argument("--k", dest="ks", help="comma-separated domain sizes (default: the whole grid)")
    ap.add_argument("--json")
    args = ap.parse_args()
    print(json.dumps({"cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
                      "numpy": np.__version__, "scipy": scipy.__version__}))
    ks = [int(k) for k in args.ks.split(",")] if args.ks else [k for k in KS if not args.quick or k <= 1024]
    budget = 1.0 if args.quick else args.budget
    rows = []
    print(f"{'protocol':8} {'k':>6} {'eps':>4} {'trials':>6} {'sim/pred':>9} {'95% CI':>17}")
    for k in ks:
        for eps in EPS:
            for name in registry.AVAILABLE:
                why = skip_reason(name, k, eps, args.max_cells)
                if why:
                    rows.append({"protocol": name, "k": k, "epsilon": eps, "skipped": why})
                    print(f"{name:8} {k:>6} {eps:>4g}   skipped: {why}")
                    continue
                r = cell(name, k, eps, max(args.n, 4 * k), budget, args.max_trials)
                rows.append(r)
                flag = "" if r["within_5pct"] else ("  OFF" if not r["ratio_ci95"][0] <= 1 <= r["ratio_ci95"][1]
                                                    else "  (noise)")
                print(f"{name:8} {k:>6} {eps:>4g} {r['trials']:>6} {r['ratio']:>9.3f} "
                      f"[{r['ratio_ci95'][0]:.3f}, {r['ratio_ci95'][1]:.3f}]{flag}")
    done = [r for r in rows if "ratio" in r]
    off = [r for r in done if not r["ratio_ci95"][0] <= 1 <= r["ratio_ci95"][1]]
    print(f"{len(done)} cells simulated, {len(rows) - len(done)} skipped; "
          f"{sum(r['within_5pct'] for r in done)} within 5%; median |ratio - 1| "
          f"{np.median([abs(r['ratio'] - 1) for r in done]):.4f}; "
          f"{len(off)} with 1 outside the 95% CI: "
          + ", ".join(f"{r['protocol']} k={r['k']} eps={r['epsilon']:g} ({r['ratio']:.3f})" for r in off))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
