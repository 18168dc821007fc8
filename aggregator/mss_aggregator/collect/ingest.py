"""Classify one incoming message: a decoded report with its device, or a
quarantine reason.  Nothing here raises on any input (a device cannot crash
the aggregator).

Reason codes (with a detail text): ``topic`` (not
``mss/v1/<campaign>/<device_id>/report``, not UTF-8, too long), ``payload``
(oversized), ``wire_<reason>`` (see :class:`mss_protocol.mss.wire.WireError`),
``frame``/``checksum`` (serial), ``epoch`` (in the future of the campaign
clock).  Compact frames take their epoch from the campaign clock (they
carry none, or its low 16 bits): without ``period_s`` they are quarantined
as ``wire_epoch``.
"""
import re
import time

from mss_device.frame import HEADER_BYTES
from mss_protocol.frames import WireError
from mss_protocol.oracle_config import codec

DEVICE_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}\Z")
MAX_TOPIC = 256


class Ingest:
    def __init__(self, cfg, campaign, period_s=None, epoch_origin=0, clock=time.time):
        self.codec = codec(cfg)
        self.campaign = campaign
        self.period_s, self.epoch_origin, self.clock = period_s, epoch_origin, clock
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
        return self._report(item, parts[3])

    def from_serial(self, port, payload_or_error):
        item = {"source": f"serial:{port}", "topic": None}
        if isinstance(payload_or_error, Exception):  # a bad frame (checksum, format)
            code, _, detail = str(payload_or_error).partition(": ")
            return dict(item, payload=None, reason=code, detail=detail)
        return self._report(dict(item, payload=payload_or_error), f"serial:{port}")

    def _report(self, item, device_id):
        if len(item["payload"]) > self.max_payload:
            return dict(item, reason="payload", detail=f"{len(item['payload'])} bytes is too long")
        try:
            report = self.codec.decode(item["payload"], device_id,
                                       self.current_epoch() if self.period_s else None)
        except WireError as exc:
            return dict(item, reason=f"wire_{exc.reason}", detail=str(exc))
        if self.period_s and report.epoch > self.current_epoch() + 1:
            return dict(item, reason="epoch", detail=f"epoch {report.epoch} is in the future")
        return dict(item, device_id=device_id, report=report)

    def current_epoch(self):
        return (int(self.clock()) - self.epoch_origin) // self.period_s
