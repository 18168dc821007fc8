#!/usr/bin/env python3
"""Beyond the paper: what post-processing does to every protocol, and the
bias of the top-10 items of a skewed distribution.

For k = 1024, Zipf(1.1), n = 10,000 and epsilon in {1, 4}: MSE per item
after none / clip / simplex (same populations and reports for all three),
and the mean signed error of the ten most frequent items over the trials.
Prints a Markdown table; --json writes the numbers.

Usage: python tools/bench_post.py [--trials 20] [--json out.json]
"""
import argparse
import json

import numpy as np

from mss_aggregator.distributions import parse
from mss_protocol import postprocess, registry

NAMES = ("mss", "ss", "pgr", "grr", "rappor", "olh", "hr")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--k", type=int, default=1024)
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    k, n = args.k, args.n
    probs = parse("zipf:1.1", k)
    pops = [np.random.default_rng([1, t]).choice(k, size=n, p=probs) for t in range(args.trials)]
    top = np.argsort(-probs)[:10]
    out = []
    print(f"k={k}, n={n}, Zipf(1.1), {args.trials} trials\n")
    print("| eps | protocol | MSE none | MSE clip | MSE simplex | top-10 mean error (none) | top-10 mean error (simplex) |")
    print("|---|---|---|---|---|---|---|")
    for eps in (1.0, 4.0):
        for name in NAMES:
            proto = registry.make(name, k, eps)
            rng = np.random.default_rng([2, int(eps), NAMES.index(name)])
            mse = {p: [] for p in postprocess.CHOICES}
            err = {p: [] for p in ("none", "simplex")}
            for values in pops:
                truth = np.bincount(values, minlength=k) / n
                raw = proto.decode(proto.sample_counts(values, rng), n, "none").raw
                for post in postprocess.CHOICES:
                    est = postprocess.apply(raw, post)
                    mse[post].append(np.mean((est - truth) ** 2))
                    if post in err:
                        err[post].append(est[top] - truth[top])
            row = {"epsilon": eps, "protocol": name,
                   **{f"mse_{p}": float(np.mean(v)) for p, v in mse.items()},
                   **{f"top10_mean_error_{p}": np.mean(v, axis=0).tolist() for p, v in err.items()}}
            out.append(row)
            fmt = lambda v: " ".join(f"{x:+.4f}" for x in v[:5]) + " …"  # noqa: E731
            print(f"| {eps:g} | {name} | {row['mse_none']:.3g} | {row['mse_clip']:.3g} | "
                  f"{row['mse_simplex']:.3g} | {fmt(row['top10_mean_error_none'])} | "
                  f"{fmt(row['top10_mean_error_simplex'])} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"k": k, "n": n, "trials": args.trials, "top10_items": top.tolist(), "rows": out},
                      fh, indent=1)


if __name__ == "__main__":
    main()
