"""What ``mss audit`` computes: reconstruction risk per protocol against the
ceilings, its growth over repeated reports, and the empirical epsilon of
the real clients.  Every function returns plain JSON-ready data.
"""
import random
import subprocess

from mss_aggregator.devices.runtime import RuntimeUnavailable
from mss_aggregator.privacy import attacks, ceilings, empirical
from mss_device.rng import ByteRng
from mss_protocol import registry
from mss_protocol.mss.config import MssConfig

PROTOCOLS = registry.AVAILABLE
HORIZONS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


def channel(name, k, epsilon, cfg=None):
    """The attacker's view of protocol ``name`` (:mod:`mss_protocol.channel`);
    ``cfg``: audit this configuration (of ``name``, or an MSS one for mss)
    instead of the planner's."""
    if cfg is not None and cfg.name in (name, "ss" if name == "mss" else name):
        return registry.from_config(cfg, name).channel()
    return registry.make_checked(name, k, epsilon).channel()


def _method(ch, exact):
    if exact is None:
        return None
    return "enumeration" if hasattr(ch, "n_outputs") else "closed form"


def reconstruction_row(ch, prior, trials, seed):
    """One protocol: the paper's rule and the Bayes-optimal attacker, exact
    where computable, and both run empirically on ``trials`` devices."""
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
        row["empirical"], row["empirical_ci"] = attacks.rate(hits["bayes"], trials)
        row["paper_rule_empirical"], row["paper_rule_empirical_ci"] = attacks.rate(hits["paper"], trials)
    if paper is None and trials:  # neither exact nor published: the measurement
        row["paper_rule"], row["paper_rule_method"] = row["paper_rule_empirical"], "empirical"
    return row


def reconstruction(k, epsilon, prior, prior_spec, names, trials, seed=0, cfg=None, progress=None):
    """The audit's main JSON: {"k", "epsilon", "prior", "ceiling", "bounds", "rows"}."""
    rows = []
    for name in names:
        rows.append(reconstruction_row(channel(name, k, epsilon, cfg), prior, trials, seed))
        if progress:
            progress()
    return {"k": k, "epsilon": epsilon, "prior": prior_spec,
            "ceiling": ceilings.ldp_prior(prior, epsilon), "bounds": ceilings.bounds(prior, epsilon),
            "trials": trials, "seed": seed, "rows": rows}


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


def longitudinal(k, epsilon, prior, names=("mss", "grr"), horizons=HORIZONS, trials=100, seed=0,
                 cfg=None, progress=None):
    """Bayes-optimal success after T reports of one fixed value, fresh and memoized:
    {"horizons", "trials", "ceiling" (the LDP ceiling at T epsilon), "rows": [...]}."""
    horizons = sorted(set(horizons))
    rows = []
    for name in names:
        ch = channel(name, k, epsilon, cfg)
        for mode in ("fresh", "memoize"):
            hits = attacks.longitudinal(ch, prior, horizons, trials, seed, memoize=mode == "memoize")
            rates = [attacks.rate(h, trials) for h in hits]
            rows.append({"protocol": name, "mode": mode, "success": [r[0] for r in rates],
                         "ci": [r[1] for r in rates]})
            if progress:
                progress()
    return {"horizons": horizons, "trials": trials, "seed": seed,
            "ceiling": [ceilings.ldp_prior(prior, t * epsilon) for t in horizons],
            "memoize_ceiling": ceilings.ldp_prior(prior, epsilon), "rows": rows}


def empirical_epsilon(k, epsilon, names, trials, seed=0, firmware=True, control=True,
                      alpha=0.001, cfg=None, progress=None):
    """ldp-audit on the wire output of every client (and the firmware under the
    MicroPython unix port): {"x1", "x2", "alpha", "rows": [...]}.  The control
    is MSS built for 2 epsilon but claimed at epsilon: a sound audit catches it."""
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
        ch = channel("mss", k, epsilon, cfg)
        try:
            reports = [empirical.firmware_reports(ch.cfg, x, trials) for x in (empirical.X1, empirical.X2)]
        except (RuntimeUnavailable, RuntimeError, subprocess.TimeoutExpired) as exc:  # shown in the row
            rows.append({"client": "mss firmware", "protocol": "mss", "runtime": "micropython",
                         "error": str(exc), "control": False, "within_epsilon": None})
        else:
            add("mss firmware", ch, reports, "micropython")
    if control:
        honest = channel("mss", k, epsilon, cfg).cfg
        broken = registry.from_config(MssConfig.build(k, 2 * epsilon, honest.moduli), "mss").channel()
        add("control: mss at 2 eps", broken,
            [empirical.host_reports(broken, x, trials, rng) for x in (empirical.X1, empirical.X2)], "cpython", True)
    return {"x1": empirical.X1, "x2": empirical.X2, "alpha": alpha, "trials": trials, "rows": rows}


def problems(report):
    """What makes the audit fail: an exact success above the ceiling (impossible
    for a correct channel), a client whose empirical epsilon exceeds its claim,
    or a broken control the empirical audit did not catch."""
    out = []
    for r in report["rows"]:
        if r["bayes_exact"] is not None and r["bayes_exact"] > report["ceiling"] * (1 + 1e-9):
            out.append(f"{r['protocol']}: exact success {r['bayes_exact']:.4g} above the ceiling")
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
