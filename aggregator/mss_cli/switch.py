"""``mss switch-config``: schedule a config switch on LoRaWAN devices, one downlink each.

A Class A device hears a downlink only after one of its uplinks, and TTN
allows 10 downlinks a day, so the downlink is 2 bytes: the start of the new
config's id, which names one of the configs the device already holds.
"""
import threading

import click

from mss_cli.collect import LORAWAN_SPEC, lorawan_spec
from mss_cli.common import broker_password_option, broker_url, console, fail
from mss_protocol.mss.config import ConfigError

TIMEOUT = 10.0  # seconds to connect, and to hand each downlink to the broker


@click.command("switch-config")
@click.option("--lorawan", metavar=LORAWAN_SPEC, callback=lorawan_spec, required=True,
              help="The network-server application the devices are in.")
@click.option("--broker", required=True,
              help="The network server's MQTT broker, mqtt[s]://[user:pass@]host:port "
                   "(TTS: user APP@TENANT, password an API key).")
@broker_password_option
@click.option("--to-config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="The config to switch to (mss plan --device-config).")
@click.option("--device", "devices", multiple=True, required=True, metavar="ID",
              help="ChirpStack: the DevEUI; TTS: the end-device id.  Repeat for several.")
@click.option("--fport", type=click.IntRange(1, 223),
              help="Downlink FPort [default: the config's device.lorawan.config_fport, else 2].")
def switch_cmd(lorawan, broker, broker_password_file, config_path, devices, fport):
    """Schedule a downlink naming --to-config's id (2 bytes) to each --device."""
    import paho.mqtt.client as mqtt

    from mss_aggregator.collect.collectors import parse_broker
    from mss_aggregator.collect.lorawan import config_port
    from mss_protocol.mss.config import read_json
    from mss_protocol.oracle_config import load_dict

    broker = broker_url(broker, broker_password_file)
    try:
        ids = [lorawan.device(d) for d in devices]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--device")
    try:
        host, port, user, password, tls = parse_broker(broker)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--broker")
    try:
        raw = read_json(config_path, "config")
        cfg = load_dict(raw, source=str(config_path))
        fport = fport or config_port(raw.get("device") or {}, "config_fport", 2)
    except (ConfigError, ValueError) as exc:
        fail(f"{config_path}: {exc}")
    payload = cfg.config_id[:2]

    answer = []  # the CONNACK's reason code
    answered = threading.Event()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    c.on_connect = lambda cl, u, f, reason, p: (answer.append(reason), answered.set())
    if user:
        c.username_pw_set(user, password)
    if tls:
        c.tls_set()
    try:
        c.connect(host, port, keepalive=30)
    except OSError as exc:
        fail(f"cannot connect to {host}:{port}: {exc}")
    c.loop_start()
    try:
        if not answered.wait(TIMEOUT):
            fail(f"no answer from {host}:{port} in {TIMEOUT:.0f} s")
        if answer[0].is_failure:
            fail(f"{host}:{port} refused the connection: {answer[0]}")
        for device in ids:
            topic, document = lorawan.downlink(device, fport, payload)
            try:  # QoS 1 (ChirpStack): until the PUBACK; QoS 0 (TTS): until it is sent
                info = c.publish(topic, document, qos=lorawan.qos)
                info.wait_for_publish(TIMEOUT)  # returns at the timeout too
                if not info.is_published():
                    raise RuntimeError(f"the broker did not take it in {TIMEOUT:.0f} s")
            except (RuntimeError, ValueError) as exc:  # e.g. the connection dropped
                fail(f"{device}: downlink not sent: {exc}")
            click.echo(f"{device}: scheduled {payload.hex()} (config {cfg.config_id_hex}) on FPort {fport} "
                       f"-> {topic}")
    finally:
        c.disconnect()
        c.loop_stop()
    console.print(f"{len(ids)} downlink(s) handed to the network server; a device receives its one "
                  f"after its next uplink", highlight=False)
