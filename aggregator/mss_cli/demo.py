"""``mss demo``: the main job end to end on embedded defaults; with ``--epochs`` a field
campaign in real time (:mod:`mss_aggregator.devices.field`)."""
import json
import sys
import time

import click
import numpy as np

from mss_aggregator.distributions import parse
from mss_cli.collect import broker_spec, http_spec
from mss_cli.common import (EPSILON, SEED, YEAR_S, broker_password_option, broker_url, checked, console,
                            counters_table, fail, make_console, output_file, progress, top_table, writing)
from mss_node.settings import DEVICE_DEFAULTS
from mss_protocol import registry
from mss_protocol.budget import default_device, describe
from mss_protocol.choose import CHOICES, choose
from mss_protocol.configs import load_dict
from mss_protocol.limits import MAX_K
from mss_protocol.lorawan import budget, parse_link

LINK = "lorawan:us915:0"  # the tightest common link: 11 bytes
PERIOD_S = DEVICE_DEFAULTS["period_s"]  # an MQTT fleet's period: the boards' own default
FIELD_PERIOD_S = 4  # --epochs: the default period (real seconds)
CODES = {"power": "P", "power-mid-uplink": "U", "watchdog": "W", "reset": "R"}  # --epochs: the resets' kinds
ID_PREFIX = "dev"  # the MQTT fleet's device ids: dev0, dev1, ...
PLOTS = {None: "demo.png", "chirpstack": "demo-lorawan.png"}  # --plot's default, by --lorawan
FIELD_FAILED = 1  # --epochs: a check failed (a device not counted once in an epoch, a loss, a duplicate)


def device_rows(results, times):
    """--json's per_device: each device's outcome and, where measured (LoRaWAN boards), the
    MCU's awake/asleep time (runtime.board_times: real run time / emulated sleeps, which
    take no real time) and its modem's (ModemEmulator.stats, TX and RX from airtime)."""
    rows = []
    for device_id, (value, rc, _) in sorted(results.items()):
        row = {"device_id": device_id, "sent": rc == 0}
        t = times.get(device_id)
        if t:
            mcu, radio = t["mcu"], t["radio"]
            row.update(modem=t["modem"], awake_s=mcu["awake_s"], asleep_s=mcu["asleep_s"],
                       awake_fraction=mcu["awake_fraction"], sleeps=mcu["light"] + mcu["deep"],
                       modem_awake_s=radio["awake_s"], modem_asleep_s=radio["asleep_s"],
                       modem_sleeps=radio["sleeps"], tx_s=radio["tx_s"], rx_s=radio["rx_s"])
        rows.append(row)
    return rows


def field_run(out, cfg, campaign, values, network, period, origin, epochs, no_clock, resets, seed, runtime, tmp,
              privacy):
    """--epochs: the boards from the start of epoch 0 (the warm-up: they boot, join, report
    for the first time) to the end of epoch ``epochs``; the boards (devices.field.FieldBoard)."""
    from pathlib import Path

    from mss_aggregator.devices.field import run_field

    t_end = origin + (epochs + 1) * period
    time.sleep(max(0.0, origin - time.time()))
    out.print(f"field campaign: {len(values)} boards in real time, epoch 0 (warm-up) and epochs 1..{epochs} of "
              f"{period} s" + (", clocks reading 2000-01-01 at every boot" if no_clock else ", clocks set")
              + (f", each reset {resets} times at random moments (seed {seed})" if resets else "")
              + ", sleeping light between reports")
    if no_clock:
        from mss_aggregator.devices.field import NO_CLOCK_LEFT_OUT, fleet_dialects

        out.print(f"modems: {', '.join(fleet_dialects(True))}; {NO_CLOCK_LEFT_OUT}", highlight=False)
    workdir = Path(tmp) / "boards"
    workdir.mkdir()
    with out.status(f"{len(values)} boards running the firmware's loop on {runtime} until "
                    f"{time.strftime('%H:%M:%S', time.localtime(t_end))}"):
        return run_field(cfg, campaign, values, network, period, origin, t_end, no_clock, resets, seed,
                         runtime, workdir, privacy=privacy)


def decoded_scope(store, epochs):
    """The :class:`~mss_aggregator.collect.scope.Scope` the demo decodes, its ``selection``
    saying why.  A field campaign (``epochs``): its last epoch, each device once; its boards
    are memoized (as ``mss plan`` configures them), so the copies they re-sent in the other
    epochs are the same draws, and pooling them as independent reports would give intervals
    about sqrt(epochs + 1) too narrow.  An MQTT fleet reports once a device: every epoch
    pooled (a run across an epoch's end keeps every device), each device once, nothing widened."""
    from dataclasses import replace

    from mss_aggregator.collect import scope as scopes

    if not epochs:
        return replace(scopes.select(store, all_epochs=True),
                       selection="an MQTT fleet reports once a device (every epoch pooled: a run across an "
                                 "epoch's end keeps every device)")
    held, _, _, spanned = store.tally()
    return replace(scopes.select(store, epoch=epochs),
                   selection=f"the campaign's last epoch, each device once (the store's {held} reports in "
                             f"{spanned} epochs are memoized copies of the same draws: not pooled)")


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
                "modem awake"):
        t.add_column(col, justify="left" if col in ("device", "modem", "resets") else "right",
                     no_wrap=col in ("device", "modem"))
    for r in s["per_device"]:
        modem = r["modem_awake_s"] + r["modem_asleep_s"]
        t.add_row(r["device_id"], r["modem"], " ".join(f"{CODES[x['kind']]}{x['t']:.1f}" for x in r["resets"]) or "-",
                  str(r["uplinks"]), str(len(set(r["epochs"]) & set(required))),
                  "-" if r["awake_fraction"] is None else f"{100 * r['awake_fraction']:.1f} %",
                  f"{100 * r['modem_awake_s'] / modem:.1f} %" if modem else "-")
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


def clear_demo(url, campaign, devices):
    """Delete the retained messages an MQTT demo left on a broker of the user's (--broker): each
    device's status (its own login: devices.fleet.clear_retained) and the aggregator's config."""
    from mss_aggregator.devices.fleet import clear_retained, status_topic

    left = clear_retained(url, [(f"{ID_PREFIX}{i}", None, [status_topic(campaign, f"{ID_PREFIX}{i}")])
                                for i in range(devices)] + [(None, None, [f"mss/v1/{campaign}/config"])])
    for line in left:
        console.print(f"[yellow]warning:[/yellow] retained message not deleted: {line}", highlight=False)


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
                   "published in ChirpStack v4's JSON, reports planned for US915 DR0's 11 bytes; the boards "
                   "sleep light between reports (device.sleep).")
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
             as_json, epochs, period_s, no_clock, resets):
    """The main job end to end: broker, aggregator, an emulated fleet, estimates."""
    import signal
    import tempfile
    import threading
    import uuid

    from mss_aggregator.collect.collectors import parse_broker
    from mss_aggregator.collect.embedded_broker import EmbeddedBroker
    from mss_aggregator.collect.lorawan import parse_spec
    from mss_aggregator.devices.network_server import ChirpStackEmulator
    from mss_aggregator.devices.field import FIELD_KEYS, summarize
    from mss_aggregator.devices.fleet import draw_values, run_fleet
    from mss_aggregator import view as views
    from mss_aggregator.collect import scope as scopes
    from mss_aggregator.plotting import plot_estimates
    from mss_aggregator.devices.runtime import micropython_path
    from mss_iot import Campaign
    from mss_aggregator.collect.links import Links, MqttEndpoint
    from mss_aggregator.collect.service import Aggregator
    from mss_aggregator.collect.store import open_store
    from mss_aggregator.web.server import HttpError, check_bind

    if epochs is None and (no_clock or resets):
        raise click.UsageError(f"{'--no-clock' if no_clock else '--resets'} needs --epochs (a field campaign)")
    if epochs is not None and not lorawan:
        raise click.UsageError("--epochs runs LoRaWAN boards: add --lorawan chirpstack")
    period = period_s or (FIELD_PERIOD_S if epochs else PERIOD_S)
    plot = plot or PLOTS[lorawan]
    broker = broker_url(broker, broker_password_file)
    if http_bind:
        try:
            check_bind(http_bind, None)
        except HttpError as exc:
            raise click.BadParameter(str(exc), param_hint="--http")
    out = make_console(stderr=as_json)
    runtime = "micropython" if micropython_path() else "cpython"
    if runtime == "cpython":
        out.print("note: no MicroPython binary; the devices run the firmware under CPython")
    embedded = None if broker else EmbeddedBroker().start()
    url = broker or embedded.url
    out.print(f"broker: {url}" + (" (embedded amqtt on loopback)" if embedded else ""))
    campaign = f"demo-{uuid.uuid4().hex[:8]}"
    web = view = None
    failed = False
    try:
        with tempfile.TemporaryDirectory() as tmp:
            link = parse_link(LINK) if lorawan else None
            # the fleet reports as mss plan --device-config configures by default: memoized, budgeted
            # (so olh hashes with one seed a device, and may use compact frames)
            result = choose(k, epsilon, protocol, max_bytes=link and link.max_payload,
                            frame="compact" if link else "full", olh_seed="device")
            cfg = load_dict(result["config"])
            privacy = default_device(epsilon)
            cfg_path, store_path = f"{tmp}/cfg.json", f"{tmp}/store.sqlite"
            # the fleet's period: the aggregator bounds the epochs it accepts (and dates compact frames) by it;
            # a field campaign's epochs are numbered from its start (epoch 0 begins as the boards boot)
            origin = int(time.time()) + 2 if epochs else 0
            device = {"period_s": period, "epoch_origin": origin, **privacy}
            cfg.save(cfg_path, {"device": device})
            out.print(f"config {cfg.config_id_hex}: {result['protocol'].upper()}, k={k}, epsilon={epsilon} "
                      f"(eps_effective {cfg.eps_effective:.6f})"
                      + (f", moduli {result['moduli']}" if result["moduli"] else "")
                      + f", {cfg.bits_per_report['max']} bits per report ({result['frame_bytes']}-byte frames)")
            out.print(describe(cfg, device)[0], highlight=False)
            server = network = None
            if link:
                air = budget(link, result["frame_bytes"])
                out.print(f"link {link.spec}: {air['airtime_ms']:.0f} ms on air per report, "
                          f"{air['reports_per_day']} reports a day in 30 s of airtime")
                server = parse_spec(f"chirpstack:{campaign}")
                host, port, user, password, _ = parse_broker(url)
                try:
                    network = ChirpStackEmulator(host, port, campaign, user, password)
                except RuntimeError as exc:  # chirpstack-api missing: the emulator builds official events
                    fail(str(exc))
                out.print(f"network server: ChirpStack v4 JSON on {server.uplink_topic}")
            agg = Aggregator(Campaign.read(cfg_path), store_path, Links(MqttEndpoint(url), lorawan=server),
                             name=campaign, log=lambda m: out.print(m, highlight=False)).start()
            try:
                if not agg.wait_connected(15):
                    fail(f"could not connect to {url}")
                if http_bind:
                    from mss_aggregator.web.live import LiveView
                    from mss_aggregator.web.server import WebServer

                    view = LiveView(store_path, interval=0.5, brokers=agg.brokers, device=device).start()
                    try:
                        web = WebServer(view, http_bind).start()
                    except HttpError as exc:
                        fail(str(exc))
                    out.print(f"dashboard: {web.url}")
                values = draw_values(parse(dist, k), devices, seed)
                if epochs:
                    boards = field_run(out, cfg, campaign, values, network, period, origin, epochs, no_clock,
                                       resets, seed, runtime, tmp, privacy)
                    sent, wait_for = sum(len(b.arrivals) for b in boards), "received"  # uplinks on air
                else:
                    times = {}
                    with progress(f"{devices} devices running the firmware on {runtime}"
                                  + (" with emulated LoRaWAN modems" if link else ""), devices) as step:
                        results = run_fleet(cfg, url, campaign, values, ID_PREFIX, runtime=runtime, period_s=period,
                                            network=network, times=times, privacy=privacy, on_done=step)
                    sent, wait_for = sum(1 for _, rc, _ in results.values() if rc == 0), "accepted"
                deadline = time.time() + 30
                while agg.store.counters()[wait_for] < sent and time.time() < deadline:
                    time.sleep(0.2)
            finally:
                agg.stop()
                if network is not None:
                    network.close()
                if broker and not link:  # the user's broker keeps what is retained: the boards' statuses, the config
                    clear_demo(url, campaign, devices)
            store = open_store(store_path)
            scope = decoded_scope(store, epochs)
            counts, counters, accepted = scope.counts, store.counters(), store.tally()[0]
            rows = store.report_epochs() if epochs else None
            store.close()
            est = scopes.decode(registry.from_config(cfg), scope)
            truth = np.bincount(values, minlength=k) / devices
            out.print(f"decoded {scope.summary()}; {scope.selection}", highlight=False)
            title = scope.summary() if epochs else f"{counts.total} reports from {sent} of {devices} devices"
            out.print(top_table(f"{title}: top categories", truth, est, 8))
            out.print(counters_table(counters, "counters"))
            with writing("--plot", plot):
                plot_estimates(views.make(est, top=40), plot, f"demo: {devices} devices, k={k}, epsilon={epsilon}"
                               + (f", LoRaWAN {LINK[8:]} via ChirpStack" if link else ""), truth)
            out.print(f"plot: {plot}")
            doc = {"campaign": campaign, "config_id": cfg.config_id_hex, "protocol": result["protocol"],
                   "link": link and link.spec, "runtime": runtime, "period_s": period, "devices": devices,
                   "sent": sent, "reports": accepted, "counters": counters,
                   # what the estimate decoded (mss estimate --json's scope fields) and every item's estimate,
                   # interval and true frequency: the printed intervals' coverage (tests/test_field_demo.py)
                   "estimate": dict(scope.document(), n=counts.total,
                                    items=[dict(r, true=float(truth[r["item"]])) for r in est.rows()])}
            if epochs:
                summary = summarize(boards, rows, counters, list(range(1, epochs + 1)), period, origin, resets)
                print_field(out, summary, period, no_clock, resets)
                failed = not summary["ok"]
                doc.update(epochs=epochs, epoch_origin=origin, no_clock=no_clock, resets=resets,
                           **{key: summary[key] for key in FIELD_KEYS})
            else:
                doc.update(per_device=device_rows(results, times),
                           awake_fraction={d: t["mcu"]["awake_fraction"] for d, t in times.items()})
            if as_json:
                click.echo(json.dumps(doc, indent=1))
            if web is not None:
                stop = threading.Event()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(sig, lambda *_: stop.set())
                out.print(f"dashboard still at {web.url} - Ctrl-C to stop")
                while not stop.wait(0.5):
                    pass
                web.stop()
                view.close()  # before the store's folder goes
                web = view = None
    finally:
        if web is not None:
            web.stop()
        if view is not None:
            view.close()
        if embedded:
            embedded.stop()
    if failed:
        sys.exit(FIELD_FAILED)
