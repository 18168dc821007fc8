#!/usr/bin/env python3
"""Shuffled against pure local, and each protocol's eps0 under the accountant before and after issue 45.

For n devices a shuffled batch (one report each) and a central (eps_c, delta = 1e-6) per epoch:

* Shuffled against pure local: auto's plan, ``mss plan --central-epsilon eps_c --shuffle-n n``, OLH
  left out (its seed names the device), against the pure-local plan, auto's choice at epsilon = eps_c.
  Today (``new``) auto plans each protocol at the largest eps0 its own bound allows
  (mss_protocol.choose.central_eps0) and ranks them; before issue 45 (``old``) it planned every
  protocol at eps0 = largest_eps0(eps_c, n, delta) under OLD_ACCOUNTANT (any eps0-LDP randomiser:
  Feldman, McMillan, Talwar, FOCS 2021), i.e. ``mss plan --epsilon E --shuffle-n n``.
* Each protocol the plan offers under a shuffler (PLANNED): ``mss plan --protocol P --central-epsilon
  eps_c --shuffle-n n`` planned by the library (mss_aggregator.plan.plan) under the accountant of today
  (``new``), beside the same request under the accountant before issue 45 (``old``: OLD_ACCOUNTANT,
  Feldman, McMillan and Talwar's bounds alone, i.e. shuffling.central_epsilon with protocol=None, the
  plan at ``mss plan --protocol P --epsilon E --shuffle-n n`` with E that accountant's largest eps0).
  GRR, OUE (rappor), SUE, SS and HR are planned at their own bound (SS and HR at the size, w or b,
  planned at each trial eps0); MSS and PGR have only the generic bound.

Every plan is simulated (the project's mss_aggregator.compare.simulate: draw n values from the prior,
run the protocol's channel, decode, MSE per item against the empirical frequencies) over a few seeded
trials, the same populations for every plan of a row, beside the predicted MSE.

Trials: by default 40 at k <= 64 and 8 above, so that the simulated MSE's relative standard error,
about sqrt(2 / (k trials)) (a mean of k trials' squared errors per item), is below 6%.

Usage: python tools/bench_shuffle.py [--trials T] [--k 16,1024] [--json docs/bench-shuffle.json]
"""
import argparse
import json
import math
import statistics
import time

import numpy as np

from mss_aggregator.compare.simulate import simulate
from mss_aggregator.distributions import parse
from mss_aggregator.plan import PlanRequest, Question, Shuffling, plan
from mss_protocol import registry, shuffling
from mss_protocol.choose import Question, choose
from mss_protocol.configs import load_dict

NS = (1_000, 10_000, 100_000)
EPS_C = (0.5, 1.0, 2.0)
DELTA = 1e-6
PLANNED = ("grr", "ss", "rappor", "sue", "hr", "mss", "pgr")  # mss plan --protocol under a shuffler (not olh)
OLD_ACCOUNTANT = dict(protocol=None, k=None, size=None)  # before issue 45: Feldman et al.'s bounds for any randomiser


def _simulated(config, probs, n, trials, seed):
    """(mean, standard error of the mean) of the per-item MSE of a plan's ``config`` over ``trials``."""
    proto = registry.from_config(load_dict(config))
    mse = simulate(proto, probs, n, trials, seed).mse
    return float(mse.mean()), float(mse.std(ddof=1) / np.sqrt(trials))


def old_eps0(eps_c, n):
    """The eps0 ``mss plan --central-epsilon eps_c --shuffle-n n`` planned before issue 45 for every
    protocol: OLD_ACCOUNTANT's largest eps0, rounded down to 4 decimals as the plan rounds it."""
    return math.floor(shuffling.largest_eps0(eps_c, n, DELTA, **OLD_ACCOUNTANT) * 1e4) / 1e4


def _planned(request, probs, trials, seed):
    """A plan's eps0, its central figure, predicted and simulated MSE (and its standard error)."""
    d = plan(request).to_dict()
    mse, se = _simulated(d["config"], probs, request.shuffle.n, trials, seed)
    return d, {"eps0": d["epsilon"], "protocol": d["protocol"], "eps_c": d["shuffle"]["eps_c"],
               "method": d["shuffle"]["method"], "predicted_mse": d["predicted_mse"],
               "simulated_mse": mse, "simulated_se": se}


def protocol_row(k, n, eps_c, name, prior, trials, seed):
    """``name`` planned by the library at eps_c under today's accountant and the old one."""
    probs = parse(prior, k)
    question = Question(prior=prior)
    new_d, new = _planned(PlanRequest(k, protocol=name, question=question, shuffle=Shuffling(n, DELTA, eps_c)),
                          probs, trials, seed)
    old_e = old_eps0(eps_c, n)
    old = new if new["eps0"] == old_e else _planned(
        PlanRequest(k, old_e, protocol=name, question=question, shuffle=Shuffling(n, DELTA)), probs, trials, seed)[1]
    row = {"k": k, "n": n, "eps_c": eps_c, "delta": DELTA, "prior": prior, "trials": trials, "protocol": name,
           **{f"{key}_old": v for key, v in old.items()}, **{f"{key}_new": v for key, v in new.items()}}
    cfg_name, _, _, size = shuffling.config_bound(load_dict(new_d["config"]))
    if cfg_name in shuffling.SIZED and size is not None:  # the size its own bound was evaluated at
        row["own_size"] = size
    return row


def local_row(k, n, eps_c, prior, trials, seed):
    """Auto's shuffled plan (today's, and before issue 45 at the generic eps0) against the pure-local plan
    at epsilon = eps_c."""
    probs = parse(prior, k)
    request = PlanRequest(k, protocol="auto", question=Question(prior=prior), shuffle=Shuffling(n, DELTA, eps_c))
    _, s = _planned(request, probs, trials, seed)
    old = PlanRequest(k, old_eps0(eps_c, n), protocol="auto", question=Question(prior=prior),
                      shuffle=Shuffling(n, DELTA))
    _, o = _planned(old, probs, trials, seed)
    local = choose(k, eps_c, "auto",
                   question=Question(n=n, prior=None if prior == "uniform" else probs, prior_label=prior))
    l_mse, l_se = _simulated(local["config"], probs, n, trials, seed)
    return {"k": k, "n": n, "eps_c": eps_c, "delta": DELTA, "prior": prior, "trials": trials,
            "eps0": s["eps0"], "eps_c_achieved": s["eps_c"], "method": s["method"],
            "shuffled_protocol": s["protocol"], "local_protocol": local["protocol"],
            "shuffled_predicted_mse": s["predicted_mse"], "local_predicted_mse": local["predicted_mse"],
            "shuffled_simulated_mse": s["simulated_mse"], "shuffled_simulated_se": s["simulated_se"],
            "local_simulated_mse": l_mse, "local_simulated_se": l_se,
            "ratio_predicted": local["predicted_mse"] / s["predicted_mse"],
            "ratio_simulated": l_mse / s["simulated_mse"],
            **{f"{key}_old": o[key] for key in ("eps0", "protocol", "eps_c", "method", "predicted_mse",
                                                 "simulated_mse", "simulated_se")},
            "ratio_predicted_old": local["predicted_mse"] / o["predicted_mse"],
            "ratio_simulated_old": l_mse / o["simulated_mse"]}


def accountant_seconds(eps0, n=100_000, runs=5, protocol=None, k=None):
    """Median seconds of one central_epsilon(eps0, n, DELTA, protocol, k) (not cached; target < 0.1 s)."""
    times = []
    for run in range(runs):
        start = time.perf_counter()
        shuffling.central_epsilon(eps0 + run * 1e-9, n, DELTA, protocol, k)  # a new eps0 each run: not the cache's
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _cell(r):
    """A protocol's cell: eps0 old -> new, simulated MSE old -> new."""
    if r["eps0_old"] == r["eps0_new"]:
        return f"{r['eps0_new']:.3f}; {r['simulated_mse_new']:.3g}"
    return (f"{r['eps0_old']:.3f} -> {r['eps0_new']:.3f}; "
            f"{r['simulated_mse_old']:.3g} -> {r['simulated_mse_new']:.3g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=None, help="default: 40 at k <= 64, else 8")
    ap.add_argument("--k", default="16,1024", help="comma-separated domain sizes")
    ap.add_argument("--prior", default="uniform")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    rows, protocols, start = [], [], time.perf_counter()
    print(f"delta {DELTA:g} per epoch, {args.prior} prior; MSE per item (simulated mean, predicted in brackets)\n")
    print("| k | trials | n | eps_c | shuffled old: eps0, protocol, MSE | shuffled new: eps0, protocol, MSE | "
          "local at eps_c: protocol, MSE | ratio old | ratio new, simulated (predicted) |")
    print("|---|---|---|---|---|---|---|---|---|")
    grid = [(int(k), n, eps_c) for k in args.k.split(",") for n in NS for eps_c in EPS_C]
    for k, n, eps_c in grid:
        trials = args.trials or (40 if k <= 64 else 8)
        seed = [k, n, int(eps_c * 10)]  # the same populations for every plan of a row
        r = local_row(k, n, eps_c, args.prior, trials, seed)
        rows.append(r)
        print(f"| {k} | {trials} | {n:,} | {eps_c:g} | {r['eps0_old']:.3f}, {r['protocol_old']}, "
              f"{r['simulated_mse_old']:.3g} ({r['predicted_mse_old']:.3g}) | {r['eps0']:.3f}, "
              f"{r['shuffled_protocol']}, {r['shuffled_simulated_mse']:.3g} ({r['shuffled_predicted_mse']:.3g}) | "
              f"{r['local_protocol']}, {r['local_simulated_mse']:.3g} ({r['local_predicted_mse']:.3g}) | "
              f"{r['ratio_simulated_old']:.3g} ({r['ratio_predicted_old']:.3g}) | "
              f"{r['ratio_simulated']:.3g} ({r['ratio_predicted']:.3g}) |", flush=True)
    print("\neps0 old -> new; simulated MSE old -> new (every protocol at its own bound; SS and HR at the size "
          "planned at each trial eps0)\n")
    print("| k | n | eps_c | " + " | ".join(PLANNED) + " |")
    print("|---|---|---|" + "---|" * len(PLANNED))
    for k, n, eps_c in grid:
        trials = args.trials or (40 if k <= 64 else 8)
        seed = [k, n, int(eps_c * 10)]
        cells = [protocol_row(k, n, eps_c, name, args.prior, trials, seed) for name in PLANNED]
        protocols += cells
        print(f"| {k} | {n:,} | {eps_c:g} | " + " | ".join(_cell(c) for c in cells) + " |", flush=True)
    seconds = time.perf_counter() - start
    print(f"\n{seconds:.0f} s; one central_epsilon at n = 100,000 (uncached, median of 5): "
          + ", ".join(f"eps0 {e:g} {1e3 * accountant_seconds(e):.1f} ms" for e in (0.5, 1, 2, 4, 8))
          + "; GRR k = 256: "
          + ", ".join(f"eps0 {e:g} {1e3 * accountant_seconds(e, protocol='grr', k=256):.1f} ms" for e in (0.5, 2, 8)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"delta": DELTA, "prior": args.prior, "seconds": seconds,
                       "bound": "rows: auto as mss plan --central-epsilon plans it (each protocol at its own "
                                "bound), *_old at mss_protocol.shuffling.largest_eps0 with protocol=None (any eps0-LDP "
                                "randomiser); protocols: mss_aggregator.plan.plan of each protocol at the central "
                                "epsilon, *_new today, *_old at the accountant before issue 45 (protocol=None)",
                       "rows": rows, "protocols": protocols}, fh, indent=1)


if __name__ == "__main__":
    main()
