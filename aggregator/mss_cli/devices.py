"""Emulated devices: ``mss device-sim`` (one device's reports) and ``mss fleet``
(many devices against a broker)."""
import json
import sys

import click
import numpy as np

from mss_aggregator import jsonout
from mss_aggregator.distributions import DistributionError, parse
from mss_cli.common import (TOPIC_LEVEL, broker_password_option, broker_url, checked, console, fail, output_file,
                            topic_level, writing)
from mss_protocol import oracle_config
from mss_protocol.mss.config import ConfigError


@click.command("device-sim")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Device config (from mss plan --device-config).")
@click.option("--value", type=int, help="The device's true category (required unless --check-only).")
@click.option("--check-only", is_flag=True,
              help="Only run the board's config checks (its own loader) and print what it accepts "
                   "or why not (exit 1).")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--runtime", type=click.Choice(["micropython", "cpython"]), default="micropython",
              show_default=True, help="Where the firmware runs.")
@click.option("--seed-bytes", default="", help="Hex byte stream to use instead of os.urandom.")
@click.option("--epoch", type=click.IntRange(0, (1 << 30) - 1), default=0, show_default=True)
@click.option("--device-id", default="sim", show_default=True,
              help="The device id (olh derives its public hash seed from it; with --check-only, the "
                   "board's unique id where the config sets no device.device_id).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per report (--check-only: the verdict).")
def device_sim_cmd(config_path, value, check_only, count, runtime, seed_bytes, epoch, device_id, as_json):
    """Run the firmware randomiser for VALUE and print its reports (hex per line)."""
    from mss_aggregator.devices.runtime import RuntimeUnavailable, run_module

    if check_only:
        return check_only_cmd(config_path, runtime, device_id, as_json)
    if value is None:
        raise click.UsageError("--value is required (unless --check-only)")
    try:
        cfg = oracle_config.load(config_path)
        bytes.fromhex(seed_bytes)
    except (ConfigError, ValueError) as exc:
        fail(f"{exc}")
    if not 0 <= value < cfg.k:
        fail(f"--value {value} is not a category in [0, {cfg.k})")
    try:
        args = [config_path, value, count, epoch, "--device", device_id] + (["--seed"] if seed_bytes else [])
        res = run_module(runtime, "mss_node.emit", args, stdin=seed_bytes)
    except RuntimeUnavailable as exc:
        fail(str(exc))
    if res.returncode != 0:
        tail = res.stderr.strip().splitlines() or res.stdout.strip().splitlines() or ["no output"]
        fail(f"firmware ({runtime}) failed: {tail[-1]}")
    codec = oracle_config.codec(cfg)
    for line in res.stdout.split():
        if as_json:
            r = codec.decode(bytes.fromhex(line), device_id, epoch)
            click.echo(json.dumps({"hex": line, "protocol": cfg.name, "frame": r.frame,
                                   "j": r.j, "subset": list(r.subset)}))
        else:
            click.echo(line)


CHECK_REFUSED = 1  # --check-only: the board refuses the config


def check_only_cmd(config_path, runtime, device_id, as_json):
    """The board's verdict on the config file (``mss_node.check_config`` on ``runtime``): print
    it, exit 1 when refused.  The host's loader is not run: this is what a board would do."""
    from mss_aggregator.devices.runtime import RuntimeUnavailable, run_module

    try:
        res = run_module(runtime, "mss_node.check_config", [config_path, "--device", device_id], timeout=120)
    except RuntimeUnavailable as exc:
        fail(str(exc))
    try:
        verdict = json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = res.stderr.strip().splitlines() or ["no output"]
        fail(f"firmware ({runtime}) failed: {tail[-1]}")
    if as_json:
        click.echo(json.dumps(verdict, sort_keys=True))
    elif verdict["ok"]:
        cap = "none" if verdict["cap"] is None else f"epsilon {verdict['cap']:g}"
        b = verdict.get("budget")
        budget = "none" if b is None else (f"epsilon {b['epsilon']:g} per {b['days']} days "
                                           f"({b['draws']} fresh draws of this config a window)")
        click.echo(f"accepted by the board ({runtime}): {verdict['protocol']} k = {verdict['k']}, config id "
                   f"{verdict['config_id']}, frame {verdict['frame']}, transport {verdict['transport']}, "
                   f"device id {verdict['device_id']}, worst ratio epsilon {verdict['epsilon']:.9g}, cap {cap}, "
                   f"budget {budget}, memoize {str(verdict['memoize']).lower()}"
                   + (f", olh seed per {verdict['seed']}" if verdict.get("seed") else "")
                   + (f", instantaneous layer epsilon {verdict['irr_epsilon']:g}"
                      if verdict.get("irr_epsilon") is not None else ""))
    else:
        console.print(f"[red]refused by the board ({runtime}):[/red] {verdict['error']}")
    if not verdict["ok"]:
        sys.exit(CHECK_REFUSED)


@click.command("fleet")
@click.option("--broker", required=True, help="mqtt://[user:pass@]host:port")
@broker_password_option
@click.option("--campaign", default="default", show_default=True, callback=checked(topic_level),
              help=f"The devices publish under mss/v1/<campaign>/; {TOPIC_LEVEL}.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Campaign config (mss plan --device-config); the devices date their reports by its "
                   "device.period_s and epoch_origin (default the firmware's 3600 and 0), as the aggregator does.")
@click.option("--devices", type=click.IntRange(min=1), required=True)
@click.option("--dist", default="zipf:1.1", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--id-prefix", default="dev", show_default=True)
@click.option("--runtime", type=click.Choice(["micropython", "cpython"]), default="micropython",
              show_default=True)
@click.option("--parallel", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--truth", "truth_path", type=click.Path(dir_okay=False), callback=output_file,
              help="Write the devices' values.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def fleet_cmd(broker, broker_password_file, campaign, config_path, devices, dist, seed, id_prefix, runtime, parallel,
              truth_path, as_json):
    """Start DEVICES emulated devices running the firmware; each reports once."""
    from mss_aggregator.collect.service import campaign_clock
    from mss_aggregator.devices.fleet import draw_values, run_fleet
    from mss_aggregator.devices.runtime import RuntimeUnavailable
    from mss_protocol.mss.config import read_json

    broker = broker_url(broker, broker_password_file)
    try:
        cfg = oracle_config.load(config_path)
        clock = campaign_clock(read_json(config_path, "config")) or {"period_s": 3600, "epoch_origin": 0}
        values = draw_values(parse(dist, cfg.k), devices, seed)
        with console.status(f"{devices} devices on {runtime}"):
            results = run_fleet(cfg, broker, campaign, values, id_prefix, runtime, parallel,
                                period_s=clock["period_s"], epoch_origin=clock["epoch_origin"])
    except (ConfigError, DistributionError, ValueError, RuntimeUnavailable) as exc:
        fail(str(exc))
    failed = sorted(d for d, (_, rc, _) in results.items() if rc != 0)
    if truth_path:
        with writing("--truth", truth_path), open(truth_path, "w") as fh:
            json.dump({"config_id": cfg.config_id_hex, "campaign": campaign,
                       "values": {d: v for d, (v, _, _) in sorted(results.items())},
                       "counts": np.bincount(values, minlength=cfg.k).tolist()}, fh)
    if as_json:
        click.echo(jsonout.dumps({"devices": devices, "published": devices - len(failed), "failed": failed,
                               "config_id": cfg.config_id_hex, "campaign": campaign}))
    else:
        console.print(f"{devices - len(failed)} of {devices} devices published")
    if failed:
        fail(f"devices that could not publish: {', '.join(failed[:10])}"
              + (f" (+{len(failed) - 10} more)" if len(failed) > 10 else "")
              + f"\nlast output of {failed[0]}: {results[failed[0]][2].strip().splitlines()[-1:]}")
