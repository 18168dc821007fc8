"""The running shuffler: collectors -> writer -> queue -> forwarder, with live counters.

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
import signal
import sys
import threading

from rich.console import Console
from rich.live import Live

from mss_aggregator.collect.collectors import Failures, MqttCollector, SerialCollector, Writer, check_topic_level
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.lorawan import config_port
from mss_aggregator.collect.service import check_compact_link, check_lorawan_id, checked_clock, counters_table
from mss_aggregator.shuffle.forward import Forwarder
from mss_aggregator.shuffle.queue import QueueError, ShuffleQueue
from mss_protocol import shuffled_batch
from mss_protocol.config_file import ConfigError, read_json
from mss_protocol.configs import load_dict
from mss_protocol.shuffled_batch import DEFAULT_COLLUDING, check_key

DEFAULT_MIN_BATCH = 100
DEFAULT_GRACE = 60.0  # seconds after an epoch's end before it is closed: reports in flight still make its batch


class Shuffler:
    """Shuffle one campaign's reports through the queue at ``queue_path``.

    ``config_path``: a file from ``mss plan --device-config`` whose ``device``
    section gives the campaign clock (``period_s``), as ``mss aggregate``
    requires; a protocol whose reports name their device (``olh``) is refused.
    ``key``: the shuffle key (bytes).  Reports come from ``broker`` (the fleet's
    MQTT, or with ``lorawan`` the network server's) and/or ``serial_ports``;
    batches go to ``forward_broker`` (default ``broker``) on
    ``mss/v1/<campaign>/shuffled``.  ``min_batch`` counts distinct devices (a batch
    holds one body a device); ``colluding``, the devices of a batch its operator
    assumes may collude with the aggregator, travels in every batch and is not
    counted by the central guarantee (docs/privacy.md section 5)."""

    def __init__(self, config_path, queue_path, key, campaign, broker=None, serial_ports=(), lorawan=None,
                 forward_broker=None, min_batch=DEFAULT_MIN_BATCH, grace=DEFAULT_GRACE, tls_ca=None, tls_cert=None,
                 tls_key=None, client_id=None, log=print, colluding=DEFAULT_COLLUDING):
        check_key(key)
        check_topic_level(campaign, "--campaign")
        if type(min_batch) is not int or min_batch < 1:
            raise ValueError(f"--min-batch must be a whole number >= 1, got {min_batch!r}")
        if type(colluding) is not int or not 0 <= colluding < min_batch:
            raise ValueError(f"--assume-colluding must be a whole number from 0 to --min-batch - 1 ({min_batch - 1}): "
                             f"a batch of --min-batch devices must hold one that does not collude, got {colluding!r}")
        if not grace >= 0:
            raise ValueError(f"--grace must be >= 0 seconds, got {grace!r}")
        if not broker and not serial_ports:
            raise ValueError("give --broker and/or --serial")
        if lorawan and not broker:
            raise ValueError("--lorawan needs --broker, the network server's MQTT broker")
        if not (forward_broker or broker):
            raise ValueError("--forward-broker is needed without --broker: where the batches go")
        raw = read_json(config_path, "config")
        self.cfg = load_dict(raw, source=str(config_path))
        if getattr(self.cfg, "name", None) == "olh":  # SPEC.md section 3; docs/privacy.md section 5
            raise ConfigError(f"{config_path}: protocol olh cannot be shuffled: its hash seed derives from the "
                              f"device id, so its reports name their device; plan another protocol")
        clock = checked_clock(raw, self.cfg, config_path, "the shuffler needs it to close epochs and bound the "
                                                          "epochs it accepts")
        check_compact_link(self.cfg, config_path, serial_ports or not lorawan)
        if lorawan:
            check_lorawan_id(raw, config_path)
        device = raw.get("device") or {}
        self.ingest = Ingest(self.cfg, campaign, clock["period_s"], clock["epoch_origin"], lorawan=lorawan,
                             fport=config_port(device, "fport", 1) if lorawan else None,
                             past_epochs=clock["accept_past_epochs"],
                             time_fport=config_port(device, "time_fport", 3) if lorawan else None)
        self.campaign, self.log, self.failures = campaign, log, Failures()
        self.queue = ShuffleQueue(queue_path, self.cfg, campaign, key, colluding)
        self.writer = Writer(self.queue, self.ingest, failures=self.failures)
        nonce = self.queue.remembered("mqtt_nonce", lambda: secrets.token_hex(8))  # a restart resumes the session
        client_id = client_id or f"mss-shuf-{campaign}-{nonce}"
        self.collectors = []
        if broker:
            topic, classify, qos = ((lorawan.uplink_topic, self.ingest.receive_lorawan, lorawan.qos) if lorawan else
                                    (f"mss/v1/{campaign}/+/report", self.ingest.receive_mqtt, 1))
            self.collectors.append(MqttCollector(broker, self.writer, topic, classify, client_id, qos, None, None,
                                                 tls_ca, log, tls_cert, tls_key, failures=self.failures))
        self.collectors += [SerialCollector(spec, self.writer, log=log, failures=self.failures)
                            for spec in serial_ports]
        self.forwarder = Forwarder(self.queue.reader(), self.ingest, forward_broker or broker,
                                   shuffled_batch.topic(campaign), min_batch, grace, tls_ca, f"{client_id}-fwd", log,
                                   self.failures)
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


def serve(shuffler, quiet=False, stopped=None):
    """Run until SIGINT/SIGTERM or a thread's death, showing the queue's counters
    unless ``quiet``; ``stopped`` is called with the final counters.  A queue
    failure raises QueueError, any other thread's death ThreadDied."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    reader = shuffler.queue.reader()  # the display's own connection
    title = f"mss shuffle: config {shuffler.cfg.config_id_hex}, queue {shuffler.queue.name}"

    def going():
        return not stop.is_set() and not shuffler.failures.event.wait(0.5)
    try:
        shuffler.start()
        if quiet:
            while going():
                pass
        else:
            with Live(counters_table(reader.counters(), title), console=Console(stderr=True), refresh_per_second=2,
                      redirect_stdout=sys.stdout.isatty()) as display:
                while going():
                    display.update(counters_table(reader.counters(), title))
    finally:
        shuffler.stop()
        if stopped is not None:
            stopped(reader.counters())
        reader.close()
    if isinstance(shuffler.writer.error, QueueError):
        raise QueueError(f"{shuffler.writer.error}; stopped, and nothing unqueued was acknowledged (the broker "
                         f"redelivers it to the next run)")
    if shuffler.failures.first is not None:
        raise shuffler.failures.error()
