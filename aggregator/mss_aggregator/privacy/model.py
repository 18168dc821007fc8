"""The attacker's model of a protocol or of one config, shared by the audit
(:mod:`.audit`, ``mss audit``), the loss over a campaign (:mod:`.over_time`,
``mss plan``) and the learned attacker (:mod:`.learned`).

:func:`channel` and :func:`prr_channel` give the attacker's view of protocol
``name`` (the planner's parameters, or a config's own), :func:`device_seed_of`
whether a device keeps one hash seed for all its draws, and
:func:`horizon_figures` the Bayes attacker's success after each number of
reports, against the epsilon-LDP ceiling at the epsilon spent.
"""
from dataclasses import dataclass

import numpy as np

from mss_aggregator.privacy import attacks, ceilings
from mss_protocol import registry
from mss_protocol.config_file import make_checked

MAX_DRAWS = 1000  # fresh draws simulated per device; beyond, the success shown is a lower bound


def configures(cfg, name):
    """Whether ``cfg`` (or None) is a config of protocol ``name`` (``Protocol.configures``)."""
    return cfg is not None and registry.from_config(cfg).configures(name)


def channel(name, k, epsilon, cfg=None):
    """The attacker's view of protocol ``name`` (:mod:`mss_protocol.channel`);
    ``cfg``: audit this configuration (of ``name``, or an MSS one for mss)
    instead of the planner's."""
    if configures(cfg, name):
        return registry.from_config(cfg, name).channel()
    return make_checked(name, k, epsilon).channel()


def prr_channel(name, k, epsilon, cfg=None):
    """(the permanent draw's channel, :class:`~.attacks.Irr` or None): the protocol
    without its instantaneous layer, and the layer, for a config that has one."""
    if configures(cfg, name):
        proto = registry.from_config(cfg, name)
    else:
        proto = make_checked(name, k, epsilon)
    layer = getattr(proto, "irr", None)
    if layer is None:
        return proto.channel(), None
    return proto.prr.channel(), attacks.Irr(layer.n, layer.threshold)


def device_seed_of(name, cfg):
    """olh configured with ``seed: device``: one hash seed for all of a device's draws."""
    return configures(cfg, name) and getattr(cfg, "seed", "epoch") == "device"  # only a seeded protocol's config has one


@dataclass(frozen=True)
class Drawing:
    """How a device draws its reports, as the attacker models it.

    Parameters
    ----------
    draw_eps : float
        The epsilon one fresh draw spends.
    memoize : bool
        One draw per value, reported again while the value holds.
    irr : attacks.Irr or None
        The instantaneous layer over the permanent draw (None: none).
    draws, window : int, float or None
        A budget of ``draws`` fresh draws per ``window`` epochs (None: no budget).
    device_seed : bool
        One hash seed for all of a device's draws (:func:`device_seed_of`).
    """
    draw_eps: float
    memoize: bool = False
    irr: object = None
    draws: int = None
    window: float = None
    device_seed: bool = False


def horizon_figures(ch, prior, reports, drawing, trials, seed, max_draws):
    """Per horizon of ``reports`` report counts: fresh draws, epsilon spent, the
    attacker's success (simulated up to ``max_draws`` fresh draws), ceiling, verdict,
    for a device drawing as ``drawing`` says (:class:`Drawing`).

    Each horizon's ``bound`` is the tightest exact upper bound on the true success:
    the ceiling at the epsilon spent, and for one draw the ``limit``, the exact success
    of an attacker who knows the draw (``ch.bayes_exact``: with an instantaneous layer,
    what any number of its reports tends to, T -> infinity; without one, the figure
    itself).  A simulated success is :func:`.attacks.bounded_rate` against it:
    ``success`` (at most ``bound``, ``capped`` if lowered), ``ci`` (the measurement's
    95% interval), ``measured``, ``conflict``, ``hits`` (None where exact)."""
    memoize, irr, draw_eps = drawing.memoize, drawing.irr, drawing.draw_eps
    no_info = ceilings.no_information(prior)
    fresh = attacks.schedule(max(reports), memoize, drawing.draws, drawing.window)
    cum = np.cumsum(fresh)
    n_draws = [int(cum[r - 1]) for r in reports]
    one = ch.bayes_exact(prior) if 1 in n_draws else None  # with a layer: the limit of one draw's reports
    exact = [n == 1 and one is not None and irr is None for n in n_draws]  # one draw, no layer: exact
    # past max_draws fresh draws: simulate up to the report of the max_draws-th draw only
    cut = int(np.searchsorted(cum, max_draws) + 1) if cum[-1] > max_draws else None
    sim = [min(r, cut) if cut else r for r in reports]
    spent = [n * draw_eps for n in n_draws]
    ceiling = [ceilings.ldp_prior(prior, e) for e in spent]
    limit = [float(one) if n == 1 and one is not None else None for n in n_draws]
    bound = [c if lim is None else min(c, lim) for c, lim in zip(ceiling, limit)]
    by_t = {}
    if not all(exact):
        reporting = attacks.Reporting(memoize=memoize, irr=irr, fresh=fresh, device_seed=drawing.device_seed)
        hits = attacks.longitudinal(ch=ch, prior=prior, horizons=sim, trials=trials, seed=seed, reporting=reporting)
        by_t = dict(zip(sorted(set(sim)), (int(h) for h in hits)))
    figs = []
    for i, t in enumerate(sim):
        if exact[i]:
            figs.append({"success": float(one), "ci": [float(one)] * 2, "measured": None, "capped": False,
                         "conflict": False, "hits": None})
        else:
            figs.append(dict(attacks.bounded_rate(by_t[t], trials, bound[i]), hits=by_t[t]))
    success = [f["success"] for f in figs]
    return {"fresh_draws": n_draws, "epsilon_spent": spent, "success": success, "ci": [f["ci"] for f in figs],
            "measured": [f["measured"] for f in figs], "capped": [f["capped"] for f in figs],
            "conflict": [f["conflict"] for f in figs], "hits": [f["hits"] for f in figs], "exact": exact,
            "simulated_reports": sim, "lower_bound": [s < r for s, r in zip(sim, reports)],
            "ceiling": ceiling, "limit": limit, "bound": bound,
            "strength": [ceilings.strength(x, no_info) for x in success]}
