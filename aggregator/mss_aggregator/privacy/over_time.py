"""A device's privacy loss over a campaign, before it is deployed (``mss plan``).

:func:`over_time` answers, for one config reporting every ``period_s``
seconds, the question of docs/privacy.md section 3 at three horizons (a day,
30 days, the campaign): how much epsilon a device spends and how likely the
Bayes-optimal attacker is to recover a **stable** value from everything it
sent, beside the epsilon-LDP ceiling at that epsilon.  Three ways of
reporting are compared:

``fresh``
    every report a fresh draw (no memo, no budget; with an instantaneous layer,
    a fresh draw of the composed channel).  T reports of one value are one
    (T eps_report)-LDP release (basic composition: Dwork & Roth, *The
    Algorithmic Foundations of Differential Privacy*, 2014, Theorem 3.16), so
    epsilon = T x eps_report.
``memoized``
    ``device.memoize`` (RAPPOR's permanent randomised response: Erlingsson,
    Pihur & Korolova, CCS 2014): one draw per distinct value, re-sent (with an
    instantaneous layer: a fresh IRR of the memoized output each time).  A
    stable value costs one draw, min(T eps_report, eps_draw) (any number of
    IRR reports of one draw are a post-processing of it: eps_draw; each one
    alone eps_report).  A value that changes every period costs a draw per
    distinct value: at most min(T, k) draws when ``memo_max`` >= k (every value
    keeps its draw), else up to T (a value evicted from the memo is drawn
    afresh when it returns): ``epsilon_worst`` = min(T eps_report, D eps_draw),
    D that number of draws.
``budgeted``
    ``device.budget`` {epsilon B, days W} on top (memoized or not as
    configured): the board refuses a fresh draw that would take the product of
    the window's draws' worst ratios above e^B (exact integers on the board,
    :mod:`mss_protocol.budget`), so H days hold at most B x ceil(H / W) of
    fresh-draw epsilon (the horizon is covered by that many windows), and never
    more than the same device without a budget.

Not counted (state them to the reviewer): re-draws after a lost or reset
state file or a config switch (each costs eps_draw; the budget's ledger
survives both on the board), and the value's own changes (the attacker's
figure is for a stable value, the worst case for epsilon only; with a change
model, ``change``, each figure also has "changing": the attacker on a value
that changes, the change-time leak and the budget's skips and bias,
:mod:`mss_aggregator.privacy.changing`).

The attacker is the audit's (:func:`mss_aggregator.privacy.model.horizon_figures`,
:func:`mss_aggregator.privacy.attacks.longitudinal`): ``trials`` devices with
values from the prior, each randomised by the protocol's real integer client on
a seeded byte stream (MSS, SS, OLH, HR, PGR without an IRR: its exact law, all devices
at once; ``seed``: the figures are reproducible), the product of
the posteriors of every report (with an IRR the exact likelihood of the
draw's reports), the MAP guess; 95% Clopper-Pearson intervals, and the point never above
its exact bound (:func:`mss_aggregator.privacy.attacks.bounded_rate`; for one memoized
draw the bound includes the exact success of an attacker who knows the draw).  Where a
device makes one draw without an IRR the exact single-report success
(:meth:`Channel.bayes_exact`) is used.  **Saturation**: more reports never
lower the Bayes-optimal attacker's success (it can ignore them), so past
``max_draws`` fresh draws the simulation stops and the figure at the last
simulated report is a lower bound (``lower_bound``), the ceiling the upper
one.  ``max_draws`` defaults to what a fixed modelled cost (``WORK_US`` of
client and posterior time, :func:`report_us`, measured on a 2-core VM) allows,
at most the audit's ``MAX_DRAWS``: ``mss plan`` stays interactive, and the
cap depends on (protocol, k, trials) only, so the figures are reproducible.

:func:`hiding_options` sets the plan beside the options that hide a changing
value's change times (``mss plan``'s table), each at :func:`changing_at`.
"""
import math
from dataclasses import dataclass

import numpy as np

from mss_aggregator.privacy import attacks, ceilings, model
from mss_protocol import budget as budgets

HORIZON_DAYS = (1, 30)  # those within the campaign, and the campaign
CAMPAIGN_DAYS = 365
TRIALS = 100
SEED = 0
MEMO_MAX = 16  # the firmware's device.memo_max default (mss_node.settings)
WORK_US = 1.5e6  # modelled simulation time for the fresh reports
IRR_CELL_US = 0.02  # the IRR likelihood of one draw's reports: per (distinct output seen, value)
EXACT_CELLS = 1 << 25  # outputs x k enumerated for an exact single-report success (under a second)
MODES = ("fresh", "memoized", "budgeted")
DAY_S = 86400


def report_us(protocol):
    """The microseconds one simulated report takes (client + posterior): the protocol's
    :meth:`~mss_protocol.base.Protocol.simulated_report_us`, a model of one client call a
    report.  MSS, SS, OLH, HR and PGR now draw all devices' reports at once (attacks: 1-2 us
    a report at k <= 256) and keep this cap: their figures stay those of the same
    simulated horizon."""
    return protocol.simulated_report_us()


def default_max_draws(protocol, trials=TRIALS):
    """Fresh draws simulated per device: what WORK_US allows, 1 to model.MAX_DRAWS."""
    return int(max(1, min(model.MAX_DRAWS, WORK_US // (trials * report_us(protocol)))))


def reports_in(days, period_s):
    """Reports a device sends in ``days`` days, one a period (at least one; the audit's rule)."""
    return max(1, int(days * DAY_S // period_s))


class _NoExact:
    """A channel whose exact single-report success is not computed (too many outputs to
    enumerate interactively): the simulation is used instead."""

    def __init__(self, ch):
        self._ch = ch

    def __getattr__(self, name):
        return getattr(self._ch, name)

    def bayes_exact(self, prior):
        return None


def _fast(ch):
    n = getattr(ch, "n_outputs", None)
    return _NoExact(ch) if n is not None and n * ch.k > EXACT_CELLS else ch


def _config(cfg, irr):
    from mss_protocol.configs import load_dict
    from mss_protocol.oracle_config import OracleConfig

    if isinstance(cfg, dict):
        cfg = load_dict(cfg)
    if irr is not None:
        e1 = irr.get("epsilon") if isinstance(irr, dict) else irr
        if getattr(cfg, "irr_epsilon", None) is None or float(e1) != cfg.irr_epsilon:
            if not isinstance(cfg, OracleConfig):
                raise ValueError(f"irr: {cfg.name} has no instantaneous layer (grr, olh, hr, pgr only)")
            from mss_device.frame import KINDS

            cfg = OracleConfig(name=cfg.name, k=cfg.k, epsilon=cfg.epsilon, frame=KINDS[cfg.frame],
                               seed=getattr(cfg, "seed", "epoch"), irr_epsilon=float(e1))
    return cfg


@dataclass(frozen=True)
class Device:
    """One device of the deployment, as :func:`over_time` takes it.

    Parameters
    ----------
    period_s : int
        Its report period (``device.period_s``), whole seconds >= 1.
    memoize : bool
        The deployment's ``device.memoize``.
    budget : dict or tuple, optional
        None, a ``device.budget`` dict, {"epsilon", "days"} or (epsilon, days).
    memo_max : int
        Memos kept (``device.memo_max``).
    """
    period_s: int
    memoize: bool = True
    budget: object = None
    memo_max: int = MEMO_MAX


@dataclass(frozen=True)
class Effort:
    """How large :func:`over_time`'s simulations are.

    Parameters
    ----------
    trials, seed : int
        The stable-value attacker's simulated devices and seed.
    max_draws : int, optional
        Fresh draws simulated per device (None: :func:`default_max_draws`).
    change_devices, change_trials : int, optional
        With a changing value: the devices simulated, and those the attacker tries
        (None: :mod:`.changing`'s defaults).
    """
    trials: int = TRIALS
    seed: int = SEED
    max_draws: int = None
    change_devices: int = None
    change_trials: int = None


def _budget(budget):
    if budget is None:
        return None
    if isinstance(budget, dict):
        return dict(budget) if "ratio" in budget else budgets.budget_section(budget["epsilon"], budget["days"])
    return budgets.budget_section(*budget)


def over_time(cfg, device, prior=None, campaign_days=CAMPAIGN_DAYS, irr=None, *, prior_label=None, effort=Effort(),
              change=None):
    """The loss of one ``device`` (:class:`Device`: its period, memoize, budget and memo_max)
    of ``cfg``, at 1 day, 30 days and ``campaign_days`` (module docstring: the math and its
    sources), simulated as ``effort`` (:class:`Effort`) says.

    ``cfg``: a config (MssConfig / OracleConfig) or its dict; ``prior``: (k,) value
    distribution (None: uniform); ``irr``: None (the config's own instantaneous layer, if
    any) or its epsilon (a float, or {"epsilon": e1}), for grr, olh, hr and pgr.

    Returns {"protocol", "k", "epsilon", "config_id", "period_s", "reports_per_day",
    "campaign_days", "prior", "eps_draw", "eps_report", "irr", "memoize", "memo_max",
    "budget", "deployment", "modes", "horizons": [{"days", "reports", <mode>: {...}}],
    "no_information", "attacker", "assumptions"}; each mode's entry: "fresh_draws"
    (stable value), "epsilon" (stable value), "epsilon_worst" (the value changing
    every period), "success", "ci", "measured", "capped", "conflict", "exact",
    "lower_bound", "simulated_reports", "ceiling" (at "epsilon"), "limit", "bound",
    "ceiling_worst", "strength" (:func:`ceilings.strength`).

    "success" is exact where "exact", else a simulation on ``trials`` devices:
    "ci" its 95% Clopper-Pearson interval, "measured" the simulated rate, and
    "success" that rate kept at most "bound" (:func:`.attacks.bounded_rate`, "capped"
    when lowered): "bound" is the tightest exact upper bound on the true success, the
    "ceiling" at "epsilon" or, for one memoized draw, the "limit" (the exact success of
    an attacker who knows the draw: what the IRR reports of one draw tend to as
    T -> infinity, :meth:`Channel.bayes_exact` of the permanent draw's channel; None
    when not one draw, or not computed: ``EXACT_CELLS``).

    ``change`` (:class:`mss_aggregator.privacy.changing.Change`): a value that changes on
    that chain; each mode's entry then also has "changing" ({"success", "ci", "ceiling",
    "change_time_advantage", "skip_rate", "bias", ...}: :func:`changing.figures`, on
    ``change_devices`` simulated devices, the attacker on ``change_trials`` of them), and
    the result a "change" section (the chain and the attacker)."""
    period_s, memoize, budget, memo_max = device.period_s, device.memoize, device.budget, device.memo_max
    trials, seed, max_draws = effort.trials, effort.seed, effort.max_draws
    change_devices, change_trials = effort.change_devices, effort.change_trials
    cfg = _config(cfg, irr)
    if isinstance(period_s, bool) or not isinstance(period_s, int) or period_s < 1:
        raise ValueError(f"period_s must be a whole number of seconds >= 1, got {period_s!r}")
    if isinstance(campaign_days, bool) or not isinstance(campaign_days, int) or campaign_days < 1:
        raise ValueError(f"campaign_days must be a whole number of days >= 1, got {campaign_days!r}")
    name, k = cfg.name, cfg.k
    prior = np.full(k, 1.0 / k) if prior is None else np.asarray(prior, dtype=float)
    bud = _budget(budget)
    ch_prr, layer = model.prr_channel(name, k, cfg.epsilon, cfg)
    ch_report = model.channel(name, k, cfg.epsilon, cfg) if layer is not None else ch_prr
    ch_prr, ch_report = _fast(ch_prr), _fast(ch_report)
    worst = budgets.worst_ratio(cfg)
    eps_draw = float(cfg.eps_effective)
    eps_report = float(getattr(cfg, "report_eps_effective", None) or eps_draw)
    device_seed = model.device_seed_of(name, cfg)
    max_draws = default_max_draws(ch_prr.oracle, trials) if max_draws is None else max_draws
    no_info = ceilings.no_information(prior)
    days = sorted({d for d in HORIZON_DAYS if d <= campaign_days} | {campaign_days})
    reports = [reports_in(d, period_s) for d in days]
    draws = window = None
    if bud is not None:
        draws = budgets.draws_per_window(bud, worst)
        if draws == 0:
            raise ValueError(f"a budget of {bud['epsilon']:g} per {bud['days']} days is below one fresh draw of "
                             f"{name} (eps_effective {eps_draw:.6g}): the board could never report")
        window = bud["days"] * DAY_S / period_s

    def figures(ch, drawing):
        sim = reports
        if drawing.irr is not None and drawing.memoize:  # the IRR likelihood: (distinct outputs seen) x k a horizon
            most = int(WORK_US // (IRR_CELL_US * k * trials * len(reports)))
            if min(max(reports), drawing.irr.n) > most:
                sim = [min(t, max(1, most)) for t in reports]
        f = model.horizon_figures(ch=ch, prior=prior, reports=sim, drawing=drawing, trials=trials, seed=seed,
                                  max_draws=max_draws)
        if sim is not reports:  # a memoized draw: one draw whatever the horizon; fewer reports simulated
            f["lower_bound"] = [b or s < t for b, s, t in zip(f["lower_bound"], f["simulated_reports"], reports)]
        return f

    # the attacker and the draws of a stable value
    figs = {"fresh": figures(ch_report, model.Drawing(draw_eps=eps_report, device_seed=device_seed)),
            "memoized": figures(ch_prr, model.Drawing(draw_eps=eps_draw, memoize=True, irr=layer,
                                                      device_seed=device_seed))}
    if bud is not None:
        if memoize:  # a stable value makes one draw, which the budget allows (draws >= 1)
            figs["budgeted"] = figs["memoized"]
        else:
            figs["budgeted"] = figures(ch_prr if layer is not None else ch_report,
                                       model.Drawing(draw_eps=eps_report, irr=layer, draws=draws, window=window,
                                                     device_seed=device_seed))
    distinct = [min(t, k) if memo_max >= k else t for t in reports]
    horizons = []
    for i, (d, t) in enumerate(zip(days, reports)):
        row = {"days": d, "reports": t}
        for mode, f in figs.items():
            n = f["fresh_draws"][i]
            if mode == "fresh" or (mode == "budgeted" and not memoize):
                eps = n * eps_report
                worst_eps = eps if mode == "fresh" else min(t * eps_report, bud["epsilon"] * math.ceil(d / bud["days"]))
            else:
                eps = min(t * eps_report, n * eps_draw)
                worst_eps = min(t * eps_report, distinct[i] * eps_draw)
                if mode == "budgeted":
                    worst_eps = min(worst_eps, bud["epsilon"] * math.ceil(d / bud["days"]))
            ceiling, limit = ceilings.ldp_prior(prior, eps), f["limit"][i]
            bound = ceiling if limit is None else min(ceiling, limit)
            if f["exact"][i]:
                fig = {"success": float(f["success"][i]), "ci": [float(c) for c in f["ci"][i]], "measured": None,
                       "capped": False, "conflict": False}
            else:  # against this row's bound (the ceiling at min(T eps_report, eps_draw) can be below the draw's)
                fig = attacks.bounded_rate(f["hits"][i], trials, bound)
                fig.pop("bound")
            row[mode] = {"fresh_draws": n, "epsilon": eps, "epsilon_worst": max(eps, worst_eps),
                         **fig, "exact": bool(f["exact"][i]), "lower_bound": bool(f["lower_bound"][i]),
                         "simulated_reports": int(f["simulated_reports"][i]),
                         "ceiling": ceiling, "limit": limit, "bound": bound,
                         "ceiling_worst": ceilings.ldp_prior(prior, max(eps, worst_eps)),
                         "strength": ceilings.strength(fig["success"], no_info)}
        horizons.append(row)
    change_doc = None
    if change is not None:
        setup = change_setup(cfg=cfg, period_s=period_s, memoize=memoize, budget=bud, memo_max=memo_max)
        change_doc = _changing(change=change, setup=setup, period_s=period_s, horizons=horizons, figs=figs,
                               seed=seed, devices=change_devices, trials=change_trials)
    deployment = "budgeted" if bud is not None else ("memoized" if memoize else "fresh")
    irr_doc = None
    if layer is not None:
        irr_doc = {"epsilon": cfg.irr_epsilon, "t": cfg.irr_threshold, "eps_effective": cfg.irr_eps_effective,
                   "report_eps_effective": eps_report}
    return {"protocol": name, "k": k, "epsilon": float(cfg.epsilon), "config_id": cfg.config_id_hex,
            "period_s": period_s, "reports_per_day": DAY_S / period_s, "campaign_days": campaign_days,
            "prior": prior_label, "eps_draw": eps_draw, "eps_report": eps_report, "irr": irr_doc,
            "memoize": bool(memoize), "memo_max": memo_max,
            "budget": None if bud is None else dict(bud, draws_per_window=draws),
            "deployment": deployment, "modes": [m for m in MODES if m in figs], "horizons": horizons,
            "no_information": no_info, "change": change_doc,
            "attacker": {"what": "Bayes-optimal MAP guess from the product of the posteriors of every report "
                                 "of a stable value (mss audit --longitudinal)",
                         "trials": trials, "seed": seed, "max_draws": max_draws},
            "assumptions": [
                "a report every period_s from an epoch boundary: floor(days x 86400 / period_s) reports",
                "epsilon: fresh draws x the epsilon of one draw (basic composition); a stable value makes "
                "one draw when memoized",
                f"epsilon_worst: the value changes every period: with memoize one draw per distinct value, "
                f"at most min(reports, k) when memo_max ({memo_max}) >= k, else every report",
                "a budget of B per W days: at most B x ceil(days / W) in fresh draws, never more than without it",
                "not counted: re-draws after a lost state file or a config switch",
                f"attacker: a stable value, simulated on {trials} devices (seed {seed}); past {max_draws} fresh "
                "draws a lower bound (more reports never lower the Bayes attacker's success)",
            ]}



def change_setup(cfg, period_s, memoize=True, budget=None, memo_max=MEMO_MAX):
    """The :class:`mss_aggregator.privacy.changing.Setup` of one device of ``cfg`` reporting every
    ``period_s`` (``budget`` as :func:`over_time` takes it): its channels, layer, one draw's and one
    report's epsilon, and the board's budget window in epochs (``mss_node.ledger.window_ms``:
    D days + D/64 of board time)."""
    from mss_aggregator.privacy import changing
    from mss_node.ledger import window_ms

    cfg = _config(cfg, None)
    name, k = cfg.name, cfg.k
    bud = _budget(budget)
    ch_prr, layer = model.prr_channel(name, k, cfg.epsilon, cfg)
    ch_report = model.channel(name, k, cfg.epsilon, cfg) if layer is not None else ch_prr
    eps_draw = float(cfg.eps_effective)
    eps_report = float(getattr(cfg, "report_eps_effective", None) or eps_draw)
    draws = window = None
    if bud is not None:
        draws = budgets.draws_per_window(bud, budgets.worst_ratio(cfg))
        if draws == 0:
            raise ValueError(f"a budget of {bud['epsilon']:g} per {bud['days']} days is below one fresh draw of "
                             f"{name} (eps_effective {eps_draw:.6g})")
        window = window_ms(bud["days"]) / (period_s * 1000)
    return changing.Setup(ch_report=ch_report, ch_prr=ch_prr, layer=layer, eps_draw=eps_draw, eps_report=eps_report,
                          memoize=bool(memoize), memo_max=memo_max, draws=draws, window=window,
                          budget_eps=None if bud is None else bud["epsilon"],
                          budget_days=None if bud is None else bud["days"],
                          device_seed=model.device_seed_of(name, cfg))


def _changing(change, setup, period_s, horizons, figs, seed, devices, trials):
    """Each horizon's mode entries get "changing" (:func:`changing.figures`); returns the
    "change" section."""
    from mss_aggregator.privacy import changing

    chain = change.chain(setup.ch_prr.k, period_s)
    devices = devices or changing.DEVICES
    trials = min(trials or changing.TRIALS, devices)
    got = changing.figures(setup=setup, chain=chain, days=[h["days"] for h in horizons],
                           reports=[h["reports"] for h in horizons], modes=list(figs), devices=devices, trials=trials,
                           seed=seed)
    for i, row in enumerate(horizons):
        for mode in figs:
            row[mode]["changing"] = got[mode][i]
    first = got[list(figs)[0]][0]
    devices, trials = first["devices"], first["trials"]  # fewer at a large k (changing.SCHEDULE_CELLS)
    return {**change.doc(), "per_epoch_change": [float(1 - s) for s in chain.stay], "uniform_jumps": chain.uniform,
            "stationary": [float(p) for p in chain.pi], "no_information": ceilings.no_information(chain.pi),
            "devices": devices, "trials": trials, "seed": seed,
            "attacker": "names the current value at the horizon, MAP under the known chain from all reports seen "
                        "(fresh: forward filter on the last `window` reports; memoized: the body-change times, "
                        "each body that appears as a draw of the current value, skips; with a layer on the draws "
                        "themselves)",
            "change_time": "dates a change at every epoch whose report differs from the last epoch's (a new "
                           "body, or a skip); advantage = P(dated | changed) - P(dated | unchanged)",
            "ceiling": "the epsilon-LDP ceiling at the loss spent (fresh: T eps_report; memoized: the mean over "
                       "devices of the ceiling at its fresh draws x eps_draw, capped by the budget); holds when "
                       "the change pattern says nothing of the value's label (uniform jumps)"}


def changing_at(cfg, period_s, change, days, mode="budgeted", *, memoize=True, budget=None, memo_max=MEMO_MAX):
    """The "changing" figures of one ``mode`` at one horizon of ``days`` for ``cfg``
    (what :func:`over_time` gives with ``change`` at its default seed, without the stable value's
    figures): the options of ``mss plan``'s table of what hides change times."""
    from mss_aggregator.privacy import changing

    setup = change_setup(cfg=cfg, period_s=period_s, memoize=memoize, budget=budget, memo_max=memo_max)
    got = changing.figures(setup=setup, chain=change.chain(setup.ch_prr.k, period_s), days=[days],
                           reports=[reports_in(days, period_s)], modes=[mode], devices=changing.DEVICES,
                           trials=changing.TRIALS, seed=SEED)
    return got[mode][0]


# -- what hides the change times (mss plan) -------------------------------------------------------
@dataclass(frozen=True)
class Fleet:
    """The plan an option is compared with: its config ``cfg``, fleet size ``n``, ``prior`` (None:
    uniform), the reporting period, the campaign, its detectable frequency, ``slack`` (--mse-slack)
    and ``detect`` (the frequency the operator asked to see, or None)."""
    cfg: object
    n: int
    prior: object
    period_s: int
    campaign_days: int
    detectable: float
    slack: float
    detect: float = None


def detectable_at(cfg, n, prior):
    """The detectable frequency of ``cfg``'s protocol with ``n`` reports an epoch (inf below one)."""
    from mss_protocol import registry, resolution

    if n < 1:
        return math.inf
    proto = registry.from_config(cfg, cfg.name)
    return resolution.figures(proto, proto.variance(n, prior), n, prior)["detectable_frequency"]


def hiding_options(ot, fleet, change, plan_for, central, irr_epsilon=None):
    """The options that hide a changing value's change times beside this plan (issue 45):
    {"n", "campaign_days", "change", "threshold", "options": [...], "suggested"}.

    Each option: {"option", "serves", "why", "success", "ci", "capped", "change_time_advantage",
    "detectable_frequency", "this"}; the attacker and the change-time advantage at the
    campaign's end (:func:`changing.figures`), the detectable frequency at ``fleet.n`` (reports an epoch).
    ``plan_for(protocol, irr_epsilon)``: the plan (``mss_protocol.choose.choose``'s dict) of that
    protocol with an instantaneous layer, or raises ValueError saying why it cannot be built;
    ``central(n)``: (eps_c, method) of a shuffled batch of n at the plan's epsilon (method
    starting "none": no bound below it).  An option serves n when it is built and its
    detectable frequency is at most ``threshold``: ``fleet.detect`` if given, else the larger
    of 1/k (the level the plan warns above) and this plan's own times sqrt(1 + slack) (the
    MSE slack auto plans with)."""
    from mss_protocol.configs import load_dict
    from mss_protocol.irr import PROTOCOLS as IRR_PROTOCOLS

    cfg, k, n, days = fleet.cfg, fleet.cfg.k, fleet.n, fleet.campaign_days
    threshold = fleet.detect
    if threshold is None:
        threshold = max(1.0 / k, fleet.detectable * math.sqrt(1 + fleet.slack))
    last = ot["horizons"][-1]
    bud = ot["budget"]
    opts = []

    def add(option, fig, detectable, why=None, this=False):
        row = {"option": option, "this": this, "detectable_frequency": detectable,
               "success": None, "ci": None, "capped": False, "change_time_advantage": None}
        if fig is not None:
            row.update(success=fig["success"], ci=fig["ci"], capped=fig["capped"],
                       change_time_advantage=fig["change_time_advantage"])
        if why is None and (detectable is None or not detectable <= threshold):
            why = "nothing detectable" if detectable is None or detectable >= 1 else \
                f"detects {detectable:.3g} and above (threshold {threshold:.3g})"
        row.update(serves=why is None, why=why)
        opts.append(row)

    mode = ot["deployment"]
    add(f"this plan: {ot['protocol']} {mode}", last[mode]["changing"], fleet.detectable, this=True)
    if bud is not None:
        fig = changing_at(cfg=cfg, period_s=fleet.period_s, change=change, days=days, mode="budgeted", memoize=False,
                          budget=bud, memo_max=ot["memo_max"])
        n_eff = n * (1 - fig["skip_rate"])
        add(f"fresh draws under the budget (no memo): {n_eff:.3g} of {n} report an epoch", fig,
            detectable_at(cfg, n_eff, fleet.prior))
    for name in IRR_PROTOCOLS:
        e1 = irr_epsilon or float(cfg.epsilon)
        label = f"instantaneous layer: {name} + irr {e1:g} (attacker on the draws)"
        try:
            plan = plan_for(name, e1)
            icfg = load_dict(plan["config"])
            fig = changing_at(cfg=icfg, period_s=fleet.period_s, change=change, days=days,
                              mode="budgeted" if bud else "memoized",
                              budget=None if bud is None else (bud["epsilon"], bud["days"]), memo_max=ot["memo_max"])
        except ValueError as exc:
            add(label, None, None, f"cannot be built: {exc}")
            continue
        add(label, fig, plan["detectable_frequency"])
    if ot["memo_max"] >= k:
        add(f"longer memo lifetimes: memo_max {ot['memo_max']} >= k already", last[mode]["changing"],
            fleet.detectable)
    else:
        fig = changing_at(cfg=cfg, period_s=fleet.period_s, change=change, days=days, mode=mode,
                          budget=None if bud is None else (bud["epsilon"], bud["days"]), memo_max=k)
        add(f"longer memo lifetimes: memo_max {k} (every value keeps its draw)", fig, fleet.detectable)
    eps_c, method = central(n)
    label = f"shuffler, batches of {n}, fresh draws (a memoized body is found across batches)"
    if method.startswith("none"):
        add(label, None, fleet.detectable, f"no central guarantee below epsilon {float(cfg.epsilon):g} at n={n}")
    else:  # it hides change times from the aggregator only for fresh draws: under the budget, those above
        fresh = next((o for o in opts if o["option"].startswith("fresh draws")), None)
        add(label + f": ({eps_c:.3g}, delta) an epoch", None,
            fleet.detectable if fresh is None else fresh["detectable_frequency"],
            None if fresh is None or fresh["serves"] else f"needs fresh draws: {fresh['why']}")
    hides = [o for o in opts if o["serves"] and not o["this"] and o["change_time_advantage"] is not None
             and o["change_time_advantage"] <= ceilings.MODERATE_GAIN]
    suggested = None
    if hides:
        best = min(hides, key=lambda o: o["detectable_frequency"])
        suggested = (f"{best['option']}: change-time advantage {best['change_time_advantage']:.3f}, detectable "
                     f"frequency {best['detectable_frequency']:.3g}")
    return {"n": n, "campaign_days": days, "change": change.label,
            "threshold": threshold, "options": opts, "suggested": suggested}
