"""``mss demo``: the main job end to end on embedded defaults; with ``--epochs`` a field
campaign in real time.  The workflow is :mod:`mss_aggregator.demo`'s; this maps the options to a
:class:`~mss_aggregator.demo.DemoRequest` and renders the result."""
import json
import signal
import sys
import threading

import click

from mss_aggregator.demo import FIELD_PERIOD_S, LINKS, PERIOD_S, REGIONS
from mss_cli.aggregate import broker_spec, http_spec
from mss_cli.common import (EPSILON, SEED, YEAR_S, broker_password_option, broker_url, checked, counters_table,
                            fail, make_console, output_file, progress, top_table, writing)
from mss_protocol.choose import CHOICES
from mss_protocol.limits import MAX_K

CODES = {"power": "P", "power-mid-uplink": "U", "watchdog": "W", "reset": "R"}  # --epochs: the resets' kinds
PLOTS = {None: "demo.png", "chirpstack": "demo-lorawan.png"}  # --plot's default, by --lorawan
FIELD_FAILED = 1  # --epochs: a check failed (a device not counted once in an epoch, a loss, a duplicate)


def print_field(out, s, period, no_clock, resets):
    """The human tables of a field campaign (``summarize``'s ``s``) and its verdict."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"reports by epoch ({period} s each; epoch 0 the warm-up, not required)")
    for col in ("epoch", "devices", "accepted", "extra", "missing"):
        t.add_column(col, justify="left" if col == "missing" else "right")
    extra = {}
    for x in s["extra"]:
        extra[x["epoch"]] = extra.get(x["epoch"], 0) + x["reports"]
    rows = [dict(r, required=True) for r in s["per_epoch"]] + [dict(r, required=False) for r in s["other_epochs"]]
    for r in sorted(rows, key=lambda r: r["epoch"]):
        gone = [x["device_id"] for x in s["missing"] if x["epoch"] == r["epoch"]]
        t.add_row(str(r["epoch"]) + ("" if r["required"] else " (not required)"), str(r["devices"]),
                  str(r["accepted"]), str(extra.get(r["epoch"], 0)),
                  ", ".join(gone) if len(gone) <= 3 else f"{len(gone)} devices")
    out.print(t)
    t = Table(title="per device (resets, s from epoch 0: P power cycle, U power cycle mid-uplink, W watchdog, "
                    "R machine.reset())", box=box.SIMPLE_HEAD, pad_edge=False)
    required = [r["epoch"] for r in s["per_epoch"]]
    for col in ("device", "modem", "resets", "uplinks", f"counted in {required[0]}..{required[-1]}", "MCU awake",
                "modem awake", "TX s", "time req"):
        t.add_column(col, justify="left" if col in ("device", "modem", "resets") else "right",
                     no_wrap=col in ("device", "modem"))
    for r in s["per_device"]:
        modem = r["modem_awake_s"] + r["modem_asleep_s"]
        t.add_row(r["device_id"], r["modem"], " ".join(f"{CODES[x['kind']]}{x['t']:.1f}" for x in r["resets"]) or "-",
                  str(r["uplinks"]), str(len(set(r["epochs"]) & set(required))),
                  "-" if r["awake_fraction"] is None else f"{100 * r['awake_fraction']:.1f} %",
                  f"{100 * r['modem_awake_s'] / modem:.1f} %" if modem else "-", f"{r['tx_s']:.2f}",
                  "-" if r["time_requests"] is None else str(r["time_requests"]))
    out.print(t)
    out.print(f"lost {s['lost']}, duplicates {s['duplicates']}, quarantined {s['quarantined']}")
    if s["ok"]:
        out.print(f"[green]PASS[/green]: every device counted exactly once in each of epochs "
                  f"{required[0]}..{required[-1]}, 0 lost, 0 duplicates" + (", no clocks" if no_clock else "")
                  + (f", {resets} resets each" if resets else ""))
    else:
        out.print(f"[red]FAIL[/red]: {escape('; '.join(s['failed']))}", highlight=False)
        for line in s["why"]:
            out.print(f"  {escape(line)}", highlight=False)


def print_radio(out, x):
    """The fleet's radio (``radio_summary``'s ``x``): airtime, duty cycle, time probes."""
    out.print(f"radio ({x['link']}, SF{x['sf']} {x['bw_khz']} kHz): {x['uplinks']} uplinks of {x['airtime_ms']:.0f} ms "
              f"and {x['joins']} joins, {x['tx_s']:.1f} s on air (the most for a device {x['max_device_tx_s']:.1f} s); "
              f"{x['time_requests']} DeviceTimeReq probes", highlight=False)
    if x["duty_cycle_limit"] is not None:
        over = x["duty_cycle_at_period"] > x["duty_cycle_limit"]
        out.print(f"duty cycle: {100 * x['duty_cycle_at_period']:.2f} % of each {x['period_s']} s period on air, "
                  f"against {100 * x['duty_cycle_limit']:.0f} % per sub-band ({x['duty_cycle_off_s']:.1f} s off after "
                  f"each uplink)" + (f": over it, as the demo's time is accelerated; in the field a period of at "
                                     f"least {x['min_period_s']} s" if over else ": within it"), highlight=False)


@click.command("demo")
@click.option("--broker", callback=checked(broker_spec),
              help="Use this broker instead of the embedded one (mqtt://[user@]host:port).")
@broker_password_option
@click.option("-n", "--devices", type=click.IntRange(1, 10**5), default=200, show_default=True,
              help="How many emulated devices report.")
@click.option("--k", "k", type=click.IntRange(4, MAX_K - 1), default=16, show_default=True,
              help="Number of categories.")
@click.option("--protocol", type=click.Choice(CHOICES), default="auto", show_default=True,
              help="The protocol the fleet runs (auto: the most accurate for k and epsilon, as mss plan chooses).")
@click.option("--epsilon", type=EPSILON, default=3.0, show_default=True, help="Each report's privacy budget.")
@click.option("--dist", default="zipf:1.1", show_default=True,
              help="The distribution the devices' values are drawn from (as mss simulate --dist).")
@click.option("--seed", type=SEED, default=1, show_default=True, help="Seed of the values (and of --resets).")
@click.option("--plot", type=click.Path(dir_okay=False), callback=output_file,
              help=f"Write the estimate's plot here (default {PLOTS[None]}; with --lorawan {PLOTS['chirpstack']}).")
@click.option("--http", "http_bind", metavar="HOST:PORT", callback=http_spec,
              help="Show the live dashboard here while the fleet reports, and keep it up until Ctrl-C.")
@click.option("--lorawan", type=click.Choice(["chirpstack"]),
              help="Report over LoRaWAN: emulated modems on ptys (RAK3172, Wio-E5, RN2483 in turn), uplinks "
                   "published in ChirpStack v4's JSON, reports planned for the --region's DR0 (US915: 11 bytes); "
                   "the boards sleep light between reports (device.sleep).")
@click.option("--region", type=click.Choice(REGIONS), default="us915", show_default=True,
              help="With --lorawan: the region, at its DR0 (eu868: SF12, 51 bytes, 1 % duty cycle per sub-band); "
                   "the demo prints the airtime, the duty cycle and the DeviceTimeReq probes.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the outcome as JSON on stdout (the rest goes to stderr); with --lorawan, per device "
                   "the MCU's and the modem's time awake and asleep and the radio's TX and RX time; with "
                   "--epochs also per_epoch, lost, duplicates and the checks.")
@click.option("--epochs", type=click.IntRange(1, 10**6),
              help="A field campaign (with --lorawan): every board runs the firmware's loop in real time for "
                   "a warm-up epoch (0) and then this many epochs (1..N), each of which must count every "
                   "device exactly once; exit status 1 when one does not.")
@click.option("--period-s", "period_s", type=click.IntRange(1, YEAR_S),
              help=f"The boards' reporting period, s (default {PERIOD_S}; with --epochs {FIELD_PERIOD_S}, "
                   f"in real time: accelerated).")
@click.option("--no-clock", is_flag=True,
              help="With --epochs: the boards' wall clock reads 2000-01-01 at every boot (no NTP): they "
                   "report by network time (DeviceTimeReq) or paced by their monotonic timer.")
@click.option("--resets", type=click.IntRange(0, 10**6), default=0, show_default=True,
              help="With --epochs: reset each board this many times at random moments (--seed): power "
                   "cycles (also mid-uplink), watchdog resets, machine.reset().")
def demo_cmd(broker, broker_password_file, devices, k, protocol, epsilon, dist, seed, plot, http_bind, lorawan,
             region, as_json, epochs, period_s, no_clock, resets):
    """The main job end to end: broker, aggregator, an emulated fleet, estimates."""
    from mss_aggregator.demo import Demo, DemoError, DemoRequest
    from mss_aggregator.web.server import HttpError, check_bind

    if epochs is None and (no_clock or resets):
        raise click.UsageError(f"{'--no-clock' if no_clock else '--resets'} needs --epochs (a field campaign)")
    if epochs is not None and not lorawan:
        raise click.UsageError("--epochs runs LoRaWAN boards: add --lorawan chirpstack")
    if region != "us915" and not lorawan:
        raise click.UsageError("--region is the LoRaWAN region: add --lorawan chirpstack")
    if http_bind:
        try:
            check_bind(http_bind, None)
        except HttpError as exc:
            raise click.BadParameter(str(exc), param_hint="--http")
    request = DemoRequest(devices=devices, k=k, protocol=protocol, epsilon=epsilon, dist=dist, seed=seed,
                          lorawan=bool(lorawan), region=region, epochs=epochs, period_s=period_s, no_clock=no_clock, resets=resets,
                          broker=broker_url(broker, broker_password_file), http=http_bind)
    out = make_console(stderr=as_json)

    def meter(label, total):
        return out.status(label) if total is None else progress(label, total)

    try:
        with Demo(request, log=lambda line: out.print(line, highlight=False)) as demo:
            result = demo.run(meter)
            render(out, request, result, plot=plot or PLOTS[lorawan], as_json=as_json)
            if demo.web is not None:
                stop = threading.Event()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(sig, lambda *_: stop.set())
                out.print(f"dashboard still at {demo.web.url} - Ctrl-C to stop")
                while not stop.wait(0.5):
                    pass
    except DemoError as exc:
        fail(str(exc))
    if result.failed:
        sys.exit(FIELD_FAILED)


def render(out, r, result, plot, as_json):
    """The demo's tables, its plot, a field campaign's checks and (``as_json``) its outcome."""
    from mss_aggregator import view as views
    from mss_aggregator.plotting import plot_estimates

    scope, truth = result.scope, result.truth
    out.print(f"decoded {scope.summary()}; {scope.selection}", highlight=False)
    title = scope.summary() if r.epochs else f"{scope.counts.total} reports from {result.sent} of {r.devices} devices"
    out.print(top_table(f"{title}: top categories", truth, result.estimate, 8))
    out.print(counters_table(result.counters, "counters"))
    with writing("--plot", plot):
        plot_estimates(views.make(result.estimate, top=40), plot, f"demo: {r.devices} devices, k={r.k}, "
                       f"epsilon={r.epsilon}" + (f", LoRaWAN {LINKS[r.region][8:]} via ChirpStack" if r.lorawan else ""),
                       truth)
    out.print(f"plot: {plot}")
    if "radio" in result.document:
        print_radio(out, result.document["radio"])
    if result.summary is not None:
        print_field(out, result.summary, r.period, no_clock=r.no_clock, resets=r.resets)
    if as_json:
        click.echo(json.dumps(result.document, indent=1))
