"""Classify one incoming message: a decoded report with its device, or a
quarantine reason.  Nothing here raises on any input (a device cannot crash
the aggregator).

Reason codes (with a detail text): ``topic`` (not
``mss/v1/<campaign>/<device_id>/report``, not UTF-8, too long; for LoRaWAN
not this application's uplink topic, or, on ChirpStack, a topic naming
another DevEUI than the event), ``lorawan_json`` (a network-server event
that is not JSON, not an object, or over 64 KiB), ``lorawan_protobuf`` (a
ChirpStack event that is neither a JSON object nor a protobuf UplinkEvent),
``lorawan_field`` (a
required field missing or of the wrong type: no DevEUI, payload not a
string, FCnt not an integer), ``lorawan_base64`` (payload not base64),
``lorawan_fport`` (not the reports' FPort, MAC-only FPort 0 included; an
uplink on ``time_fport`` is a clockless board's time probe, no report: it is
counted as ``time_probes``, neither stored nor quarantined; one of the byte
01 says the board skipped that epoch, device.budget spent: :meth:`Ingest.skip`),
``payload`` (longer than any frame of the config), ``wire_<reason>`` (see
:class:`mss_protocol.mss.wire.WireError`), ``frame``/``checksum`` (serial),
``not_allowed`` (a device id not on the campaign's
:class:`~.allow_list.AllowList`, :attr:`Ingest.allowed`: refused before its frame is read),
``epoch`` (outside the window of the campaign clock: more than
``past_epochs`` epochs before the current one, or after the next one).
Compact frames take their epoch from the link (they carry none, or its low
16 bits): the campaign clock, or a LoRaWAN event's time, so a replayed old
event is outside the window too; without ``period_s`` there is no clock, no
window, and compact frames are quarantined as ``wire_epoch``.

Classification has two steps: the link's (``receive_mqtt``, ``receive_lorawan``,
``receive_webhook`` (a network server's authenticated POST: no topic), ``receive_serial``: topic, network-server event or serial line, length, device,
link epoch and sequence) gives a final result or a :class:`Pending` frame, and
the decoding step (:meth:`Ingest.decode_one`, or :meth:`Ingest.decode_batch`
for many at once with ``codec.decode_many``: the same WireErrors) finishes it.
``from_mqtt``, ``from_lorawan`` and ``from_serial`` are both steps for one message.

A quarantine result keeps what arrived as its ``length``, its ``sha256``
(hex) and its first KEEP_BYTES bytes only (the topic: its first MAX_TOPIC
bytes), so one row is small whatever the broker lets through.
"""
import hashlib
import time
from dataclasses import dataclass, replace

from mss_aggregator.collect.lorawan import UplinkError
from mss_device.frame import HEADER_BYTES
from mss_device.gateway import DEVICE_ID, LineError, parse as parse_line
from mss_node.lorawan_link import DEFAULTS as LORAWAN_DEFAULTS
from mss_node.settings import DEVICE_DEFAULTS
from mss_protocol.codec import codec
from mss_protocol.frames import WireError

MAX_TOPIC = 256
KEEP_BYTES = 4096  # of a quarantined payload or network-server event (events are up to 64 KiB)
SKIP_UPLINK = b"\x01"  # a LoRaWAN uplink on time_fport saying the epoch was skipped (a probe is 00)
PAST_EPOCHS = DEVICE_DEFAULTS["queue_max"]  # default window into the past: what a board keeps unsent
LORAWAN_PORTS = (LORAWAN_DEFAULTS["fport"], LORAWAN_DEFAULTS["time_fport"])  # a board's (reports, time probes)
AGGREGATOR_FIELDS = {"accept_past_epochs", "quarantine_max_rows"}  # a config file's aggregator section


def count_field(section, key, default, where):
    """``section[key]`` (default ``default``), a non-negative integer, else ValueError naming
    ``where.key``."""
    value = section.get(key, default)
    if type(value) is not int or value < 0:
        raise ValueError(f"{where}.{key} must be a non-negative integer, got {value!r}")
    return value


def campaign_clock(raw):
    """The campaign clock of a config file's dict: ``{"period_s", "epoch_origin",
    "accept_past_epochs"}`` from its ``device`` section (the boards' period)
    and its ``aggregator`` section (the window into the past; default the
    boards' ``device.queue_max``, else the firmware's, :data:`PAST_EPOCHS`), or None without
    ``device.period_s`` (which the services refuse).  ValueError names a bad field."""
    device, agg = raw.get("device") or {}, raw.get("aggregator") or {}
    for name, section in (("device", device), ("aggregator", agg)):
        if not isinstance(section, dict):
            raise ValueError(f"{name} must be an object, got {section!r}")
    unknown = sorted(set(agg) - AGGREGATOR_FIELDS)
    if unknown:
        raise ValueError(f"unknown field aggregator.{unknown[0]} (known: {', '.join(sorted(AGGREGATOR_FIELDS))})")
    if "period_s" not in device:
        if "accept_past_epochs" in agg:
            raise ValueError("aggregator.accept_past_epochs needs device.period_s, the boards' period")
        return None
    period = device["period_s"]
    if type(period) is not int or period < 1:  # the firmware takes whole seconds only
        raise ValueError(f"device.period_s must be a whole number of seconds >= 1, got {period!r}")
    origin = device.get("epoch_origin", DEVICE_DEFAULTS["epoch_origin"])
    if type(origin) is not int or origin < 0:
        raise ValueError(f"device.epoch_origin must be a unix time in whole seconds >= 0, got {origin!r}")
    past = count_field(agg, "accept_past_epochs", count_field(device, "queue_max", PAST_EPOCHS, "device"),
                       "aggregator")
    return {"period_s": period, "epoch_origin": origin, "accept_past_epochs": past}


def held(item, raw):
    """The quarantine form of ``item``: ``raw`` (all that arrived, or None) as
    its length, SHA-256 and first KEEP_BYTES bytes; the topic cut to MAX_TOPIC."""
    topic, detail = item.get("topic"), item.get("detail", "")
    if raw is not None and len(raw) > KEEP_BYTES:
        detail += f" ({len(raw)} bytes, the first {KEEP_BYTES} kept)"
    return dict(item, topic=None if topic is None else topic[:MAX_TOPIC], detail=detail,
                payload=None if raw is None else raw[:KEEP_BYTES], length=None if raw is None else len(raw),
                sha256=None if raw is None else hashlib.sha256(raw).hexdigest())


@dataclass(frozen=True)
class Pending:
    """A message past its link's checks, its frame not yet decoded: ``item`` (source,
    topic, payload) that the result extends, the frame's ``device_id``, the link's
    ``epoch`` and ``seq`` (see :meth:`Ingest._pending`), and ``raw``, what a
    quarantine row keeps (:func:`held`; None: the result is not held, ``Ingest.frame``)."""
    item: dict
    device_id: str
    frame: bytes
    epoch: int
    seq: int
    raw: bytes = None


class Ingest:
    """``lorawan``: the :class:`~mss_aggregator.collect.lorawan.Server` whose
    uplinks :meth:`from_lorawan` reads, with ``ports`` (fport, time_fport): reports on fport, time
    probes on time_fport (``{"ignored": "time_probes"}``, counted by the store).  With
    ``period_s`` only epochs ``current - past_epochs .. current + 1`` of the
    campaign clock are accepted (the + 1 for device clocks a little ahead).

    ``allowed``: an :class:`~.allow_list.AllowList`, or None (every device id); the services set it
    from their links (:attr:`~.links.Links.allowed`).  A report of an id not on it is quarantined as
    ``not_allowed``, on every link, before anything else about its frame is judged."""

    allowed = None

    def __init__(self, cfg, campaign, period_s=None, epoch_origin=0, clock=time.time, lorawan=None,
                 past_epochs=PAST_EPOCHS, ports=LORAWAN_PORTS):
        self.codec = codec(cfg)
        self.campaign = campaign
        self.period_s, self.epoch_origin, self.clock = period_s, epoch_origin, clock
        self.past_epochs = past_epochs
        self.lorawan, (self.fport, self.time_fport) = lorawan, ports
        self.max_payload = HEADER_BYTES + max(self.codec.body_lengths)  # the longest header, full

    def from_mqtt(self, topic, payload, source="mqtt"):
        return self.decode_one(self.receive_mqtt(topic, payload, source))

    def receive_mqtt(self, topic, payload, source="mqtt"):
        """The link's step of :meth:`from_mqtt`: a result, or a :class:`Pending` frame."""
        item = {"source": source, "topic": bytes(topic), "payload": bytes(payload)}
        return self._held(self._classify_mqtt(item), item["payload"])

    def _classify_mqtt(self, item):
        try:
            text = item["topic"].decode("utf-8")
        except UnicodeDecodeError:
            return dict(item, reason="topic", detail="not UTF-8")
        parts = text.split("/")
        if (len(item["topic"]) > MAX_TOPIC or len(parts) != 5 or parts[:3] != ["mss", "v1", self.campaign]
                or parts[4] != "report" or not DEVICE_ID.match(parts[3])):
            return dict(item, reason="topic", detail="not a report topic of this campaign")
        return self._pending(item, parts[3], item["payload"], self._link_epoch())

    def from_lorawan(self, topic, payload, source="lorawan"):
        """One uplink event of the network server.  The device is its DevEUI; a
        compact frame's epoch is the event's time (else the clock) and its
        sequence the FCnt, so copies of one uplink (several gateways,
        redelivery) are duplicates and a rejoined device's second report in
        an epoch (FCnt from 0 again) is an extra.  A quarantine row keeps the
        event (not only its frame), as :func:`held` does."""
        return self.decode_one(self.receive_lorawan(topic, payload, source))

    def receive_lorawan(self, topic, payload, source="lorawan"):
        """The link's step of :meth:`from_lorawan`: a result, or a :class:`Pending` frame."""
        document = bytes(payload)
        item = {"source": source, "topic": bytes(topic), "payload": None}
        return self._held(self._classify_lorawan(item, document), document)

    def _classify_lorawan(self, item, document):
        try:
            text = item["topic"].decode("utf-8")
        except UnicodeDecodeError:
            return dict(item, reason="topic", detail="not UTF-8")
        if len(item["topic"]) > MAX_TOPIC:
            return dict(item, reason="topic", detail="too long")
        try:
            up = self.lorawan.uplink(text, document, self.fport, (self.time_fport,))
        except UplinkError as exc:
            return dict(item, reason=exc.reason, detail=exc.detail)
        return self._uplink(item, up)

    def receive_webhook(self, document, source="webhook"):
        """The link's step for one uplink event POSTed by the network server (its HTTP
        integration or webhook, authenticated by the caller: no topic): as
        :meth:`receive_lorawan` without the topic's checks, the same quarantine reasons otherwise."""
        document = bytes(document)
        item = {"source": source, "topic": None, "payload": None}
        try:
            up = self.lorawan.event(document, self.fport, (self.time_fport,))
        except UplinkError as exc:
            return held(dict(item, reason=exc.reason, detail=exc.detail), document)
        return self._held(self._uplink(item, up), document)

    def _uplink(self, item, up):
        """The result of the network server's :class:`~.lorawan.Uplink` ``up``: a skip, a time
        probe, or its frame :class:`Pending`."""
        if up.fport == self.time_fport:  # no report: a skipped epoch (the byte 01), else a time probe
            if up.frame == SKIP_UPLINK:
                return self.skip("lorawan", up.dev_eui, self._link_epoch(up.time), item["source"])
            return dict(item, ignored="time_probes")
        return self._pending(item=item, device_id=up.dev_eui, frame=up.frame, epoch=self._link_epoch(up.time),
                             seq=up.fcnt & 0xFFFF)

    def from_serial(self, port, line):
        """One line read from serial port ``port`` (bytes, its LF or CRLF
        stripped or not): the report of the line's device id, or a
        quarantine result keeping the line (``frame``, ``checksum``);
        None for console output (a line not starting with ``$MSS``)."""
        return self.decode_one(self.receive_serial(port, line))

    def receive_serial(self, port, line):
        """The link's step of :meth:`from_serial`: a result, a :class:`Pending` frame, or None."""
        raw = bytes(line)
        item = {"source": f"serial:{port}", "topic": None, "payload": raw}
        try:
            parsed = parse_line(raw)
        except LineError as exc:
            return held(dict(item, reason=exc.reason, detail=exc.detail), raw)
        if parsed is None:
            return None
        device_id, frame = parsed
        return self._held(self._pending(dict(item, payload=frame), device_id, frame, self._link_epoch()), frame)

    def skip(self, link, device_id, epoch, source):
        """The store item of a board's skipped ``epoch`` (SPEC.md section 10: device.budget
        spent and no memo), counted once per (link, device, epoch); an epoch outside the
        window of accepted epochs (or none: no campaign clock) is not counted."""
        if epoch is not None and self.period_s:
            now = self.current_epoch()
            if not now - self.past_epochs <= epoch <= now + 1:
                epoch = None
        return {"skip": link, "device_id": device_id, "epoch": epoch if self.period_s else None, "source": source}

    def frame(self, frame, device_id=None, epoch=None):
        """What the aggregator makes of ``frame`` from ``device_id`` arriving now
        (``epoch``: the link's, default the campaign clock's): a dict with
        ``report``, or with the ``reason`` and ``detail`` it would quarantine it
        with (``mss decode``)."""
        return self.decode_one(self._pending({}, device_id, bytes(frame),
                                             self._link_epoch() if epoch is None else epoch))

    def decode_one(self, out):
        """The result of ``out``, one ``receive_*`` result: a :class:`Pending` frame
        decoded by ``codec.decode``, anything else as it is."""
        if not isinstance(out, Pending):
            return out
        try:
            report = self.codec.decode(out.frame, out.device_id, out.epoch)
        except WireError as exc:
            report = exc
        return self._decoded(out, report, self._window())

    def decode_batch(self, outs):
        """:meth:`decode_one` of each of ``outs``, the :class:`Pending` frames decoded
        together by one ``codec.decode_many`` (the same reports and WireErrors as
        ``codec.decode`` one by one) and judged against one reading of the clock."""
        pending = [n for n, out in enumerate(outs) if isinstance(out, Pending)]
        if not pending:
            return list(outs)
        batch = self.codec.decode_many([outs[n].frame for n in pending], [outs[n].device_id for n in pending],
                                       [outs[n].epoch for n in pending])
        decoded = dict(batch.errors)
        decoded.update(zip(batch.positions, batch.reports()))
        window, results = self._window(), list(outs)
        for i, n in enumerate(pending):
            results[n] = self._decoded(outs[n], decoded[i], window)
        return results

    @staticmethod
    def _held(out, raw):
        """``out`` as what arrived as ``raw`` is kept: a quarantine result held
        (:func:`held`), a :class:`Pending` frame told to hold its own."""
        if isinstance(out, Pending):
            return replace(out, raw=raw)
        return held(out, raw) if "reason" in out else out

    def _pending(self, item, device_id, frame, epoch, seq=None):
        """``frame`` of ``device_id`` to decode (:class:`Pending`), or the ``payload``
        quarantine if it is longer than any frame; ``epoch`` is the link's (compact
        frames), ``seq`` the link's counter that replaces a compact frame's 0."""
        if self.allowed is not None and not self.allowed.allows(device_id):
            return dict(item, reason="not_allowed", detail=f"device {device_id} is not on the allow-list "
                                                           f"{self.allowed.source}")
        if len(frame) > self.max_payload:
            return dict(item, reason="payload", detail=f"{len(frame)} bytes is longer than any frame "
                                                       f"of this config ({self.max_payload} bytes)")
        return Pending(item=item, device_id=device_id, frame=frame, epoch=epoch, seq=seq)

    def _window(self):
        """The accepted epochs (first, last) of the campaign clock now, or None (no clock)."""
        if not self.period_s:
            return None
        now = self.current_epoch()
        return now - self.past_epochs, now + 1

    def _decoded(self, pending, report, window):
        """The result of ``pending`` whose frame decoded to ``report`` (or raised that
        WireError): quarantined outside ``window``; an accepted report keeps the
        frame as its payload, and a compact frame takes the link's seq."""
        if isinstance(report, WireError):
            out = dict(pending.item, reason=f"wire_{report.reason}", detail=str(report))
        elif window and not window[0] <= report.epoch <= window[1]:
            out = dict(pending.item, reason="epoch", detail=f"epoch {report.epoch} is outside the window "
                       f"{window[0]}..{window[1]} (aggregator.accept_past_epochs {self.past_epochs})")
        else:
            if pending.seq is not None and report.frame != "full":
                report = replace(report, seq=pending.seq)
            return dict(pending.item, payload=pending.frame, device_id=pending.device_id, report=report)
        return out if pending.raw is None else held(out, pending.raw)

    def current_epoch(self, at=None):
        """The campaign epoch at unix time ``at`` (default: now)."""
        return int(((self.clock() if at is None else at) - self.epoch_origin) // self.period_s)

    def _link_epoch(self, at=None):
        return self.current_epoch(at) if self.period_s else None
