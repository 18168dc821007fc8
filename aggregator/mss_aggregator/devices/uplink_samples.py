"""Sample uplink events of a planned config: what a board with that config sends now,
as ChirpStack v4 (both MQTT marshalers) and The Things Stack v3 publish it.

A sample is a real report, drawn by the device's own code
(:class:`mss_node.reporter.Reporter` on :class:`mss_device.params.Params`, as
``mss device-sim`` and the board run it; OLH seeded with the DevEUI, the id a
LoRaWAN board reports under), dated in the epoch of the sample's time on the
config's clock (``device.period_s``, ``device.epoch_origin``: the aggregator's
:func:`~mss_aggregator.collect.ingest.campaign_clock`), on the config's
``device.lorawan.fport`` (the firmware's default where unset), in the events
the network-server emulator publishes (:func:`.network_server.chirpstack_event`,
:func:`.network_server.marshal`, :func:`.network_server.tts_uplink`).  The radio metadata
(gateway, RSSI, region) is the emulator's; the aggregator reads none of it.

:func:`sample_uplinks` also reads every event back through the aggregator's
own ingest (:class:`~mss_aggregator.collect.ingest.Ingest`, its clock at the
sample's time) and raises unless each is accepted: a sample is never one the
aggregator would quarantine.  An event's time must be current when it is
published, or the aggregator quarantines it as ``epoch`` (outside
``accept_past_epochs``): write fresh ones rather than replay old files.

    >>> s = sample_uplinks(board, value=3)            # doctest: +SKIP
    >>> [(u.name, u.topic) for u in s.uplinks]         # doctest: +SKIP
    [('chirpstack-json', 'application/.../event/up'), ('chirpstack-protobuf', ...), ('tts', 'v3/...')]
"""
import json
import time
from dataclasses import dataclass

from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.lorawan import parse_spec
from mss_aggregator.devices.network_server import chirpstack_event, marshal, tts_uplink
from mss_device.params import Params
from mss_device.rng import ByteRng
from mss_node.reporter import Reporter

# The examples of docs/lorawan.md: a ChirpStack application id (a UUID), a TTS application on TTN,
# a DevEUI in the TTN-assigned range, a frame counter.
CHIRPSTACK_APP = "6f1c1c2e-1d2f-4b5f-9d2e-0a1b2c3d4e5f"
TTS_APP, TTS_TENANT = "orchard", "ttn"
DEV_EUI, FCNT = "70b3d57ed0000001", 42


@dataclass(frozen=True)
class Applications:
    """The network-server applications the events are addressed to (``mss aggregate
    --lorawan chirpstack:<chirpstack>`` and ``tts:<tts>@<tenant>``)."""
    chirpstack: str = CHIRPSTACK_APP
    tts: str = TTS_APP
    tenant: str = TTS_TENANT

    def specs(self):
        """{server name: its ``--lorawan`` spec}; ValueError for an id unsafe in a topic."""
        out = {"chirpstack": f"chirpstack:{self.chirpstack}", "tts": f"tts:{self.tts}@{self.tenant}"}
        for spec in out.values():
            parse_spec(spec)
        return out


@dataclass(frozen=True)
class BoardCampaign:
    """What a sample needs of the campaign its board runs (the application layer reads the file
    once and gives these: ``Campaign.cfg``, ``Campaign.require_clock(...)``,
    ``Campaign.lorawan_ports()``): ``cfg`` the protocol's config; ``clock`` ``{"period_s",
    "epoch_origin", "accept_past_epochs"}``; ``ports`` (fport, time_fport)."""
    cfg: object
    clock: dict
    ports: tuple


@dataclass(frozen=True)
class SampleUplink:
    name: str  # chirpstack-json, chirpstack-protobuf or tts
    spec: str  # the mss aggregate --lorawan that reads it
    topic: str
    document: bytes  # what the network server publishes on ``topic``
    suffix: str  # of a file holding ``document``: json or bin


@dataclass(frozen=True)
class Samples:
    uplinks: tuple  # of SampleUplink
    report: bytes  # the frame, the FRMPayload
    dev_eui: str
    fport: int
    fcnt: int
    time: float  # the network server's receive time, unix seconds
    epoch: int  # of ``time`` on the config's clock


def sample_uplinks(board, value, dev_eui=DEV_EUI, fcnt=FCNT, apps=Applications(), at=None, rng=None):
    """:class:`Samples` of the campaign ``board`` (a :class:`BoardCampaign`, of a config file as
    ``mss plan --device-config`` writes it): one uplink of the board's report for category ``value``, received at
    unix time ``at`` (default now), with frame counter ``fcnt``, from device ``dev_eui``
    (16 hex digits), drawn from ``rng`` (a :class:`~mss_device.rng.ByteRng`; default
    ``os.urandom``), published to ``apps``.

    ValueError: a value outside [0, k), a time before the campaign's epoch 0, or an event
    the aggregator would not accept (the reason)."""
    cfg, clock = board.cfg, board.clock
    if type(value) is not int or not 0 <= value < cfg.k:
        raise ValueError(f"value {value!r} is not a category in [0, {cfg.k})")
    if type(fcnt) is not int or not 0 <= fcnt < 1 << 32:
        raise ValueError(f"a frame counter is an integer in [0, 2^32), got {fcnt!r}")
    dev_eui, fport = dev_eui.lower(), board.ports[0]
    at = time.time() if at is None else at
    epoch = int((at - clock["epoch_origin"]) // clock["period_s"])  # as the aggregator dates an arrival
    if epoch < 0:
        raise ValueError(f"the time is before the campaign's epoch 0 (device.epoch_origin {clock['epoch_origin']})")
    report = Reporter(Params(cfg.to_dict()), rng or ByteRng(), dev_eui).report(value, epoch, fcnt & 0xFFFF)
    specs = apps.specs()
    topic, event = chirpstack_event(app=apps.chirpstack, dev_eui=dev_eui, fport=fport, fcnt=fcnt, data=report, t=at)
    tts_topic, tts = tts_uplink(app=apps.tts, tenant=apps.tenant, dev_eui=dev_eui, fport=fport, fcnt=fcnt, data=report,
                                t=at)
    uplinks = (SampleUplink(name="chirpstack-json", spec=specs["chirpstack"], topic=topic,
                            document=marshal(event, "json"), suffix="json"),
               SampleUplink(name="chirpstack-protobuf", spec=specs["chirpstack"], topic=topic,
                            document=marshal(event, "protobuf"), suffix="bin"),
               SampleUplink(name="tts", spec=specs["tts"], topic=tts_topic, document=json.dumps(tts).encode(),
                            suffix="json"))
    samples = Samples(uplinks=uplinks, report=report, dev_eui=dev_eui, fport=fport, fcnt=fcnt, time=at, epoch=epoch)
    for uplink in uplinks:
        reason = refusal(board, uplink, at)
        if reason:
            raise ValueError(f"the aggregator would not accept the {uplink.name} event: {reason}")
    return samples


def refusal(board, uplink, at=None):
    """Why the aggregator of the campaign ``board`` (a :class:`BoardCampaign`) would not store
    ``uplink`` (a :class:`SampleUplink`) received at unix time ``at`` (default now): its
    quarantine reason and detail, or None when it would accept it."""
    clock = board.clock
    ingest = Ingest(board.cfg, None, clock["period_s"], clock["epoch_origin"],
                    clock=(lambda: at) if at is not None else time.time, lorawan=parse_spec(uplink.spec),
                    past_epochs=clock["accept_past_epochs"],
                    ports=board.ports)
    out = ingest.from_lorawan(uplink.topic.encode(), uplink.document)
    if "report" in out:
        return None
    return f"{out.get('reason') or out.get('ignored')}: {out.get('detail', '')}".rstrip(": ")
