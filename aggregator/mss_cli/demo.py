"""``mss demo``: the main job end to end on embedded defaults."""
import json

import click
import numpy as np
from rich.console import Console

from mss_aggregator.distributions import parse
from mss_cli.common import EPSILON, broker_password_option, broker_url, fail, output_file, top_table, writing
from mss_protocol import registry
from mss_protocol.choose import CHOICES, choose
from mss_protocol.lorawan import budget, parse_link
from mss_protocol.oracle_config import load_dict

LINK = "lorawan:us915:0"  # the tightest common link: 11 bytes
PERIOD_S = 3600


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


@click.command("demo")
@click.option("--broker", help="Use this broker instead of the embedded one (mqtt://[user@]host:port).")
@broker_password_option
@click.option("--devices", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--k", "k", type=click.IntRange(min=4), default=16, show_default=True)
@click.option("--protocol", type=click.Choice(CHOICES), default="mss", show_default=True,
              help="The protocol the fleet runs (auto: the most accurate for k and epsilon).")
@click.option("--epsilon", type=EPSILON, default=3.0, show_default=True)
@click.option("--dist", default="zipf:1.1", show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--plot", default="demo.png", show_default=True, type=click.Path(dir_okay=False),
              callback=output_file)
@click.option("--http", "http_bind", metavar="HOST:PORT",
              help="Show the live dashboard here while the fleet reports, and keep it up until Ctrl-C.")
@click.option("--lorawan", type=click.Choice(["chirpstack"]),
              help="Report over LoRaWAN: emulated modems on ptys (RAK3172, Wio-E5, RN2483 in turn), uplinks "
                   "published in ChirpStack v4's JSON, reports planned for US915 DR0's 11 bytes; the boards "
                   "sleep light between reports (device.sleep).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the outcome as JSON on stdout (the rest goes to stderr); with --lorawan, per device "
                   "the MCU's and the modem's time awake and asleep and the radio's TX and RX time.")
def demo_cmd(broker, broker_password_file, devices, k, protocol, epsilon, dist, seed, plot, http_bind, lorawan,
             as_json):
    """The main job end to end: broker, aggregator, an emulated fleet, estimates."""
    import signal
    import tempfile
    import threading
    import time
    import uuid

    from mss_aggregator.collect.collectors import parse_broker
    from mss_aggregator.collect.embedded_broker import EmbeddedBroker
    from mss_aggregator.collect.lorawan import parse_spec
    from mss_aggregator.devices.modem import ChirpStackEmulator
    from mss_aggregator.devices.fleet import draw_values, run_fleet
    from mss_aggregator.plotting import plot_estimates
    from mss_aggregator.devices.runtime import micropython_path
    from mss_aggregator.collect.service import Aggregator, counters_table
    from mss_aggregator.collect.store import open_store
    from mss_aggregator.web.server import HttpError, check_bind

    broker = broker_url(broker, broker_password_file)
    if http_bind:
        try:
            check_bind(http_bind, None)
        except HttpError as exc:
            raise click.BadParameter(str(exc), param_hint="--http")
    out = Console(stderr=as_json)
    runtime = "micropython" if micropython_path() else "cpython"
    if runtime == "cpython":
        out.print("note: no MicroPython binary; the devices run the firmware under CPython")
    embedded = None if broker else EmbeddedBroker().start()
    url = broker or embedded.url
    out.print(f"broker: {url}" + (" (embedded amqtt on loopback)" if embedded else ""))
    campaign = f"demo-{uuid.uuid4().hex[:8]}"
    web = view = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            link = parse_link(LINK) if lorawan else None
            result = choose(k, epsilon, protocol, max_bytes=link and link.max_payload,
                            frame="compact" if link else "full")
            cfg = load_dict(result["config"])
            cfg_path, store_path = f"{tmp}/cfg.json", f"{tmp}/store.sqlite"
            # the fleet's period: the aggregator bounds the epochs it accepts (and dates compact frames) by it
            cfg.save(cfg_path, {"device": {"period_s": PERIOD_S}})
            out.print(f"config {cfg.config_id_hex}: {result['protocol'].upper()}, k={k}, epsilon={epsilon} "
                      f"(eps_effective {cfg.eps_effective:.6f})"
                      + (f", moduli {result['moduli']}" if result["moduli"] else "")
                      + f", {cfg.bits_per_report['max']} bits per report ({result['frame_bytes']}-byte frames)")
            server = network = None
            if link:
                air = budget(link, result["frame_bytes"])
                out.print(f"link {link.spec}: {air['airtime_ms']:.0f} ms on air per report, "
                          f"{air['reports_per_day']} reports a day in 30 s of airtime")
                server = parse_spec(f"chirpstack:{campaign}")
                host, port, user, password, _ = parse_broker(url)
                network = ChirpStackEmulator(host, port, campaign, user, password)
                out.print(f"network server: ChirpStack v4 JSON on {server.uplink_topic}")
            agg = Aggregator(cfg_path, store_path, campaign, url,
                             log=lambda m: out.print(m, highlight=False), lorawan=server).start()
            try:
                if not agg.wait_connected(15):
                    fail(f"could not connect to {url}")
                if http_bind:
                    from mss_aggregator.web.live import LiveView
                    from mss_aggregator.web.server import WebServer

                    view = LiveView(store_path, interval=0.5, brokers=agg.brokers).start()
                    try:
                        web = WebServer(view, http_bind).start()
                    except HttpError as exc:
                        fail(str(exc))
                    out.print(f"dashboard: {web.url}")
                values = draw_values(parse(dist, k), devices, seed)
                with out.status(f"{devices} devices running the firmware on {runtime}"
                                + (" with emulated LoRaWAN modems" if link else "")):
                    times = {}
                    results = run_fleet(cfg, url, campaign, values, runtime=runtime, period_s=PERIOD_S,
                                        network=network, times=times)
                sent = sum(1 for _, rc, _ in results.values() if rc == 0)
                deadline = time.time() + 30
                while agg.store.counters()["accepted"] < sent and time.time() < deadline:
                    time.sleep(0.2)
            finally:
                agg.stop()
                if network is not None:
                    network.close()
            store = open_store(store_path)
            counts, counters = store.counts(), store.counters()
            store.close()
            est = registry.from_config(cfg).decode(counts)
            truth = np.bincount(values, minlength=k) / devices
            out.print(top_table(f"{counts.total} reports from {sent} of {devices} devices: top categories",
                                 truth, est, 8))
            out.print(counters_table(counters, "counters"))
            with writing("--plot", plot):
                plot_estimates(truth, est, plot, f"demo: {devices} devices, k={k}, epsilon={epsilon}"
                               + (f", LoRaWAN {LINK[8:]} via ChirpStack" if link else ""))
            out.print(f"plot: {plot}")
            if as_json:
                click.echo(json.dumps({"campaign": campaign, "config_id": cfg.config_id_hex,
                                       "protocol": result["protocol"], "link": link and link.spec,
                                       "runtime": runtime, "period_s": PERIOD_S, "devices": devices, "sent": sent,
                                       "reports": counts.total, "counters": counters,
                                       "per_device": device_rows(results, times),
                                       "awake_fraction": {d: t["mcu"]["awake_fraction"] for d, t in times.items()}},
                                      indent=1))
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
