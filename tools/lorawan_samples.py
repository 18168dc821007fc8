#!/usr/bin/env python3
"""Write sample LoRaWAN uplink events for a planned config, current and valid:
a ChirpStack v4 ``event/up`` through its JSON marshaler and its protobuf
marshaler, and a The Things Stack v3 ``up`` message, each carrying a real
report of the config drawn by the device's own code, dated now on the config's
clock, on its ``device.lorawan.fport``.  Every event is first read back
through the aggregator's own ingest and must be accepted
(mss_aggregator.devices.uplink_samples, this tool's library).

    mss plan --k 1024 --epsilon 4 --link lorawan:eu868:0 --device-config config.json
    .venv/bin/python tools/lorawan_samples.py --config config.json --out samples

writes samples/chirpstack-json.json, chirpstack-protobuf.bin, tts.json and
samples.json (topics, time, report), and prints a mosquitto_pub line for each.
Publish them within the aggregator's window (device.period_s x
accept_past_epochs): an older event is quarantined as ``epoch``.

``--markdown`` prints the "Sample uplink events" section of docs/lorawan.md
instead; the doc's block is this with the ``--time`` and ``--seed`` its marker
names, and tests/test_lorawan_samples.py checks that it is.
"""
import json
import random
import re
import shlex
import time
from datetime import datetime, timezone
from pathlib import Path

import click

from mss_aggregator.campaign import Campaign
from mss_aggregator.collect.lorawan import unix_time
from mss_aggregator.devices.uplink_samples import (CHIRPSTACK_APP, DEV_EUI, FCNT, TTS_APP, TTS_TENANT, Applications,
                                                   BoardCampaign, sample_uplinks)
from mss_device.rng import ByteRng
from mss_protocol.config_file import ConfigError

EUI = re.compile(r"[0-9A-Fa-f]{16}\Z")


def dev_eui_option(ctx, param, value):
    if not EUI.match(value):
        raise click.BadParameter(f"{value!r}: a DevEUI is 16 hex digits")
    return value.lower()


def tts_option(ctx, param, value):
    app, at, tenant = value.partition("@")
    if not (app and at and tenant):
        raise click.BadParameter(f"{value!r}: expected APP@TENANT, e.g. {TTS_APP}@{TTS_TENANT}")
    return app, tenant


def time_option(ctx, param, value):
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    t = unix_time(value)
    if t is None:
        raise click.BadParameter(f"{value!r}: give unix seconds or an RFC 3339 time (2026-05-20T12:00:00Z)")
    return t


def markdown(samples):
    """The body of docs/lorawan.md's block: each event with its topic (JSON indented, protobuf in hex)."""
    cs_json, cs_protobuf, tts = samples.uplinks
    hexed = cs_protobuf.document.hex()
    lines = [f"ChirpStack v4, `json = true` (sent compact; indented here), on `{cs_json.topic}`:", "",
             "```json", json.dumps(json.loads(cs_json.document), indent=2), "```", "",
             f"The same event with `json = false`: the binary protobuf `integration.UplinkEvent`, "
             f"{len(hexed) // 2} bytes, in hex:", "", "```text"]
    lines += [hexed[i:i + 96] for i in range(0, len(hexed), 96)]
    lines += ["```", "", f"The Things Stack v3 (TTN), on `{tts.topic}`:", "",
              "```json", json.dumps(json.loads(tts.document), indent=2), "```"]
    return "\n".join(lines) + "\n"


def write(samples, out, config_id):
    """The events as files in ``out`` plus samples.json; the mosquitto_pub line of each."""
    out.mkdir(parents=True, exist_ok=True)
    events, commands = [], []
    for up in samples.uplinks:
        path = out / f"{up.name}.{up.suffix}"
        path.write_bytes(up.document)
        events.append({"name": up.name, "lorawan": up.spec, "topic": up.topic, "file": path.name})
        commands.append(f"mosquitto_pub -t {shlex.quote(up.topic)} -f {shlex.quote(str(path))}"
                        f"   # mss aggregate --lorawan {up.spec}")
    manifest = {"config_id": config_id, "dev_eui": samples.dev_eui, "fport": samples.fport, "fcnt": samples.fcnt,
                "time": samples.time, "epoch": samples.epoch, "report": samples.report.hex(), "events": events}
    (out / "samples.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return commands


@click.command()
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="The boards' config (mss plan ... --link lorawan:<region>:<dr> --device-config FILE).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True,
              help="Directory to write the events and samples.json to.")
@click.option("--markdown", "as_markdown", is_flag=True,
              help="Print the events as docs/lorawan.md shows them instead of writing files.")
@click.option("--dev-eui", default=DEV_EUI, show_default=True, callback=dev_eui_option,
              help="The device's DevEUI (its id at the aggregator; OLH's seed).")
@click.option("--value", type=int, default=0, show_default=True, help="The device's true category.")
@click.option("--fcnt", type=click.IntRange(0, (1 << 32) - 1), default=FCNT, show_default=True,
              help="The uplink's frame counter.")
@click.option("--chirpstack", "chirpstack_app", default=CHIRPSTACK_APP, show_default=True,
              help="The ChirpStack application id (mss aggregate --lorawan chirpstack:APP).")
@click.option("--tts", default=f"{TTS_APP}@{TTS_TENANT}", show_default=True, callback=tts_option,
              help="The Things Stack application and tenant (mss aggregate --lorawan tts:APP@TENANT).")
@click.option("--time", "at", callback=time_option, metavar="T",
              help="The network server's receive time (unix seconds or RFC 3339) instead of now: for the "
                   "docs; the aggregator quarantines an event outside its window as epoch.")
@click.option("--seed", type=int,
              help="Draw the report from random.Random(SEED)'s bytes instead of os.urandom: reproducible "
                   "docs, never a private report.")
def main(config_path, out, as_markdown, dev_eui, value, fcnt, chirpstack_app, tts, at, seed):
    """Write current ChirpStack v4 (JSON and protobuf) and The Things Stack v3 uplink events of a
    report of --config, each accepted by mss aggregate --lorawan with that config."""
    apps = Applications(chirpstack_app, *tts)
    try:
        apps.specs()
    except ValueError as exc:
        raise click.UsageError(f"--chirpstack / --tts: {exc}")
    try:
        campaign = Campaign.read(config_path)
        board = BoardCampaign(campaign.cfg, campaign.require_clock("a sample is dated on the campaign's clock"),
                              campaign.lorawan_ports())
    except ConfigError as exc:  # it names the file
        raise click.ClickException(str(exc))
    config_id = campaign.cfg.config_id_hex
    rng = ByteRng(random.Random(seed).randbytes) if seed is not None else None
    try:
        samples = sample_uplinks(board, value, dev_eui=dev_eui, fcnt=fcnt, apps=apps,
                                 at=time.time() if at is None else at, rng=rng)
    except (ConfigError, ValueError) as exc:
        raise click.ClickException(f"{config_path}: {exc}")
    if as_markdown:
        click.echo(markdown(samples), nl=False)
        return
    received = datetime.fromtimestamp(samples.time, timezone.utc).isoformat(timespec="seconds")
    click.echo(f"config {config_id}: report {samples.report.hex()} ({len(samples.report)} bytes) of value "
               f"{value}, DevEUI {samples.dev_eui}, FPort {samples.fport}, FCnt {samples.fcnt}, received "
               f"{received} (epoch {samples.epoch}); publish before the aggregator's window passes it")
    for line in write(samples, out, config_id):
        click.echo(line)


if __name__ == "__main__":
    main()
