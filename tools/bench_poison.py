"""Attacks, measured (issue 47 item 3): what compromised devices gain against each protocol.

n = 10,000 honest devices hold Zipf(1.1) values (mod k); M = share x n compromised devices are
ADDED to them (n + M reports in all), each sending one crafted report that aims at r = 3 rare target
items (the three least frequent).  The attacks (Cao et al., "Data poisoning attacks to local
differential privacy protocols"):

- ``mga``: the Maximal Gain Attack; each report supports the targets as much as a valid report of
  the protocol can (the protocol's ``crafted_counts``): GRR the point on one target (round robin
  over the three), the unary encodings (OUE "rappor", SUE) exactly the three target bits, OLH a
  seed (a, b) that hashes the three targets to one output y and that y (a board may pick its
  device id, hence its seed), HR the output (j, 0) of a block holding the most targets (column 0
  supports the whole block), PGR a point on the hyperplanes of as many targets as any point is
  (all three when they span fewer than t dimensions), SS and MSS a block (round robin) and a
  subset holding the targets' residues, filled to its size with other residues;
- ``random-item``: a target picked at random, honestly randomised;
- ``random-output``: a uniformly random valid report (point, k bits, seed and output, block and
  subset; the protocol's ``random_output_counts``);
- ``input-lie``: the baseline no protocol can prevent, each fake device honestly randomising a
  target (round robin over the three).

Crafted reports enter as the counts their decoded reports add (GRR and the unary encodings: the
support counts, HR and PGR: the histogram over their K outputs, SS and MSS:
:class:`~mss_protocol.counts.Counts`, a block's reports and the residues its subset holds, OLH: its
``tally`` of the (a, b, y)), and the estimates are each protocol's own ``estimate``.  The gain is
the largest rise of any one target's estimate against the same honest counts without the crafted
devices (one draw of each attack); ``input_lie`` is the input lie's expected gain, exact since every
estimator here is unbiased: max over targets of (M / 3 - M f_t) / (n + M), so that the ratio
realised / input_lie (Cheu et al.'s measure of manipulation) is not a ratio of two noises; the
certified bound is ``M * shift_per_report(1) / (n + M)``
(:class:`mss_aggregator.estimates.Integrity` over the n + M reports).

- ``detector_aware`` (issue 47 item 4, ``tools/bench_detect.py``): an attacker who knows the
  detector (:mod:`mss_aggregator.integrity.detect`) and its thresholds at the default alpha and stays
  just under them over a 30-epoch campaign: it sends its MGA report in the epochs it can afford and
  the input lie in the others.  Its gain is the campaign's (the pooled estimate moves by the mean of
  the epochs' moves): M x share crafted reports of the MGA and the rest the input lie, the share
  measured by simulating 30 such devices against the tests (:func:`bench_detect.detector_aware_share`).

``--detect`` also measures the detector itself (``tools/bench_detect.py``: true- and false-positive
rates of the MGA, the input lie and the detector-aware attacker at 5% over 30 epochs of fresh reports,
and of the MGA in a memoized fleet), written to the ``detection`` list; without ``--detect`` a
written file keeps the ``detection`` list it had.

Resistance (issue 47 item 5, :func:`resist`): every cell decoded again, and once with no attack,
the plain decoder's errors beside the robust estimate's (:mod:`mss_protocol.robust`), written to
the ``resistance`` list beside ``rows``.

    .venv/bin/python tools/bench_poison.py            # the full grid (about 45 s on 2 cores)
    .venv/bin/python tools/bench_poison.py --quick    # k 16, eps 2, 1% and 5%
    .venv/bin/python tools/bench_poison.py --write docs/bench-poison.json
    .venv/bin/python tools/bench_poison.py --detect --write docs/bench-poison.json  # + detection (~30 min)
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

from mss_protocol import postprocess, registry, robust
from mss_protocol.counts import Counts

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_detect  # noqa: E402  (tools/bench_detect.py, beside this file)

N = 10_000
R = 3
PROTOCOLS = ("grr", "rappor", "sue", "olh", "hr", "pgr", "ss", "mss")
KS = (16, 256, 1024)
EPSILONS = (1.0, 2.0, 4.0)
SHARES = (0.005, 0.01, 0.02, 0.05)
ATTACKS = ("mga", "random-item", "random-output", "input-lie")
QUICK = {"ks": (16,), "epsilons": (2.0,), "shares": (0.01, 0.05)}
MEASURED = ATTACKS + ("detector_aware",)  # the rows' attacks (resistance: ATTACKS)


def population(k, seed=11):
    """(values (N,), targets (R,)): Zipf(1.1) mod k, and the R least frequent items."""
    values = np.random.default_rng(seed).zipf(1.1, N) % k
    freq = np.bincount(values, minlength=k)
    return values, np.argsort(freq, kind="stable")[:R]


def add(counts, extra):
    if isinstance(counts, Counts):
        return Counts(counts.cfg, counts.n + extra.n, counts.c + extra.c)
    return counts + extra


def crafted(proto, attack, targets, m, rng):
    """The counts the ``m`` crafted reports of ``attack`` add."""
    if attack in ("input-lie", "random-item"):
        claims = targets[np.arange(m) % R] if attack == "input-lie" else targets[rng.integers(0, R, m)]
        return proto.sample_counts(claims, rng)
    if attack == "mga":
        return proto.crafted_counts(targets, m, rng)
    if attack == "detector_aware":  # its share of MGA reports, the input lie in the other epochs
        share = bench_detect.detector_aware_share(proto.name, proto.k, proto.epsilon, tuple(int(t) for t in targets))
        mga = int(round(share * m))
        parts = ([proto.crafted_counts(targets, mga, rng)] if mga else []) \
            + ([proto.sample_counts(targets[np.arange(mga, m) % R], rng)] if mga < m else [])
        out = parts[0]
        for part in parts[1:]:
            out = add(out, part)
        return out
    return proto.random_output_counts(m, rng)


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
        for a, attack in enumerate(MEASURED):
            rng = np.random.default_rng([seed, k, int(eps * 10), m, a])
            est = estimate(proto, add(honest, crafted(proto, attack, targets, m, rng)), N + m)[targets]
            gain = float(np.max(est - base))
            rows.append({"protocol": name, "k": k, "epsilon": eps, "compromised": share, "attack": attack,
                         "realised": gain, "certified": m * shift / (N + m), "input_lie": lie})
    return rows


def run(ks=KS, epsilons=EPSILONS, shares=SHARES, protocols=PROTOCOLS):
    return [row for name in protocols for k in ks for eps in epsilons for row in cell(name, k, eps, shares)]


def resist(name, k, eps, shares, seed=47):
    """Resistance (issue 47 item 5): per share and attack, and with no attack at all (``none``: the
    n honest reports alone, the operator still stating the share), the largest absolute error of a
    target item (``plain_error``, ``robust_error``) and the mean absolute error over all k items
    (``plain_mae``, ``robust_mae``) against the honest fleet's frequencies, of the plain decoder and
    of the robust estimate (:func:`mss_protocol.robust.recover` for the share's M crafted reports),
    both projected onto the simplex (the dashboard's view); the same honest and crafted counts as
    :func:`cell`."""
    proto = registry.make(name, k, eps)
    values, targets = population(k)
    honest = proto.sample_counts(values, np.random.default_rng(seed))
    f = np.bincount(values, minlength=k) / N
    rows = []
    for share in shares:
        m = int(round(share * N))
        for a, attack in enumerate(("none",) + ATTACKS):
            if attack == "none":
                counts, n = honest, N
            else:
                rng = np.random.default_rng([seed, k, int(eps * 10), m, a - 1])
                counts, n = add(honest, crafted(proto, attack, targets, m, rng)), N + m
            raw, stderr = (np.asarray(v, float) for v in proto.estimate(counts, n))
            fits = {"plain": postprocess.simplex(raw),
                    "robust": postprocess.simplex(robust.recover(proto, raw, stderr, n, m).raw)}
            row = {"protocol": name, "k": k, "epsilon": eps, "compromised": share, "attack": attack}
            for how, fit in fits.items():
                row[f"{how}_error"] = float(np.max(np.abs(fit[targets] - f[targets])))
                row[f"{how}_mae"] = float(np.mean(np.abs(fit - f)))
            rows.append(row)
    return rows


def resistance(ks=KS, epsilons=EPSILONS, shares=SHARES, protocols=PROTOCOLS):
    return [row for name in protocols for k in ks for eps in epsilons for row in resist(name, k, eps, shares)]


def resistance_summary(rows):
    """Per protocol, attack and share: the median over k and eps of robust / plain target error and
    of robust / plain mean absolute error (< 1: the robust estimate is closer)."""
    groups = {}
    for r in rows:
        key = (r["protocol"], r["attack"], r["compromised"])
        groups.setdefault(key, []).append((r["robust_error"] / max(r["plain_error"], 1e-12),
                                           r["robust_mae"] / max(r["plain_mae"], 1e-12)))
    return {key: tuple(float(np.median(col)) for col in zip(*vals)) for key, vals in groups.items()}


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
    ap.add_argument("--write", help="write {\"rows\": [...], \"resistance\": [...]} to this JSON file")
    ap.add_argument("--detect", action="store_true",
                    help="also measure detection (tools/bench_detect.py; several minutes): the \"detection\" list")
    args = ap.parse_args()
    rows = run(**QUICK) if args.quick else run()
    print("| protocol | k | worst gain / input-lie | realised <= certified |")
    print("|---|---|---|---|")
    for (name, k), (worst, ok) in summary(rows).items():
        print(f"| {name} | {k} | {worst:.1f} | {'yes' if ok else 'NO'} |")
    resisted = resistance(**QUICK) if args.quick else resistance()
    print("\n| protocol | attack | compromised | robust / plain target error | robust / plain MAE |")
    print("|---|---|---|---|---|")
    for (name, attack, share), (err, mae) in resistance_summary(resisted).items():
        print(f"| {name} | {attack} | {share:.1%} | {err:.2f} | {mae:.2f} |")
    detection = None
    if args.detect:
        grid = QUICK if args.quick else {"ks": KS, "epsilons": EPSILONS}
        print("\n| protocol | k | eps | attack | reports | tpr | fpr |")
        print("|---|---|---|---|---|---|---|")
        detection = bench_detect.run(PROTOCOLS, grid["ks"], grid["epsilons"], progress=lambda rows: [print(
            f"| {r['protocol']} | {r['k']} | {r['epsilon']:g} | {r['attack']} | {r['reports']} | {r['tpr']:.3f} | "
            f"{r['fpr']:.4f} |", flush=True) for r in rows])
    elif args.write and Path(args.write).exists():
        detection = json.loads(Path(args.write).read_text()).get("detection")
    if args.write:
        with open(args.write, "w") as fh:
            json.dump({"rows": rows, "resistance": resisted, **({} if detection is None else {"detection": detection})},
                      fh, indent=1)
            fh.write("\n")


if __name__ == "__main__":
    main()
