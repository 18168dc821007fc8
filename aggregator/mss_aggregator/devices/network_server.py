"""Network servers in ChirpStack's and The Things Stack's shape, for emulated modems.

:class:`ChirpStackEmulator` publishes the uplinks of emulated modems
(:mod:`mss_aggregator.devices.modem`) as ChirpStack v4's
MQTT integration does, ``event/up`` events made with ChirpStack's own
protobuf messages (``chirpstack-api``) through either of its marshalers
(JSON or binary protobuf), and feeds ``command/down`` documents back to the
devices' modems; :class:`TheThingsStackEmulator` does the same in The
Things Stack v3's documented shape (``v3/<app>@<tenant>/devices/<id>/up``
at QoS 0, ``.../down/push``).  Tests and ``mss demo --lorawan chirpstack`` use them.
"""
import base64
import json
import time
import uuid
from datetime import datetime, timezone


def rfc3339(t):
    """As both servers print times: UTC, nanoseconds, Z."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f") + "417Z"


def omit_empty(value):
    """What The Things Stack does to its JSON ("Empty fields are omitted from payloads"):
    drop 0, false, "", null and empty fields, at every depth."""
    if isinstance(value, dict):
        value = {k: omit_empty(v) for k, v in value.items()}
        return {k: v for k, v in value.items() if not (v in (0, "", None) or v == [] or v == {})}
    if isinstance(value, list):
        return [omit_empty(v) for v in value]
    return value


MARSHALERS = ("json", "protobuf")  # ChirpStack's [integration.mqtt] json = true / false
# region -> (ChirpStack's region config id, common name, an uplink channel in Hz): chirpstack's
# configuration/region_*.toml ids and the regions' first default channels (RP002: EU868 868.1 MHz,
# US915 sub-band 1 902.3 MHz, AU915 sub-band 1 915.2 MHz)
REGION_EVENT = {"eu868": ("eu868", "EU868", 868100000), "us915": ("us915_0", "US915", 902300000),
                "au915": ("au915_0", "AU915", 915200000), "au915-nodwell": ("au915_0", "AU915", 915200000)}


def chirpstack_event(app, dev_eui, fport, fcnt, data, t, gateway=0, link=None):
    """(topic, ``integration.UplinkEvent``) of an uplink as ChirpStack v4 publishes it, built
    with ChirpStack's own protobuf messages (the ``chirpstack-api`` package); ``t`` None leaves
    the time unset, ``gateway`` numbers the receiver, ``link`` (a :class:`mss_protocol.lorawan.Link`,
    default US915 DR0) gives the region, data rate and modulation."""
    from chirpstack_api import common, gw, integration

    from mss_protocol.lorawan import parse_link

    link = link or parse_link("lorawan:us915:0")
    region_id, region_name, hz = REGION_EVENT[link.region]

    event = integration.UplinkEvent(
        deduplication_id=f"{fcnt:08x}-6f6a-4a1f-9a1b-{dev_eui[4:]}",
        device_info=integration.DeviceInfo(
            tenant_id="52f14cd4-c6f1-4fbd-8f87-4025e1d49242", tenant_name="ChirpStack", application_id=app,
            application_name="mss", device_profile_id="0b1a8f2e-0d9c-4a52-9b7e-2f5f3c6a1d10",
            device_profile_name=f"{region_name} class A", device_name=f"node-{dev_eui[-4:]}", dev_eui=dev_eui,
            device_class_enabled=common.DeviceClass.CLASS_A),
        dev_addr=dev_eui[-8:], adr=True, dr=link.dr, f_cnt=fcnt, f_port=fport, confirmed=False, data=data,
        rx_info=[gw.UplinkRxInfo(gateway_id=f"0080000000a0{gateway:04x}", uplink_id=4242 + gateway,
                                 rssi=-70 - 9 * gateway, snr=9.5 - 4 * gateway, channel=gateway,
                                 context=bytes([gateway, 7, 7, 7]),
                                 metadata={"region_config_id": region_id, "region_common_name": region_name},
                                 crc_status=gw.CRCStatus.CRC_OK)],
        tx_info=gw.UplinkTxInfo(frequency=hz, modulation=gw.Modulation(lora=gw.LoraModulationInfo(
            bandwidth=link.bw_khz * 1000, spreading_factor=link.sf, code_rate=gw.CodeRate.CR_4_5))),
        region_config_id=region_id)
    if t is not None:
        event.time.FromNanoseconds(int(round(t * 1e6)) * 1000)
    return f"application/{app}/device/{dev_eui}/event/up", event


def chirpstack_json(event):
    """The document ChirpStack's JSON marshaler makes of ``event``: the proto3 JSON mapping
    (camelCase names, bytes in base64, enums by name), with the zero fields, as its
    serde code is built with pbjson's emit_fields (api/rust/build.rs)."""
    from google.protobuf import json_format

    doc = json_format.MessageToDict(event, always_print_fields_with_no_presence=True)
    for rx in doc.get("rxInfo", ()):  # a map's order is arbitrary (a HashMap in ChirpStack): sorted, to be stable
        rx["metadata"] = dict(sorted(rx.get("metadata", {}).items()))
    return doc


def marshal(event, marshaler):
    """``event`` as ChirpStack publishes it with ``marshaler`` (:data:`MARSHALERS`): compact JSON
    (serde_json::to_vec) or the binary protobuf encoding (prost's encode_to_vec)."""
    if marshaler == "json":
        return json.dumps(chirpstack_json(event), separators=(",", ":")).encode()
    if marshaler == "protobuf":
        return event.SerializeToString(deterministic=True)  # map entries sorted, as for the JSON
    raise ValueError(f"marshaler must be one of {', '.join(MARSHALERS)}, got {marshaler!r}")


def chirpstack_uplink(app, dev_eui, fport, fcnt, data, t, gateway=0):
    """(topic, JSON document as a dict) of :func:`chirpstack_event`: what tests edit into bad events."""
    topic, event = chirpstack_event(app=app, dev_eui=dev_eui, fport=fport, fcnt=fcnt, data=data, t=t, gateway=gateway)
    return topic, chirpstack_json(event)


def tts_device_id(dev_eui):
    """The end-device id The Things Stack's console proposes for a DevEUI."""
    return f"eui-{dev_eui.lower()}"


# The Things Stack v3's uplink message as its documentation gives it (field paths, a list's items
# under the list's name): thethingsindustries.com/docs/integrations/data-formats, "Uplink Messages"
# (lorawan-stack-docs doc/content/integrations/data-formats/_index.md), published on the MQTT
# server's v3/{application id}@{tenant id}/devices/{device id}/up.  Tests hold tts_uplink to it.
TTS_UPLINK_FIELDS = frozenset(tuple(p.split(".")) for p in """
    end_device_ids end_device_ids.device_id end_device_ids.application_ids
    end_device_ids.application_ids.application_id end_device_ids.dev_eui end_device_ids.join_eui
    end_device_ids.dev_addr correlation_ids received_at simulated
    uplink_message uplink_message.session_key_id uplink_message.f_cnt uplink_message.f_port
    uplink_message.frm_payload uplink_message.decoded_payload uplink_message.rx_metadata
    uplink_message.rx_metadata.gateway_ids uplink_message.rx_metadata.gateway_ids.gateway_id
    uplink_message.rx_metadata.gateway_ids.eui uplink_message.rx_metadata.time
    uplink_message.rx_metadata.timestamp uplink_message.rx_metadata.rssi uplink_message.rx_metadata.channel_rssi
    uplink_message.rx_metadata.snr uplink_message.rx_metadata.uplink_token uplink_message.rx_metadata.channel_index
    uplink_message.settings uplink_message.settings.data_rate uplink_message.settings.data_rate.lora
    uplink_message.settings.data_rate.lora.bandwidth uplink_message.settings.data_rate.lora.spreading_factor
    uplink_message.settings.data_rate_index uplink_message.settings.coding_rate uplink_message.settings.frequency
    uplink_message.settings.timestamp uplink_message.settings.time uplink_message.received_at
    uplink_message.consumed_airtime uplink_message.locations""".split())


def tts_uplink(app, tenant, dev_eui, fport, fcnt, data, t, gateway=0):
    """(topic, document) of an uplink as The Things Stack v3 publishes it on its MQTT
    server, in the documented shape (:data:`TTS_UPLINK_FIELDS`; empty fields omitted, the
    DevEUI in capitals, as TTS writes it); ``t`` None omits the times, ``gateway`` numbers
    the receiver."""
    device, at = tts_device_id(dev_eui), t and rfc3339(t)
    doc = {"end_device_ids": {"device_id": device, "application_ids": {"application_id": app},
                              "dev_eui": dev_eui.upper(), "join_eui": "0000000000000000",
                              "dev_addr": dev_eui[-8:].upper()},
           "correlation_ids": [f"gs:uplink:01HQ{fcnt:012d}{gateway:010d}"], "received_at": at,
           "uplink_message": {"session_key_id": "AYbC3xYt0p8l2lq7a1cGqw==", "f_cnt": fcnt, "f_port": fport,
                              "frm_payload": base64.b64encode(data).decode(),
                              "rx_metadata": [{"gateway_ids": {"gateway_id": f"gw-{gateway}",
                                                               "eui": f"B827EBFFFE{gateway:06X}"},
                                               "time": at, "timestamp": 1804523 + gateway,
                                               "rssi": -70 - 9 * gateway, "channel_rssi": -70 - 9 * gateway,
                                               "snr": 9.5 - 4 * gateway,
                                               "uplink_token": f"ChcKFQoJZ3ctMBIIuCfr//4{gateway}",
                                               "channel_index": gateway}],
                              "settings": {"data_rate": {"lora": {"bandwidth": 125000, "spreading_factor": 10}},
                                           "data_rate_index": 0, "coding_rate": "4/5", "frequency": "902300000",
                                           "timestamp": 1804523, "time": at},
                              "received_at": at, "consumed_airtime": "0.370688s"}}
    return f"v3/{app}@{tenant}/devices/{device}/up", omit_empty(doc)


class NetworkServerEmulator:
    """Publishes emulated modems' uplinks as a network server's MQTT
    integration does and routes downlink documents back to the modems.
    Subclasses give the shape: ``qos`` of the uplinks, the downlink topic
    filter, ``event(dev_eui, fport, fcnt, data, t)`` -> (topic, bytes published)
    and ``addressed(topic, document)`` -> (DevEUI, fport, payload bytes)."""

    qos = 1

    def __init__(self, host, port, down_filter, user=None, password=None):
        import paho.mqtt.client as mqtt

        self.modems = {}
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"ns-emulator-{uuid.uuid4().hex[:8]}")
        if user:
            c.username_pw_set(user, password)
        c.on_connect = lambda cl, *a: cl.subscribe(down_filter, qos=1)
        c.on_message = self._down
        c.connect(host, port)
        c.loop_start()
        self.client = c

    def attach(self, modem):
        """Serve ``modem``: its uplinks published, its downlinks delivered; with a ``link`` (the
        network's region and data rate) the modem's radio time is counted on it."""
        self.modems[modem.dev_eui] = modem
        modem.on_uplink = self.uplink
        if getattr(self, "link", None) is not None:
            modem.link = self.link

    def uplink(self, modem, fport, fcnt, data):
        topic, document = self.event(dev_eui=modem.dev_eui, fport=fport, fcnt=fcnt, data=data, t=time.time())
        self.client.publish(topic, document, qos=self.qos)

    def _down(self, client, userdata, msg):
        try:
            eui, fport, data = self.addressed(msg.topic, json.loads(msg.payload))
            self.modems[eui].downlink(fport, data)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, StopIteration):
            pass  # not for an emulated device: a real network server would log it

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


class ChirpStackEmulator(NetworkServerEmulator):
    """ChirpStack v4: ``event/up`` at QoS 1 with the ``marshaler`` chosen (:data:`MARSHALERS`);
    ``command/down`` (JSON) names the DevEUI.  ``link`` (a :class:`mss_protocol.lorawan.Link`; None:
    US915 DR0): the region and data rate of its events and of the modems it serves."""

    def __init__(self, host, port, app, user=None, password=None, marshaler="json", link=None):
        if marshaler not in MARSHALERS:
            raise ValueError(f"marshaler must be one of {', '.join(MARSHALERS)}, got {marshaler!r}")
        try:  # here, not at the first uplink in a modem's thread
            import chirpstack_api  # noqa: F401
        except ImportError:
            raise RuntimeError("the ChirpStack emulator builds its events with ChirpStack's own messages: "
                               "pip install chirpstack-api") from None
        self.app, self.marshaler, self.link = app, marshaler, link
        super().__init__(host=host, port=port, down_filter=f"application/{app}/device/+/command/down", user=user,
                         password=password)

    def event(self, dev_eui, fport, fcnt, data, t):
        topic, event = chirpstack_event(app=self.app, dev_eui=dev_eui, fport=fport, fcnt=fcnt, data=data, t=t,
                                        link=self.link)
        return topic, marshal(event, self.marshaler)

    def addressed(self, topic, doc):
        return doc["devEui"].lower(), int(doc["fPort"]), base64.b64decode(doc["data"])


class TheThingsStackEmulator(NetworkServerEmulator):
    """The Things Stack v3: uplinks at QoS 0 (its MQTT server offers no more),
    devices named by end-device id (:func:`tts_device_id`) in the topics."""

    qos = 0

    def __init__(self, host, port, app, tenant, user=None, password=None):
        self.app, self.tenant = app, tenant
        super().__init__(host=host, port=port, down_filter=f"v3/{app}@{tenant}/devices/+/down/push", user=user,
                         password=password)

    def event(self, dev_eui, fport, fcnt, data, t):
        topic, doc = tts_uplink(app=self.app, tenant=self.tenant, dev_eui=dev_eui, fport=fport, fcnt=fcnt, data=data,
                                t=t)
        return topic, json.dumps(doc).encode()

    def addressed(self, topic, doc):
        device = topic.split("/")[3]
        eui = next(e for e in self.modems if tts_device_id(e) == device)
        down = doc["downlinks"][0]
        return eui, int(down.get("f_port", 0)), base64.b64decode(down.get("frm_payload", ""))
