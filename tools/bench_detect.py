"""Detection, measured (issue 47 item 4): the per-device and population tests of
:mod:`mss_aggregator.integrity.detect` on simulated fleets, for ``tools/bench_poison.py --detect``.

A fleet of ``N_DETECT`` = 2,000 honest devices holds Zipf(1.1) values (mod k; the population of
``bench_poison``: its three least frequent items are the targets) and sends a fresh report every epoch
for ``EPOCHS`` = 30 epochs; ``SHARE`` = 5% more devices (100) are compromised and send, every epoch:

- ``mga``: the Maximal Gain Attack report (the protocol's ``crafted_counts`` of one report, its
  support by the protocol's ``support``), the same each epoch: device d aims at the targets rotated
  by d mod 3 (GRR: one target each, round robin; MSS: block 0, the first report of the rotation);
- ``input-lie``: an honest report of target d mod 3 (what no test of reports can see);
- ``detector_aware``: an attacker who knows the tests and their thresholds at the operator's alpha
  (it reads docs/privacy.md) and stays just under them: each epoch it sends its crafted report when
  its statistics with it stay below every threshold (one-item t1, two-items t2 and the population
  count s) with a margin for the honest reports still to come (their mean plus 2 sd at the worst
  honest rates), else an honest report of its target (the input lie), redrawn, up to 20 times,
  until they stay below.  Where a report's size is tested (the unary encodings) its crafted report is an honest
  report of its target with the targets' bits set and as many other set bits cleared, so its size
  has the honest law.  Its share of crafted reports, :func:`detector_aware_share`, is what
  ``bench_poison``'s ``detector_aware`` rows feed the estimate;
- ``mga`` in a memoized fleet (``reports`` "memoized"): every device resends one report all
  campaign, the crafted one the MGA report, so each device has one distinct report to test.

Each row: protocol, k, epsilon, compromised (0.05), attack, epochs, reports ("fresh" or
"memoized"), tpr (compromised devices flagged), fpr (honest devices flagged), alpha (0.01).
"""
from functools import lru_cache

import numpy as np

from mss_aggregator.integrity.detect import DEFAULT_ALPHA, DeviceTest, scan
from mss_protocol import registry

N_DETECT = 2_000
EPOCHS = 30
SHARE = 0.05
R = 3
TRIES = 20  # fallback reports the detector-aware attacker draws before it sends the last anyway
ATTACKS = ("mga", "input-lie", "detector_aware")


def population(k, n=N_DETECT, seed=11):
    """(values (n,), targets (R,)): Zipf(1.1) mod k and the R least frequent items."""
    values = np.random.default_rng(seed).zipf(1.1, n) % k
    return values, np.argsort(np.bincount(values, minlength=k), kind="stable")[:R]


def honest_supports(proto, values, epochs, rng):
    """bool (n, epochs, k): every device's fresh honest report each epoch (values held fixed)."""
    return np.stack([proto.sample_supports(values, rng) for _ in range(epochs)], axis=1)


def mga_pool(proto, targets, rng):
    """R supports (k,) of one Maximal Gain Attack report each, aimed at the targets rotated by i."""
    return [np.asarray(proto.support(proto.crafted_counts(np.roll(targets, i), 1, rng))) > 0 for i in range(R)]


def padded(proto, mga, target, rng):
    """A crafted unary report of honest size: an honest report of ``target`` with ``mga``'s bits set and
    as many other set bits cleared (where there are enough)."""
    honest = proto.sample_supports(np.array([target]), rng)[0]
    out = honest | mga
    spare = np.flatnonzero(out & ~mga)
    extra = int(out.sum() - honest.sum())
    if extra > 0 and spare.size:
        out[rng.choice(spare, min(extra, spare.size), replace=False)] = False
    return out


def detector_aware_supports(proto, targets, devices, epochs, rng, alpha=DEFAULT_ALPHA):
    """(bool (devices, epochs, k) supports, bool (devices, epochs) crafted) of detector-aware devices."""
    test = DeviceTest(proto, alpha)
    th = test.thresholds(epochs)
    limit2 = min(th["two-items"], th.get("population", th["two-items"]))
    pool = mga_pool(proto, targets, rng)
    sized = proto.support_size_law() is not None
    out = np.zeros((devices, epochs, proto.k), dtype=bool)
    crafted = np.zeros((devices, epochs), dtype=bool)

    rho1, rho2 = test.rho1, test.rho2

    def under(h, margin=True):
        """Its statistics with ``h`` stay below the thresholds, and (``margin``) still will after the
        remaining epochs' honest reports, each supporting an item at most at rate rho1 and a pair at
        rho2 (their mean plus 2 sd): the attacker spends only what it can keep."""
        rest = epochs - len(h)
        m1 = rest * rho1 + 2 * np.sqrt(rest * rho1 * (1 - rho1)) if margin else 0.0
        m2 = rest * rho2 + 2 * np.sqrt(rest * rho2 * (1 - rho2)) if margin else 0.0
        stat = test.statistics(h[None])
        return stat["one-item"][0] + m1 < th["one-item"] and stat["two-items"][0] + m2 < limit2

    for d in range(devices):
        target = int(targets[d % R])
        for e in range(epochs):
            report = padded(proto, pool[d % R], target, rng) if sized else pool[d % R]
            out[d, e] = report
            if under(out[d, :e + 1]):
                crafted[d, e] = True
                continue
            for report in proto.sample_supports(np.full(TRIES, target), rng):
                out[d, e] = report
                if under(out[d, :e + 1], margin=False):
                    break
    return out, crafted


@lru_cache(maxsize=None)
def detector_aware_share(name, k, epsilon, targets, devices=30, seed=47):
    """The share of crafted reports among a detector-aware attacker's aiming at ``targets`` (a tuple;
    ``devices`` simulated over ``EPOCHS``), for ``bench_poison``'s gain of the ``detector_aware`` attack."""
    proto = registry.make(name, k, epsilon)
    targets = np.asarray(targets)
    rng = np.random.default_rng([seed, k, int(epsilon * 10), 1])
    return float(detector_aware_supports(proto, targets, devices, EPOCHS, rng)[1].mean())


def rates(proto, honest, fakes, memoized=False, alpha=DEFAULT_ALPHA):
    """(tpr, fpr) of :func:`scan` over honest (n, E, k) and compromised (m, E, k) devices."""
    devices = [(("h", i), s) for i, s in enumerate(honest)] + [(("c", i), s) for i, s in enumerate(fakes)]
    flagged = scan(proto, devices, alpha=alpha, memoized=memoized).flagged
    tp = sum(1 for kind, _ in flagged if kind == "c")
    return tp / len(fakes), (len(flagged) - tp) / len(honest)


def cell(name, k, eps, seed=47, n=N_DETECT, epochs=EPOCHS):
    proto = registry.make(name, k, eps)
    values, targets = population(k, n)
    rng = np.random.default_rng([seed, k, int(eps * 10), 2])
    honest = honest_supports(proto, values, epochs, rng)
    m = int(round(SHARE * n))
    pool = mga_pool(proto, targets, rng)
    claims = targets[np.arange(m) % R]
    fleets = {
        "mga": np.stack([np.repeat(pool[d % R][None], epochs, 0) for d in range(m)]),
        "input-lie": honest_supports(proto, claims, epochs, rng),
        "detector_aware": detector_aware_supports(proto, targets, m, epochs, rng)[0],
    }
    base = {"protocol": name, "k": k, "epsilon": eps, "compromised": SHARE, "epochs": epochs,
            "alpha": DEFAULT_ALPHA}
    rows = []
    for attack in ATTACKS:
        tpr, fpr = rates(proto, honest, fleets[attack])
        rows.append({**base, "attack": attack, "reports": "fresh", "tpr": tpr, "fpr": fpr})
    memo = np.repeat(honest[:, :1], epochs, axis=1)  # each honest device's first report, resent
    tpr, fpr = rates(proto, memo, fleets["mga"], memoized=True)
    rows.append({**base, "attack": "mga", "reports": "memoized", "tpr": tpr, "fpr": fpr})
    return rows


def run(protocols, ks, epsilons, progress=None):
    rows = []
    for name in protocols:
        for k in ks:
            for eps in epsilons:
                rows.extend(cell(name, k, eps))
                if progress:
                    progress(rows[-4:])
    return rows
