#!/usr/bin/env python3
"""Shuffled against pure local: the MSE of the plan at the largest eps0 a shuffler allows, simulated.

For n devices a shuffled batch (one report each) and a central (eps_c, delta = 1e-6) per epoch,
the shuffled plan runs at eps0 = largest_eps0(eps_c, n, delta) (mss_protocol.shuffling: the best
of Feldman, McMillan, Talwar's bounds for any eps0-LDP randomiser, FOCS 2021) and auto's choice
at that eps0 without OLH (its seed names the device); the pure-local plan is auto's choice at
epsilon = eps_c, as ``mss plan`` plans today.  Both are simulated (the project's
mss_aggregator.compare.simulate: draw n values from the prior, run the protocol's channel,
decode, MSE per item against the empirical frequencies) over a few seeded trials, beside the
predicted MSE, and the ratio local / shuffled (above 1: the shuffler pays).

GRR's own bound (issue 45, item 5): ``mss plan --protocol grr --central-epsilon C --shuffle-n N``
plans GRR at largest_eps0(C, N, delta, "grr", k); the table gives that eps0 and GRR's simulated MSE
there now (the blanket and the stronger clone, mss_protocol.shuffling) beside the old accountant's
(the blanket or the generic bound, whichever was smaller: the stronger clone left out).  The
generic bound, and so auto's eps0, is unchanged (the module docstring says why).

Trials: by default 40 at k <= 64 and 8 above, so that the simulated MSE's relative standard error,
about sqrt(2 / (k trials)) (a mean of k trials' squared errors per item), is below 6%.

Usage: python tools/bench_shuffle.py [--trials T] [--k 16,1024] [--json docs/bench-shuffle.json]
"""
import argparse
import json
import statistics
import time

import numpy as np

from mss_aggregator.compare.simulate import simulate
from mss_aggregator.distributions import parse
from mss_protocol import registry, shuffling
from mss_protocol.choose import choose
from mss_protocol.configs import load_dict

NS = (1_000, 10_000, 100_000)
EPS_C = (0.5, 1.0, 2.0)
DELTA = 1e-6
OLH_OUT = {"olh": "shuffled: its seed names the device"}


def _simulated(plan, probs, n, trials, seed):
    """(mean, standard error of the mean) of the per-item MSE of ``plan``'s config over ``trials``."""
    proto = registry.from_config(load_dict(plan["config"]))
    mse = simulate(proto, probs, n, trials, seed).mse
    return float(mse.mean()), float(mse.std(ddof=1) / np.sqrt(trials))


def grr_old_eps0(eps_c, n, k):
    """largest_eps0 for GRR under the old accountant: the smallest bound but the stronger clone."""
    def old(eps0):
        c = shuffling.central_epsilon(eps0, n, DELTA, "grr", k)
        return min([eps for name, eps in c.bounds if name != "grr-stronger-clone"] + [eps0])

    lo, hi = min(eps_c, shuffling.EPS0_MAX), shuffling.EPS0_MAX
    if old(hi) <= eps_c:
        return hi
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if old(mid) <= eps_c else (lo, mid)
    return lo


def _grr(k, n, eps0, probs, prior, trials, seed):
    """GRR planned at eps0: (predicted MSE, simulated MSE, its standard error)."""
    plan = choose(k, float(eps0), "grr", n=n, prior=None if prior == "uniform" else probs, prior_label=prior)
    mse, se = _simulated(plan, probs, n, trials, seed)
    return plan["predicted_mse"], mse, se


def run(k, n, eps_c, prior, trials):
    """One row: both plans, predicted and simulated."""
    probs = parse(prior, k)
    # plans at eps0 rounded down to 4 decimals, as mss plan --central-epsilon does (still meets eps_c)
    eps0 = np.floor(shuffling.largest_eps0(eps_c, n, DELTA) * 1e4) / 1e4
    shuffled = choose(k, float(eps0), "auto", n=n, prior=None if prior == "uniform" else probs, prior_label=prior,
                      exclude=OLH_OUT)
    local = choose(k, eps_c, "auto", n=n, prior=None if prior == "uniform" else probs, prior_label=prior)
    bound = ("grr", k) if shuffled["protocol"] == "grr" else (None, None)
    central = shuffling.central_epsilon(float(eps0), n, DELTA, *bound)
    seed = [k, n, int(eps_c * 10)]  # the same populations for both plans
    s_mse, s_se = _simulated(shuffled, probs, n, trials, seed)
    l_mse, l_se = _simulated(local, probs, n, trials, seed)
    grr = {}
    for label, e0 in (("old", grr_old_eps0(eps_c, n, k)), ("new", shuffling.largest_eps0(eps_c, n, DELTA, "grr", k))):
        e0 = float(np.floor(e0 * 1e4) / 1e4)
        predicted, mse, se = _grr(k, n, e0, probs, prior, trials, seed)
        grr.update({f"grr_eps0_{label}": e0, f"grr_predicted_mse_{label}": predicted,
                    f"grr_simulated_mse_{label}": mse, f"grr_simulated_se_{label}": se})
    grr["grr_method_new"] = shuffling.central_epsilon(grr["grr_eps0_new"], n, DELTA, "grr", k).method
    return {**grr, "k": k, "n": n, "eps_c": eps_c, "delta": DELTA, "prior": prior, "trials": trials,
            "eps0": float(eps0), "eps_c_achieved": central.eps, "method": central.method,
            "shuffled_protocol": shuffled["protocol"], "local_protocol": local["protocol"],
            "shuffled_predicted_mse": shuffled["predicted_mse"], "local_predicted_mse": local["predicted_mse"],
            "shuffled_simulated_mse": s_mse, "shuffled_simulated_se": s_se,
            "local_simulated_mse": l_mse, "local_simulated_se": l_se,
            "ratio_predicted": local["predicted_mse"] / shuffled["predicted_mse"],
            "ratio_simulated": l_mse / s_mse}


def accountant_seconds(eps0, n=100_000, runs=5, protocol=None, k=None):
    """Median seconds of one central_epsilon(eps0, n, DELTA, protocol, k) (not cached; target < 0.1 s)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        shuffling.central_epsilon(eps0, n, DELTA, protocol, k)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=None, help="default: 40 at k <= 64, else 8")
    ap.add_argument("--k", default="16,1024", help="comma-separated domain sizes")
    ap.add_argument("--prior", default="uniform")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    rows, start = [], time.perf_counter()
    print(f"delta {DELTA:g} per epoch, {args.prior} prior; MSE per item (simulated mean, predicted in brackets)\n")
    print("| k | trials | n | eps_c | eps0 (shuffled) | shuffled: protocol, MSE | local at eps_c: protocol, MSE | "
          "ratio simulated (predicted) | GRR eps0 old -> new | GRR MSE old -> new |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in (int(x) for x in args.k.split(",")):
        trials = args.trials or (40 if k <= 64 else 8)
        for n in NS:
            for eps_c in EPS_C:
                r = run(k, n, eps_c, args.prior, trials)
                rows.append(r)
                print(f"| {k} | {trials} | {n:,} | {eps_c:g} | {r['eps0']:.3f} | {r['shuffled_protocol']}, "
                      f"{r['shuffled_simulated_mse']:.3g} ({r['shuffled_predicted_mse']:.3g}) | "
                      f"{r['local_protocol']}, {r['local_simulated_mse']:.3g} ({r['local_predicted_mse']:.3g}) | "
                      f"{r['ratio_simulated']:.3g} ({r['ratio_predicted']:.3g}) | "
                      f"{r['grr_eps0_old']:.3f} -> {r['grr_eps0_new']:.3f} | "
                      f"{r['grr_simulated_mse_old']:.3g} -> {r['grr_simulated_mse_new']:.3g} |", flush=True)
    seconds = time.perf_counter() - start
    print(f"\n{seconds:.0f} s; one central_epsilon at n = 100,000 (uncached, median of 5): "
          + ", ".join(f"eps0 {e:g} {1e3 * accountant_seconds(e):.1f} ms" for e in (0.5, 1, 2, 4, 8))
          + "; GRR k = 256: "
          + ", ".join(f"eps0 {e:g} {1e3 * accountant_seconds(e, protocol='grr', k=256):.1f} ms" for e in (0.5, 2, 8)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"delta": DELTA, "prior": args.prior, "seconds": seconds,
                       "bound": "mss_protocol.shuffling.largest_eps0 (protocol=None: any eps0-LDP randomiser; "
                                "grr_*: protocol='grr', old = without grr-stronger-clone)",
                       "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
