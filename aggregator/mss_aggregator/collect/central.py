"""The central (eps_c, delta) of what a shuffled store's estimate decodes (``mss estimate``
on a store of ``mss aggregate --shuffled``; the accountant is :mod:`mss_protocol.shuffling`).

One release epoch e (``--epoch``, or the default scope): the shuffler released e's reports in
one or more batches, each device's report of an epoch in exactly one of them, so the release
is the parallel composition of its batches and its guarantee the worst batch's.  A batch of
n reports (those stored: a body that did not decode is no part of the blanket, see
:mod:`.shuffled`) of eps0-LDP randomisers is (eps_b, delta)-DP with eps_b =
``central_epsilon(eps0, n, delta, protocol, k)``; the accountant's eps_b falls as n grows, so
the worst batch is the smallest.

A batch merged over campaign epochs first_epoch..e (held because it was smaller than the
shuffler's ``--min-batch``) may hold r = e - first_epoch + 1 reports of one device, one per
campaign epoch: group privacy over those r reports (neighbouring inputs D_0, ..., D_r that
change one report at a time, each step (eps_b, delta)) gives

    Pr[M(D_0) in S] <= e^(r eps_b) Pr[M(D_r) in S] + delta (1 + e^eps_b + ... + e^((r-1) eps_b)),

(Dwork and Roth, "The Algorithmic Foundations of Differential Privacy", 2014, Theorem 2.2
and its (eps, delta) form, unrolled), and never more than r eps0 with delta 0 (basic
composition of the device's r eps0-LDP reports).

Several release epochs (``--all-epochs``): each epoch's release is at worst (eps_w, delta_w),
the worst epoch's, and a device reports in each: ``shuffling.compose`` of that guarantee over
the E epochs (basic or Kairouz, Oh and Viswanath's composition, whichever is smaller; total
delta (E + 1) delta_w).  For memoized reports this is an upper bound (docs/privacy.md,
section 5).

eps0 is the config's exact worst log-ratio of one report (``report_eps_effective``, with an
instantaneous layer the composed report's; else ``eps_effective``), never above its epsilon;
GRR without an instantaneous layer gets the accountant's k-ary randomised response bound.
"""
import math

from mss_aggregator.collect.store import SHUFFLER
from mss_protocol.shuffling import Central, bound_args, central_epsilon, compose

DELTA = 1e-6  # per epoch, mss estimate --delta's default (issue 29)


def eps0_of(cfg):
    """The worst log-ratio of one report of ``cfg``: its eps0-LDP."""
    return float(getattr(cfg, "report_eps_effective", cfg.eps_effective))


def batch_guarantee(cfg, reports, span, delta):
    """(eps, delta, method) of one batch of ``reports`` reports covering ``span`` campaign epochs."""
    eps0 = eps0_of(cfg)
    layered = getattr(cfg, "irr_epsilon", None) is not None
    c = central_epsilon(eps0, int(reports), delta, *bound_args(cfg.name, cfg.k, layered))
    if span == 1:
        return c.eps, c.delta, c.method
    eps, grouped = span * c.eps, c.delta * sum(math.exp(i * c.eps) for i in range(span))
    if eps >= span * eps0 or grouped >= 1:
        return span * eps0, 0.0, f"basic composition of {span} eps0-LDP reports (a batch merged over {span} epochs)"
    return eps, grouped, f"{c.method}, group privacy over {span} reports (a batch merged over {span} epochs)"


def epoch_guarantee(cfg, batches, delta):
    """The :class:`~mss_protocol.shuffling.Central` of one release epoch from its ``batches``
    [(epoch, first_epoch, n, reports)]: the worst of its batches' (parallel composition),
    ``n`` the smallest batch's reports."""
    eps, d, method = max((batch_guarantee(cfg, reports, epoch - first + 1, delta)
                          for epoch, first, _, reports in batches), key=lambda g: (g[0], g[1]))
    return Central(eps, d, min(b[3] for b in batches), eps0_of(cfg), method)


def guarantee(store, scope, delta=DELTA):
    """The ``central`` document of ``mss estimate --json`` for ``scope`` of a shuffled ``store``
    ({eps, delta, n, eps0, method, epochs, composition, per_epoch_eps, per_epoch_delta}: the
    total, the smallest batch, the bound, the release epochs, the composition over them or None
    for one, and the worst epoch's guarantee), or None when the store is not a shuffled one or
    the scope has no batch."""
    if store.mode != SHUFFLER:
        return None
    batches = store.shuffle_batches(None if scope.pooled or scope.epoch is None else [scope.epoch])
    by_epoch = {}
    for b in batches:
        if b[3]:
            by_epoch.setdefault(b[0], []).append(b)
    if not by_epoch:
        return None
    per_epoch = [epoch_guarantee(store.cfg, bs, delta) for bs in by_epoch.values()]
    worst = max(per_epoch, key=lambda c: (c.eps, c.delta))
    n = min(c.n for c in per_epoch)
    doc = {"eps": worst.eps, "delta": worst.delta, "n": n, "eps0": worst.eps0, "method": worst.method,
           "epochs": len(per_epoch), "composition": None, "per_epoch_eps": worst.eps,
           "per_epoch_delta": worst.delta}
    if len(per_epoch) > 1:
        total = compose(Central(worst.eps, worst.delta, n, worst.eps0, worst.method), len(per_epoch))
        doc.update(eps=total.eps, delta=total.delta, composition=total.method)
    return doc


def line(doc):
    """The guarantee in one line of ``mss estimate``'s text output."""
    head = (f"central guarantee of the shuffled release: ({doc['eps']:.4g}, {doc['delta']:.3g})-DP for each device "
            f"(eps0 {doc['eps0']:.4g} per report)")
    if doc["composition"] is None:
        return head + f"; smallest batch {doc['n']} reports; {doc['method']}"
    return (head + f"; {doc['composition']} composition over {doc['epochs']} epochs of the worst epoch's "
            f"({doc['per_epoch_eps']:.4g}, {doc['per_epoch_delta']:.3g}) (smallest batch {doc['n']} "
            f"reports; {doc['method']})")
