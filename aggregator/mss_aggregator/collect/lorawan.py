"""The LoRaWAN network servers whose MQTT integrations the aggregator reads
uplinks from and sends config switches through: ChirpStack v4 (either of its
marshalers: JSON or binary protobuf) and The Things Stack v3 (JSON).

:func:`parse_spec` turns ``chirpstack:<application id>`` or
``tts:<application id>@<tenant>`` into a :class:`ChirpStack` or
:class:`TheThingsStack` object with

* ``uplink_topic`` (the subscription filter) and ``qos`` (ChirpStack 1 with
  the collector's manual ack; TTS offers QoS 0 only), used for downlinks too;
* ``uplink(topic, document, fport)``: an :class:`Uplink` (DevEUI, FPort,
  FCnt, frame bytes, unix time or None) or :class:`UplinkError` with a
  quarantine reason: ``topic``, ``lorawan_json``, ``lorawan_protobuf``,
  ``lorawan_field``, ``lorawan_base64``, ``lorawan_fport``;
* ``downlink(device, fport, payload)``: (topic, JSON document).

:func:`webhook_server` (``chirpstack`` or ``tts``) is the same server without application or
topic, for the events it POSTs (ChirpStack's HTTP integration, TTS's webhooks: the same documents
as on MQTT, :mod:`.webhook`): its ``event(document, fport)`` reads them as ``uplink`` does, less the
topic's checks.

A missing FPort, FCnt or payload is 0 or empty, never an error: TTS omits
empty fields ("Empty fields are omitted"), proto3's binary encoding never
writes a zero, and ChirpStack's JSON writes them (its api/rust/build.rs builds
the integration messages' serde code with pbjson's ``emit_fields``), but a
reader of the proto3 JSON mapping must take an omitted one as its default.

ChirpStack's MQTT integration publishes ``integration.UplinkEvent`` on one
topic either way (chirpstack/src/integration/mqtt.rs: ``serde_json::to_vec``
with ``[integration.mqtt] json = true``, else prost's ``encode_to_vec``), so
each message says which it is by its first byte: ``{`` opens the JSON object,
and no protobuf message starts with it (0x7B would be field 15 opening a
group, a wire type proto3 never writes).  The binary one is parsed by
protobuf itself against :data:`UPLINK_FIELDS`, the few fields read, by their
numbers and types in ChirpStack's integration.proto (tests compare them with
the official ``chirpstack-api`` descriptors); the rest are skipped as unknown
fields, so the aggregator needs ``protobuf`` only, not the gRPC stack
``chirpstack-api`` pulls in.
"""
import base64
import functools
import json
import re
from datetime import datetime
from typing import NamedTuple

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory, timestamp_pb2

from mss_protocol.frames import dev_eui

MAX_DOCUMENT = 64 * 1024  # an uplink event is 1-2 KiB, even heard by tens of gateways
APP_PORTS = range(1, 224)  # FPort 0 carries MAC commands only, 224 is the certification test port
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")  # ids that are safe as MQTT topic levels
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)\Z", re.IGNORECASE)
_F = descriptor_pb2.FieldDescriptorProto
# The fields of ChirpStack v4's integration.UplinkEvent (and its DeviceInfo) the
# aggregator reads: name -> (number, type, message type), as integration.proto defines them
UPLINK_FIELDS = {
    "UplinkEvent": {"time": (2, _F.TYPE_MESSAGE, ".google.protobuf.Timestamp"),
                    "device_info": (3, _F.TYPE_MESSAGE, ".integration.DeviceInfo"),
                    "f_cnt": (7, _F.TYPE_UINT32, None), "f_port": (8, _F.TYPE_UINT32, None),
                    "data": (10, _F.TYPE_BYTES, None)},
    "DeviceInfo": {"dev_eui": (8, _F.TYPE_STRING, None)},
}


class UplinkError(ValueError):
    """An event that is no uplink of this application; ``reason`` is the quarantine code."""

    def __init__(self, reason, detail):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


class Uplink(NamedTuple):
    dev_eui: str  # 16 lowercase hex digits
    fport: int
    fcnt: int
    frame: bytes
    time: float | None  # unix seconds the server received it, None if missing or unparsable


def check_port(port, what):
    if type(port) is not int or port not in APP_PORTS:
        raise ValueError(f"{what} must be an application FPort 1..223, got {port!r}")
    return port


def config_port(device, key, default):
    """FPort ``device.lorawan.<key>`` of a config file's ``device`` section, or ``default``."""
    section = device.get("lorawan") or {}
    if not isinstance(section, dict):
        raise ValueError("device.lorawan must be an object")
    return check_port(section.get(key, default), f"device.lorawan.{key}")


def _show(value):
    """A short text of a JSON value for a detail (no repr of nested junk: it may recurse deeply)."""
    return repr(value)[:40] if isinstance(value, (str, int, float, type(None))) else type(value).__name__


def unix_time(value):
    """Seconds since 1970 of an RFC 3339 time (any fraction digits, Z or offset), or None."""
    if not isinstance(value, str) or not RFC3339.match(value):
        return None
    try:  # fromisoformat takes the upper-case T and Z only, and rejects e.g. February 30
        return datetime.fromisoformat(value.upper()).timestamp()
    except (ValueError, OverflowError):
        return None


def _field(doc, path):
    """doc[path[0]][path[1]]...; None where a level is missing, UplinkError where one is no object."""
    for i, key in enumerate(path):
        if not isinstance(doc, dict):
            raise UplinkError("lorawan_field", f"{'.'.join(path[:i]) or 'the document'} is not an object")
        doc = doc.get(key)
    return doc


def _integer(doc, path, limit):
    value = _field(doc, path)
    if value is None:
        return 0  # omitted because it is 0
    if type(value) is not int or not 0 <= value < limit:  # type(): JSON true is no counter
        raise UplinkError("lorawan_field",
                          f"{'.'.join(path)} = {_show(value)} is not an integer in [0, {limit})")
    return value


@functools.cache
def uplink_event_class():
    """A protobuf message class of :data:`UPLINK_FIELDS` (package ``integration``, as ChirpStack's)."""
    proto = descriptor_pb2.FileDescriptorProto(name="mss/chirpstack_uplink.proto", package="integration",
                                               syntax="proto3", dependency=[timestamp_pb2.DESCRIPTOR.name])
    for name, fields in UPLINK_FIELDS.items():
        msg = proto.message_type.add(name=name)
        for field, (number, kind, type_name) in fields.items():
            msg.field.add(name=field, number=number, type=kind, type_name=type_name, label=_F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(timestamp_pb2.DESCRIPTOR.serialized_pb))
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("integration.UplinkEvent"))


def json_object(document):
    """The JSON object ``document`` (bytes), or UplinkError("lorawan_json", ...)."""
    try:
        doc = json.loads(document)
    except ValueError as exc:  # not UTF-8 or JSON, or an integer of over 4300 digits
        raise UplinkError("lorawan_json", f"not JSON: {str(exc)[:80]}") from None
    except RecursionError:
        raise UplinkError("lorawan_json", "nested too deeply") from None
    if not isinstance(doc, dict):
        raise UplinkError("lorawan_json", f"not a JSON object but {type(doc).__name__}")
    return doc


class Server:
    """One application on a network server: its topics and JSON field paths.
    Subclasses add ``device(id)`` (the id a downlink is addressed to, checked;
    ValueError if it cannot be one) and ``downlink(device, fport, payload)``."""

    name = ""
    qos = 0
    DEV_EUI = FPORT = FCNT = DATA = ()  # paths into an uplink event
    TIMES = ()  # paths of the event's time, best first
    DEVICE_LEVEL = 3  # the topic level that names the device

    def __init__(self, app, uplink_topic):
        self.app, self.uplink_topic = app, uplink_topic
        self._levels = uplink_topic.split("/") if uplink_topic else []

    @property
    def webhook(self):
        """Whether this server's uplinks come POSTed to the aggregator (:func:`webhook_server`:
        no application, no topic), not over its MQTT integration."""
        return self.uplink_topic is None

    def uplink(self, topic, document, fport, also=()):
        """The :class:`Uplink` in ``document`` (bytes) received on ``topic`` (str)
        if it is one on ``fport`` (or a port of ``also``: the time probes' ``time_fport``,
        which the caller sets apart); else raise :class:`UplinkError`."""
        levels = topic.split("/")
        if self.webhook or len(levels) != len(self._levels) or not levels[self.DEVICE_LEVEL] or any(
                want not in ("+", got) for want, got in zip(self._levels, levels)):
            raise UplinkError("topic", f"not an uplink topic of {self.name} application {self.app}")
        up = self.event(document, fport, also)
        self.check_device(levels[self.DEVICE_LEVEL], up.dev_eui)
        return up

    def event(self, document, fport, also=()):
        """The :class:`Uplink` in ``document`` (bytes), whatever carried it (an MQTT topic,
        checked by :meth:`uplink`, or an authenticated webhook POST), as :meth:`uplink` says."""
        if len(document) > MAX_DOCUMENT:  # not parsed: parsing time and memory grow with it
            raise UplinkError(self.marshaler_reason(document), f"{len(document)} bytes is too long for an "
                                                               "uplink event")
        eui, port, fcnt, frame, time = self.read(document)
        if port != fport and port not in also:
            raise UplinkError("lorawan_fport", f"FPort {port} is not the reports' FPort {fport}")
        return Uplink(dev_eui=eui, fport=port, fcnt=fcnt, frame=frame, time=time)

    def marshaler_reason(self, document):
        """The quarantine reason of a malformed ``document``, named for the marshaler that reads it."""
        return "lorawan_json"

    def read(self, document):
        """(DevEUI, FPort, FCnt, frame, time) of an event's bytes; UplinkError if it has none."""
        return self.read_json(json_object(document))

    def read_json(self, doc):
        eui = self.event_dev_eui(_field(doc, self.DEV_EUI))
        port = _integer(doc, self.FPORT, 256)
        fcnt = _integer(doc, self.FCNT, 1 << 32)
        data = _field(doc, self.DATA)
        if not isinstance(data, (str, type(None))):
            raise UplinkError("lorawan_field", f"{'.'.join(self.DATA)} is not a string")
        try:
            frame = base64.b64decode(data or "", validate=True)
        except ValueError as exc:  # binascii.Error, or a non-ASCII string
            raise UplinkError("lorawan_base64", f"{'.'.join(self.DATA)}: {exc}") from None
        times = (unix_time(_field(doc, path)) for path in self.TIMES)
        return eui, port, fcnt, frame, next((t for t in times if t is not None), None)

    def event_dev_eui(self, value):
        try:
            return dev_eui(value)
        except ValueError as exc:
            raise UplinkError("lorawan_field", f"{'.'.join(self.DEV_EUI)}: {exc}") from None

    def check_device(self, level, eui):
        """Raise UplinkError("topic", ...) if the topic's device level contradicts the DevEUI."""


class ChirpStack(Server):
    """ChirpStack v4's MQTT integration, either marshaler; the topic names the device by its DevEUI."""

    name, qos = "chirpstack", 1
    DEV_EUI, FPORT, FCNT, DATA = ("deviceInfo", "devEui"), ("fPort",), ("fCnt",), ("data",)
    TIMES = (("time",),)

    def __init__(self, app=None):
        super().__init__(app, app and f"application/{app}/device/+/event/up")

    def marshaler_reason(self, document):
        return "lorawan_json" if self.is_json(document) else "lorawan_protobuf"

    @staticmethod
    def is_json(document):
        """The JSON marshaler's (an object), else the protobuf one's."""
        return document[:1] == b"{"

    def read(self, document):
        if self.is_json(document):
            return super().read(document)
        try:
            event = uplink_event_class().FromString(document)
        except message.DecodeError as exc:
            raise UplinkError("lorawan_protobuf",
                              f"neither a JSON object nor a protobuf integration.UplinkEvent: {exc}") from None
        eui = self.event_dev_eui(event.device_info.dev_eui)
        try:  # read as the JSON marshaler writes it; out of Timestamp's range it is no time, as there
            time = unix_time(event.time.ToJsonString()) if event.HasField("time") else None
        except ValueError:
            time = None
        return eui, event.f_port, event.f_cnt, event.data, time

    def check_device(self, level, eui):
        if level.lower() != eui:  # a forged or misrouted event
            raise UplinkError("topic", f"topic device {level[:40]!r} is not the event's DevEUI {eui}")

    def device(self, value):
        return dev_eui(value)

    def downlink(self, device, fport, payload):
        doc = {"devEui": device, "confirmed": False, "fPort": fport,
               "data": base64.b64encode(payload).decode()}
        return f"application/{self.app}/device/{device}/command/down", json.dumps(doc).encode()


class TheThingsStack(Server):
    """The Things Stack v3 MQTT server; the topic names the device by its end-device id, not its DevEUI."""

    name, qos = "tts", 0
    DEV_EUI, DATA = ("end_device_ids", "dev_eui"), ("uplink_message", "frm_payload")
    FPORT, FCNT = ("uplink_message", "f_port"), ("uplink_message", "f_cnt")
    TIMES = (("uplink_message", "received_at"), ("received_at",))  # the network server's, else the app's

    def __init__(self, app=None, tenant=None):
        self.tenant = tenant
        super().__init__(app, app and f"v3/{app}@{tenant}/devices/+/up")

    def device(self, value):
        if not isinstance(value, str) or not NAME.match(value):
            raise ValueError(f"a TTS end-device id is letters, digits, '-', '_' or '.', got {value!r}")
        return value

    def downlink(self, device, fport, payload):
        doc = {"downlinks": [{"f_port": fport, "frm_payload": base64.b64encode(payload).decode(),
                              "priority": "NORMAL"}]}
        return f"v3/{self.app}@{self.tenant}/devices/{device}/down/push", json.dumps(doc).encode()


def parse_spec(spec):
    """The :class:`Server` of ``chirpstack:<application id>`` or ``tts:<application id>@<tenant>``."""
    kind, _, rest = str(spec).partition(":")
    if kind == "chirpstack" and NAME.match(rest):
        return ChirpStack(rest)
    app, _, tenant = rest.partition("@")
    if kind == "tts" and NAME.match(app) and NAME.match(tenant):
        return TheThingsStack(app, tenant)
    raise ValueError(f"expected chirpstack:<application id> or tts:<application id>@<tenant> "
                     f"(e.g. tts:my-app@ttn), got {spec!r}")


WEBHOOKS = {"chirpstack": ChirpStack, "tts": TheThingsStack}


def webhook_server(kind):
    """The :class:`Server` whose uplinks its HTTP integration POSTs (``chirpstack``: either
    marshaler) or its webhook (``tts``): the same events as on its MQTT integration, read by
    :meth:`Server.event`; no application (the network server posts one application's events to
    the URL configured in it), no topic, no downlinks."""
    if kind not in WEBHOOKS:
        raise ValueError(f"expected chirpstack or tts, got {kind!r}")
    return WEBHOOKS[kind]()
