"""What ``mss audit`` computes: reconstruction risk per protocol against the
ceilings, its growth over repeated reports, and the empirical epsilon of
the real clients.  Every function returns plain JSON-ready data.
"""
import math
import random
import subprocess
from dataclasses import dataclass
from fractions import Fraction

from mss_aggregator.devices.runtime import RuntimeUnavailable
from mss_aggregator.privacy import attacks, ceilings, empirical
from mss_aggregator.privacy.model import (MAX_DRAWS, Drawing, channel, configures, device_seed_of, horizon_figures,
                                          prr_channel)
from mss_device.frame import KINDS
from mss_device.rng import ByteRng
from mss_protocol import registry
from mss_protocol.config_file import make_checked
from mss_protocol.mss.config import MssConfig

PROTOCOLS = registry.AVAILABLE
HORIZONS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
MSS_MIN_K = 4  # MSS needs at least two coprime moduli of 2 or more: k >= 4 (SS and the rest take k >= 2)
DAY_S = 86400
CAMPAIGN_DAYS = 365
FIRMWARE_PERIOD_S = 3600  # the firmware's device.period_s default


@dataclass(frozen=True)
class Target:
    """What an audit attacks: the protocols at (``k``, ``epsilon``), or the config ``cfg``.

    Parameters
    ----------
    k : int
        Categories.
    epsilon : float
        epsilon-LDP of one report (nats).
    prior : numpy.ndarray, shape (k,)
        The attacker's prior over the values (sums to 1).
    cfg : object, optional
        A deployment's config: its protocol's own parameters instead of the planner's at (k, epsilon).
    """
    k: int
    epsilon: float
    prior: object = None
    cfg: object = None


def skipped(names, k):
    """(the protocols of ``names`` that run at k, [{"protocol", "reason"}] of those
    that do not): those whose ``min_k`` is above k (MSS below k = 4)."""
    small = {name: registry.protocol_class(name) for name in names}
    small = {name: cls for name, cls in small.items() if k < cls.min_k}
    out = [{"protocol": name, "reason": cls.min_k_why.format(k=k)} for name, cls in small.items()]
    return [n for n in names if n not in small], out


def _method(ch, exact):
    if exact is None:
        return None
    return "enumeration" if hasattr(ch, "n_outputs") else "closed form"


def reconstruction_row(ch, prior, trials, seed, ceiling=None):
    """One protocol: the paper's rule and the Bayes-optimal attacker, exact
    where computable, and both run empirically on ``trials`` devices.  A measured
    success is kept at most ``ceiling`` (default the ceiling at the channel's
    ``eps_effective``; :func:`.attacks.bounded_rate`): ``empirical`` and
    ``paper_rule_empirical`` the bounded figures, ``*_ci`` their measurement's 95%
    interval, ``*_measured``, ``*_capped`` and ``*_conflict`` as there."""
    ceiling = ceilings.ldp_prior(prior, ch.eps_effective) if ceiling is None else ceiling
    bayes = ch.bayes_exact(prior)
    paper, method = _paper_rule(ch, prior)
    row = {"protocol": ch.name, "eps_effective": ch.eps_effective,
           "paper_rule": paper, "paper_rule_method": method,
           "paper_rule_closed_form": ch.paper_closed_form(),
           "bayes_exact": bayes, "bayes_method": _method(ch, bayes),
           "empirical": None, "empirical_ci": None,
           "paper_rule_empirical": None, "paper_rule_empirical_ci": None, "trials": trials}
    if trials:
        hits = attacks.single_report(ch, prior, trials, seed)
        for key, who in (("empirical", "bayes"), ("paper_rule_empirical", "paper")):
            fig = attacks.bounded_rate(hits[who], trials, ceiling)
            row.update({key: fig["success"], f"{key}_ci": fig["ci"], f"{key}_measured": fig["measured"],
                        f"{key}_capped": fig["capped"], f"{key}_conflict": fig["conflict"]})
    if paper is None and trials:  # neither exact nor published: the measurement
        row["paper_rule"], row["paper_rule_method"] = row["paper_rule_empirical"], "empirical"
    return row


def reconstruction(target, prior_spec, names, trials, seed=0, progress=None):
    """The audit's main JSON: {"k", "epsilon", "prior", "ceiling", "bounds", "rows"}."""
    k, epsilon, prior, cfg = target.k, target.epsilon, target.prior, target.cfg
    rows, ceiling = [], ceilings.ldp_prior(prior, epsilon)
    for name in names:
        rows.append(reconstruction_row(ch=channel(name, k, epsilon, cfg), prior=prior, trials=trials, seed=seed,
                                       ceiling=ceiling))
        if progress:
            progress()
    return {"k": k, "epsilon": epsilon, "prior": prior_spec, "config": config_doc(cfg),
            "ceiling": ceiling, "bounds": ceilings.bounds(prior, epsilon),
            "trials": trials, "seed": seed, "rows": rows}


def config_doc(cfg):
    """What identifies the audited config (None without one): its config id (the one the
    boards must run, docs/privacy.md section 6), protocol, frame kind, the permanent
    draw's ``eps_effective`` and the instantaneous layer's figures (:func:`irr_doc`)."""
    if cfg is None:
        return None
    return {"config_id": cfg.config_id_hex, "protocol": cfg.name, "frame": KINDS[cfg.frame],
            "eps_effective": cfg.eps_effective, "irr": irr_doc(cfg)}


def sweep(k, prior, names, epsilons):
    """Exact success per protocol over ``epsilons`` (for the plot):
    {"epsilons", "ceiling", "rero", "no_information", "paper_rule": {name: [...]},
    "bayes": {name: [...]}} with None where no exact value exists."""
    out = {"epsilons": list(epsilons), "ceiling": [ceilings.ldp_prior(prior, e) for e in epsilons],
           "rero": [ceilings.rero(prior, e) for e in epsilons],
           "no_information": ceilings.no_information(prior), "paper_rule": {}, "bayes": {}}
    for name in names:
        chans = [channel(name, k, e) for e in epsilons]
        out["bayes"][name] = [ch.bayes_exact(prior) for ch in chans]
        out["paper_rule"][name] = [_paper_rule(ch, prior)[0] for ch in chans]
    return out


def _paper_rule(ch, prior):
    """(success of the paper's rule, how it was obtained): exact, else the
    published closed form, else (None, None)."""
    value = ch.paper_exact(prior)
    if value is not None:
        return value, "exact"
    closed = ch.paper_closed_form()
    return (closed, "closed form (approximation)") if closed is not None else (None, None)


def longitudinal(target, names=("mss", "grr"), horizons=HORIZONS, trials=100, seed=0, progress=None):
    """Bayes-optimal success after T reports of one fixed value, fresh and memoized
    (with the config's instantaneous layer, if it has one: a fresh IRR on every report):
    {"horizons", "trials", "ceiling" (the LDP ceiling at T epsilon), "memoize_ceiling"
    (at epsilon), "rows": [...]}.  Each row's "bound" per T is the tightest exact upper
    bound on its true success: the ceiling at T epsilon, for memoize also at epsilon and
    the "limit" (the exact success of an attacker who knows the draw, what the IRR
    reports of one draw tend to; without a layer the figure itself, "exact").  A
    simulated "success" is :func:`.attacks.bounded_rate` against it ("ci" the
    measurement's 95% interval, "measured", "capped", "conflict")."""
    k, epsilon, prior, cfg = target.k, target.epsilon, target.prior, target.cfg
    horizons = sorted(set(horizons))
    at_t = [ceilings.ldp_prior(prior, t * epsilon) for t in horizons]
    at_one = ceilings.ldp_prior(prior, epsilon)
    rows = []
    for name in names:
        ch, irr = prr_channel(name, k, epsilon, cfg)  # with a config's IRR: each report a fresh IRR of the draw
        for mode in ("fresh", "memoize"):
            hits = attacks.longitudinal(ch=ch, prior=prior, horizons=horizons, trials=trials, seed=seed,
                                        reporting=attacks.Reporting(memoize=mode == "memoize", irr=irr))
            limit = ch.bayes_exact(prior) if mode == "memoize" else None
            bound = [c if mode == "fresh" else min(c, at_one, 1.0 if limit is None else limit) for c in at_t]
            figs = [attacks.bounded_rate(h, trials, b) for h, b in zip(hits, bound)]
            row = {"protocol": name, "mode": mode, "exact": False, "limit": limit, "bound": bound,
                   **{key: [f[key] for f in figs] for key in ("success", "ci", "measured", "capped", "conflict")}}
            if limit is not None and irr is None:  # one draw re-sent: the single-report value at every T, exactly
                row.update(success=[limit] * len(horizons), ci=[[limit, limit]] * len(horizons), exact=True,
                           capped=[False] * len(horizons))  # conflict: the simulation far above the exact value
            rows.append(row)
            if progress:
                progress()
    return {"horizons": horizons, "trials": trials, "seed": seed, "ceiling": at_t, "memoize_ceiling": at_one,
            "rows": rows}


def linkability(target, names, pairs=1000, seed=0, irr_epsilon=None, progress=None):
    """How well two reports of one device link: the attacker says "same device" iff
    they are identical (:func:`.attacks.linkability`), for a memoized device without
    an instantaneous layer and, for the one-output protocols, with one (the config's,
    else at ``irr_epsilon``, default the protocol's epsilon).  Rows {"protocol", "irr"
    (None or {"epsilon", "t", "p1", "configured"}), measured "tpr", "fpr", "advantage"
    with CIs, and "exact" ({"tpr", "fpr", "advantage"}, one-output protocols)}."""
    k, epsilon, prior, cfg = target.k, target.epsilon, target.prior, target.cfg
    rows = []
    for name in names:
        ch, layer = prr_channel(name, k, epsilon, cfg)
        configured = layer is not None
        variants = [None]
        if name in attacks.IRR_PROTOCOLS:
            variants.append(layer or attacks.Irr.for_epsilon(attacks.n_out(ch), irr_epsilon or epsilon))
        for irr in variants:
            row = {"protocol": name, "mode": "memoize" if irr is None else "memoize+irr", "irr": None}
            if irr is not None:
                nominal = getattr(cfg, "irr_epsilon", None) if configured else (irr_epsilon or epsilon)
                row["irr"] = {"epsilon": nominal, "eps_effective": irr.epsilon, "t": irr.threshold, "n_out": irr.n,
                              "p1": irr.p1, "configured": configured}
            row.update(attacks.linkability(ch=ch, prior=prior, pairs=pairs, seed=seed, irr=irr))
            row["exact"] = attacks.link_exact(ch, prior, irr) if name in attacks.IRR_PROTOCOLS else None
            rows.append(row)
        if progress:
            progress()
    return {"test": "same device iff the two reports are identical", "pairs": pairs, "seed": seed, "rows": rows}


def _worst_ratio(name, k, epsilon, cfg, ch):
    """One fresh draw's worst likelihood ratio, exact where the config is at hand
    (the board's ``mss_device.check.verify``), else from ``eps_effective``."""
    from mss_protocol import budget

    own = cfg if configures(cfg, name) else getattr(ch, "cfg", None)
    if own is None:  # a one-output protocol: its config follows from (k, epsilon)
        from mss_protocol.config_file import ConfigError
        from mss_protocol.oracle_config import OracleConfig

        try:
            own = OracleConfig(name, k, epsilon)
        except ConfigError:
            pass
    if own is not None:
        try:
            return budget.worst_ratio(own)
        except (ValueError, AttributeError, TypeError):
            pass
    return Fraction(math.exp(ch.eps_effective))


def deployment_horizons(campaign_days):
    """The horizons (days) shown for a campaign: a day, a week, 30 days, a year, within it, and its end."""
    return sorted({d for d in (1, 7, 30, 365) if d <= campaign_days} | {campaign_days})


def deployment(target, names, device, campaign_days=CAMPAIGN_DAYS, trials=100, seed=0, progress=None,
               change=None):
    """The deployment as configured over ``campaign_days``: a device reporting a FIXED
    value every ``device.period_s`` (default the firmware's 3600 s), memoized or
    not (``device.memoize``), within its budget (``device.budget``: B fresh draws per
    window of ``days``, :func:`mss_protocol.budget.draws_per_window`, exact), with
    the config's instantaneous layer.  Per horizon (days): reports sent, fresh draws,
    the epsilon spent (fresh draws x one draw's epsilon: the permanent draw's, or one
    composed report's without memoization), the Bayes attacker's success (the
    product attack of :func:`.attacks.longitudinal` on the real client, ``trials``
    devices; past ``max_draws`` fresh draws a lower bound, flagged: more reports
    never lower the optimal attacker's success), the ceiling at the epsilon spent and
    the verdict of :func:`.ceilings.strength`.  The same figures for fresh reports
    (no memo, no budget, no layer) are in ``fresh``, for comparison.  With a config,
    ``over_time`` is :func:`mss_aggregator.privacy.over_time.over_time` for it (the
    figures ``mss plan --json`` prints as ``privacy_over_time``: fresh, memoized and
    budgeted at a day, 30 days and the campaign, with the value's worst case; with ``change``,
    a :class:`~mss_aggregator.privacy.changing.Change`, each entry's "changing" figures)."""
    k, epsilon, prior, cfg = target.k, target.epsilon, target.prior, target.cfg
    from mss_protocol import budget as budgets

    device = device or {}
    period = device.get("period_s")
    source = "device.period_s"
    if period is None:
        period, source = FIRMWARE_PERIOD_S, "firmware default (no device.period_s)"
    memoize = bool(device.get("memoize", False))
    bud = device.get("budget")
    horizons_days = deployment_horizons(campaign_days)
    max_draws = MAX_DRAWS
    reports = [max(1, int(d * DAY_S // period)) for d in horizons_days]
    no_info = ceilings.no_information(prior)
    rows = []
    for name in names:
        ch, irr = prr_channel(name, k, epsilon, cfg)
        worst = _worst_ratio(name=name, k=k, epsilon=epsilon, cfg=cfg, ch=ch)
        draw_eps = math.log(worst.numerator) - math.log(worst.denominator)
        report_eps = draw_eps
        if irr is not None and not memoize:  # every report is a fresh draw of the composed channel
            report_eps = min(draw_eps, channel(name, k, epsilon, cfg).eps_effective)
        draws = window = None
        if bud:
            draws = budgets.draws_per_window(bud, worst)
            window = bud["days"] * DAY_S / period
        row = {"protocol": name, "mode": "configured", "draws_per_window": draws,
               "epsilon_per_draw": draw_eps}
        drawing = Drawing(draw_eps=report_eps, memoize=memoize, irr=irr, draws=draws, window=window,
                          device_seed=device_seed_of(name, cfg))
        row.update(horizon_figures(ch=ch, prior=prior, reports=reports, drawing=drawing, trials=trials, seed=seed,
                                   max_draws=max_draws))
        rows.append(row)
        if memoize or bud or irr is not None:
            plain = prr_channel(name, k, epsilon)[0] if irr is not None else ch
            fresh = {"protocol": name, "mode": "fresh", "draws_per_window": None, "epsilon_per_draw": draw_eps}
            fresh.update(horizon_figures(ch=plain, prior=prior, reports=reports, drawing=Drawing(draw_eps=draw_eps),
                                         trials=trials, seed=seed, max_draws=max_draws))
            rows.append(fresh)
        if progress:
            progress()
    out = {"period_s": period, "period_source": source, "memoize": memoize, "budget": bud,
           "irr": irr_doc(cfg), "campaign_days": campaign_days, "value": "fixed (a stable reading)",
           "horizons_days": horizons_days, "reports": reports, "trials": trials, "seed": seed,
           "no_information": no_info, "max_draws": max_draws, "rows": rows}
    if cfg is not None and isinstance(period, int):  # what mss plan --json shows for it (privacy_over_time)
        try:
            from mss_aggregator.privacy.over_time import Device, Effort, over_time
        except ImportError:
            pass
        else:
            out["over_time"] = over_time(cfg=cfg, device=Device(period_s=period, memoize=memoize, budget=bud),
                                         prior=prior, campaign_days=campaign_days,
                                         effort=Effort(trials=trials, seed=seed), change=change)
    return out


def loss_so_far(cfg, device, prior, reports, trials=200, seed=0, max_draws=200):
    """One device of the deployment ``cfg`` (its ``device`` section: memoize, budget,
    period_s) after ``reports`` epochs, holding a fixed value: {"reports",
    "fresh_draws", "epsilon_spent", "success" (Bayes product attack, ``trials``
    devices), "ci", "lower_bound" (past ``max_draws`` draws), "ceiling" (at the
    epsilon spent), "no_information", "strength"} (the dashboard's privacy panel)."""
    from mss_protocol import budget as budgets

    device = device or {}
    name, k, epsilon = cfg.name, cfg.k, cfg.epsilon
    ch, irr = prr_channel(name, k, epsilon, cfg)
    worst = _worst_ratio(name=name, k=k, epsilon=epsilon, cfg=cfg, ch=ch)
    draw_eps = math.log(worst.numerator) - math.log(worst.denominator)
    memoize = bool(device.get("memoize", False))
    if irr is not None and not memoize:
        draw_eps = min(draw_eps, channel(name, k, epsilon, cfg).eps_effective)
    bud = device.get("budget")
    draws = window = None
    if bud:
        draws = budgets.draws_per_window(bud, worst)
        window = bud["days"] * DAY_S / (device.get("period_s") or FIRMWARE_PERIOD_S)
    no_info = ceilings.no_information(prior)
    drawing = Drawing(draw_eps=draw_eps, memoize=memoize, irr=irr, draws=draws, window=window,
                      device_seed=device_seed_of(name, cfg))
    figs = horizon_figures(ch=ch, prior=prior, reports=[max(1, int(reports))], drawing=drawing, trials=trials,
                           seed=seed, max_draws=max_draws)
    out = {key: value[0] for key, value in figs.items()}
    out.update(reports=max(1, int(reports)), no_information=no_info, trials=trials, draws_per_window=draws,
               epsilon_per_draw=draw_eps)
    return out


def irr_doc(cfg):
    eps1 = getattr(cfg, "irr_epsilon", None)
    if eps1 is None:
        return None
    return {"epsilon": eps1, "t": getattr(cfg, "irr_threshold", None),
            "eps_effective": getattr(cfg, "irr_eps_effective", None),
            "report_eps_effective": getattr(cfg, "report_eps_effective", None)}


def empirical_epsilon(target, names, trials, seed=0, firmware=True, control=True, alpha=0.001,
                      progress=None):
    """ldp-audit on the wire output of every client (and the firmware of the config's
    protocol, else MSS's, under the MicroPython unix port: :func:`firmware_protocol`):
    {"x1", "x2", "alpha", "rows": [...]}.  The control is MSS (GRR below k = 4)
    built for 2 epsilon but claimed at epsilon: a sound audit catches it."""
    k, epsilon, cfg = target.k, target.epsilon, target.cfg  # the prior plays no part
    rng = ByteRng(random.Random(seed).randbytes)
    rows = []

    def add(label, ch, reports, runtime, is_control=False):
        row = {"client": label, "protocol": ch.name, "runtime": runtime, "epsilon": epsilon,
               "eps_effective": ch.eps_effective, "control": is_control}
        row.update(empirical.audit_client(ch, *reports, epsilon, alpha))
        rows.append(row)
        if progress:
            progress()

    for name in names:
        ch = channel(name, k, epsilon, cfg)
        add(name, ch, [empirical.host_reports(ch, x, trials, rng) for x in (empirical.X1, empirical.X2)], "cpython")
    if firmware:
        name = firmware_protocol(k, names, cfg)
        ch = channel(name, k, epsilon, cfg)
        label = f"{name} firmware"
        try:
            fw_cfg = _device_config(name=name, k=k, epsilon=epsilon, cfg=cfg, ch=ch)
            reports = [empirical.firmware_channel_reports(ch, fw_cfg, x, trials) for x in (empirical.X1, empirical.X2)]
        except (RuntimeUnavailable, RuntimeError, subprocess.TimeoutExpired) as exc:  # shown in the row
            rows.append({"client": label, "protocol": name, "runtime": "micropython",
                         "error": str(exc), "control": False, "within_epsilon": None})
        else:
            add(label, ch, reports, "micropython")
    if control:  # a fixed reference, not the audited protocol: MSS at 2 eps (GRR below k = 4)
        name = "mss" if k >= MSS_MIN_K else "grr"
        if name == "mss":
            honest = channel("mss", k, epsilon, cfg if cfg is not None and cfg.name == "mss" else None).cfg
            broken = registry.from_config(MssConfig.build(k, 2 * epsilon, honest.moduli), "mss").channel()
        else:  # MSS needs k >= 4
            broken = make_checked("grr", k, 2 * epsilon).channel()
        add(label=f"control: {name} at 2 eps", ch=broken,
            reports=[empirical.host_reports(broken, x, trials, rng) for x in (empirical.X1, empirical.X2)],
            runtime="cpython", is_control=True)
    return {"x1": empirical.X1, "x2": empirical.X2, "alpha": alpha, "trials": trials, "rows": rows}


def _device_config(name, k, epsilon, cfg, ch):
    """The device config of protocol ``name``: the audited one, else the planner's."""
    if cfg is not None and cfg.name == name:
        return cfg
    if getattr(ch, "cfg", None) is not None:  # mss, ss
        return ch.cfg
    from mss_protocol.oracle_config import OracleConfig

    return OracleConfig(name, k, epsilon)


def firmware_protocol(k, names, cfg=None):
    """Whose firmware the empirical audit runs: the config's protocol, else MSS
    (the planner's), else (k < 4) the first protocol audited."""
    if cfg is not None:
        return cfg.name
    return "mss" if k >= MSS_MIN_K or not names else names[0]


def _ci(ci):
    return f"[{ci[0]:.4g}, {ci[1]:.4g}]"


def conflicts(report):
    """The simulated successes of the repeated-report sections (``longitudinal``,
    ``deployment`` and its ``over_time``) that lie above their exact bound beyond
    sampling noise (:func:`.attacks.bounded_rate`), one sentence each."""
    out = []
    lon, dep = report.get("longitudinal") or {}, report.get("deployment") or {}
    for name, section, horizons, at in (("longitudinal", lon, lon.get("horizons", []), "T = {}"),
                                        ("deployment", dep, dep.get("horizons_days", []), "{} days")):
        for r in section.get("rows", []):
            for t, bad, m, ci, b in zip(horizons, r["conflict"], r["measured"], r["ci"], r["bound"]):
                if bad:
                    out.append(f"{name} {r['protocol']} {r['mode']}, {at.format(t)}: simulated success {m:.4g} "
                               f"{_ci(ci)} above its exact bound {b:.4g} beyond sampling noise")
    for h in (dep.get("over_time") or {}).get("horizons", []):
        for mode in dep["over_time"]["modes"]:
            m = h[mode]
            if m["conflict"]:
                out.append(f"over time {mode}, {h['days']} days: simulated success {m['measured']:.4g} "
                           f"{_ci(m['ci'])} above its exact bound {m['bound']:.4g} beyond sampling noise")
            c = m.get("changing")
            if c and c["conflict"]:
                out.append(f"over time {mode}, {h['days']} days, a changing value: simulated success "
                           f"{c['measured']:.4g} {_ci(c['ci'])} above its ceiling {c['bound']:.4g} beyond sampling noise")
    return out


def problems(report):
    """What makes the audit fail: an exact success above the ceiling (impossible
    for a correct channel), a simulated one above its exact bound beyond sampling
    noise (:func:`conflicts`), a client whose empirical epsilon exceeds its claim,
    or a broken control the empirical audit did not catch."""
    out = []
    for r in report["rows"]:
        if r["bayes_exact"] is not None and r["bayes_exact"] > report["ceiling"] * (1 + 1e-9):
            out.append(f"{r['protocol']}: exact success {r['bayes_exact']:.4g} above the ceiling")
        for key in ("empirical", "paper_rule_empirical"):
            if r.get(f"{key}_conflict"):
                out.append(f"{r['protocol']}: measured success {r[f'{key}_measured']:.4g} {_ci(r[f'{key}_ci'])} above "
                           f"the ceiling {report['ceiling']:.4g} beyond sampling noise")
    out.extend(conflicts(report))
    for r in report.get("epsilon_audit", {}).get("rows", []):
        if r.get("within_epsilon") is None:
            continue
        if r["control"] and r["within_epsilon"]:
            out.append(f"{r['client']}: the broken control was not caught (bound "
                       f"{r['eps_lower_bound']:.3f}); use more --audit-trials")
        elif not r["control"] and not r["within_epsilon"]:
            out.append(f"{r['client']} ({r['runtime']}): empirical epsilon >= {r['eps_lower_bound']:.3f} "
                       f"exceeds {r['epsilon']}")
    return out
