#!/usr/bin/env python3
"""Consistent estimators at small n: MSE and interval coverage of none /
clip (= Norm-Mul) / simplex (= Norm-Sub) / mle (IBU's limit) for every protocol.

Grid: k x epsilon x n x {uniform, zipf:1.1} x protocol.  Each trial draws a
population of n devices (fixed seeds), the protocol's counts of their
reports, and decodes them four ways (mss_protocol.postprocess, tools/estimators.py); MSE is per
item against the population's empirical frequencies, averaged over trials.
Coverage: the fraction of (item, trial) pairs whose true frequency lies in
the 95% Wald interval every view shows today (raw +- 1.96 SE), and the
fraction whose point estimate lies outside that interval.  On a smaller grid
(``--boot-k``, epsilon 1 and 4, n 100/1000/10000, zipf; the first
``--boot-trials`` trials) the parametric
bootstrap intervals of simplex and mle (estimators.bootstrap, percentile
and basic) are measured too, with their cost (mle's not for MSS: a
hundred iterative solves per interval).  Protocols that refuse a k
(mss below 4) are skipped and listed.

Usage: python tools/bench_estimators.py [--trials 6] [--trials-large 2]
       [--draws 100] [--json docs/bench-estimators.json]
"""
import argparse
import json
import time

import numpy as np

from mss_aggregator.distributions import parse
import estimators
from mss_protocol import registry
from mss_protocol.estimate import Z95

KS, EPSILONS, NS = (2, 8, 64, 1024, 4096), (0.5, 1.0, 2.0, 4.0), (100, 500, 1000, 10000)
DISTS = ("uniform", "zipf:1.1")
VIEWS = estimators.CHOICES
BOOT_VIEWS, BOOT_EPS, BOOT_NS = ("simplex", "mle"), (1.0, 4.0), (100, 1000, 10000)


def population(k, n, dist, trial):
    """n devices' values, drawn with a seed fixed by the cell and trial."""
    rng = np.random.default_rng([1, k, n, DISTS.index(dist), trial])
    return rng.choice(k, size=n, p=parse(dist, k))


def run_cell(proto, k, eps, n, dist, trials, draws, boot_trials):
    """One grid cell: MSE per view, Wald coverage, points outside it, bootstrap."""
    rng = np.random.default_rng([2, k, n, int(4 * eps), DISTS.index(dist), registry.AVAILABLE.index(proto.name)])
    boot = draws and eps in BOOT_EPS and n in BOOT_NS and dist == "zipf:1.1"
    sq = {v: [] for v in VIEWS}
    outside = {v: [] for v in VIEWS}
    covered, seconds = [], {v: 0.0 for v in VIEWS}
    bcov = {(v, m): [] for v in BOOT_VIEWS for m in estimators.Intervals._fields}
    bsec = {v: 0.0 for v in BOOT_VIEWS}
    for t in range(trials):
        values = population(k, n, dist, t)
        truth = np.bincount(values, minlength=k) / n
        counts = proto.sample_counts(values, rng)
        raw, se = proto.estimate(counts, n)
        lo, hi = raw - Z95 * se, raw + Z95 * se
        covered.append((truth >= lo) & (truth <= hi))
        for v in VIEWS:
            t0 = time.perf_counter()
            est = estimators.from_counts(proto, counts, n, v)
            seconds[v] += time.perf_counter() - t0
            sq[v].append((est - truth) ** 2)
            outside[v].append((est < lo) | (est > hi))
        for v in BOOT_VIEWS if boot and t < boot_trials else ():
            # this benchmark's time budget: MSS's MLE takes 100 FISTA solves per interval, minutes per cell
            if v == "mle" and proto.name == "mss":
                continue
            t0 = time.perf_counter()
            iv = estimators.bootstrap(proto, counts, n, v, draws, rng)
            bsec[v] += time.perf_counter() - t0
            for m in estimators.Intervals._fields:
                blo, bhi = getattr(iv, m)
                bcov[(v, m)].append((truth >= blo) & (truth <= bhi))
    row = {"protocol": proto.name, "k": k, "epsilon": eps, "n": n, "dist": dist, "trials": trials,
           "wald_coverage": float(np.mean(covered))}
    for v in VIEWS:
        row[f"mse_{v}"] = float(np.mean(sq[v]))
        row[f"outside_wald_{v}"] = float(np.mean(outside[v]))
        row[f"seconds_{v}"] = seconds[v] / trials
    if boot:
        row["boot_draws"] = draws
        for (v, m), c in bcov.items():
            row[f"boot_{m}_coverage_{v}"] = float(np.mean(c)) if c else float("nan")
        for v in BOOT_VIEWS:
            row[f"boot_seconds_{v}"] = bsec[v] / trials
    return row


def values(rows, key):
    """The measured values of ``key`` (rows without it, or NaN, left out)."""
    return [r[key] for r in rows if not np.isnan(r.get(key, np.nan))]


def median(rows, key):
    return float(np.median(values(rows, key))) if values(rows, key) else float("nan")


def smallest(rows, key):
    return min(values(rows, key), default=float("nan"))


def report(rows, skipped, args):
    """Markdown tables: MSE ratios to none, coverage, bootstrap."""
    print(f"Grid: k {KS}, eps {EPSILONS}, n {NS}, {DISTS}; trials {args.trials} (k <= 64), "
          f"{args.trials_large} (k >= 1024); bootstrap {args.draws} draws.")
    print(f"Skipped: {', '.join(skipped) or 'none'}\n")
    for r in rows:
        for v in VIEWS[1:]:
            r[f"ratio_{v}"] = r[f"mse_{v}"] / r["mse_none"]
    print("Median MSE ratio to none over k, protocols and distributions (max in brackets):\n")
    print("| eps | n | " + " | ".join(VIEWS[1:]) + " | best view in cells |")
    print("|---|---|" + "---|" * (len(VIEWS)))
    for eps in EPSILONS:
        for n in NS:
            cell = [r for r in rows if r["epsilon"] == eps and r["n"] == n]
            best = [min(VIEWS, key=lambda v: r[f"mse_{v}"]) for r in cell]
            wins = ", ".join(f"{v} {best.count(v)}" for v in VIEWS if best.count(v))
            print(f"| {eps:g} | {n} | " + " | ".join(
                f"{median(cell, f'ratio_{v}'):.3g} ({max(r[f'ratio_{v}'] for r in cell):.3g})"
                for v in VIEWS[1:]) + f" | {wins} |")
    print("\nMedian MSE ratio to none per protocol and k (over eps, n <= 10,000, distributions):\n")
    print("| protocol | k | " + " | ".join(VIEWS[1:]) + " | mle seconds (max) |")
    print("|---|---|" + "---|" * len(VIEWS))
    for name in registry.AVAILABLE:
        for k in KS:
            cell = [r for r in rows if r["protocol"] == name and r["k"] == k]
            if cell:
                print(f"| {name} | {k} | " + " | ".join(f"{median(cell, f'ratio_{v}'):.3g}" for v in VIEWS[1:])
                      + f" | {max(r['seconds_mle'] for r in cell):.3g} |")
    print("\nWald 95% interval (raw +- 1.96 SE): coverage of the true frequencies, and the share of "
          "items whose point estimate lies outside it (medians over cells; min coverage in brackets):\n")
    print("| n | coverage | " + " | ".join(f"outside, {v}" for v in VIEWS[1:]) + " |")
    print("|---|---|" + "---|" * (len(VIEWS) - 1))
    for n in NS:
        cell = [r for r in rows if r["n"] == n]
        print(f"| {n} | {median(cell, 'wald_coverage'):.3f} ({smallest(cell, 'wald_coverage'):.3f}) | "
              + " | ".join(f"{median(cell, f'outside_wald_{v}'):.3f}" for v in VIEWS[1:]) + " |")
    brows = [r for r in rows if "boot_draws" in r]
    if brows:
        print("\nParametric bootstrap 95% intervals (zipf:1.1, eps 1 and 4): median coverage over "
              "cells (min in brackets), median seconds per bootstrap:\n")
        print("| k | n | " + " | ".join(f"{v} {m}" for v in BOOT_VIEWS for m in estimators.Intervals._fields)
              + " | " + " | ".join(f"{v} s" for v in BOOT_VIEWS) + " |")
        print("|---|---|" + "---|" * (3 * len(BOOT_VIEWS)))
        for k in sorted({r["k"] for r in brows}):
            for n in BOOT_NS:
                cell = [r for r in brows if r["k"] == k and r["n"] == n]
                cov = " | ".join(f"{median(cell, f'boot_{m}_coverage_{v}'):.3f} "
                                 f"({smallest(cell, f'boot_{m}_coverage_{v}'):.3f})"
                                 for v in BOOT_VIEWS for m in estimators.Intervals._fields)
                print(f"| {k} | {n} | {cov} | "
                      + " | ".join(f"{median(cell, f'boot_seconds_{v}'):.3g}" for v in BOOT_VIEWS) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=6, help="trials per cell for k <= 64")
    ap.add_argument("--trials-large", type=int, default=2, help="trials per cell for k >= 1024")
    ap.add_argument("--draws", type=int, default=100, help="bootstrap draws (0: no bootstrap)")
    ap.add_argument("--boot-trials", type=int, default=3, help="trials of a cell that get a bootstrap")
    ap.add_argument("--boot-k", type=int, nargs="*", default=[8, 64])
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    rows, skipped = [], []
    t0 = time.perf_counter()
    for k in KS:
        trials = args.trials if k <= 64 else args.trials_large
        for name in registry.AVAILABLE:
            try:
                protos = {eps: registry.make(name, k, eps) for eps in EPSILONS}
            except ValueError as exc:
                skipped.append(f"{name} at k = {k} ({exc})")
                continue
            draws = args.draws if k in args.boot_k else 0
            rows += [run_cell(protos[eps], k, eps, n, dist, trials, draws, args.boot_trials)
                     for eps in EPSILONS for n in NS for dist in DISTS]
    seconds = time.perf_counter() - t0
    report(rows, skipped, args)
    print(f"\n{len(rows)} cells in {seconds:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "seconds": seconds, "skipped": skipped, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
