#!/usr/bin/env python3
"""The shuffle accountant's upper bounds beside the exact shuffled binary-RR curve (issue 45, item 4).

For eps0 in {0.5, 1, 2, 3, 4, 6, 8}, n in {100, 10^3, 10^4, 10^5, 10^6} and delta in {1e-6, 1e-8}
(70 cells), the central eps of a shuffled batch of n eps0-LDP reports by
mss_protocol.shuffling.central_epsilon:

* ``generic``: any eps0-LDP randomiser (Feldman, McMillan, Talwar FOCS 2021, numerical);
* ``grr_k2``: binary randomised response's own bound (GRR at k = 2: the blanket, which is also
  the SODA 2023 stronger-clone pair);
* ``grr_k256``: GRR on 256 items (blanket divergence, blanket or stronger clone, the smallest, or the
  generic one);
* ``ss_k16``, ``ss_k1024``: subset selection on 16 and 1024 items at its variance-optimal subset
  size (mss_protocol.subset_selection.optimal_omega); ``oue_k256``, ``sue_k256``: unary encodings
  on 256 items; ``hr_k256``: Hadamard response on 256 items in one block of 512 -- each the
  smallest of the protocol's own bounds (blanket divergence, per-protocol blanket, stronger clone)
  and the generic ones;

each also without the blanket divergence (``_previous``: the smallest clones-pair bound, the accountant
before it) and the divergence alone where listed (``_divergence``);

beside ``lower``: mss_protocol.shuffling.binary_rr_lower_bound, the exact central eps of shuffled
binary RR (others all holding one value), below which no bound valid for every eps0-LDP randomiser
can go, and the ratio of each bound to it (a protocol's own bound may go below it: the curve bounds
only bounds valid for every randomiser; ``rr_*`` in the summary: the cells where binary RR amplifies).
``sup_s``: the check behind the module docstring's "generic randomisers" paragraph: max over s in [1e-4, 1] (200 points, geometric) of
s D(pair, C ~ Bin(n - 1, 2 s/(e^eps0 + 1))) / delta at the eps where s = 1 meets delta; above 1
means that decomposition proves no generic bound at that eps.

Usage: python tools/bench_shuffle_bounds.py [--json docs/bench-shuffle-bounds.json]
"""
import argparse
import collections
import json
import math
import time

import numpy as np

from mss_protocol import shuffling
from mss_protocol.subset_selection import optimal_omega

EPS0 = (0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0)
NS = (100, 1000, 10_000, 100_000, 1_000_000)
DELTAS = (1e-6, 1e-8)
TARGET = 1.25


def sup_s(eps0, n, delta):
    """(eps of the s = 1 pair, max over s of s D_s(eps) / delta); (None, None) if s = 1 meets delta only at eps0."""
    e = math.exp(eps0)
    eps = shuffling.clones_epsilon(eps0, n, delta, 2 / (e + 1))
    if eps is None:
        return None, None
    worst = max(s * shuffling.clones_delta(eps, eps0, n, delta, 2 * s / (e + 1)) / delta
                for s in np.geomspace(1e-4, 1, 200))
    return eps, worst


def cell(eps0, n, delta):
    lower = shuffling.binary_rr_lower_bound(eps0, n, delta)
    row = {"eps0": eps0, "n": n, "delta": delta, "lower": lower}
    bounds = (("generic", (None, None)), ("grr_k2", ("grr", 2)), ("grr_k256", ("grr", 256)),
              ("ss_k16", ("ss", 16, optimal_omega(16, eps0))), ("ss_k1024", ("ss", 1024, optimal_omega(1024, eps0))),
              ("oue_k256", ("oue", 256)), ("sue_k256", ("sue", 256)), ("hr_k256", ("hr", 256, 512)))
    for key, args in bounds:
        start = time.perf_counter()
        c = shuffling.central_epsilon(eps0, n, delta, *args)
        row[key] = c.eps
        row[key + "_method"] = c.method
        row[key + "_seconds"] = time.perf_counter() - start
        row[key + "_ratio"] = c.eps / lower if lower > 0 else None
        listed = dict(c.bounds)
        paired = [eps for name, eps in c.bounds if not name.endswith("-blanket-divergence")]
        row[key + "_previous"] = min(paired + [eps0])  # without the blanket divergence: the accountant before it
        row[key + "_divergence"] = next((eps for name, eps in listed.items() if name.endswith("-blanket-divergence")),
                                        None)
    row["stronger_clone_pair"], row["sup_s"] = sup_s(eps0, n, delta)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    rows, start = [], time.perf_counter()
    print("| delta | eps0 | n | 2-RR exact (lower) | generic | ratio | GRR k=2 | ratio | GRR k=256 | method | "
          "SS k=16 | SS k=1024 | OUE | SUE | HR | (ratios) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for delta in DELTAS:
        for eps0 in EPS0:
            for n in NS:
                r = cell(eps0, n, delta)
                rows.append(r)

                def ratio(key):
                    return "-" if r[key + "_ratio"] is None else f"{r[key + '_ratio']:.3f}"

                print(f"| {delta:g} | {eps0:g} | {n:,} | {r['lower']:.4g} | {r['generic']:.4g} | {ratio('generic')} | "
                      f"{r['grr_k2']:.4g} | {ratio('grr_k2')} | {r['grr_k256']:.4g} | {r['grr_k256_method']} | "
                      + " | ".join(ratio(key) for key in ("ss_k16", "ss_k1024", "oue_k256", "sue_k256", "hr_k256"))
                      + " |",
                      flush=True)
    seconds = time.perf_counter() - start
    summary = {}
    for key in ("generic", "grr_k2", "grr_k256", "ss_k16", "ss_k1024", "oue_k256", "sue_k256", "hr_k256"):
        ratios = [(r[key + "_ratio"], r) for r in rows if r[key + "_ratio"] is not None]
        worst, at = max(ratios, key=lambda x: x[0])
        amplified = [(x, r) for x, r in ratios if r[key] < r["eps0"] * (1 - shuffling.USEFUL)]
        summary[key] = {"cells": len(ratios), "at_most_target": int(sum(x <= TARGET for x, _ in ratios)),
                        "amplified_cells": len(amplified),
                        "amplified_at_most_target": int(sum(x <= TARGET for x, _ in amplified)),
                        "worst_ratio": worst, "worst_at": {"eps0": at["eps0"], "n": at["n"], "delta": at["delta"]},
                        "at_eps0": int(sum(r[key] >= r["eps0"] * (1 - shuffling.USEFUL) for r in rows)),
                        "below_lower": int(sum(r[key] < r["lower"] - 1e-9 for r in rows)),
                        "methods": dict(sorted(collections.Counter(r[key + "_method"].split(":")[0] for r in rows).items())),
                        "max_seconds": max(r[key + "_seconds"] for r in rows),
                        "median_seconds": float(np.median([r[key + "_seconds"] for r in rows]))}
        # the 60 cells where shuffled binary RR amplifies at all (the docs' count), and the gain of the divergence
        rr = [r for r in rows if r["lower"] < r["eps0"] * (1 - shuffling.USEFUL)]
        summary[key].update({"rr_cells": len(rr),
                             "rr_at_most_target": int(sum(r[key] <= TARGET * r["lower"] for r in rr)),
                             "rr_below_lower": int(sum(r[key] < r["lower"] - 1e-9 for r in rr)),
                             "rr_worst_ratio": max(r[key] / r["lower"] for r in rr),
                             "previous_rr_at_most_target": int(sum(r[key + "_previous"] <= TARGET * r["lower"] for r in rr)),
                             "previous_rr_worst_ratio": max(r[key + "_previous"] / r["lower"] for r in rr),
                             "divergence_cells": int(sum(r[key + "_divergence"] is not None for r in rows)),
                             "median_gain": float(np.median([r[key] / r[key + "_previous"] for r in rows]))})
    sups = [r["sup_s"] for r in rows if r["sup_s"] is not None]
    summary["sup_s"] = {"cells": len(sups), "min": float(min(sups)), "max": float(max(sups)),
                        "above_1": int(sum(x > 1 for x in sups))}
    print(f"\n{seconds:.0f} s; {json.dumps(summary)}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"target_ratio": TARGET, "seconds": seconds, "summary": summary, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
