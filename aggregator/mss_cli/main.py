"""``mss``: plan, simulate (and, as they land, the collection and audit commands).

Exit codes: 0 ok, 1 privacy audit failed (``mss audit``), 2 usage error, 3 data error
(bad config, plan impossible).
"""
import json
import sys
from contextlib import nullcontext

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from mss_aggregator import jsonout, postprocess
from mss_aggregator.distributions import DistributionError, parse
from mss_protocol.config import ConfigError, MssConfig
from mss_protocol.planner import PlanError, plan
from mss_protocol.variance import predicted_mse

console = Console(stderr=True)
AUDIT_FAILED = 1  # mss audit: a client exceeded its epsilon, or the broken control was not caught
DATA_ERROR = 3
# mss audit defaults (privacy_audit.PROTOCOLS / HORIZONS; written out to keep startup light)
AUDIT_PROTOCOLS = "mss,ss,pgr,grr,rappor,sue,olh,hr"
AUDIT_HORIZONS = "1,2,5,10,20,50,100,200,500,1000"


def _top_table(title, truth, est, n):
    """The n most frequent true categories: truth, estimate and its 95% CI."""
    table = Table(title=title)
    for col in ("item", "true", "estimate", "95% CI"):
        table.add_column(col, justify="right")
    for i in np.argsort(-truth, kind="stable")[:n]:
        table.add_row(str(i), f"{truth[i]:.4f}", f"{est.estimate[i]:.4f}",
                      f"[{est.ci_low[i]:.4f}, {est.ci_high[i]:.4f}]")
    return table


def _fail(msg):
    console.print(f"[red]error:[/red] {msg}")
    sys.exit(DATA_ERROR)


@click.group()
@click.version_option(package_name="mss-iot")
def main():
    """Private frequency estimation for microcontroller fleets (ModularSubsetSelection)."""


@main.command("plan")
@click.option("--k", "k", type=click.IntRange(min=4), required=True, help="Domain size (categories).")
@click.option("--epsilon", type=click.FloatRange(min=0, min_open=True), required=True,
              help="Privacy budget per report (epsilon-LDP).")
@click.option("--max-bits", type=click.IntRange(min=1), default=None,
              help="Largest report body in bits (e.g. a LoRa payload).")
@click.option("--n", "n", type=click.IntRange(min=1), default=10000, show_default=True,
              help="Reports assumed for the predicted MSE.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the moduli search.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--device-config", type=click.Path(dir_okay=False, writable=True),
              help="Write the config file devices and the aggregator load.")
@click.option("--no-cache", is_flag=True, help="Recompute even if a cached plan exists.")
def plan_cmd(k, epsilon, max_bits, n, seed, as_json, device_config, no_cache):
    """Choose moduli and subset sizes for K categories at EPSILON."""
    try:
        result = plan(k, epsilon, max_bits=max_bits, n=n, seed=seed, use_cache=not no_cache)
    except PlanError as exc:
        _fail(str(exc))
    if device_config:
        MssConfig.from_dict(result["config"]).save(device_config)
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    out = Console()
    table = Table(title=f"MSS plan for k={k}, epsilon={epsilon}", show_header=False)
    for label, value in [
        ("moduli", result["moduli"]), ("subset sizes (omega)", result["omegas"]),
        ("eps_effective", repr(result["eps_effective"])),
        ("bits per report (max / mean)", f"{result['bits_per_report']['max']} / "
                                         f"{result['bits_per_report']['mean']:.1f}"),
        (f"predicted MSE per item (n={n})", f"{result['predicted_mse']:.4g}"),
        ("SubsetSelection MSE (same n)", f"{result['ss_variance']:.4g} ({result['ss_bits']} bits)"),
        ("variance ratio vs SS", f"{result['variance_ratio_vs_ss']:.4f}"),
        ("config id", result["config_id"]),
    ]:
        table.add_row(label, str(value))
    out.print(table)
    if device_config:
        out.print(f"wrote {device_config}")


@main.command("simulate")
@click.option("--k", "k", type=click.IntRange(min=4), help="Domain size (or take it from --config).")
@click.option("--epsilon", type=click.FloatRange(min=0, min_open=True))
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="Use this config (from mss plan --device-config) instead of planning.")
@click.option("--max-bits", type=click.IntRange(min=1), default=None)
@click.option("--n", "n", type=click.IntRange(min=1), required=True, help="Simulated devices.")
@click.option("--dist", default="zipf:1.1", show_default=True,
              help="zipf:S | spike | uniform | file:counts.csv")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--protocol", type=click.Choice(["mss", "ss"]), default="mss", show_default=True,
              help="mss, or ss: SubsetSelection on the full domain (the baseline).")
@click.option("--trials", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--post", type=click.Choice(postprocess.CHOICES), default="none", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write a PNG of truth vs estimates.")
def simulate_cmd(k, epsilon, config_path, max_bits, n, dist, seed, protocol, trials, post,
                 as_json, plot):
    """Simulate N devices, decode their reports and print the accuracy."""
    from mss_aggregator.simulate import simulate

    try:
        if config_path:
            cfg = MssConfig.load(config_path)
            protocol = cfg.to_dict()["protocol"]
            if (k and k != cfg.k) or (epsilon and epsilon != cfg.epsilon):
                _fail(f"--k/--epsilon disagree with {config_path} (k={cfg.k}, epsilon={cfg.epsilon})")
        elif k is None or epsilon is None:
            raise click.UsageError("give --k and --epsilon, or --config")
        elif protocol == "ss":
            cfg = MssConfig.subset_selection(k, epsilon)
        else:
            cfg = MssConfig.from_dict(plan(k, epsilon, max_bits=max_bits, n=n)["config"])
        probs = parse(dist, cfg.k)
    except (ConfigError, PlanError, DistributionError) as exc:
        _fail(str(exc))
    predicted = predicted_mse(cfg, n)[0]
    with console.status(f"simulating {trials} x {n} devices") if not as_json else nullcontext():
        sim = simulate(cfg, probs, n, trials, seed, post=post)
    out = {
        "protocol": protocol, "k": cfg.k, "epsilon": cfg.epsilon, "n": n, "trials": trials,
        "mse": float(sim.mse.mean()), "mse_std": float(sim.mse.std(ddof=1)) if trials > 1 else 0.0,
        "predicted_mse": predicted, "decode_seconds": float(sim.decode_seconds.mean()),
        "bits_per_report": cfg.bits_per_report, "config_id": cfg.config_id_hex,
        "eps_effective": cfg.eps_effective, "dist": dist, "post": post, "seed": seed,
    }
    if plot:
        from mss_aggregator.plotting import plot_estimates

        plot_estimates(sim.truth, sim.estimate, plot,
                       f"{protocol.upper()} k={cfg.k} eps={cfg.epsilon} n={n} {dist} (post={post})")
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    table = Table(title=f"{protocol.upper()} simulation: k={cfg.k}, epsilon={cfg.epsilon}, n={n}, {dist}")
    for col in ("MSE per item", "± std", "predicted MSE", "decode s", "bits max/mean"):
        table.add_column(col)
    table.add_row(f"{out['mse']:.4g}", f"{out['mse_std']:.2g}", f"{predicted:.4g}",
                  f"{out['decode_seconds']:.4f}",
                  f"{out['bits_per_report']['max']}/{out['bits_per_report']['mean']:.1f}")
    out_console = Console()
    out_console.print(table)
    out_console.print(_top_table("top 10 categories (last trial)", sim.truth, sim.estimate, 10))
    if plot:
        out_console.print(f"plot: {plot}")



@main.command("device-sim")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Device config (from mss plan --device-config).")
@click.option("--value", type=int, required=True, help="The device's true category.")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--runtime", type=click.Choice(["micropython", "cpython"]), default="micropython",
              show_default=True, help="Where the firmware randomiser runs.")
@click.option("--seed-bytes", default="", help="Hex byte stream to use instead of os.urandom.")
@click.option("--epoch", type=click.IntRange(0, (1 << 30) - 1), default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per report.")
def device_sim_cmd(config_path, value, count, runtime, seed_bytes, epoch, as_json):
    """Run the firmware randomiser for VALUE and print its reports (hex per line)."""
    from mss_aggregator.runtime import RuntimeUnavailable, run_module
    from mss_protocol.wire import WireCodec

    try:
        cfg = MssConfig.load(config_path)
        bytes.fromhex(seed_bytes)
    except (ConfigError, ValueError) as exc:
        _fail(f"{exc}")
    if not 0 <= value < cfg.k:
        _fail(f"--value {value} is not a category in [0, {cfg.k})")
    try:
        args = [config_path, value, count, epoch] + (["--seed"] if seed_bytes else [])
        res = run_module(runtime, "mss_node.emit", args, stdin=seed_bytes)
    except RuntimeUnavailable as exc:
        _fail(str(exc))
    if res.returncode != 0:
        tail = res.stderr.strip().splitlines() or res.stdout.strip().splitlines() or ["no output"]
        _fail(f"firmware ({runtime}) failed: {tail[-1]}")
    codec = WireCodec(cfg)
    for line in res.stdout.split():
        if as_json:
            r = codec.decode(bytes.fromhex(line))
            click.echo(json.dumps({"hex": line, "j": r.j, "subset": list(r.subset)}))
        else:
            click.echo(line)


@main.command("aggregate")
@click.option("--broker", help="mqtt://[user:pass@]host:port (mqtts:// for TLS)")
@click.option("--campaign", default="default", show_default=True)
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Campaign config (mss plan --device-config).")
@click.option("--store", "store_path", required=True, metavar="PATH|URL",
              help="The campaign's store: an SQLite file (one worker) or "
                   "postgresql://user[:password]@host[:port]/db (shared by several workers).")
@click.option("--tls-ca", type=click.Path(exists=True, dir_okay=False))
@click.option("--share-group", help="Share the stream with other workers ($share/<group>/...).")
@click.option("--client-id", help="MQTT client id (default mss-agg-<campaign>); keep it stable.")
@click.option("--serial", "serial_ports", multiple=True, metavar="PORT[,BAUD]",
              help="Serial port with framed reports; repeat for several.")
@click.option("--quiet", is_flag=True, help="No live counters.")
@click.option("--http", "http_bind", metavar="HOST:PORT",
              help="Serve the live dashboard, JSON API and /metrics here (e.g. 127.0.0.1:8080).")
@click.option("--http-token", envvar="MSS_HTTP_TOKEN",
              help="Token the dashboard/API require (Bearer, or basic-auth password); needed "
                   "when --http is not on loopback. Default: $MSS_HTTP_TOKEN.")
@click.option("--refresh", type=click.FloatRange(min=0.2), default=2.0, show_default=True,
              help="Seconds between dashboard decodes.")
def aggregate_cmd(broker, campaign, config_path, store_path, tls_ca, share_group, client_id,
                  serial_ports, quiet, http_bind, http_token, refresh):
    """Collect reports from MQTT and/or serial ports until SIGINT/SIGTERM."""
    from mss_aggregator.service import Aggregator, serve
    from mss_aggregator.store import StoreError
    from mss_aggregator.webserver import HttpError, check_bind

    if http_bind:
        try:
            check_bind(http_bind, http_token)  # before connecting anything
        except HttpError as exc:
            raise click.BadParameter(str(exc), param_hint="--http")
    if not broker and not serial_ports:
        raise click.UsageError("give --broker and/or --serial")
    if share_group and not client_id:
        raise click.UsageError("--share-group needs a --client-id per worker (workers sharing "
                               "one id would disconnect each other)")
    try:
        agg = Aggregator(config_path, store_path, campaign, broker, serial_ports, share_group,
                         tls_ca, client_id, log=lambda m: console.print(m, highlight=False))
    except (ConfigError, StoreError, ValueError) as exc:
        _fail(str(exc))
    try:
        serve(agg, quiet=quiet, http=http_bind, token=http_token, refresh=refresh)
    except HttpError as exc:  # e.g. the --http port is taken
        _fail(str(exc))


@main.command("estimate")
@click.option("--store", "store_path", metavar="PATH|URL",
              help="SQLite file or postgresql:// URL of a campaign's store.")
@click.option("--counts", "counts_path", type=click.Path(exists=True, dir_okay=False),
              help="Decode a counts file (mss estimate --export-counts, mss merge) instead of a store.")
@click.option("--export-counts", type=click.Path(dir_okay=False),
              help="Also write the counts (the additive sufficient statistic, with the config).")
@click.option("--json", "as_json", is_flag=True)
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), help="Write estimates as CSV.")
@click.option("--plot", type=click.Path(dir_okay=False), help="Write a PNG of the top estimates.")
@click.option("--post", type=click.Choice(postprocess.CHOICES), default="none", show_default=True)
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--epoch", type=click.IntRange(min=0), default=None,
              help="Only this epoch's reports (decode memoized campaigns one epoch at a time).")
def estimate_cmd(store_path, counts_path, export_counts, as_json, csv_path, plot, post, top, epoch):
    """Frequency estimates with standard errors and 95% CIs from a store or a counts file."""
    from mss_aggregator.counts import Counts
    from mss_aggregator.decoder import Decoder
    from mss_aggregator.store import StoreError, open_store

    if (store_path is None) == (counts_path is None):
        raise click.UsageError("give --store or --counts")
    if counts_path and epoch is not None:
        raise click.UsageError("--epoch selects reports in a store; a counts file has no epochs")
    try:
        if counts_path:
            counts, counters = Counts.load(counts_path), None
        else:
            store = open_store(store_path)
            try:
                counts, counters = store.counts(epoch), store.counters()
            finally:
                store.close()
    except (ConfigError, StoreError) as exc:
        _fail(str(exc))
    cfg = counts.cfg
    if export_counts:
        counts.save(export_counts)
    est = Decoder(cfg).decode(counts, post=post)
    rows = est.rows()
    if csv_path:
        with open(csv_path, "w") as fh:
            fh.write("item,estimate,stderr,ci_low,ci_high\n")
            for r in rows:
                fh.write(f"{r['item']},{r['estimate']!r},{r['stderr']!r},{r['ci_low']!r},{r['ci_high']!r}\n")
    if plot:
        from mss_aggregator.plotting import plot_estimates

        plot_estimates(None, est, plot, f"{counts.total} reports, config {cfg.config_id_hex}")
    if as_json:
        click.echo(jsonout.dumps({"n": counts.total, "config_id": cfg.config_id_hex, "epoch": epoch,
                                  "counters": counters, "post": post, "estimates": rows}))
        return
    out = Console()
    out.print(f"{counts.total} reports, config {cfg.config_id_hex}"
              + (f", counters {counters}" if counters is not None else ""))
    table = Table(title=f"top {top} categories")
    for col in ("item", "estimate", "stderr", "95% CI"):
        table.add_column(col, justify="right")
    for i in np.argsort(-est.estimate, kind="stable")[:top]:
        table.add_row(str(i), f"{est.estimate[i]:.4f}", f"{est.stderr[i]:.4f}",
                      f"[{est.ci_low[i]:.4f}, {est.ci_high[i]:.4f}]")
    out.print(table)


@main.command("merge")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Where to write the summed counts.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def merge_cmd(inputs, output, as_json):
    """Sum count files of the same config (sites that share only counts)."""
    from mss_aggregator.counts import Counts

    try:
        total = Counts.load(inputs[0])
        for path in inputs[1:]:
            part = Counts.load(path)
            try:
                total = total.merge(part)
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc} ({inputs[0]}); only one config merges") from None
    except ConfigError as exc:
        _fail(str(exc))
    total.save(output)
    if as_json:
        click.echo(jsonout.dumps({"inputs": list(inputs), "output": output, "n": int(total.total),
                               "config_id": total.cfg.config_id_hex}))
        return
    console.print(f"{len(inputs)} files, {total.total} reports, config {total.cfg.config_id_hex} -> {output}")


@main.command("fleet")
@click.option("--broker", required=True, help="mqtt://[user:pass@]host:port")
@click.option("--campaign", default="default", show_default=True)
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True)
@click.option("--devices", type=click.IntRange(min=1), required=True)
@click.option("--dist", default="zipf:1.1", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--id-prefix", default="dev", show_default=True)
@click.option("--runtime", type=click.Choice(["micropython", "cpython"]), default="micropython",
              show_default=True)
@click.option("--parallel", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--truth", "truth_path", type=click.Path(dir_okay=False), help="Write the devices' values.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def fleet_cmd(broker, campaign, config_path, devices, dist, seed, id_prefix, runtime, parallel, truth_path,
              as_json):
    """Start DEVICES emulated devices running the firmware; each reports once."""
    from mss_aggregator.fleet import draw_values, run_fleet
    from mss_aggregator.runtime import RuntimeUnavailable

    try:
        cfg = MssConfig.load(config_path)
        values = draw_values(parse(dist, cfg.k), devices, seed)
        with console.status(f"{devices} devices on {runtime}"):
            results = run_fleet(cfg, broker, campaign, values, id_prefix, runtime, parallel)
    except (ConfigError, DistributionError, ValueError, RuntimeUnavailable) as exc:
        _fail(str(exc))
    failed = sorted(d for d, (_, rc, _) in results.items() if rc != 0)
    if truth_path:
        with open(truth_path, "w") as fh:
            json.dump({"config_id": cfg.config_id_hex, "campaign": campaign,
                       "values": {d: v for d, (v, _, _) in sorted(results.items())},
                       "counts": np.bincount(values, minlength=cfg.k).tolist()}, fh)
    if as_json:
        click.echo(jsonout.dumps({"devices": devices, "published": devices - len(failed), "failed": failed,
                               "config_id": cfg.config_id_hex, "campaign": campaign}))
    else:
        console.print(f"{devices - len(failed)} of {devices} devices published")
    if failed:
        _fail(f"devices that could not publish: {', '.join(failed[:10])}"
              + (f" (+{len(failed) - 10} more)" if len(failed) > 10 else "")
              + f"\nlast output of {failed[0]}: {results[failed[0]][2].strip().splitlines()[-1:]}")


@main.command("demo")
@click.option("--broker", help="Use this broker instead of the embedded one (mqtt://host:port).")
@click.option("--devices", type=click.IntRange(min=1), default=200, show_default=True)
@click.option("--k", "k", type=click.IntRange(min=4), default=16, show_default=True)
@click.option("--epsilon", type=click.FloatRange(min=0, min_open=True), default=3.0, show_default=True)
@click.option("--dist", default="zipf:1.1", show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--plot", default="demo.png", show_default=True, type=click.Path(dir_okay=False))
@click.option("--http", "http_bind", metavar="HOST:PORT",
              help="Show the live dashboard here while the fleet reports, and keep it up until Ctrl-C.")
def demo_cmd(broker, devices, k, epsilon, dist, seed, plot, http_bind):
    """The main job end to end: broker, aggregator, an emulated fleet, estimates."""
    import signal
    import tempfile
    import threading
    import time
    import uuid

    from mss_aggregator.decoder import Decoder
    from mss_aggregator.embedded_broker import EmbeddedBroker
    from mss_aggregator.fleet import draw_values, run_fleet
    from mss_aggregator.plotting import plot_estimates
    from mss_aggregator.runtime import micropython_path
    from mss_aggregator.service import Aggregator, counters_table
    from mss_aggregator.store import open_store
    from mss_aggregator.webserver import HttpError, check_bind

    if http_bind:
        try:
            check_bind(http_bind, None)
        except HttpError as exc:
            raise click.BadParameter(str(exc), param_hint="--http")
    out = Console()
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
            result = plan(k, epsilon)
            cfg = MssConfig.from_dict(result["config"])
            cfg_path, store_path = f"{tmp}/cfg.json", f"{tmp}/store.sqlite"
            cfg.save(cfg_path)
            out.print(f"config {cfg.config_id_hex}: k={k}, epsilon={epsilon} "
                      f"(eps_effective {cfg.eps_effective:.6f}), moduli {list(cfg.moduli)}, "
                      f"{cfg.bits_per_report['max']} bits per report")
            agg = Aggregator(cfg_path, store_path, campaign, url, client_id=f"mss-agg-{campaign}",
                             log=lambda m: out.print(m, highlight=False)).start()
            try:
                if not agg.wait_connected(15):
                    _fail(f"could not connect to {url}")
                if http_bind:
                    from mss_aggregator.live import LiveView
                    from mss_aggregator.webserver import WebServer

                    view = LiveView(store_path, interval=0.5).start()
                    try:
                        web = WebServer(view, http_bind).start()
                    except HttpError as exc:
                        _fail(str(exc))
                    out.print(f"dashboard: {web.url}")
                values = draw_values(parse(dist, k), devices, seed)
                with out.status(f"{devices} devices running the firmware on {runtime}"):
                    results = run_fleet(cfg, url, campaign, values, runtime=runtime)
                sent = sum(1 for _, rc, _ in results.values() if rc == 0)
                deadline = time.time() + 30
                while agg.store.counters()["accepted"] < sent and time.time() < deadline:
                    time.sleep(0.2)
            finally:
                agg.stop()
            store = open_store(store_path)
            counts, counters = store.counts(), store.counters()
            store.close()
            est = Decoder(cfg).decode(counts)
            truth = np.bincount(values, minlength=k) / devices
            out.print(_top_table(f"{counts.total} reports from {sent} of {devices} devices: top categories",
                                 truth, est, 8))
            out.print(counters_table(counters, "counters"))
            plot_estimates(truth, est, plot, f"demo: {devices} devices, k={k}, epsilon={epsilon}")
            out.print(f"plot: {plot}")
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


def _csv_list(kind):
    def convert(ctx, param, value):
        try:
            return [kind(v) for v in value.split(",") if v]
        except ValueError:
            raise click.BadParameter(f"expected comma-separated {kind.__name__} values, got {value!r}")
    return convert


@main.command("bench")
@click.option("--k", "ks", default="1024", show_default=True, callback=_csv_list(int))
@click.option("--epsilon", "epsilons", default="0.5,1,2,3,4,5", show_default=True,
              callback=_csv_list(float))
@click.option("--n", "n", type=click.IntRange(min=1), default=10000, show_default=True)
@click.option("--dist", "dists", default="zipf:1.1,spike", show_default=True,
              callback=_csv_list(str))
@click.option("--trials", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--protocols", "names", default="mss,ss,pgr,grr,rappor,olh,hr", show_default=True,
              callback=_csv_list(str), help="mss, ss, pgr, grr, rappor (OUE), sue, olh, hr.")
@click.option("--post", type=click.Choice(postprocess.CHOICES), default="none", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True),
              help="Write {\"rows\": [...]} to this file (- prints it instead of the table).")
@click.option("--plot", "plot_prefix", help="Write <prefix>-mse/decode/bits-*.png.")
def bench_cmd(ks, epsilons, n, dists, trials, names, post, seed, json_path, plot_prefix):
    """Accuracy, bits and decode time of every protocol on the same data."""
    from rich.progress import Progress

    from mss_aggregator import protocols
    from mss_aggregator.bench import run_bench

    unknown = [p for p in names if p not in protocols.AVAILABLE]
    if unknown:
        raise click.BadParameter(f"unknown protocols {', '.join(unknown)} (available: "
                                 f"{', '.join(protocols.AVAILABLE)})", param_hint="--protocols")
    try:
        for d in dists:
            parse(d, 4)
    except DistributionError as exc:
        _fail(str(exc))
    total = len(ks) * len(dists) * len(epsilons) * len(names) * trials
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("bench", total=total)
        rows = run_bench(ks, epsilons, n, dists, trials, names, post, seed,
                         progress=lambda: bar.advance(task))
    if json_path == "-":
        click.echo(jsonout.dumps({"rows": rows}))
        return
    if json_path:
        with open(json_path, "w") as fh:
            fh.write(jsonout.dumps({"rows": rows}, indent=1))
    table = Table(title=f"mss bench: n={n}, {trials} trials, post={post}")
    for col in ("protocol", "k", "eps", "dist", "MSE", "± std", "vs SS", "bits max", "client s",
                "decode s"):
        table.add_column(col, justify="right")
    for r in rows:
        ratio = f"{r['mse_ratio_vs_ss']:.3f}" if r["mse_ratio_vs_ss"] else "-"
        table.add_row(r["protocol"], str(r["k"]), f"{r['epsilon']:g}", r["dist"], f"{r['mse']:.3g}",
                      f"{r['mse_std']:.2g}", ratio, str(r["bits_max"]),
                      f"{r['client_seconds_per_report']:.2g}", f"{r['decode_seconds']:.3g}")
    wide = Console(width=160)
    wide.print(table)
    if plot_prefix:
        from mss_aggregator.plotting import plot_bench

        for path in plot_bench(rows, plot_prefix):
            wide.print(f"plot: {path}")


@main.command("audit")
@click.option("--k", "k", type=click.IntRange(min=4), help="Domain size (or take it from --config).")
@click.option("--epsilon", type=click.FloatRange(min=0, min_open=True),
              help="Privacy budget (or take it from --config).")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="Audit this device config (MSS) instead of the planner's for --k/--epsilon.")
@click.option("--prior", "prior_spec", default="uniform", show_default=True,
              help="Attacker's prior: uniform, zipf:S, spike, file:est.json (mss estimate --json) "
                   "or file:counts.csv.")
@click.option("--protocols", "names", default=AUDIT_PROTOCOLS, show_default=True,
              callback=_csv_list(str), help="Protocols to audit.")
@click.option("--trials", type=click.IntRange(min=0), default=10000, show_default=True,
              help="Devices in the empirical attack run (0: exact values only).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the audit as JSON.")
@click.option("--plot", type=click.Path(dir_okay=False), help="PNG: success vs epsilon with the ceilings.")
@click.option("--plot-epsilons", default="0.5,1,2,3,4,5", show_default=True, callback=_csv_list(float))
@click.option("--longitudinal", is_flag=True, help="Also attack T repeated reports (fresh and memoized).")
@click.option("--horizons", default=AUDIT_HORIZONS, show_default=True,
              callback=_csv_list(int), help="Report counts T for --longitudinal.")
@click.option("--long-trials", type=click.IntRange(min=1), default=100, show_default=True,
              help="Devices per protocol and mode for --longitudinal.")
@click.option("--empirical", is_flag=True,
              help="Also audit epsilon empirically on every client's wire output (ldp-audit).")
@click.option("--audit-trials", type=click.IntRange(min=100), default=20000, show_default=True,
              help="Reports per input for --empirical.")
@click.option("--firmware/--no-firmware", default=True, show_default=True,
              help="Include the firmware under the MicroPython unix port in --empirical.")
@click.option("--control/--no-control", default=True, show_default=True,
              help="Include a deliberately broken client (MSS at 2 epsilon) that --empirical must catch.")
def audit_cmd(k, epsilon, config_path, prior_spec, names, trials, seed, as_json, plot, plot_epsilons,
              longitudinal, horizons, long_trials, empirical, audit_trials, firmware, control):
    """Reconstruction risk of one report (and of many) against the provable ceilings,
    and an empirical epsilon audit of the real clients."""
    from rich.progress import Progress

    from mss_aggregator import privacy_audit

    cfg = None
    if config_path:
        try:
            cfg = MssConfig.load(config_path)
        except ConfigError as exc:
            _fail(str(exc))
        if (k is not None and k != cfg.k) or (epsilon is not None and epsilon != cfg.epsilon):
            _fail(f"--k/--epsilon disagree with {config_path} (k={cfg.k}, epsilon={cfg.epsilon})")
        k, epsilon = cfg.k, cfg.epsilon
    if k is None or epsilon is None:
        raise click.UsageError("give --k and --epsilon, or --config")
    unknown = [p for p in names if p not in privacy_audit.PROTOCOLS]
    if unknown:
        raise click.BadParameter(f"unknown protocols {', '.join(unknown)} (available: "
                                 f"{', '.join(privacy_audit.PROTOCOLS)})", param_hint="--protocols")
    if any(t < 1 for t in horizons):
        raise click.BadParameter("report counts must be >= 1", param_hint="--horizons")
    try:
        prior = parse(prior_spec, k)
    except DistributionError as exc:
        _fail(str(exc))
    steps = len(names) + (4 if longitudinal else 0) + ((len(names) + 2) if empirical else 0)
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("audit", total=steps)
        tick = lambda: bar.advance(task)  # noqa: E731
        report = privacy_audit.reconstruction(k, epsilon, prior, prior_spec, names, trials, seed, cfg, tick)
        if longitudinal:
            report["longitudinal"] = privacy_audit.longitudinal(
                k, epsilon, prior, horizons=horizons, trials=long_trials, seed=seed, cfg=cfg, progress=tick)
        if empirical:
            report["epsilon_audit"] = privacy_audit.empirical_epsilon(
                k, epsilon, names, audit_trials, seed, firmware, control, cfg=cfg, progress=tick)
    if plot:
        from mss_aggregator.plotting import plot_audit

        grid = sorted(set(plot_epsilons) | {epsilon})
        plot_audit(privacy_audit.sweep(k, prior, names, grid), plot,
                   f"k={k}, prior {prior_spec}", report.get("longitudinal"))
    problems = privacy_audit.problems(report)
    if as_json:
        click.echo(jsonout.dumps(report))
    else:
        _print_audit(report, plot)
    for p in problems:
        console.print(f"[red]audit failed:[/red] {p}")
    if problems:
        sys.exit(AUDIT_FAILED)


def _fmt(x, ci=None):
    if x is None:
        return "-"
    return f"{x:.4g}" + (f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci else "")


def _print_audit(report, plot):
    out = Console(width=170)
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
                      _fmt(r["paper_rule_empirical"], r["paper_rule_empirical_ci"]),
                      _fmt(r["bayes_exact"]), _fmt(r["empirical"], r["empirical_ci"]), share)
    out.print(table)
    out.print(f"ceiling for any {report['epsilon']}-LDP protocol with this prior: {report['ceiling']:.4g}  "
              f"(uniform-prior ceiling {b['ldp_uniform']:.4g}, ReRo bound {b['rero']:.4g}, "
              f"no information {b['no_information']:.4g}, random guess {b['random_guess']:.4g})")
    lon = report.get("longitudinal")
    if lon:
        table = Table(title=f"repeated reports of one value ({lon['trials']} devices, Bayes-optimal)")
        table.add_column("T", justify="right")
        for r in lon["rows"]:
            table.add_column(f"{r['protocol']} {r['mode']}", justify="right")
        table.add_column("ceiling at T eps", justify="right")
        for i, t in enumerate(lon["horizons"]):
            table.add_row(str(t), *[f"{r['success'][i]:.3f}" for r in lon["rows"]], f"{lon['ceiling'][i]:.3g}")
        out.print(table)
    ea = report.get("epsilon_audit")
    if ea:
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
    if plot:
        out.print(f"plot: {plot}")


@main.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion_cmd(shell):
    """Print the shell completion script, e.g. eval "$(mss completion bash)" in ~/.bashrc."""
    from click.shell_completion import get_completion_class

    click.echo(get_completion_class(shell)(main, {}, "mss", "_MSS_COMPLETE").source())
