"""The aggregator service: collectors -> writer -> store, with live counters."""
import json
import signal
import threading

from rich.console import Console
from rich.live import Live
from rich.table import Table

from mss_aggregator.collect.collectors import MqttCollector, SerialCollector, Writer
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.lorawan import config_port
from mss_aggregator.collect.store import StoreError, open_store
from mss_protocol.mss.config import ConfigError, read_json
from mss_protocol.oracle_config import load_dict


class Aggregator:
    """Collect one campaign's reports into ``store_path``.

    ``config_path`` is a file from ``mss plan --device-config`` (its
    optional ``device`` section gives the reporting period, used to reject
    reports from the future and to date compact frames, and
    ``lorawan.fport``, the FPort of reports, default 1).  With ``lorawan``
    (a :class:`~mss_aggregator.collect.lorawan.Server`) ``broker`` is that
    network server's MQTT broker and the reports are its uplinks; no config
    is published, LoRaWAN devices do not read it.  The store is checked
    writable here, before anything subscribes.
    """

    def __init__(self, config_path, store_path, campaign="default", broker=None, serial_ports=(),
                 share_group=None, tls_ca=None, client_id=None, log=print, lorawan=None):
        raw = read_json(config_path, "config")
        self.cfg = load_dict(raw, source=str(config_path))
        device = raw.get("device") or {}
        period_s, epoch_origin = campaign_clock(device, config_path)
        if lorawan and not broker:
            raise ValueError("--lorawan needs --broker, the network server's MQTT broker")
        fport = config_port(device, "fport", 1) if lorawan else None
        self.store = open_store(store_path, self.cfg)
        try:
            self.store.check_writable()
        except StoreError:
            self.store.close()
            raise
        self.started = False
        self.ingest = Ingest(self.cfg, campaign, period_s, epoch_origin, lorawan=lorawan, fport=fport)
        self.writer = Writer(self.store, self.ingest)
        self.collectors = []
        if broker:  # LoRaWAN devices read no retained config: only MQTT devices get one
            topic, classify, qos, retained = (
                (lorawan.uplink_topic, self.ingest.from_lorawan, lorawan.qos, None) if lorawan else
                (f"mss/v1/{campaign}/+/report", self.ingest.from_mqtt, 1,
                 (f"mss/v1/{campaign}/config", json.dumps(self.cfg.to_dict()))))
            self.collectors.append(MqttCollector(broker, self.writer, topic, classify,
                                                 client_id or f"mss-agg-{campaign}", qos, retained,
                                                 share_group, tls_ca, log))
        self.collectors += [SerialCollector(spec, self.writer, log=log) for spec in serial_ports]
        if not self.collectors:
            raise ValueError("give --broker and/or --serial")

    def start(self):
        self.writer.start()
        for c in self.collectors:
            c.start()
        self.started = True
        return self

    def stop(self):
        """Stop taking messages, store what was received, close the store
        (also when it never started, e.g. the --http port was taken)."""
        if self.started:
            for c in self.collectors:
                c.stop()
            self.writer.stop()
        self.store.close()

    def wait_connected(self, timeout=10):
        mqtt = [c for c in self.collectors if isinstance(c, MqttCollector)]
        return all(c.connected.wait(timeout) for c in mqtt)


def campaign_clock(device, source):
    """(period_s or None, epoch_origin) of a config's ``device`` section, checked
    as the firmware checks them: a string period would fail at the first
    report, and a negative one would put every report in the future."""
    if not isinstance(device, dict):
        raise ConfigError(f"{source}: device must be an object, got {device!r}")
    period, origin = device.get("period_s"), device.get("epoch_origin", 0)
    if period is not None and (type(period) is not int or period < 1):
        raise ConfigError(f"{source}: device.period_s must be a whole number of seconds >= 1, got {period!r}")
    if type(origin) is not int or origin < 0:
        raise ConfigError(f"{source}: device.epoch_origin must be a unix time in whole seconds >= 0, "
                          f"got {origin!r}")
    return period, origin


def counters_table(counters, title):
    table = Table(title=title)
    table.add_column("counter")
    table.add_column("value", justify="right")
    for name, value in counters.items():
        table.add_row(name, str(value))
    return table


def serve(agg, quiet=False, http=None, token=None, refresh=2.0):
    """Run until SIGINT/SIGTERM; show live counters unless ``quiet``; with
    ``http`` ("host:port") serve the dashboard, JSON API and /metrics."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    console = Console(stderr=True)
    web = view = reader = None
    try:
        if http:
            from mss_aggregator.web.live import LiveView
            from mss_aggregator.web.server import WebServer

            view = LiveView(agg.store.location, interval=refresh)
            web = WebServer(view, http, token).start()
            view.start()
            console.print(f"dashboard: {web.url}  (API: {web.url}api/openapi.json, metrics: {web.url}metrics)")
        agg.start()
        title = f"mss aggregate: config {agg.cfg.config_id_hex}, store {agg.store.name}"
        reader = open_store(agg.store.location)  # a second connection: the display never blocks the writer
        if quiet:
            while not stop.wait(0.5) and agg.writer.error is None:
                pass
        else:
            with Live(counters_table(reader.counters(), title), console=console,
                      refresh_per_second=2) as display:
                while not stop.wait(0.5) and agg.writer.error is None:
                    display.update(counters_table(reader.counters(), title))
    finally:
        agg.stop()
        if web is not None:
            web.stop()
        if view is not None:
            view.close()
        if reader is not None:
            try:
                console.print(f"stopped; counters: {json.dumps(reader.counters())}")
            except StoreError:
                pass  # unreadable now: the error that stopped us says why
            reader.close()
    error = agg.writer.error
    if isinstance(error, StoreError):  # the writer stopped at the batch it could not commit
        raise StoreError(f"{error}; stopped, and nothing unstored was acknowledged (an MQTT broker "
                         f"redelivers it to the next run)")
    if error is not None:
        raise error
