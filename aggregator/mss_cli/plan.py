"""``mss plan``: choose a protocol and its configuration for a domain, a budget and a link.

The command maps its options to a :class:`mss_aggregator.plan.PlanRequest`, plans it
(:func:`mss_aggregator.plan.plan`) and renders the :class:`~mss_aggregator.plan.Plan` as a table or
as JSON; the option combinations a request cannot express are refused here, and the planner's
errors, which name the request's fields, are shown naming the options."""
import json
import math
import os
from types import SimpleNamespace

import click
from click.core import ParameterSource
from rich.table import Table

from mss_aggregator.distributions import DistributionError
from mss_aggregator.plan import DEFAULT_BOARD, DEFAULT_MODEM, ESTIMATE_EVERY_S
from mss_aggregator.privacy.over_time import CAMPAIGN_DAYS
from mss_cli import changing as change_opts
from mss_cli.common import EPSILON, MAX_BITS, SEED, YEAR_S, CompromisedParam, FloatRange, fail, figure, make_console
from mss_device.frame import KINDS
from mss_iot import Hardware, Limits, PlanRequest, Question, Reporting, RequestError, Shuffling, plan
from mss_node.settings import DEVICE_DEFAULTS
from mss_protocol import budget as budgets
from mss_protocol import device_cost, energy, lorawan, shuffling
from mss_protocol.choose import CHOICES, COST_TIE, MAX_DEVICE_MS, MSE_SLACK, N_DEFAULT
from mss_protocol.limits import MAX_K
from mss_protocol.mss.planner import PlanError
from mss_protocol.progress import Reporter

FLAGS = {"epsilon": "--epsilon", "protocol": "--protocol", "question.target_se": "--target-se",
         "reporting.budget": "--budget", "reporting.irr_epsilon": "--irr-epsilon", "hardware.board": "--board",
         "hardware.modem": "--modem", "hardware.battery_mah": "--battery", "hardware.period_s": "--period",
         "hardware.cell": "--cell", "hardware.resets_per_year": "--resets-per-year",
         "question.estimate_every_s": "--estimate-every",
         "hardware.link": "--link lorawan:REGION:DR", "question.detect": "--detect",
         "reporting.memoize": "--fresh-reports", "shuffle.central_epsilon": "--central-epsilon",
         "limits.max_shift": "--max-shift", "limits.compromised": "--compromised M"}


def _link(ctx, param, value):
    if value is not None and value.strip().lower() in ("mqtt", "mqtts", "wifi", "serial"):
        raise click.BadParameter(f"{value!r}: an MQTT or serial board has no payload or airtime limit to plan (its "
                                 "reports go in full frames): leave --link out; --link plans a LoRaWAN link's "
                                 f"payload, airtime and duty cycle: {lorawan.SPEC_FORM}")
    try:
        return None if value is None else lorawan.parse_link(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc))


def _slack(ctx, param, value):
    if math.isnan(value):  # click's FloatRange lets nan through (every comparison with it is false)
        raise click.BadParameter("must be a number >= 0, not nan")
    return value


def _number(ctx, param, value):
    if value is not None and math.isnan(value):  # as _slack: FloatRange lets nan through
        raise click.BadParameter("must be a number, not nan")
    return value


def _budget(ctx, param, value):
    try:
        return None if value is None else budgets.parse_budget(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc))


def _writable_in(ctx, param, value):
    """--device-config: its folder must exist (checked before planning, which can take a while)."""
    if value is not None:
        folder = os.path.dirname(os.path.abspath(value))
        if not os.path.isdir(folder):
            raise click.BadParameter(f"no such folder {folder}")
    return value


@click.command("plan")
@click.option("--k", "k", type=click.IntRange(2, MAX_K - 1), required=True, help="Domain size (categories).")
@click.option("--epsilon", type=EPSILON, default=None,
              help="Privacy budget per report (epsilon-LDP).  Required unless --central-epsilon, which plans it.")
@click.option("--protocol", type=click.Choice(CHOICES), default="auto", show_default=True,
              help="auto: of the protocols whose whole frame fits the budget, the fastest on the device among "
                   "the most accurate (--mse-slack; with --link the least energy per report; within 1% of that, "
                   "the smallest shift_per_report); or one protocol "
                   "(mss: the best MSS configuration, compared honestly with SubsetSelection).")
@click.option("--max-bytes", type=click.IntRange(1, MAX_BITS // 8), default=None,
              help="Largest whole report (header + body) in bytes, e.g. 11 for LoRaWAN US915 DR0.")
@click.option("--max-bits", type=click.IntRange(1, MAX_BITS), default=None, help="Largest report body in bits.")
@click.option("--frame", type=click.Choice(KINDS), default="full", show_default=True,
              help="full: 11-byte header; compact: 1 byte, for links that carry the device id and "
                   "counter (LoRaWAN); compact-epoch: 3 bytes, the link carries the device id only.")
@click.option("--link", type=str, callback=_link, default=None, metavar="lorawan:REGION:DR",
              help="LoRaWAN link (regions " + ", ".join(lorawan.REGIONS) + "): --max-bytes from the "
                   "region's payload table, a compact frame (olh: compact-epoch) unless --frame is given, "
                   "and the airtime and reports/day of the chosen report.")
@click.option("--n", "n", type=click.IntRange(1, 10**12), default=N_DEFAULT, show_default=True,
              help="Fleet size: reports the predicted MSE, the resolution (per-item standard error, 95% "
                   "half-width, detectable frequency) and the decode time are stated for.  With --detect or "
                   "--target-se and no --n: the devices the chosen protocol needs.")
@click.option("--detect", type=FloatRange(0, 1, min_open=True), default=None, callback=_number, metavar="F",
              help="The smallest frequency the operator needs to see (one-sided 5% test, 80% power): each "
                   "candidate states the devices it needs, auto chooses the fewest (within --mse-slack) and, "
                   "without --n, states the plan at that fleet size.")
@click.option("--target-se", type=FloatRange(0, 1, min_open=True), default=None, callback=_number,
              metavar="S", help="A per-item standard error to reach: as --detect, the devices needed for it.")
@click.option("--prior", "prior_spec", default="uniform", show_default=True,
              help="Value distribution the MSE is predicted at: uniform, zipf:S, spike, "
                   "file:est.json (mss estimate --json) or file:counts.csv.")
@click.option("--max-device-ms", type=FloatRange(0, 3.6e6, min_open=True), default=MAX_DEVICE_MS,
              show_default=True,
              help="Per-report device time budget on the --board (default an RP2040), from its instruction "
                   "counts: auto leaves out protocols above it; a protocol named with --protocol is warned about.")
@click.option("--mse-slack", type=FloatRange(0, 10), default=MSE_SLACK, show_default=True, callback=_slack,
              help="auto: protocols whose predicted MSE is within this fraction of the lowest tie, and the "
                   "fastest on the device wins, with --link the least energy per report, and of those within 1% "
                   "of it the most robust, the smallest shift_per_report (0: the most accurate, whatever its "
                   "device time).")
@click.option("--compromised", type=CompromisedParam(), default=None,
              help="Devices an attacker may control: a count (3) or a share of the reports (1% or 0.01); each "
                   "candidate then states worst_shift, the most M crafted reports can move one item's estimate.")
@click.option("--max-shift", type=FloatRange(0, 1e6, min_open=True), default=None, callback=_number, metavar="S",
              help="With --compromised: leave out the protocols whose worst shift of one item's estimate "
                   "(a frequency) is above S.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of MSS's moduli search.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--device-config", type=click.Path(dir_okay=False, writable=True), callback=_writable_in,
              help="Write the config file devices and the aggregator load (it names its protocol, "
                   "and its device.period_s is the campaign clock the aggregator needs; device.sleep: with "
                   "--link what the board sleeps best in between reports, light on an rp2040, deep on an "
                   "esp32/esp32c3, else none).")
@click.option("--period", type=click.IntRange(1, YEAR_S), default=None, metavar="S",
              help="The boards' reporting period in whole seconds (device.period_s, one report an epoch). "
                   "Default: with --link the longer of --estimate-every and the shortest its budget allows (a "
                   f"shorter one is refused), else the firmware's {DEVICE_DEFAULTS['period_s']}.")
@click.option("--estimate-every", type=click.IntRange(1, YEAR_S), default=None, metavar="S",
              help=f"With --link: how often the operator needs a new estimate, s (default {ESTIMATE_EVERY_S}, one a "
                   "day); each takes one report from every device, and memoized re-sends of a stable value add "
                   "nothing, so without --period the period is the longer of S and the link's shortest: the "
                   "least energy that serves the question (docs/energy.md).")
@click.option("--board", type=click.Choice(tuple(device_cost.CORES)), default=None,
              help=f"The MicroPython board device_ms and --max-device-ms are of (default {DEFAULT_BOARD}: a Pico W; "
                   "docs/device-cost.md), with --link also of the energy model (docs/energy.md; "
                   + ", ".join(energy.BOARDS) + ").")
@click.option("--modem", type=click.Choice(tuple(energy.MODEMS)), default=None,
              help=f"With --link: the LoRaWAN AT modem of the energy model (default {DEFAULT_MODEM}).")
@click.option("--battery", type=FloatRange(0, 1e7, min_open=True), default=None, metavar="MAH",
              help="With --link: battery capacity in mAh; the plan states the days it lasts, and warns when that is "
                   "shorter than --campaign-days (docs/energy.md).")
@click.option("--cell", type=click.Choice(tuple(energy.CELLS)), default=None,
              help=f"With --link: the battery's cell (default {energy.DEFAULT_CELL}): its voltage, self-discharge "
                   "and shelf life, which caps the days (docs/energy.md).")
@click.option("--resets-per-year", type=FloatRange(0, 1e5), default=None, callback=_number, metavar="R",
              help=f"With --link: the resets a year each board rejoins after (default {energy.RESETS_PER_YEAR}, an "
                   "assumption; the RN2483 rejoins after every boot, the RAK3172 and Wio-E5 after a power cut): the "
                   "campaign's 1 + R x days / 365 joins are counted in the energy (docs/energy.md).")
@click.option("--no-cache", is_flag=True, help="Recompute MSS plans even if a cached plan exists.")
@click.option("--campaign-days", type=click.IntRange(min=1, max=36500), default=CAMPAIGN_DAYS, show_default=True,
              metavar="D", help="The campaign's length: the privacy over time is stated at 1 day, 30 days and D days.")
@click.option("--budget", "budget_spec", callback=_budget, default=None, metavar="EPS/DAYS",
              help=f"device.budget: at most EPS spent on fresh draws in any DAYS days, enforced by the board "
                   f"(default {budgets.DEFAULT_FACTOR} x --epsilon per {budgets.DEFAULT_DAYS} days).")
@click.option("--fresh-reports", is_flag=True,
              help="Every report a fresh draw: no device.memoize and no device.budget (the privacy loss grows "
                   "with every report; the plan prints the attacker's success after a day in red).")
@click.option("--irr-epsilon", type=EPSILON, default=None, metavar="E1",
              help="An instantaneous layer (RAPPOR's IRR) at E1 per report over the memoized draw: grr, olh, hr "
                   "and pgr only (repeated reports are no longer identical).")
@click.option("--shuffle-n", type=click.IntRange(1, 10**12), default=None, metavar="N",
              help="Reports pass an anonymising shuffler (mss shuffle) in batches of N devices: the plan states "
                   "the central (eps_c, --delta) of a batch at its epsilon (docs/privacy.md), states the MSE at "
                   "n = N unless --n is given, and leaves out OLH (its hash seed names the device).")
@click.option("--delta", type=FloatRange(0, 1, min_open=True, max_open=True), default=shuffling.DEFAULT_DELTA,
              callback=_number, show_default=True, metavar="D", help="With --shuffle-n: the central delta of each "
                                                                       "epoch's shuffled batch.")
@click.option("--central-epsilon", type=EPSILON, default=None, metavar="C",
              help="With --shuffle-n: plan at the largest epsilon per report (at most "
                   f"{shuffling.EPS0_MAX:g}) whose shuffled batch of N is (C, --delta)-DP, and state its MSE beside "
                   "the pure-local plan at epsilon C.  Replaces --epsilon (give one of them).")
@change_opts.options
def plan_cmd(**options):
    """Choose the protocol and parameters for K categories at EPSILON."""
    o = SimpleNamespace(**options)
    request = _request(click.get_current_context(), o)
    err = make_console(stderr=True)  # MSS's search says how far it is once it has taken 2 s, on stderr
    try:
        p = plan(request, progress=Reporter(lambda text: err.print(text, markup=False, highlight=False)))
    except RequestError as exc:
        raise _bad_option(exc)
    except (DistributionError, PlanError) as exc:
        fail(str(exc))
    if o.device_config:
        try:
            p.save_device_config(o.device_config)
        except OSError as exc:
            fail(f"--device-config {o.device_config}: cannot write it: {exc.strerror or exc}")
    if o.as_json:
        click.echo(json.dumps(p.to_dict(), indent=1))
    else:
        _print_plan(make_console(), p, o.device_config)


def _request(ctx, o):
    """The :class:`PlanRequest` of the options; the combinations a request cannot express (a central
    epsilon or a delta without a shuffled batch, no epsilon at all) refused naming the options."""
    def given(name):
        return ctx.get_parameter_source(name) != ParameterSource.DEFAULT

    change = change_opts.change_model(o.change_every, o.transitions, o.k)
    if o.central_epsilon is not None and o.shuffle_n is None:
        raise click.BadParameter("needs --shuffle-n N (the central epsilon is of a shuffled batch of N reports)",
                                 param_hint="--central-epsilon")
    if o.shuffle_n is None and given("delta"):
        raise click.BadParameter("needs --shuffle-n N (the delta is of a shuffled batch)", param_hint="--delta")
    if o.central_epsilon is not None and o.epsilon is not None:
        raise click.BadParameter("--central-epsilon plans the epsilon per report: give --epsilon or "
                                 "--central-epsilon, not both", param_hint="--epsilon")
    if o.epsilon is None and o.central_epsilon is None:
        raise click.UsageError("Missing option '--epsilon' (or --central-epsilon C with --shuffle-n N)")
    shuffle = (None if o.shuffle_n is None else
               Shuffling(n=o.shuffle_n, delta=o.delta, central_epsilon=o.central_epsilon))
    return PlanRequest(
        k=o.k, epsilon=o.epsilon, protocol=o.protocol, seed=o.seed, use_cache=not o.no_cache, shuffle=shuffle,
        limits=Limits(max_bytes=o.max_bytes, max_bits=o.max_bits, frame=o.frame if given("frame") else None,
                      max_device_ms=o.max_device_ms, max_shift=o.max_shift, compromised=o.compromised),
        question=Question(n=o.n if given("n") else None, detect=o.detect, target_se=o.target_se,
                          prior=o.prior_spec, mse_slack=o.mse_slack, estimate_every_s=o.estimate_every),
        hardware=Hardware(link=o.link, board=o.board, modem=o.modem, battery_mah=o.battery, period_s=o.period,
                          cell=o.cell, resets_per_year=o.resets_per_year),
        reporting=Reporting(memoize=not o.fresh_reports, budget=o.budget_spec, irr_epsilon=o.irr_epsilon,
                            campaign_days=o.campaign_days, change=change,
                            over_time=True if o.device_config else None))


def _bad_option(exc):
    """The usage error of a :class:`RequestError`, naming the options of its fields."""
    if exc.needs:
        words = f"needs {FLAGS[exc.needs]} ({exc.reason})"
    elif exc.excludes:
        words = f"{exc.reason}: give {FLAGS[exc.field]} or {FLAGS[exc.excludes]}, not both"
    else:
        words = exc.reason
    return click.BadParameter(words, param_hint=FLAGS[exc.field])


def _print_plan(out, p, device_config):
    """The human output: the candidates' table, the choice and why, resolution, link, energy,
    shuffle, notes, privacy over time and the options that hide change times."""
    r, result, frame, max_bytes = p.request, p.to_dict(), p.frame, p.max_bytes
    k, max_bits, prior_spec, link = r.k, r.limits.max_bits, r.question.prior, r.hardware.link
    n = result["n"]
    budget = ", ".join(x for x in (f"<= {max_bytes} bytes" if max_bytes else "",
                                   f"<= {max_bits} body bits" if max_bits else "") if x) or "no size budget"
    central = any("eps0" in c for c in result["candidates"])  # --central-epsilon: each at its own epsilon
    epsilon = "each its own (eps0)" if central else p.epsilon
    table = Table(title=f"k={k}, epsilon={epsilon}, {frame} frame, {budget}, n={n}, {prior_spec} prior",
                  caption=f"MSE: the predicted mean squared error of an item's estimated frequency at n={n}, "
                          f"the {prior_spec} prior; vs SS: MSE / SubsetSelection's (below 1: more accurate)"
                          + ("; devices: the fleet the question needs" if result["devices_needed"] is not None
                             else "")
                          + ("; eps0: the largest epsilon a report whose batch meets --central-epsilon under "
                             "the bound named (the protocol's own where proven)" if central else ""),
                  caption_justify="left")
    asked = result["devices_needed"] is not None  # a --detect or --target-se question: the devices it needs
    worst = result.get("compromised") is not None  # --compromised: the worst shift, else one report's
    cols = (("protocol",) + ("eps0", "bound") * central + ("bits", "bytes", "MSE", "vs SS") + ("devices",) * asked
            + ("worst shift" if worst else "shift/report", "dev ms*", "dec s*", "note"))
    for col in cols:
        table.add_column(col, justify="left" if col in ("protocol", "note") else "right")
    for c in result["candidates"]:
        chosen = c["protocol"] == result["protocol"]
        if c["predicted_mse"] is None:
            table.add_row(c["protocol"], *[""] * (len(cols) - 2), c["excluded"], style="dim")
            continue
        table.add_row(c["protocol"], *([f"{c['eps0']:g}", c["central_method"]] if central else []),
                      str(c["body_bits"]), str(c["frame_bytes"]), figure(c["predicted_mse"], 3),
                      figure(c["variance_ratio_vs_ss"], 3), *[str(c["devices_needed"])] * asked,
                      _shift_cell(c, worst), figure(c["device_ms"], 2), figure(c["decode_s"], 2),
                      "chosen" if chosen else c.get("excluded", "quick search" if c.get("search") else ""),
                      style="bold" if chosen else None)
    out.print(table)
    _print_choice(out, p)
    if link:
        _print_budget(out, link, result)
        _print_energy(out, result)
    if "shuffle" in result:
        _print_shuffle(out, result["shuffle"])
    for note in p.notes:
        out.print(f"note: [red]{_worded(note)}[/red]" if note.alarm else f"note: {_worded(note)}")
    if "privacy_over_time" in result:
        _print_over_time(out, result["privacy_over_time"], not r.reporting.memoize)
    if "hiding_options" in result:
        change_opts.print_hiding(out, result["hiding_options"])
    if device_config:
        section = result["device_budget"]
        extra = (f", device.memoize true, device.budget {section['epsilon']:g} per {section['days']} days"
                 if r.reporting.memoize else "; no device.memoize, no device.budget (--fresh-reports)")
        out.print(f"wrote {device_config} (device.period_s {result['period_s']}), device.sleep "
                  f"{result['device_sleep']}{extra}")


def _shift_cell(c, worst):
    """A candidate's manipulation figure: the worst shift of one item's estimate by the compromised
    devices, else one report's shift_per_report (of n fhat); "-" where it is not computed."""
    value = c.get("worst_shift") if worst else c.get("shift_per_report")
    return "-" if value is None else figure(value, 3)


def _worded(note):
    """A plan's note in this command's words: the options of the request fields it speaks of."""
    v = note.values
    if note.kind == "payload":
        return (f"--max-bytes {v['max_bytes']} and {v['link']}'s {v['payload']}-byte payload: the smaller, "
                f"{v['used']}, is used")
    if note.kind == "shuffle_memoized":
        return note.text.replace("(the estimate says so; fresh reports compose;",
                                 "(mss estimate says so; --fresh-reports compose;")
    return note.text


def _print_choice(out, p):
    """The models' footnote, the chosen plan and why, MSS's moduli, the resolution and the device time."""
    r, result = p.request, p.to_dict()
    isa, cpi, hz = device_cost.CORES[result["board"]]
    out.print(f"* models: device time per report on {result['board']} ({hz / 1e6:g} MHz) from {isa.upper()} "
              f"instruction counts x {cpi:g} cycles each (tools/bench_mcu.py, docs/device-cost.md), decode time "
              "on one core")
    out.print(f"chosen: {result['protocol']}, {result['body_bits']}-bit body, {result['frame_bytes']}-byte "
              f"{p.frame} frame, eps_effective {figure(result['eps_effective'], 6)}, config id {result['config_id']}")
    out.print(f"why: {_why(r.protocol, result, r.hardware.link, r.question.mse_slack)}", highlight=False)
    if result["protocol"] == "mss":
        parts = result["predicted_mse_parts"]
        out.print(f"MSS moduli {result['moduli']}, subset sizes {result['omegas']}; predicted MSE "
                  f"{result['predicted_mse']:.4g} = noise {parts['noise']:.3g} + block assignment "
                  f"{parts['assignment']:.3g}")
        if result["variance_ratio_vs_ss"] > 1 and result["body_bits"] >= result["ss_bits"]:
            out.print(f"note: SubsetSelection is better here in both MSE and bits ({result['ss_bits']} bits, "
                      f"MSE ratio {result['variance_ratio_vs_ss']:.4f}): --protocol ss")
    _print_resolution(out, r.k, result)
    if result.get("shift_per_report") is not None:
        line = (f"integrity: one crafted report moves one item's estimate by at most "
                f"{figure(result['shift_per_report'], 3)}/n")
        if result.get("worst_shift") is not None:
            line += f"; {result['compromised']} compromised devices by at most +-{figure(result['worst_shift'], 3)}"
        out.print(line, highlight=False)
    if not result["device_ok"]:
        out.print(f"[red]warning: {result['device_ms']:.3g} ms a report on {result['board']} is above --max-device-ms "
                  f"{r.limits.max_device_ms:g}[/red] (battery and watchdog: see firmware/README.md)")


def _print_shuffle(out, s):
    """The shuffle lines of the human output."""
    out.print(f"shuffled in batches of n={s['n']}: epsilon {s['eps0']:.4g} a report is a central "
              f"({s['eps_c']:.4g}, {s['delta']:g})-DP release an epoch ({s['method']})", highlight=False)
    if "local_mse" in s:
        out.print(f"planned at epsilon {s['eps0']:.4g}, the largest whose batch of {s['n']} is "
                  f"({s['central_epsilon']:g}, {s['delta']:g})-DP: predicted MSE {s['shuffled_mse']:.4g}, against "
                  f"{s['local_mse']:.4g} for the pure-local plan at epsilon {s['central_epsilon']:g} "
                  f"({s['local_protocol']}): {s['ratio']:.3g}x lower", highlight=False)


def _why(asked, result, link, slack):
    """Why the plan chose its protocol, in words: auto's rule (choose.choose) as it applied here."""
    chosen = result["protocol"]
    if asked != "auto":
        return f"--protocol {asked}"
    rivals = [c for c in result["candidates"] if c["predicted_mse"] is not None and "excluded" not in c]
    left = [c["protocol"] for c in result["candidates"] if c not in rivals]
    key, metric, least = (("devices_needed", "devices needed", "fewest") if result["devices_needed"] is not None
                          else ("predicted_mse", "predicted MSE", "lowest"))
    best = min(c[key] for c in rivals)
    near = [c["protocol"] for c in rivals if c[key] <= best * (1 + slack)]
    among = " of those not left out" if left else ""
    rule = f"within {slack:.0%} of the {least} (--mse-slack {slack:g})"
    if len(near) > 1:
        cost, costs, fastest = (("energy_mj_per_report", "energies", "the least energy per report") if link
                                else ("device_ms", "device times", "the lowest device time"))
        whose = "devices needed are" if metric == "devices needed" else "predicted MSEs are"
        cheapest = min(c[cost] for c in rivals if c["protocol"] in near)
        tied = [c["protocol"] for c in rivals if c["protocol"] in near and c[cost] <= cheapest * (1 + COST_TIE)]
        why = f"{chosen} has {fastest} of {', '.join(near)}, whose {whose} {rule}{among}"
        if len(tied) > 1:  # the cost ties too: the smallest shift_per_report decides (choose.choose)
            why = (f"{chosen} has the smallest shift_per_report (the most robust) of {', '.join(tied)}, whose {costs} "
                   f"are within {COST_TIE:.0%} of {fastest} of {', '.join(near)}, whose {whose} {rule}{among}")
    else:
        why = f"{chosen} has the {least} {metric}{among}, and no other is {rule}"
    return why + (f"; left out: {', '.join(left)} (note column)" if left else "")


def _print_resolution(out, k, result):
    """The resolution lines of the human output (mss_protocol.resolution) and its warnings."""
    out.print(f"at n={result['n']}: per-item standard error {result['per_item_se']:.3g} (95% half-width "
              f"{result['half_width_95']:.3g}); detectable frequency {result['detectable_frequency']:.3g} "
              f"(one-sided 5% test, 80% power; mean frequency 1/k = {1 / k:.2g})")
    if result["detect"] is not None:
        out.print(f"devices needed to detect frequency {result['detect']:g}: {result['devices_needed']}")
    if result["target_se"] is not None:
        out.print(f"devices needed for a per-item standard error of {result['target_se']:g}: "
                  f"{result['devices_needed']}")
    for warning in result["warnings"]:
        if not warning.startswith("battery_days"):  # printed with the battery's figures
            out.print(f"[red]warning: {warning}[/red]", highlight=False)


def attacker_cell(m):
    """An attacker's success as printed (docs/privacy.md section 3, "Simulated figures"): exact
    as it is; simulated with its 95% interval, "≥ " before it past the simulated draws, and
    "†" after it when the measurement was above the exact bound and is shown at it.  Printed
    to 3 significant digits, as the ceiling is: rounding is monotone, so a figure at most its
    ceiling never prints above it."""
    if m["exact"]:
        return f"{m['success']:.3g}"
    lo, hi = m["ci"]
    return (("≥ " if m["lower_bound"] else "") + f"{m['success']:.3g}" + ("†" if m["capped"] else "")
            + f" [{lo:.3g}, {hi:.3g}]")


def _print_over_time(out, ot, fresh_reports):
    """The privacy-over-time table of the human output (mss_aggregator.privacy.over_time)."""
    b = ot["budget"]
    labels = {"fresh": "fresh", "memoized": "memoized", "budgeted": f"budget {b['epsilon']:g}/{b['days']}d" if b else ""}
    table = Table(title=f"privacy over time: {ot['protocol']}, a report every {ot['period_s']} s "
                        f"({ot['reports_per_day']:.4g}/day), a stable value, {ot['prior']} prior")
    for col in ("reporting", "days", "reports", "epsilon", "changing", "attacker [95% CI]", "ceiling"):
        table.add_column(col, justify="left" if col == "reporting" else "right", no_wrap=col == "reporting")
    for mode in ot["modes"]:
        this = mode == ot["deployment"]
        for i, h in enumerate(ot["horizons"]):
            m = h[mode]
            table.add_row((labels[mode] + (" *" if this else "")) if i == 0 else "", str(h["days"]),
                          str(h["reports"]), f"{m['epsilon']:.3g}", f"≤ {m['epsilon_worst']:.3g}", attacker_cell(m),
                          f"{m['bound']:.3g}", style="bold" if this else None,
                          end_section=i == len(ot["horizons"]) - 1)
    out.print(table)
    cells = [h[mode] for h in ot["horizons"] for mode in ot["modes"]]
    out.print(f"* this deployment. epsilon: spent by a device whose value stays the same (one draw "
              f"{ot['eps_draw']:.4g}, one report {ot['eps_report']:.4g}); changing: the value changes every period, one draw per "
              f"distinct value (device.memo_max {ot['memo_max']}); attacker: the Bayes-optimal attacker's success "
              f"on a stable value, exact for one draw without a layer (no interval), else simulated on "
              f"{ot['attacker']['trials']} devices (seed {ot['attacker']['seed']}) with its 95% Clopper-Pearson "
              f"interval, ≥: a lower bound past {ot['attacker']['max_draws']} fresh draws; ceiling: the most any "
              f"epsilon-LDP protocol concedes at that epsilon, or for one memoized draw the exact success of an "
              f"attacker who knows the draw if lower (docs/privacy.md section 3)", highlight=False)
    if any(m["capped"] for m in cells):
        out.print("† simulated above the exact ceiling by sampling noise (the interval, as measured, contains it): "
                  "shown at the ceiling; the measured rate is the JSON's measured", highlight=False)
    for h in ot["horizons"]:
        for mode in ot["modes"]:
            m = h[mode]
            if m["conflict"]:
                out.print(f"[red]{mode}, {h['days']} days: the simulated success {m['measured']:.3f} "
                          f"[{m['ci'][0]:.3f}, {m['ci'][1]:.3f}] is above the exact ceiling {m['bound']:.4g} beyond "
                          f"sampling noise (99.9%): a bug in the simulation or the ceiling[/red]", highlight=False)
    if ot.get("change"):
        change_opts.print_changing(out, ot, labels)
    elif ot["deployment"] != "fresh":
        out.print("a value that changes: under memoization a new body marks the epoch it changed (epsilon bounds "
                  "nothing about it); --change-every D or --transitions FILE states the attacker, the change-time "
                  "leak and the budget's skips for it, and compares the options that hide the changes",
                  highlight=False)
    if fresh_reports:
        h = ot["horizons"][0]["fresh"]
        out.print(f"[red]--fresh-reports: every report is a fresh draw: after one day "
                  f"({ot['horizons'][0]['reports']} reports, epsilon {h['epsilon']:.3g}) the best attacker recovers "
                  f"a stable value with probability {attacker_cell(h)} "
                  f"(ceiling {h['bound']:.3g}); without it the plan memoizes and budgets[/red]", highlight=False)


def _print_budget(out, link, result):
    """The link lines of the human output: airtime and reports a day of the chosen report."""
    b = result["link_budget"]
    out.print(f"link {link.spec}: SF{link.sf}/{link.bw_khz} kHz, payload <= {link.max_payload} bytes; one "
              f"{result['frame_bytes']}-byte report takes {result['airtime_ms']:.1f} ms airtime")
    out.print(f"TTN fair use (30 s airtime/day, on a day with a {b['join_airtime_ms']:.1f} ms join-request): "
              f"{b['fair_use_reports_per_day']} reports/day")
    if b["duty_cycle_gap_s"] is not None:
        out.print(f"EU868 1 % duty cycle: >= {b['duty_cycle_gap_s']:.1f} s between reports, "
                  f"{b['join_duty_cycle_off_s']:.1f} s off the sub-band after a join-request, "
                  f"{b['duty_cycle_reports_per_day']} reports/day")
    if b["dwell_ok"] is not None:
        out.print(f"dwell time: {result['airtime_ms']:.1f} ms " + ("<= 400 ms, ok" if b["dwell_ok"] else
                  "[red]exceeds the 400 ms limit: this report cannot be sent at this data rate[/red]"))
    out.print(f"reports/day: {result['reports_per_day']} (a report every {b['min_period_s']} s or longer)")
    _print_period(out, result["period_basis"])


def _print_period(out, pb):
    """Why the period is what it is (mss_aggregator.plan._period_basis), and whether n serves the question."""
    why = {"request": "--period", "min_period": f"the link's shortest, above --estimate-every {pb['estimate_every_s']}",
           "estimate_every": f"one estimate every {pb['estimate_every_s']} s (--estimate-every), each one report "
                             f"from every device"}[pb["source"]]
    line = f"period: {pb['period_s']} s, {why}"
    if pb["period_s"] != pb["min_period_s"]:
        ratio = pb["energy_mj_per_day_at_min_period"] / pb["energy_mj_per_day"]
        line += (f"; the link's shortest, {pb['min_period_s']} s, would take {pb['energy_mj_per_day_at_min_period'] / 1e3:.4g} "
                 f"J a day against {pb['energy_mj_per_day'] / 1e3:.4g} J ({ratio:.3g}x), and memoized re-sends of a "
                 "stable value add nothing to an estimate")
    out.print(line, highlight=False)
    if pb["served"] is not None:
        out.print(f"n={pb['n']} >= {pb['devices_needed']} devices needed: each estimate serves the question"
                  if pb["served"] else
                  f"[red]n={pb['n']} < {pb['devices_needed']} devices needed: no period serves the question with "
                  "memoized reports (a device re-sends the same draw every period): more devices are needed[/red]",
                  highlight=False)


_LABELS = {"mcu_awake": "MCU awake: device time {device_ms:.3g} ms + boot {boot_ms:.4g} ms + modem handshake "
                        "{handshake_ms:.3g} ms",
           "mcu_wait": "MCU waiting for the modem: airtime + RX2 delay + RX2 ({wait_ms:.1f} ms)",
           "tx": "TX at {tx_dbm} dBm for the airtime ({air_ms:.1f} ms)",
           "rx1": "RX1 window, empty ({rx1_ms:.1f} ms)",
           "rx2": "RX2 window, empty ({rx2_ms:.1f} ms)",
           "modem_idle": "modem awake, radio off ({modem_idle_ms:.0f} ms)",
           "sleep": "sleep over the period ({period_s} s, {sleep})"}


def _print_energy(out, result):
    """The energy lines of the human output: the breakdown of one report and the battery life."""
    m, t, e = result["energy_model"], result["energy_times_s"], result["energy_breakdown"]
    board, modem = energy.BOARDS[m["board"]], energy.MODEMS[m["modem"]]
    fields = {f"{key}_ms": value * 1e3 for key, value in t.items()}
    fields.update(device_ms=t["device"] * 1e3, air_ms=t["air"] * 1e3, tx_dbm=m["tx_dbm"],
                  period_s=result["period_s"], sleep=f"{m['sleep']} sleep")
    table = Table(title=f"energy per report: {board['name']} + {modem['name']} (docs/energy.md)")
    for col in ("part", "mJ", "share"):
        table.add_column(col, justify="left" if col == "part" else "right")
    total = result["energy_mj_per_report"]
    for key in energy.COMPONENTS:
        table.add_row(_LABELS[key].format(**fields), f"{e[key]:.4g}", f"{100 * e[key] / total:.1f} %")
    out.print(table)
    j = result["join"]
    out.print(f"joins: {result['joins_over_campaign']:.4g} over the {result['campaign_days']}-day campaign (the first, "
              f"then one a reset, {result['joins_per_year']:g} a year: --resets-per-year), each {j['airtime_ms']:.1f} "
              f"ms on air, {j['awake_s']:.2f} s awake, {j['energy_mj']:.4g} mJ: {result['join_mj_per_day']:.4g} mJ a day")
    out.print(f"energy per report: {total:.4g} mJ; per day: {result['energy_mj_per_day'] / 1e3:.4g} J "
              f"({86400 / result['period_s']:.4g} report{'' if result['period_s'] == 86400 else 's'} and the joins)")
    if result["battery_days"] is None:
        out.print("battery: --battery MAH states the days it lasts")
        return
    cap = (f"capped at the cell's {m['shelf_life_days']}-day shelf life (the load alone: "
           f"{result['battery_load_days']:.0f} days)" if result["battery_limit"] == "shelf life" else
           f"with {100 * m['self_discharge_per_year']:g} % self-discharge a year")
    out.print(f"battery {m['battery_mah']:g} mAh {m['cell']} (energy at the cell's terminals, "
              f"{m['battery_volts']:g} V): {result['battery_days']:.1f} days, {cap}; campaign {result['campaign_days']} days "
              f"(no temperature or regulator losses: docs/energy.md)")
    for warning in result["warnings"]:
        if warning.startswith("battery_days"):
            out.print(f"[red]warning: {warning}[/red]", highlight=False)
