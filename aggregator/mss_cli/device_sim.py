"""``mss device-sim``: one emulated device's reports (the firmware's randomiser), or the board's
verdict on a config."""
import json
import sys

import click

from mss_cli.common import console, fail
from mss_iot import Campaign
from mss_protocol.codec import codec as codec_of
from mss_protocol.config_file import ConfigError
from mss_protocol.limits import MAX_K


@click.command("device-sim")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Device config (from mss plan --device-config).")
@click.option("--value", type=click.IntRange(0, MAX_K - 2),
              help="The device's true category (required unless --check-only).")
@click.option("--check-only", is_flag=True,
              help="Only run the board's config checks (its own loader) and print what it accepts "
                   "or why not (exit 1).")
@click.option("--count", type=click.IntRange(1, 10**6), default=1, show_default=True,
              help="How many reports, each a fresh draw (sequence numbers 0, 1, ...).")
@click.option("--runtime", type=click.Choice(["micropython", "cpython"]), default="micropython",
              show_default=True, help="Where the firmware runs.")
@click.option("--seed-bytes", default="", help="Hex byte stream to use instead of os.urandom.")
@click.option("--epoch", type=click.IntRange(0, (1 << 30) - 1),
              help="The epoch the reports are dated in [default: the config's campaign clock's current one, as a "
                   "board with the time dates them (so mss decode and the aggregator accept them); 0 without a "
                   "clock].")
@click.option("--device-id", default="sim", show_default=True,
              help="The device id (olh derives its public hash seed from it; with --check-only, the "
                   "board's unique id where the config sets no device.device_id).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per report (--check-only: the verdict).")
def device_sim_cmd(config_path, value, check_only, count, runtime, seed_bytes, epoch, device_id, as_json):
    """Run the firmware randomiser for the category --value and print its reports (hex per line)."""
    from mss_aggregator.devices.runtime import RuntimeUnavailable, run_module

    if check_only:
        return check_only_cmd(config_path, runtime, device_id, as_json)
    if value is None:
        raise click.UsageError("--value is required (unless --check-only)")
    try:
        campaign = Campaign.read(config_path)
        cfg = campaign.cfg
        bytes.fromhex(seed_bytes)
    except (ConfigError, ValueError) as exc:
        fail(f"{exc}")
    if epoch is None:
        from mss_aggregator.collect.scope import current_epoch

        epoch = max(current_epoch(campaign.clock) or 0, 0)
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
    codec = codec_of(cfg)
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
