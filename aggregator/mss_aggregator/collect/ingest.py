"""Classify one incoming message: a decoded report with its device, or a
quarantine reason.  Nothing here raises on any input (a device cannot crash
the aggregator).

Reason codes (with a detail text): ``topic`` (not
``mss/v1/<campaign>/<device_id>/report``, not UTF-8, too long; for LoRaWAN
not this application's uplink topic, or, on ChirpStack, a topic naming
another DevEUI than the event), ``lorawan_json`` (a network-server event
that is not JSON, not an object, or over 64 KiB), ``lorawan_field`` (a
required field missing or of the wrong type: no DevEUI, payload not a
string, FCnt not an integer), ``lorawan_base64`` (payload not base64),
``lorawan_fport`` (not the reports' FPort, MAC-only FPort 0 included),
``payload`` (oversized), ``wire_<reason>`` (see
:class:`mss_protocol.mss.wire.WireError`), ``frame``/``checksum`` (serial),
``epoch`` (in the future of the campaign clock).  Compact frames take their
epoch from the link (they carry none, or its low 16 bits): the campaign
clock, or a LoRaWAN event's time; without ``period_s`` they are quarantined
as ``wire_epoch``.
"""
import re
import time
from dataclasses import replace

from mss_aggregator.collect.lorawan import UplinkError
from mss_device.frame import HEADER_BYTES
from mss_protocol.frames import WireError
from mss_protocol.oracle_config import codec

DEVICE_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}\Z")
MAX_TOPIC = 256
KEEP_BYTES = 4096  # of a quarantined network-server event (they are up to 64 KiB)


class Ingest:
    """``lorawan``: the :class:`~mss_aggregator.collect.lorawan.Server` whose
    uplinks :meth:`from_lorawan` reads, with reports on ``fport``."""

    def __init__(self, cfg, campaign, period_s=None, epoch_origin=0, clock=time.time, lorawan=None, fport=1):
        self.codec = codec(cfg)
        self.campaign = campaign
        self.period_s, self.epoch_origin, self.clock = period_s, epoch_origin, clock
        self.lorawan, self.fport = lorawan, fport
        self.max_payload = HEADER_BYTES + max(self.codec.body_lengths)  # the longest header, full

    def from_mqtt(self, topic, payload, source="mqtt"):
        item = {"source": source, "topic": bytes(topic), "payload": bytes(payload)}
        try:
            text = bytes(topic).decode("utf-8")
        except UnicodeDecodeError:
            return dict(item, reason="topic", detail="not UTF-8")
        parts = text.split("/")
        if (len(topic) > MAX_TOPIC or len(parts) != 5 or parts[:3] != ["mss", "v1", self.campaign]
                or parts[4] != "report" or not DEVICE_ID.match(parts[3])):
            return dict(item, reason="topic", detail="not a report topic of this campaign")
        return self._report(item, parts[3], item["payload"], self._link_epoch())

    def from_lorawan(self, topic, payload, source="lorawan"):
        """One uplink event of the network server.  The device is its DevEUI; a
        compact frame's epoch is the event's time (else the clock) and its
        sequence the FCnt, so copies of one uplink (several gateways,
        redelivery) are duplicates and a rejoined device's second report in
        an epoch (FCnt from 0 again) is an extra.  A quarantine row keeps the
        first KEEP_BYTES of the event."""
        document = bytes(payload)
        item = {"source": source, "topic": bytes(topic), "payload": document[:KEEP_BYTES]}
        try:
            text = item["topic"].decode("utf-8")
        except UnicodeDecodeError:
            return dict(item, reason="topic", detail="not UTF-8")
        if len(item["topic"]) > MAX_TOPIC:
            out = dict(item, reason="topic", detail="too long")
        else:
            try:
                up = self.lorawan.uplink(text, document, self.fport)
                out = self._report(item, up.dev_eui, up.frame, self._link_epoch(up.time), up.fcnt & 0xFFFF)
            except UplinkError as exc:
                out = dict(item, reason=exc.reason, detail=exc.detail)
        if "reason" in out and len(document) > KEEP_BYTES:
            out["detail"] += f" (event of {len(document)} bytes, the first {KEEP_BYTES} kept)"
        return out

    def from_serial(self, port, payload_or_error):
        item = {"source": f"serial:{port}", "topic": None}
        if isinstance(payload_or_error, Exception):  # a bad frame (checksum, format)
            code, _, detail = str(payload_or_error).partition(": ")
            return dict(item, payload=None, reason=code, detail=detail)
        return self._report(dict(item, payload=payload_or_error), f"serial:{port}", payload_or_error,
                            self._link_epoch())

    def _report(self, item, device_id, frame, epoch, seq=None):
        """Decode ``frame`` of ``device_id``; ``epoch`` is the link's (compact
        frames), ``seq`` the link's counter that replaces a compact frame's 0.
        ``item["payload"]`` is what a quarantine row keeps."""
        if len(frame) > self.max_payload:
            return dict(item, reason="payload", detail=f"{len(frame)} bytes is too long")
        try:
            report = self.codec.decode(frame, device_id, epoch)
        except WireError as exc:
            return dict(item, reason=f"wire_{exc.reason}", detail=str(exc))
        if self.period_s and report.epoch > self.current_epoch() + 1:
            return dict(item, reason="epoch", detail=f"epoch {report.epoch} is in the future")
        if seq is not None and report.frame != "full":
            report = replace(report, seq=seq)
        return dict(item, payload=frame, device_id=device_id, report=report)

    def current_epoch(self, at=None):
        """The campaign epoch at unix time ``at`` (default: now)."""
        return int(((self.clock() if at is None else at) - self.epoch_origin) // self.period_s)

    def _link_epoch(self, at=None):
        return self.current_epoch(at) if self.period_s else None
