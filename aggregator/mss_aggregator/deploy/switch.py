"""Schedule a config switch on LoRaWAN devices: one 2-byte downlink each (``mss switch-config``).

A Class A device hears a downlink only after one of its uplinks, and TTN allows 10 downlinks a day,
so the downlink is the start of the new config's id, which names one of the configs the device
already holds.  :func:`send_switch` hands each downlink to the network server's MQTT broker and
returns when the broker has taken it (QoS 1, ChirpStack: its PUBACK; QoS 0, TTS: sent).
"""
import threading
from dataclasses import dataclass

TIMEOUT = 10.0  # seconds to connect, and to hand each downlink to the broker


class SwitchError(RuntimeError):
    """The broker could not be reached, refused the connection, or did not take a downlink."""


@dataclass(frozen=True)
class Broker:
    """The network server's MQTT broker (:func:`mss_aggregator.collect.collectors.parse_broker`'s parts);
    ``ca``: the CA certificate file its certificate is verified with (default: the system's), which
    implies TLS."""
    host: str
    port: int
    user: str = None
    password: str = None
    tls: bool = False
    ca: str = None


def switch_payload(cfg):
    """The downlink naming ``cfg``: the first 2 bytes of its config id."""
    return cfg.config_id[:2]


def send_switch(broker, lorawan, devices, payload, fport, sent=None):
    """Hand a downlink of ``payload`` on ``fport`` to each of ``devices`` (as ``lorawan``, a network
    server's :class:`~mss_aggregator.collect.lorawan` dialect, names them) to ``broker``;
    ``sent(device, topic)`` after each.  Raises :class:`SwitchError`."""
    import paho.mqtt.client as mqtt

    answer = []  # the CONNACK's reason code
    answered = threading.Event()
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    c.on_connect = lambda cl, u, f, reason, p: (answer.append(reason), answered.set())
    if broker.user:
        c.username_pw_set(broker.user, broker.password)
    if broker.tls or broker.ca:
        try:
            c.tls_set(ca_certs=broker.ca)
        except OSError as exc:  # ssl.SSLError: not a CA certificate
            raise SwitchError(f"CA certificate {broker.ca}: {getattr(exc, 'strerror', None) or exc}") from None
    where = f"{broker.host}:{broker.port}"
    try:
        c.connect(broker.host, broker.port, keepalive=30)
    except OSError as exc:
        raise SwitchError(f"cannot connect to {where}: {exc}") from None
    c.loop_start()
    try:
        if not answered.wait(TIMEOUT):
            raise SwitchError(f"no answer from {where} in {TIMEOUT:.0f} s")
        if answer[0].is_failure:
            raise SwitchError(f"{where} refused the connection: {answer[0]}")
        for device in devices:
            topic, document = lorawan.downlink(device, fport, payload)
            try:  # QoS 1 (ChirpStack): until the PUBACK; QoS 0 (TTS): until it is sent
                info = c.publish(topic, document, qos=lorawan.qos)
                info.wait_for_publish(TIMEOUT)  # returns at the timeout too
                if not info.is_published():
                    raise RuntimeError(f"the broker did not take it in {TIMEOUT:.0f} s")
            except (RuntimeError, ValueError) as exc:  # e.g. the connection dropped
                raise SwitchError(f"{device}: downlink not sent: {exc}") from None
            if sent is not None:
                sent(device, topic)
    finally:
        c.disconnect()
        c.loop_stop()
