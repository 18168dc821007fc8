"""``mss audit``: reconstruction risk, repeated reports and the empirical epsilon audit."""
import sys
from types import SimpleNamespace

import click
from rich.table import Table

from mss_aggregator import jsonout
from mss_aggregator.distributions import DistributionError, parse
from mss_cli import changing as change_opts
from mss_cli import learned as learned_opts
from mss_cli.common import (AUDIT_FAILED, EPSILON, SEED, NumberList, console, csv_list, fail, make_console,
                            output_file, progress, writing)
from mss_iot import Campaign
from mss_protocol import registry
from mss_protocol.config_file import ConfigError
from mss_protocol.limits import MAX_K
from mss_protocol.privacy import MAX_EPSILON

AUDIT_PROTOCOLS = ",".join(registry.AVAILABLE)  # every protocol
# privacy.audit.HORIZONS, written out to keep startup light (that module imports SciPy)
AUDIT_HORIZONS = "1,2,5,10,20,50,100,200,500,1000"


@click.command("audit")
@click.option("--k", "k", type=click.IntRange(2, MAX_K - 1),
              help="Domain size (or take it from --config); MSS needs k >= 4 and is left out below.")
@click.option("--epsilon", type=EPSILON,
              help="Privacy budget (or take it from --config).")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="Audit this deployment (mss plan --device-config): its protocol only unless --protocols, "
                   "its firmware in --empirical, and with --longitudinal its device.period_s, memoize, "
                   "budget and instantaneous layer over --campaign-days.")
@click.option("--prior", "prior_spec", default="uniform", show_default=True,
              help="Attacker's prior: uniform, zipf:S, spike, file:est.json (mss estimate --json) "
                   "or file:counts.csv.")
@click.option("--protocols", "names", default=None, callback=lambda c, p, v: None if v is None else csv_list(str)(c, p, v),
              help=f"Protocols to audit [default: the --config's, else {AUDIT_PROTOCOLS}; "
                   f"--longitudinal: the config's, else mss,grr].")
@click.option("--trials", type=click.IntRange(0, 10**7), default=10000, show_default=True,  # 10**6 takes 18 s
              help="Devices in the empirical attack run (0: exact values only).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the simulated devices and reports.")
@click.option("--json", "as_json", is_flag=True, help="Print the audit as JSON.")
@click.option("--plot", type=click.Path(dir_okay=False), callback=output_file,
              help="PNG: success vs epsilon with the ceilings.")
@click.option("--plot-epsilons", default="0.5,1,2,3,4,5", show_default=True, type=NumberList(EPSILON),
              help="The epsilons --plot's curves are drawn at (and --epsilon), comma-separated.")
@click.option("--longitudinal", is_flag=True, help="Also attack T repeated reports (fresh and memoized).")
@click.option("--horizons", default=AUDIT_HORIZONS, show_default=True,
              type=NumberList(click.IntRange(1, 10**6)),  # T bytes a trial and protocol
              help="Report counts T for --longitudinal.")
@click.option("--long-trials", type=click.IntRange(1, 10**6), default=100, show_default=True,
              help="Devices per protocol and mode for --longitudinal.")
@click.option("--campaign-days", type=click.IntRange(1, 36500), default=365, show_default=True,
              help="--longitudinal with --config: the campaign's length in days.")
@click.option("--link-pairs", type=click.IntRange(10, 10**7), default=1000, show_default=True,
              help="--longitudinal: report pairs (same device, and two devices) for the linkability test.")
@click.option("--empirical", is_flag=True,
              help="Also audit epsilon empirically on every client's wire output (ldp-audit).")
@click.option("--audit-trials", type=click.IntRange(100, 10**8), default=20000, show_default=True,
              help="Reports per input for --empirical.")
@click.option("--firmware/--no-firmware", default=True, show_default=True,
              help="Include the firmware under the MicroPython unix port in --empirical.")
@click.option("--control/--no-control", default=True, show_default=True,
              help="Include a deliberately broken client (MSS at 2 epsilon) that --empirical must catch.")
@learned_opts.options
@change_opts.options
def audit_cmd(**options):
    """Reconstruction risk of one report (and of many) against the provable ceilings,
    and an empirical epsilon audit of the real clients."""
    from mss_aggregator.audit import selection, steps
    from mss_iot import AuditRequestError, audit

    o = SimpleNamespace(**options)
    request = _request(o)
    try:
        _, skipped, _, long_skipped = selection(request)
    except AuditRequestError as exc:
        if exc.field == "names":
            raise click.BadParameter(str(exc), param_hint="--protocols")
        raise click.UsageError(str(exc))
    for s in skipped or long_skipped[:o.longitudinal]:
        console.print(f"[yellow]left out:[/yellow] {s['reason']}")
    try:
        with progress("audit", steps(request)) as tick:
            report = audit(request, progress=tick).to_dict()
        if o.plot:
            _plot(request, report, o.plot, o.plot_epsilons)
    except (ConfigError, ValueError) as exc:  # a protocol that takes no such (k, epsilon): OLH above k = 32749, ...
        fail(str(exc))
    from mss_aggregator.privacy.audit import problems as audit_problems

    problems = audit_problems(report)
    if o.as_json:
        click.echo(jsonout.dumps(report))
    else:
        _print_audit(report, o.plot)
    for p in problems:
        console.print(f"[red]audit failed:[/red] {p}")
    if problems:
        sys.exit(AUDIT_FAILED)


def _deployment(o):
    """(k, epsilon, config, device section) of the options: --config's, checked against --k and --epsilon."""
    k, epsilon, cfg, device = o.k, o.epsilon, None, None
    if o.config_path:
        try:
            campaign = Campaign.read(o.config_path)
        except ConfigError as exc:
            fail(str(exc))
        cfg, device = campaign.cfg, campaign.device
        if (k is not None and k != cfg.k) or (epsilon is not None and epsilon != cfg.epsilon):
            fail(f"--k/--epsilon disagree with {o.config_path} (k={cfg.k}, epsilon={cfg.epsilon})")
        k, epsilon = cfg.k, cfg.epsilon
    if k is None or epsilon is None:
        raise click.UsageError("give --k and --epsilon, or --config")
    return k, epsilon, cfg, device


def _request(o):
    """The :class:`mss_aggregator.audit.AuditRequest` of the options, their combinations checked."""
    from mss_aggregator.audit import AuditRequest, Empirical, Longitudinal

    k, epsilon, cfg, device = _deployment(o)
    change = change_opts.change_model(o.change_every, o.transitions, k)
    if change is not None and not ((o.longitudinal or o.learned) and cfg is not None):
        raise click.BadParameter("a value that changes is audited for a deployment: needs --config and "
                                 "--longitudinal or --learned",
                                 param_hint="--change-every" if o.change_every else "--transitions")
    if o.public_path and not o.learned:
        raise click.UsageError("--public-signal goes with --learned")
    campaign = None
    if o.learned:
        campaign = learned_opts.campaign(cfg, o.public_path, follow=o.public_follow, devices=o.learned_devices,
                                         days=o.learned_days, change_every=o.change_every,
                                         transitions=o.transitions, seed=o.seed)
    try:
        prior = parse(o.prior_spec, k)
    except DistributionError as exc:
        fail(str(exc))
    if o.empirical and o.control and 2 * epsilon > MAX_EPSILON:
        raise click.UsageError(f"--empirical's broken control is MSS at 2 epsilon, above {MAX_EPSILON:.4f} "
                               f"(the largest epsilon) for epsilon {epsilon}; give --no-control")
    longitudinal = (Longitudinal(horizons=o.horizons, trials=o.long_trials, campaign_days=o.campaign_days,
                                 link_pairs=o.link_pairs, change=change) if o.longitudinal else None)
    empirical = (Empirical(trials=o.audit_trials, firmware=o.firmware, control=o.control) if o.empirical
                 else None)
    return AuditRequest(k=k, epsilon=epsilon, prior=prior, prior_spec=o.prior_spec,
                        names=None if o.names is None else tuple(o.names), trials=o.trials, seed=o.seed,
                        config=cfg, device=device, longitudinal=longitudinal, learned=campaign, empirical=empirical)


def _plot(request, report, path, epsilons):
    """--plot: success against epsilon, the ceilings, and the longitudinal curves (PNG)."""
    from mss_aggregator.audit import selection
    from mss_aggregator.plotting import plot_audit
    from mss_aggregator.privacy.audit import sweep

    names = selection(request)[0]
    grid = sorted(set(epsilons) | {request.epsilon})
    with writing("--plot", path):
        plot_audit(sweep(request.k, request.prior, names, grid), path, f"k={request.k}, prior {request.prior_spec}",
                   report.get("longitudinal"))


def _fmt(x, ci=None, capped=False):
    """A figure, "†" when a measurement above its exact ceiling is shown at it, and its interval."""
    if x is None:
        return "-"
    return f"{x:.4g}" + ("†" if capped else "") + (f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci else "")


CAPPED_NOTE = ("† measured above the exact ceiling by sampling noise (the interval, as measured, contains it): shown at "
               "the ceiling; the measured rate is in the JSON (docs/privacy.md section 3, simulated figures)")


def _fmt_rate(x, ci, capped):
    """A simulated success and its interval, 3 significant digits as its ceiling (monotone rounding:
    a figure at most its ceiling never prints above it)."""
    return f"{x:.3g}" + ("†" if capped else "") + f" [{ci[0]:.3g}, {ci[1]:.3g}]"


def _print_audit(report, plot):
    out = make_console()
    capped = _print_reconstruction(out, report)
    if report.get("longitudinal"):
        capped = _print_longitudinal(out, report["longitudinal"]) or capped
    if report.get("linkability"):
        _print_linkability(out, report["linkability"])
    if report.get("deployment"):
        capped = _print_deployment(out, report["deployment"]) or capped
    if report.get("learned"):
        learned_opts.print_learned(out, report["learned"])
    if report.get("epsilon_audit"):
        _print_epsilon_audit(out, report["epsilon_audit"])
    if capped:
        out.print(CAPPED_NOTE, highlight=False)
    if plot:
        out.print(f"plot: {plot}")


def _print_reconstruction(out, report):
    """The single-report table, the config and the ceilings; whether a figure is shown capped."""
    b = report["bounds"]
    table = Table(title=f"single-report reconstruction: k={report['k']}, epsilon={report['epsilon']}, "
                        f"prior {report['prior']}, {report['trials']} devices per empirical run")
    for col in ("protocol", "eps_eff", "paper rule", "(how)", "paper rule measured [95% CI]",
                "Bayes-optimal exact", "Bayes measured [95% CI]", "of ceiling"):
        table.add_column(col, justify="right")
    for r in report["rows"]:
        best = r["bayes_exact"] if r["bayes_exact"] is not None else r["empirical"]
        share = f"{best / report['ceiling']:.0%}" if best is not None else "-"
        table.add_row(r["protocol"], f"{r['eps_effective']:.4f}", _fmt(r["paper_rule"]),
                      r["paper_rule_method"] or "-",
                      _fmt(r["paper_rule_empirical"], r["paper_rule_empirical_ci"],
                           r.get("paper_rule_empirical_capped")),
                      _fmt(r["bayes_exact"]), _fmt(r["empirical"], r["empirical_ci"], r.get("empirical_capped")), share)
    out.print(table)
    capped = any(r.get("empirical_capped") or r.get("paper_rule_empirical_capped") for r in report["rows"])
    conf = report.get("config")
    if conf:
        irr = conf["irr"]
        out.print(f"config {conf['config_id']}: {conf['protocol']}, frame {conf['frame']}, eps_effective "
                  f"{conf['eps_effective']:.4f}" + (f", instantaneous layer eps_effective {irr['eps_effective']:.4f}, "
                                                    f"one report's {irr['report_eps_effective']:.4f}" if irr else ""))
    out.print(f"ceiling for any {report['epsilon']}-LDP protocol with this prior: {report['ceiling']:.4g}  "
              f"(uniform-prior ceiling {b['ldp_uniform']:.4g}, ReRo bound {b['rero']:.4g}, "
              f"no information {b['no_information']:.4g}, random guess {b['random_guess']:.4g})")
    return capped


def _print_longitudinal(out, lon):
    """The repeated-reports table; whether a figure is shown capped."""
    table = Table(title=f"repeated reports of one value ({lon['trials']} devices, Bayes-optimal; simulated "
                        f"[95% CI], exact without one; ≤ its exact ceiling)")
    table.add_column("T", justify="right")
    for r in lon["rows"]:
        table.add_column(f"{r['protocol']} {r['mode']}", justify="right")
        table.add_column("ceiling", justify="right")
    for i, t in enumerate(lon["horizons"]):
        cells = []
        for r in lon["rows"]:
            cells += [f"{r['success'][i]:.3g} (exact)" if r["exact"] else
                      _fmt_rate(r["success"][i], r["ci"][i], r["capped"][i]), f"{r['bound'][i]:.3g}"]
        table.add_row(str(t), *cells)
    out.print(table)
    out.print("ceiling: the most any protocol concedes at T eps (memoize: at eps), or the exact success of an "
              "attacker who knows the memoized draw if lower")
    if any(r.get("exact") for r in lon["rows"]):
        out.print("memoize without an instantaneous layer: one draw re-sent, the exact single-report success "
                  "at every T (the simulation's figure is in the JSON's measured)")
    return any(any(r["capped"]) for r in lon["rows"])


def _print_linkability(out, link):
    """The linkability table of a memoized device."""
    table = Table(title=f"linkability of a memoized device: {link['test']} ({link['pairs']} pairs each)")
    for col in ("protocol", "mode", "irr epsilon (p1)", "TPR", "FPR", "advantage", "exact advantage"):
        table.add_column(col, justify="right")
    for r in link["rows"]:
        irr = r["irr"]
        table.add_row(r["protocol"], r["mode"],
                      "-" if irr is None else f"{irr['epsilon']:.3g} ({irr['p1']:.3f})"
                      + ("" if irr["configured"] else " (not configured)"),
                      _fmt(r["tpr"], r["tpr_ci"]), _fmt(r["fpr"], r["fpr_ci"]), f"{r['advantage']:.3f}",
                      "-" if r["exact"] is None else f"{r['exact']['advantage']:.3f}")
    out.print(table)


def _print_deployment(out, dep):
    """The deployment's table over its campaign (and a changing value's); whether a figure is shown capped."""
    bud = dep["budget"]
    irr = dep["irr"]
    table = Table(title=f"the deployment over {dep['campaign_days']} days: a stable value reported every "
                        f"{dep['period_s']} s ({dep['period_source']}), memoize "
                        f"{'on' if dep['memoize'] else 'off'}, budget "
                        + (f"{bud['epsilon']:g} per {bud['days']} days" if bud else "none") + ", irr "
                        + (f"epsilon {irr['epsilon']:g}" if irr else "none")
                        + f" ({dep['trials']} devices, Bayes-optimal)")
    for col in ("protocol", "mode", "days", "reports", "fresh draws", "epsilon spent", "attacker success",
                "no information", "ceiling", "verdict"):
        table.add_column(col, justify="right")
    colour = {"weak": "red", "moderate": "yellow", "strong": "green"}
    for r in dep["rows"]:
        for i, d in enumerate(dep["horizons_days"]):
            success = ("≥ " if r["lower_bound"][i] else "") + (
                f"{r['success'][i]:.3g} (exact)" if r["exact"][i] else
                _fmt_rate(r["success"][i], r["ci"][i], r["capped"][i]))
            verdict = r["strength"][i]
            table.add_row(r["protocol"], r["mode"], str(d), str(dep["reports"][i]), str(r["fresh_draws"][i]),
                          f"{r['epsilon_spent'][i]:.3g}", success, f"{dep['no_information']:.3g}",
                          f"{r['bound'][i]:.3g}", f"[{colour[verdict]}]{verdict}[/{colour[verdict]}]")
    out.print(table)
    out.print("verdict: weak when the attacker is right at least half the time or has gained half the room "
              "above the prior; moderate from 10 points above the prior (docs/privacy.md)")
    ot = dep.get("over_time") or {}
    if ot.get("change"):
        b = ot["budget"]
        change_opts.print_changing(out, ot, {"fresh": "fresh", "memoized": "memoized", "budgeted":
                                             f"budget {b['epsilon']:g}/{b['days']}d" if b else ""})
    return any(any(r["capped"]) for r in dep["rows"])


def _print_epsilon_audit(out, ea):
    """The empirical epsilon table (ldp-audit) of every client."""
    table = Table(title=f"empirical epsilon (ldp-audit): inputs {ea['x1']} vs {ea['x2']}, "
                        f"{ea['trials']} reports each, Clopper-Pearson alpha={ea['alpha']}")
    for col in ("client", "runtime", "eps_eff", "TP", "FP", "eps lower bound", "verdict"):
        table.add_column(col, justify="right")
    for r in ea["rows"]:
        if "error" in r:
            table.add_row(r["client"], r["runtime"], "-", "-", "-", "-", f"not run: {r['error']}")
            continue
        verdict = ("caught" if not r["within_epsilon"] else "NOT caught") if r["control"] else \
            ("<= epsilon" if r["within_epsilon"] else "EXCEEDS epsilon")
        table.add_row(r["client"], r["runtime"], f"{r['eps_effective']:.4f}", str(r["tp"]), str(r["fp"]),
                      f"{r['eps_lower_bound']:.3f}", verdict)
    out.print(table)
