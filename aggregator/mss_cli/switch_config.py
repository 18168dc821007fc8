"""``mss switch-config``: schedule a config switch on LoRaWAN devices, one downlink each.

A Class A device hears a downlink only after one of its uplinks, and TTN
allows 10 downlinks a day, so the downlink is 2 bytes: the start of the new
config's id, which names one of the configs the device already holds.
"""
import click

from mss_cli.aggregate import LORAWAN_SPEC, broker_spec, lorawan_spec
from mss_cli.common import broker_password_option, broker_url, checked, console, fail, tls_options
from mss_protocol.config_file import ConfigError

@click.command("switch-config", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--lorawan", metavar=LORAWAN_SPEC, callback=lorawan_spec, required=True,
              help="The network-server application the devices are in.")
@click.option("--broker", required=True, callback=checked(broker_spec),
              help="The network server's MQTT broker, mqtt[s]://[user:pass@]host:port "
                   "(TTS: user APP@TENANT, password an API key).")
@broker_password_option
@tls_options("the --broker connection", client_cert=False)
@click.option("--to-config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="The config to switch to (mss plan --device-config).")
@click.option("--device", "devices", multiple=True, metavar="ID",
              help="ChirpStack: the DevEUI; TTS: the end-device id.  Repeat for several.")
@click.option("--devices-file", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="Devices as --device takes them, one a line ('#' starts a comment).")
@click.option("--all-seen", is_flag=True,
              help="Every device with an accepted report in --store (TTS: end-device id eui-<DevEUI>, "
                   "the Console's default and mss provision's).")
@click.option("--store", "store_path", metavar="PATH|URL",
              help="The campaign's store (SQLite file or postgresql:// URL) --all-seen reads.")
@click.option("--fport", type=click.IntRange(1, 223),
              help="Downlink FPort [default: the config's device.lorawan.config_fport, else 2].")
def switch_config_cmd(lorawan, broker, broker_password_file, tls_ca, config_path, devices, devices_file, all_seen,
                      store_path, fport):
    """Schedule a downlink naming --to-config's id (2 bytes) to each device of --device, --devices-file
    and --all-seen (each once)."""
    from mss_aggregator.collect.collectors import parse_broker
    from mss_aggregator.deploy.switch import Broker, SwitchError, send_switch, switch_payload

    if all_seen != bool(store_path):
        raise click.UsageError("--all-seen reads the devices of --store: give both" if all_seen
                               else "--store is read by --all-seen: give both")
    if not (devices or devices_file or all_seen):
        raise click.UsageError("no device: give --device, --devices-file or --all-seen --store")
    broker = broker_url(broker, broker_password_file)
    try:
        ids = [lorawan.device(d) for d in devices]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--device")
    if devices_file:
        ids += _listed(lorawan, devices_file)
    if all_seen:
        ids += _seen(lorawan, store_path)
    ids = list(dict.fromkeys(ids))  # each device once, in the order given
    try:
        endpoint = Broker(*parse_broker(broker), ca=tls_ca)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--broker")
    cfg, fport = _target(config_path, fport)
    payload = switch_payload(cfg)

    def sent(device, topic):
        click.echo(f"{device}: scheduled {payload.hex()} (config {cfg.config_id_hex}) on FPort {fport} -> {topic}")

    try:
        send_switch(endpoint, lorawan, ids, payload=payload, fport=fport, sent=sent)
    except SwitchError as exc:
        fail(str(exc))
    console.print(f"{len(ids)} downlink(s) handed to the network server; a device receives its one "
                  f"after its next uplink", highlight=False)


def _target(config_path, fport):
    """(the config of --to-config, the downlink's FPort: --fport, else its device.lorawan.config_fport, else 2)."""
    from mss_iot import Campaign

    try:
        campaign = Campaign.read(config_path)
        return campaign.cfg, fport or campaign.lorawan_port("config_fport")
    except ConfigError as exc:
        fail(str(exc))


def _listed(lorawan, path):
    """The devices of a --devices-file, one a line, '#' comments; a bad one exits 3 naming its line."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--devices-file {path}: cannot read it: {getattr(exc, 'strerror', None) or exc}")
    ids = []
    for number, line in enumerate(lines, 1):
        text = line.partition("#")[0].strip()
        if text:
            try:
                ids.append(lorawan.device(text))
            except ValueError as exc:
                fail(f"--devices-file {path} line {number}: {exc}")
    if not ids:
        fail(f"--devices-file {path}: no device in it")
    return ids


def _seen(lorawan, store_path):
    """Every device with an accepted report in the store, as the network server names it for a downlink:
    ChirpStack by its DevEUI (the store's device id), TTS by end-device id eui-<DevEUI>."""
    from mss_aggregator.collect.store import StoreError, open_store

    try:
        store = open_store(store_path)
        try:
            seen = sorted({d for d, _, status in store.report_epochs() if status == "accepted"})
        finally:
            store.close()
    except (StoreError, ConfigError) as exc:
        fail(str(exc))
    if not seen:
        fail(f"--store {store_path}: no device has an accepted report in it")
    try:
        return [lorawan.device(d if lorawan.name == "chirpstack" else f"eui-{d}") for d in seen]
    except ValueError as exc:  # an MQTT campaign's store: its device ids are no DevEUIs
        fail(f"--store {store_path}: {exc} (is it a LoRaWAN campaign's store?)")
