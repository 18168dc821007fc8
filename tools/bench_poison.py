"""Attacks, measured (issue 47 item 3): what compromised devices gain against each protocol.

n = 10,000 honest devices hold Zipf(1.1) values (mod k); M = share x n compromised devices are
ADDED to them (n + M reports in all), each sending one crafted report that aims at r = 3 rare target
items (the three least frequent).  The attacks (Cao et al., "Data poisoning attacks to local
differential privacy protocols"):

- ``mga``: the Maximal Gain Attack; each report supports the targets as much as a valid report of
  the protocol can: GRR the point on one target (round robin over the three), the unary encodings
  (OUE "rappor", SUE) exactly the three target bits, OLH a seed (a, b) that hashes the three
  targets to one output y and that y (a board may pick its device id, hence its seed), SS and MSS a block (round robin) and a subset
  holding the targets' residues, filled to its size with other residues;
- ``random-item``: a target picked at random, honestly randomised;
- ``random-output``: a uniformly random valid report (point, k bits, seed and output, block and
  subset);
- ``input-lie``: the baseline no protocol can prevent, each fake device honestly randomising a
  target (round robin over the three).

Crafted reports enter as the counts their decoded reports add (GRR and the unary encodings: the
support counts, SS and MSS: :class:`~mss_protocol.counts.Counts`, a block's reports and the
residues its subset holds, OLH: its ``tally`` of the (a, b, y)), and the estimates are each protocol's own ``estimate``.  The gain is
the largest rise of any one target's estimate against the same honest counts without the crafted
devices (one draw of each attack); ``input_lie`` is the input lie's expected gain, exact since every
estimator here is unbiased: max over targets of (M / 3 - M f_t) / (n + M), so that the ratio
realised / input_lie (Cheu et al.'s measure of manipulation) is not a ratio of two noises; the
certified bound is ``M * shift_per_report(1) / (n + M)``
(:class:`mss_aggregator.estimates.Integrity` over the n + M reports).

Not measured: the attacker who knows the anomaly detector of issue 47 item 4 (no detector exists
yet), and HR and PGR (their crafted supports are Hadamard or grouped sets, not built here).

    .venv/bin/python tools/bench_poison.py            # the full grid (about 9 s on 2 cores)
    .venv/bin/python tools/bench_poison.py --quick    # k 16, eps 2, 1% and 5%
    .venv/bin/python tools/bench_poison.py --write docs/bench-poison.json
"""
import argparse
import json

import numpy as np

from mss_protocol import registry
from mss_protocol.counts import Counts

N = 10_000
R = 3
PROTOCOLS = ("grr", "rappor", "sue", "olh", "ss", "mss")
KS = (16, 256, 1024)
EPSILONS = (1.0, 2.0, 4.0)
SHARES = (0.005, 0.01, 0.02, 0.05)
ATTACKS = ("mga", "random-item", "random-output", "input-lie")
QUICK = {"ks": (16,), "epsilons": (2.0,), "shares": (0.01, 0.05)}


def population(k, seed=11):
    """(values (N,), targets (R,)): Zipf(1.1) mod k, and the R least frequent items."""
    values = np.random.default_rng(seed).zipf(1.1, N) % k
    freq = np.bincount(values, minlength=k)
    return values, np.argsort(freq, kind="stable")[:R]


def is_blocks(proto):
    return hasattr(proto, "cfg") and hasattr(proto.cfg, "moduli")


def add(counts, extra):
    if isinstance(counts, Counts):
        return Counts(counts.cfg, counts.n + extra.n, counts.c + extra.c)
    return counts + extra


def block_counts(cfg, blocks, subsets):
    """Counts of block-subset reports: ``blocks`` (M,), ``subsets`` a list of residue arrays."""
    n_j = np.bincount(blocks, minlength=cfg.l)
    c = np.zeros(cfg.offsets[-1], dtype=np.int64)
    for j, z in zip(blocks, subsets):
        c[cfg.offsets[j] + np.asarray(z)] += 1
    return Counts(cfg, n_j, c)


def crafted(proto, attack, targets, m, rng):
    """The counts the ``m`` crafted reports of ``attack`` add."""
    k = proto.k
    if attack in ("input-lie", "random-item"):
        claims = targets[np.arange(m) % R] if attack == "input-lie" else targets[rng.integers(0, R, m)]
        return proto.sample_counts(claims, rng)
    if is_blocks(proto):
        cfg = proto.cfg
        blocks = np.arange(m) % cfg.l if attack == "mga" else rng.integers(0, cfg.l, m)
        subsets = []
        for i, j in enumerate(blocks):
            mod, omega = cfg.moduli[j], cfg.omegas[j]
            if attack == "random-output":
                subsets.append(rng.choice(mod, omega, replace=False))
                continue
            res = list(dict.fromkeys(int(t) % mod for t in targets))
            res = res[i % len(res):] + res[:i % len(res)]  # rotate when omega holds fewer than all
            fill = [v for v in range(mod) if v not in res][:max(0, omega - len(res))]
            subsets.append((res + fill)[:omega])
        return block_counts(cfg, blocks, subsets)
    if hasattr(proto, "tally"):  # OLH: reports (a, b, y), any seed (a board may pick its device id)
        if attack == "random-output":
            a, b = proto.sample_seeds(m, rng)
            return proto.tally((a, b, rng.integers(0, proto.g, m)))
        a, b = proto.sample_seeds(1 << 20, rng)  # MGA: seeds that hash the three targets together
        h = proto.hash(a[:, None].astype(np.int64), b[:, None].astype(np.int64), targets[None, :].astype(np.int64))
        hit = np.flatnonzero((h == h[:, :1]).all(axis=1))
        hit = np.resize(hit, m)
        return proto.tally((a[hit], b[hit], h[hit, 0]))
    lo, hi = proto.support_sizes()
    if hi == 1:  # GRR: one point
        points = targets[np.arange(m) % R] if attack == "mga" else rng.integers(0, k, m)
        return np.bincount(points, minlength=k)
    if attack == "random-output":  # unary: every bit a fair coin
        return rng.binomial(m, 0.5, size=k)
    support = np.zeros(k, dtype=np.int64)
    support[targets] = m
    return support


def estimate(proto, counts, n):
    return np.asarray(proto.estimate(counts, n)[0])


def cell(name, k, eps, shares, seed=47):
    proto = registry.make(name, k, eps)
    values, targets = population(k)
    honest = proto.sample_counts(values, np.random.default_rng(seed))
    base = estimate(proto, honest, N)[targets]
    shift = float(proto.shift_per_report(1))
    f = np.bincount(values, minlength=k)[targets] / N
    rows = []
    for share in shares:
        m = int(round(share * N))
        lie = float(np.max((m / R - m * f) / (N + m)))  # the input lie's expected gain
        for a, attack in enumerate(ATTACKS):
            rng = np.random.default_rng([seed, k, int(eps * 10), m, a])
            est = estimate(proto, add(honest, crafted(proto, attack, targets, m, rng)), N + m)[targets]
            gain = float(np.max(est - base))
            rows.append({"protocol": name, "k": k, "epsilon": eps, "compromised": share, "attack": attack,
                         "realised": gain, "certified": m * shift / (N + m), "input_lie": lie})
    return rows


def run(ks=KS, epsilons=EPSILONS, shares=SHARES, protocols=PROTOCOLS):
    return [row for name in protocols for k in ks for eps in epsilons for row in cell(name, k, eps, shares)]


def summary(rows):
    """Per protocol and k: the worst ratio of a realised gain to the input-lie gain, and whether
    every realised gain stays under its certified bound."""
    out = {}
    for row in rows:
        key = (row["protocol"], row["k"])
        worst, ok = out.get(key, (0.0, True))
        ratio = row["realised"] / row["input_lie"] if row["input_lie"] > 0 else float("inf")
        out[key] = (max(worst, ratio), ok and row["realised"] <= row["certified"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="k 16, eps 2, 1%% and 5%% compromised")
    ap.add_argument("--write", help="write {\"rows\": [...]} to this JSON file")
    args = ap.parse_args()
    rows = run(**QUICK) if args.quick else run()
    print("| protocol | k | worst gain / input-lie | realised <= certified |")
    print("|---|---|---|---|")
    for (name, k), (worst, ok) in summary(rows).items():
        print(f"| {name} | {k} | {worst:.1f} | {'yes' if ok else 'NO'} |")
    if args.write:
        with open(args.write, "w") as fh:
            json.dump({"rows": rows}, fh, indent=1)
            fh.write("\n")


if __name__ == "__main__":
    main()
