"""The running shuffler: collectors -> writer -> queue -> forwarder (the command line shows its
live counters).

The collecting half is the aggregator's (:mod:`mss_aggregator.collect`): the
same :class:`~mss_aggregator.collect.ingest.Ingest` classifies every link's
messages against the config and the campaign clock, the same
:class:`~mss_aggregator.collect.collectors.Writer` commits each batch of
messages before it acknowledges them, only into a
:class:`~mss_aggregator.shuffle.queue.ShuffleQueue` instead of a store.  No
retained config is published (the shuffler holds no fleet key) and the boards'
statuses are not read.  Nothing here logs a device id: counters only.
"""
import secrets
from dataclasses import dataclass, replace

from mss_aggregator.collect.collectors import Failures, MqttCollector, SerialCollector, Writer, check_topic_level
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.links import PROBLEMS, LinkError, MqttEndpoint, TlsFiles
from mss_aggregator.shuffle.forward import Forwarder
from mss_aggregator.shuffle.queue import ShuffleQueue
from mss_protocol import shuffled_batch
from mss_protocol.config_file import ConfigError
from mss_protocol.shuffled_batch import DEFAULT_COLLUDING, check_key

DEFAULT_MIN_BATCH = 100
DEFAULT_GRACE = 60.0  # seconds after an epoch's end before it is closed: reports in flight still make its batch


@dataclass(frozen=True)
class Batching:
    """How batches are made: ``min_batch`` distinct devices at least (a batch holds one body a
    device), ``grace`` seconds after an epoch's end before it is closed, ``colluding`` devices of
    each batch assumed to collude with the aggregator (travels in every batch, not counted by the
    central guarantee: docs/privacy.md section 5; fewer than ``min_batch``).  ValueError for a
    value outside those bounds."""

    min_batch: int = DEFAULT_MIN_BATCH
    grace: float = DEFAULT_GRACE
    colluding: int = DEFAULT_COLLUDING

    def __post_init__(self):
        if type(self.min_batch) is not int or self.min_batch < 1:
            raise ValueError(f"the least batch must be a whole number of devices >= 1, got {self.min_batch!r}")
        if type(self.colluding) is not int or not 0 <= self.colluding < self.min_batch:
            raise ValueError(f"the colluding devices assumed must be a whole number from 0 to the least batch - 1 "
                             f"({self.min_batch - 1}): a batch must hold one that does not collude, "
                             f"got {self.colluding!r}")
        if not self.grace >= 0:
            raise ValueError(f"the grace must be >= 0 seconds, got {self.grace!r}")


class Shuffler:
    """Shuffle one campaign's reports through the queue at ``queue_path``.

    ``campaign``: a :class:`~mss_aggregator.campaign.Campaign` (a file from ``mss plan
    --device-config``) with a clock (``device.period_s``), as the aggregator requires; a protocol
    whose reports name their device (``olh``) is refused.  ``key``: the shuffle key (bytes);
    ``name`` the campaign's name (an MQTT topic level).  Reports come by ``links`` (a
    :class:`~mss_aggregator.collect.links.Links`: the fleet's MQTT, or with ``lorawan`` the network
    server's, and/or serial ports); batches go to ``forward`` (an
    :class:`~mss_aggregator.collect.links.MqttEndpoint`; default the links' broker with its CA) on
    ``mss/v1/<campaign>/shuffled``, made as ``batching`` (a :class:`Batching`) says."""

    def __init__(self, campaign, queue_path, key, name, links, forward=None, batching=Batching(), log=print):
        check_key(key)
        check_topic_level(name, "campaign name")
        if links.shuffled:
            raise ValueError("a shuffler takes device reports, not a shuffler's batches")
        if forward is None and links.mqtt is None:
            raise LinkError("forward-without-broker", PROBLEMS["forward-without-broker"])
        self.cfg = campaign.cfg
        if getattr(self.cfg, "name", None) == "olh":  # SPEC.md section 3; docs/privacy.md section 5
            raise ConfigError(f"{campaign.source}: protocol olh cannot be shuffled: its hash seed derives from the "
                              f"device id, so its reports name their device; plan another protocol")
        clock = campaign.require_clock("the shuffler needs it to close epochs and bound the epochs it accepts")
        campaign.check_links(links)
        self.ingest = Ingest(self.cfg, name, clock["period_s"], clock["epoch_origin"], lorawan=links.lorawan,
                             past_epochs=clock["accept_past_epochs"],
                             ports=campaign.lorawan_ports() if links.lorawan else (None, None))
        self.ingest.allowed = links.allowed  # checked before the ids are stripped (allow_list)
        self.campaign, self.log, self.failures = name, log, Failures()
        self.queue = ShuffleQueue(queue_path, self.cfg, name, key, colluding=batching.colluding)
        self.writer = Writer(self.queue, self.ingest, failures=self.failures)
        nonce = self.queue.remembered("mqtt_nonce", lambda: secrets.token_hex(8))  # a restart resumes the session
        self.collectors = []
        client_id = f"mss-shuf-{name}-{nonce}"
        if links.mqtt:
            endpoint = links.mqtt if links.mqtt.client_id else replace(links.mqtt, client_id=client_id)
            client_id = endpoint.client_id
            subscription = ((links.lorawan.uplink_topic, self.ingest.receive_lorawan, links.lorawan.qos)
                            if links.lorawan else (f"mss/v1/{name}/+/report", self.ingest.receive_mqtt, 1))
            self.collectors.append(MqttCollector(endpoint, self.writer, subscription, log=log, failures=self.failures))
        self.collectors += [SerialCollector(spec, self.writer, log=log, failures=self.failures)
                            for spec in links.serial]
        if forward is None:  # the links' broker, checked against their CA (no client certificate)
            forward = MqttEndpoint(links.mqtt.url, TlsFiles(ca=links.mqtt.tls.ca))
        if forward.client_id is None:
            forward = replace(forward, client_id=f"{client_id}-fwd")
        self.forwarder = Forwarder(self.queue.reader(), self.ingest, forward, shuffled_batch.topic(name),
                                   batching=batching, log=log, failures=self.failures)
        self.started = False

    def start(self):
        self.writer.start()
        for c in self.collectors:
            c.start()
        self.forwarder.start()
        self.started = True
        return self

    def stop(self):
        """Stop taking messages, queue what was received, stop forwarding, close the queue."""
        if self.started:
            for c in self.collectors:
                c.stop()
            self.writer.stop()
            self.forwarder.stop()
        self.forwarder.queue.close()
        self.queue.close()
