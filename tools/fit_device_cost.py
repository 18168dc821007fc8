#!/usr/bin/env python3
"""Fit and check the planner's device-cost model against tools/bench_mcu.py's measurements.

    python tools/fit_device_cost.py bench_mcu.json [more.json ...] [--isa m0|m3|rv32] [--fit]

For every config measured on the instruction set ``--isa`` (default m0;
grid rows and targets, means: the model is of the expected cost) prints
the model's prediction (:mod:`mss_protocol.device_cost`), measured / model
and the worst ratio per protocol family.  ``--fit`` first refits the
coefficients: non-negative least squares on the relative error, one fit per
family, printed as the ``COEF[isa]`` literal to paste into device_cost.py.
"""
import argparse
import json
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from mss_protocol import device_cost
from mss_protocol.configs import load_dict


def measured(paths, isa="m0"):
    """[(config object, mean instructions on ``isa``)] of every distinct config in the JSON files."""
    seen = {}
    for path in paths:
        data = json.loads(Path(path).read_text())
        for row in data["rows"]:
            fig = row.get(isa) or {}
            if "instr_mean" in fig:
                seen[json.dumps(row["config"], sort_keys=True)] = (row["config"], fig["instr_mean"])
    return [(load_dict(cfg), instr) for cfg, instr in seen.values()]


def fit(points, isa="m0"):
    """{family: {feature: coefficient}} minimising sum ((model - measured) / measured)**2, coefficients >= 0
    (the features of every family are the M0 model's; a family with no point keeps ``isa``'s, else the M0's)."""
    coef = {}
    for family, names in device_cost.COEF["m0"].items():
        rows = [(device_cost.features(c), y) for c, y in points if device_cost.family(c) == family]
        if not rows:
            coef[family] = dict(device_cost.COEF.get(isa, device_cost.COEF["m0"])[family])
            continue
        a = np.array([[f[n] / y for n in names] for f, y in rows])
        x, _ = nnls(a, np.ones(len(rows)))
        coef[family] = {n: float(f"{v:.4g}") for n, v in zip(names, x)}
    return coef


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+")
    ap.add_argument("--isa", choices=device_cost.ISAS, default="m0", help="the instruction set's counts")
    ap.add_argument("--fit", action="store_true", help="refit the coefficients first and print them")
    args = ap.parse_args()
    points = measured(args.json, args.isa)
    if args.fit:
        device_cost.COEF[args.isa] = fit(points, args.isa)
        print(f"COEF[{args.isa!r}] = " + json.dumps(device_cost.COEF[args.isa], indent=4))
    worst = {}
    print(f"{'protocol':8} {'k':>6} {'eps':>4} {'measured':>15} {'model':>15} {'ratio':>6}")
    for cfg, instr in sorted(points, key=lambda p: (p[0].name, p[0].k, p[0].epsilon)):
        model = device_cost.instructions(cfg, args.isa)
        ratio = instr / model if model else float("inf")
        fam = device_cost.family(cfg)
        worst[fam] = max(worst.get(fam, 1.0), ratio, 1 / ratio if ratio else float("inf"))
        print(f"{cfg.name:8} {cfg.k:>6} {cfg.epsilon:>4g} {instr:>15,} {model:>15,.0f} {ratio:>6.2f}")
    print("worst measured/model (or its inverse) per family: "
          + ", ".join(f"{f} {w:.2f}" for f, w in sorted(worst.items())))


if __name__ == "__main__":
    main()
