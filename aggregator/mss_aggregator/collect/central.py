"""The central (eps_c, delta) of what a shuffled store's estimate decodes (``mss estimate``
on a store of ``mss aggregate --shuffled``; the accountant is :mod:`mss_protocol.shuffling`),
or, where no central bound is below it, the local guarantee that stands instead.

**n is distinct honest devices.**  The amplification theorems count users, one report each.
A batch of format version 2 (SPEC.md section 12) holds at most one body a device, so its
reports stored are its distinct devices; ``colluding`` of them (``mss shuffle
--assume-colluding``) may be the aggregator's own (compromised boards: the n - 1 attack fills
a batch and subtracts its own bodies), so a batch hides a device among its
``reports - colluding`` honest devices, the target included: eps_b =
``central_epsilon(eps0, reports - colluding, delta, ...)``.  A batch of version 1 counted
reports, not devices: one merged over several epochs (``first_epoch < epoch``) may hold a
device many times and an attacker's boards up to once an epoch each, so it gets no central
bound; one of a single epoch holds one report a device (the shuffler's check).

**The scope's batches compose.**  The scope (``--epoch``, the default one, or
``--all-epochs``) is released in B batches; a device has at most one body in each, but may be
in several (a batch released for epoch e also takes late reports of earlier epochs), so the
release is the B-fold composition of the worst batch's guarantee (``shuffling.compose``:
basic, Kairouz, Oh and Viswanath's, or the worst batch's clones pair composed through its
privacy-loss distribution, whichever is smaller; total delta (B + 1) delta).  The worst batch is
the one with the fewest honest devices, whose pair dominates every other batch's (more clones
are post-processing), so composing its pair B times bounds the scope.

**Regimes: fresh or memoized.**  Composition holds for fresh draws only (``device.memoize``
false: every report an independent eps0-LDP draw).  A memoized body is the same bytes in
every batch: an attacker that intersects two batches in which the other devices re-drew (a
value change, a config switch, a new cohort) finds it and reads it unamplified (measured in
issue 44: SS, k = 256, eps0 = 4, n = 10,000, the body isolated in 98.5% of trials, its value
named 0.060 of the time against 0.0129 the composed bound allowed; tests/test_shuffle_regimes.py).
So for memoized reports (and for an instantaneous layer over a memoized value, whose reports
are all functions of it) a store holding more than one batch states the memoized draw's own
eps (``cfg.eps_effective``: the permanent layer's) with delta 0, for each value a device
reported (docs/privacy.md section 3): post-processing of that one eps-LDP draw, whatever the
batches.  A store of one batch has released the body once: that batch's eps_c holds.  A store
that does not record ``device.memoize`` (an older aggregator) is taken as memoized.

**Never a central figure that is not below the local one.**  When the worst batch has no
bound below eps0 (too few honest devices), or the composition over B batches is not below
B eps0 (basic composition of the device's at most B fresh reports), the local guarantee is
printed instead, as such (``guarantee: "local"``), with why.  "Below" means by at least
MIN_GAIN (1%): a central (eps, delta) a hair under the local eps with delta 0 is no gain.

eps0 is the config's exact worst log-ratio of one report (``report_eps_effective``, with an
instantaneous layer the composed report's; else ``eps_effective``), never above its epsilon;
GRR, SS (one block), OUE, SUE and HR without an instantaneous layer get their protocol's own bound
(``bound_args(*config_bound(cfg))``: their device channels are the ideal ones at eps_effective).
"""
from mss_aggregator.collect.store import SHUFFLER
from mss_protocol.shuffling import bound_args, central_epsilon, compose, config_bound

DELTA = 1e-6  # per batch, mss estimate --delta's default (issue 29)
FRESH, MEMOIZED = "fresh", "memoized"
CENTRAL, LOCAL = "central", "local"
# a central (eps, delta > 0) is stated only when eps is at least this fraction below the local eps (delta 0):
# the accountant's (0.999998, 1e-6) for eps0 = 1 at n = 2 is no gain a reviewer would sign for
MIN_GAIN = 0.01


def eps0_of(cfg):
    """The worst log-ratio of one report of ``cfg``: its eps0-LDP."""
    return float(getattr(cfg, "report_eps_effective", cfg.eps_effective))


def regime_of(store):
    """(regime, why): FRESH when the store records that the boards draw every report afresh,
    else MEMOIZED (recorded, or unknown)."""
    memoized = store.memoized()
    if memoized is False:
        return FRESH, "every report a fresh draw (device.memoize false)"
    layered = getattr(store.cfg, "irr_epsilon", None) is not None
    if memoized is None:
        return MEMOIZED, "the store records no device.memoize (an older aggregator): memoized assumed"
    return MEMOIZED, "device.memoize: a device re-sends one draw a value" + (
        " (the instantaneous layer re-randomises that draw: every report is a function of it)" if layered else "")


def honest_devices(batch):
    """(honest devices, colluding) of a stored batch (epoch, first_epoch, n, reports, colluding):
    its reports less its colluding devices, or None when its devices are unknown (a version 1
    batch merged over several epochs)."""
    epoch, first, _, reports, colluding = batch
    if colluding is None:
        return (reports, 0) if epoch == first else (None, 0)
    return max(reports - colluding, 0), colluding


def batch_guarantee(cfg, devices, delta):
    """The :class:`~mss_protocol.shuffling.Central` of a batch hiding a device among ``devices``
    honest devices (the device included), or None when no bound is below eps0 there."""
    if devices is None or devices < 2:
        return None
    c = central_epsilon(eps0_of(cfg), int(devices), delta, *bound_args(*config_bound(cfg)))
    return None if c.method.startswith("none") or c.eps > (1 - MIN_GAIN) * c.eps0 else c


def guarantee(store, scope, delta=DELTA):
    """The ``central`` document of ``mss estimate --json`` for ``scope`` of a shuffled ``store``,
    or None when the store is not a shuffled one or the scope has no batch:

    ``guarantee`` "central" or "local" (no central bound below the local one: ``eps`` is then
    the local guarantee, delta 0); ``regime`` "fresh" or "memoized" and ``regime_why``; ``eps``,
    ``delta``; ``eps0`` (one report's); ``devices`` the honest devices the worst batch hides a
    device among (its devices less ``colluding``, the most any batch assumes); ``n`` the
    smallest batch's devices; ``method``; ``epochs`` and ``batches`` of the scope;
    ``composition`` (None for one batch); ``per_batch_eps``, ``per_batch_delta`` (the worst
    batch's, None when local); ``why`` (why this guarantee applies)."""
    if store.mode != SHUFFLER:
        return None
    batches = [b for b in store.shuffle_batches(None if scope.pooled or scope.epoch is None else [scope.epoch])
               if b[3]]
    if not batches:
        return None
    cfg, eps0 = store.cfg, eps0_of(store.cfg)
    regime, regime_why = regime_of(store)
    counted = [honest_devices(b) for b in batches]
    known = [d for d, _ in counted if d is not None]
    doc = {"guarantee": CENTRAL, "regime": regime, "regime_why": regime_why, "eps": None, "delta": None,
           "eps0": eps0, "devices": None if len(known) < len(counted) else min(known),
           "n": min(b[3] for b in batches), "colluding": max(c for _, c in counted), "method": None,
           "epochs": len({b[0] for b in batches}), "batches": len(batches), "composition": None,
           "per_batch_eps": None, "per_batch_delta": None, "why": None}
    stored = sum(1 for b in store.shuffle_batches() if b[3])
    if regime == MEMOIZED and stored > 1:
        eps = float(cfg.eps_effective)
        return dict(doc, guarantee=LOCAL, eps=eps, delta=0.0, method="memoized draw (local)", why=(
            f"a memoized body may be in each of the store's {stored} batches, and one that repeats while other "
            f"bodies change is found by intersecting them: its draw's {eps:.4g}-LDP stands, for each value a "
            f"device reported (docs/privacy.md section 5)"))
    per_batch = [batch_guarantee(cfg, d, delta) for d, _ in counted]
    local = len(batches) * eps0
    if any(c is None for c in per_batch):
        worst = ("a batch of an older shuffler merged over several epochs (it counted reports, not devices)"
                 if doc["devices"] is None else
                 f"a batch of {doc['devices']} honest device{'' if doc['devices'] == 1 else 's'}")
        return dict(doc, guarantee=LOCAL, eps=local, delta=0.0, method="local", why=(
            f"no central bound below eps0 for {worst}: {_local_words(len(batches), eps0)}"))
    worst = max(per_batch, key=lambda c: (c.eps, c.delta, -c.n))  # ties: the fewest devices, whose pair dominates
    doc.update(per_batch_eps=worst.eps, per_batch_delta=worst.delta, method=worst.method)
    # fresh draws of other epochs are other releases: this figure is the scope's, and says so
    rest = (f"; of this scope's {len(batches)} of the store's {stored} batches only (fresh draws of the "
            f"others compose with it: --all-epochs)") if stored > len(batches) else ""
    if len(batches) == 1:
        return dict(doc, eps=worst.eps, delta=worst.delta, why=(
            "one batch" + (": the memoized body released once" if regime == MEMOIZED else "") + rest))
    total = compose(worst, len(batches))  # worst.eps0 is eps0; its pair is composed too
    if total.eps > (1 - MIN_GAIN) * local:
        return dict(doc, guarantee=LOCAL, eps=local, delta=0.0, why=(
            f"the composition over {len(batches)} batches ({total.eps:.4g}) is not below the local guarantee: "
            f"{_local_words(len(batches), eps0)}"))
    return dict(doc, eps=total.eps, delta=total.delta, composition=total.method, why=(
        f"fresh draws: the {len(batches)} batches compose (a device has at most one body in each){rest}"))


def _local_words(batches, eps0):
    if batches == 1:
        return f"{eps0:.4g}-LDP per report"
    return f"{batches} x {eps0:.4g} (basic composition of a device's at most {batches} reports, one a batch)"


def line(doc):
    """The guarantee in one line of ``mss estimate``'s text output."""
    assumed = (f"{doc['colluding']} of a batch's devices assumed colluding (mss shuffle --assume-colluding)"
               if doc["colluding"] else "no device assumed colluding (mss shuffle --assume-colluding 0)")
    if doc["guarantee"] == LOCAL:
        return (f"no central guarantee of the shuffled release ({doc['regime']} reports: {doc['regime_why']}); "
                f"the local one stands: {doc['eps']:.4g}-LDP for each device; {doc['why']}; {assumed}")
    head = (f"central guarantee of the shuffled release: ({doc['eps']:.4g}, {doc['delta']:.3g})-DP for each device "
            f"({doc['regime']} reports: {doc['regime_why']}; eps0 {doc['eps0']:.4g} per report); "
            f"smallest batch {doc['n']} devices, {doc['devices']} counted: {assumed}")
    if doc["composition"] is None:
        return head + f"; {doc['why']}; {doc['method']}"
    return (head + f"; {doc['composition']} composition over {doc['batches']} batches ({doc['epochs']} epochs) of "
            f"the worst batch's ({doc['per_batch_eps']:.4g}, {doc['per_batch_delta']:.3g}) ({doc['method']}); "
            f"{doc['why']}")
