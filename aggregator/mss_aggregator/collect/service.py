"""The aggregator service: collectors -> writer -> store, with live counters."""
import json
import secrets
import signal
import sys
import threading
import time

from rich.console import Console
from rich.live import Live
from rich.table import Table

from mss_aggregator.collect.collectors import Failures, MqttCollector, SerialCollector, Writer, check_topic_level
from mss_aggregator.collect.ingest import PAST_EPOCHS, Ingest
from mss_aggregator.collect.link_health import DeviceClocks
from mss_aggregator.collect.lorawan import config_port
from mss_aggregator.collect.shuffled import ShuffledIngest
from mss_aggregator.collect.store import DEVICES, QUARANTINE_MAX_ROWS, SHUFFLER, StoreError, open_store
from mss_node.settings import DEVICE_DEFAULTS
from mss_protocol import categories, shuffled_batch
from mss_protocol.budget import check_device
from mss_protocol.config_file import ConfigError, read_json
from mss_protocol.configs import load_dict
from mss_protocol.frames import dev_eui
from mss_protocol.sealed import seal


AGGREGATOR_FIELDS = {"accept_past_epochs", "quarantine_max_rows"}
DEFAULT_CAMPAIGN = "default"  # of a new store collected without --campaign
REPORTS = ("accepted", "duplicate", "extra")  # outcomes of a message that is a report of this campaign


def _count(section, key, default, where):
    value = section.get(key, default)
    if type(value) is not int or value < 0:
        raise ValueError(f"{where}.{key} must be a non-negative integer, got {value!r}")
    return value


def campaign_clock(raw):
    """The campaign clock of a config file: ``{"period_s", "epoch_origin",
    "accept_past_epochs"}`` from its ``device`` section (the boards' period)
    and its ``aggregator`` section (the window into the past; default the
    boards' ``device.queue_max``, else the firmware's 32), or None without
    ``device.period_s`` (which :class:`Aggregator` refuses).  ValueError
    names a bad field."""
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
    origin = device.get("epoch_origin", 0)
    if type(origin) is not int or origin < 0:
        raise ValueError(f"device.epoch_origin must be a unix time in whole seconds >= 0, got {origin!r}")
    past = _count(agg, "accept_past_epochs", _count(device, "queue_max", PAST_EPOCHS, "device"), "aggregator")
    return {"period_s": period, "epoch_origin": origin, "accept_past_epochs": past}


def checked_clock(raw, cfg, config_path, needs):
    """The campaign clock of config file ``raw`` (:func:`campaign_clock`), its ``device``
    section checked as the boards read it (memoize, budget); ConfigError naming
    ``config_path`` for a bad field or for no ``device.period_s`` (``needs``: why the
    caller cannot do without the clock)."""
    try:
        clock = campaign_clock(raw)  # first: it checks that the sections are objects
        check_device(raw.get("device") or {}, cfg)
    except ValueError as exc:
        raise ConfigError(f"{config_path}: {exc}") from None
    if clock is None:
        raise ConfigError(f"{config_path}: no device.period_s, the boards' reporting period in seconds: {needs}; "
                          f"add it (the firmware's default is 3600, with epoch_origin 0): "
                          "mss plan ... --period S --device-config FILE writes it with the plan")
    return clock


def check_compact_link(cfg, config_path, off_lorawan):
    """ConfigError if ``cfg``'s frame is compact and its reports come ``off_lorawan`` (SPEC.md
    section 4: a compact frame is dated by arrival, which only a network server's receive
    time makes safe)."""
    if cfg.frame == 1 and off_lorawan:
        raise ConfigError(f"{config_path}: frame compact is dated by arrival, which only a LoRaWAN "
                          f"network server's receive time makes safe: collect it with --lorawan only, "
                          f"or plan the boards with compact-epoch")


def check_lorawan_id(raw, config_path):
    """ConfigError if config file ``raw`` sets a ``device.device_id`` other than a DevEUI while its
    reports come as LoRaWAN uplinks: they arrive under the DevEUI, which is also what a LoRaWAN board
    seeds OLH with, so a board that seeded with another id would be decoded with another seed
    (SPEC.md section 4, "Device ids"; the board refuses such a config too)."""
    given = (raw.get("device") or {}).get("device_id")
    if given is None:
        return
    try:
        dev_eui(given)
    except ValueError:
        raise ConfigError(f"{config_path}: device.device_id {str(given)[:64]!r} is not a DevEUI: a LoRaWAN board "
                          "reports under its modem's DevEUI and seeds with it; leave device.device_id out "
                          "(or set it to the DevEUI, 16 hex digits)") from None


class Aggregator:
    """Collect one campaign's reports into ``store_path``.

    ``config_path`` is a file from ``mss plan --device-config``.  Its
    ``device`` section must give the boards' reporting period
    (``period_s``, with ``epoch_origin``): the campaign clock, which dates
    compact frames, bounds the epochs accepted to a window around the
    current one and picks the default estimate's epoch
    (:func:`campaign_clock`, :mod:`.scope`).  A config without it is refused:
    without a window one device id could store a report in each of 2^32
    epochs.  ``device.lorawan.fport`` is the FPort of reports, default 1.  Its optional ``aggregator`` section:
    ``accept_past_epochs`` and ``quarantine_max_rows`` (default
    10,000).  With ``lorawan``
    (a :class:`~mss_aggregator.collect.lorawan.Server`) ``broker`` is that
    network server's MQTT broker and the reports are its uplinks; no config
    is published, LoRaWAN devices do not read it.  ``fleet_key`` (bytes)
    signs the published config; boards adopt nothing unsigned.  ``tls_cert``/``tls_key``:
    a client certificate for a broker that requires one.  The store is checked
    writable here, before anything subscribes; ``campaign`` and ``share_group``
    are checked to be MQTT topic levels (ValueError).  The store records its
    campaign: another ``campaign`` is refused (StoreError naming both), None
    takes the recorded one (a new store: DEFAULT_CAMPAIGN, said in the log).
    A collector, the writer or the HTTP server that dies tells ``failures``
    (:func:`serve` stops on it).  ``verbose``: called with one line
    (:func:`message_line`) per message once it is stored (``mss aggregate -v``).

    With ``shuffle_key`` (bytes; ``mss aggregate --shuffled``) it takes a shuffler's
    batches only (:mod:`.shuffled`): one subscription, to ``mss/v1/<campaign>/shuffled``
    on ``broker``, no device topic, status or retained config, no serial port or
    LoRaWAN server (ValueError), and a store that records itself as shuffled
    (:meth:`~.store.Store.record_mode`: a store of device reports is refused).
    """

    def __init__(self, config_path, store_path, campaign=None, broker=None, serial_ports=(),
                 share_group=None, tls_ca=None, client_id=None, log=print, lorawan=None, fleet_key=None,
                 tls_cert=None, tls_key=None, verbose=None, shuffle_key=None):
        if campaign is not None:
            check_topic_level(campaign, "--campaign")
        if share_group is not None:
            check_topic_level(share_group, "--share-group")
        raw = read_json(config_path, "config")
        self.cfg = load_dict(raw, source=str(config_path))
        self.device = raw.get("device")  # the boards' section: the dashboard's loss so far (web.live)
        self.categories = categories.from_config(raw, self.cfg.k, str(config_path))  # the views' names, order
        clock = checked_clock(raw, self.cfg, config_path, "the aggregator needs it to bound the epochs it "
                                                          "accepts and to choose the default estimate")
        shuffled = shuffle_key is not None
        if shuffled and (serial_ports or lorawan or not broker):
            raise ValueError("--shuffled takes a shuffler's batches from --broker only: no device link "
                             "(--serial, --lorawan) is heard, or the aggregator would see device ids")
        if lorawan and not broker:
            raise ValueError("--lorawan needs --broker, the network server's MQTT broker")
        # SPEC.md section 4 (a shuffler's bodies are compact frames, dated by the batch: see .shuffled)
        check_compact_link(self.cfg, config_path, not shuffled and (serial_ports or (broker and not lorawan)))
        if lorawan:
            check_lorawan_id(raw, config_path)
        fport = config_port(raw.get("device") or {}, "fport", 1) if lorawan else None
        time_fport = config_port(raw.get("device") or {}, "time_fport", 3) if lorawan else None
        quarantine_max = _count(raw.get("aggregator") or {}, "quarantine_max_rows", QUARANTINE_MAX_ROWS,
                                "aggregator")
        self.store = open_store(store_path, self.cfg, campaign)
        self.store.quarantine_max_rows = quarantine_max
        try:
            self.store.check_writable()
            if campaign is None:
                recorded = self.store.campaign()
                campaign = recorded or DEFAULT_CAMPAIGN
                log(f"campaign {campaign!r}: " + (f"recorded in {self.store.name}" if recorded else
                    f"no --campaign given and {self.store.name} records none; boards of another campaign "
                    f"are not heard (give --campaign NAME)"))
            self.store.record_campaign(campaign)
            self.store.record_mode(SHUFFLER if shuffled else DEVICES)
        except StoreError:
            self.store.close()
            raise
        self.campaign, self.verbose = campaign, verbose
        self.seen = dict.fromkeys(("report", "quarantined"), 0)  # messages of this run (the idle warning)
        self.started = False
        self.store.set_clock(clock)
        # memoized copies repeat a draw: pooled estimates widen their standard errors for them (scope)
        self.store.record_memoize((raw.get("device") or {}).get("memoize", DEVICE_DEFAULTS["memoize"]))
        self.store.set_categories(self.categories)
        if shuffled:
            self.ingest = ShuffledIngest(self.cfg, campaign, shuffle_key)
        else:
            self.ingest = Ingest(self.cfg, campaign, clock["period_s"], clock["epoch_origin"], lorawan=lorawan,
                                 fport=fport, past_epochs=clock["accept_past_epochs"], time_fport=time_fport)
        self.log, self.failures = log, Failures()
        self.clocks = DeviceClocks(log)  # boards that said they have no clock (link_health)
        self.writer = Writer(self.store, self.ingest, on_batch=self._reported, failures=self.failures)
        self.collectors = []
        if shuffled:  # the shuffler's topic only: no status, no retained config (devices are not here)
            self.collectors.append(MqttCollector(broker, self.writer, shuffled_batch.topic(campaign),
                                                 self.ingest.receive_mqtt,
                                                 client_id or default_client_id(self.store, campaign), 1, None,
                                                 share_group, tls_ca, log, tls_cert, tls_key,
                                                 failures=self.failures))
        elif broker:  # LoRaWAN devices read no retained config: only MQTT devices get one
            topic, classify, qos, retained = (
                (lorawan.uplink_topic, self.ingest.receive_lorawan, lorawan.qos, None) if lorawan else
                (f"mss/v1/{campaign}/+/report", self.ingest.receive_mqtt, 1,
                 (f"mss/v1/{campaign}/config", config_message(self.cfg, campaign, fleet_key, log))))
            self.collectors.append(MqttCollector(broker, self.writer, topic, classify,
                                                 client_id or default_client_id(self.store, campaign),
                                                 qos, retained, share_group, tls_ca, log, tls_cert, tls_key,
                                                 failures=self.failures, clocks=None if lorawan else self.clocks,
                                                 status_topic=f"mss/v1/{campaign}/+/status"))
        self.collectors += [SerialCollector(spec, self.writer, log=log, failures=self.failures, clocks=self.clocks)
                            for spec in serial_ports]
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

    def brokers(self):
        """Each MQTT collector's connection state (LinkHealth.status)."""
        return [c.health.status() for c in self.collectors if isinstance(c, MqttCollector)]

    def no_clock(self):
        """The devices that said they have no clock and have not reported since (DeviceClocks.status)."""
        return self.clocks.status()

    def _reported(self, items, outcomes):
        # a skip too: its epoch says the board has a clock again
        self.clocks.reported(i["device_id"] for i in items if i and "device_id" in i)
        for item, outcome in zip(items, outcomes):
            if outcome in REPORTS:
                self.seen["report"] += 1
            elif outcome == "quarantined":
                self.seen["quarantined"] += 1
            if self.verbose and item:
                self.verbose(message_line(item, outcome))

    def listening(self):
        """What the collectors read: each subscription with its broker, each serial port."""
        return [f"{c.topic} at {c.host}:{c.port}" if isinstance(c, MqttCollector) else f"serial {c.port}"
                for c in self.collectors]

    def idle_warning(self, minutes):
        """The line saying that no report came in the first ``minutes`` of this run,
        naming the campaign and what is subscribed (a typo'd campaign hears nothing)."""
        junk = self.seen["quarantined"]
        return (f"warning: no report in the {minutes:g} min since the start: campaign {self.campaign!r}, "
                f"listening on {', '.join(self.listening())}"
                + (f"; {junk} message(s) quarantined (mss quarantine --store {self.store.name})" if junk else "")
                + "; check the boards' campaign, broker and config")

    def wait_connected(self, timeout=10):
        mqtt = [c for c in self.collectors if isinstance(c, MqttCollector)]
        return all(c.connected.wait(timeout) for c in mqtt)


def printable(text):
    """``text`` with every character that is not printable (a terminal escape,
    a newline) as its Python escape: a device's topic cannot rewrite the log."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def message_line(item, outcome):
    """One ``mss aggregate -v`` line for a stored message, as mosquitto_sub -v prints
    one: where it came from (its topic, else its link), then what became of it.
    Metadata only: a report's body is a randomised private value, and a quarantined
    message's reason is printed, not its bytes."""
    topic = item.get("topic")
    where = item["source"] if topic is None else topic.decode("utf-8", "backslashreplace")
    if "batch" in item:  # a shuffler's batch: its size and epochs, no body
        b = item["batch"]
        what = (f"{outcome} batch {b.batch_id_hex} epoch {b.epoch} (first {b.first_epoch}): {len(b.bodies)} "
                f"bodies, {len(item['reports'])} reports"
                + (f", {len(item['bad'])} quarantined" if item["bad"] else ""))
    elif "skip" in item:  # a board's status: device.budget spent, no report this epoch
        what = f"{outcome} skip {item['device_id']} epoch {item['epoch']} (budget spent)"
    elif "reason" in item:
        size = "" if item.get("length") is None else f" ({item['length']} bytes)"
        what = f"quarantined {item['reason']}: {item.get('detail', '')}{size}"
    elif "ignored" in item:
        what = f"ignored ({item['ignored']})"
    else:
        r = item["report"]
        what = (f"{outcome} {item['device_id']} epoch {r.epoch} seq {r.seq} ({len(item['payload'])} bytes, "
                f"{r.frame})" + (": its epoch has a report" if outcome == "extra" else ""))
    return printable(f"{where} {what}")


def default_client_id(store, campaign):
    """``mss-agg-<campaign>-<16 hex digits>``: random, so that nobody can guess
    it from the campaign and take over the aggregator's persistent session, and
    kept in the store, so that a restart resumes that session (and collects
    what the broker queued meanwhile).  The broker must still tie client ids
    to credentials (docs/mosquitto): ids show up in logs."""
    return f"mss-agg-{campaign}-{store.remembered('mqtt_client_nonce', lambda: secrets.token_hex(8))}"


def config_message(cfg, campaign, fleet_key, log):
    """The retained config: signed with the fleet key (issued now), else the plain
    config, which boards ignore (it still replaces an older signed one)."""
    if fleet_key is None:
        log(f"no fleet key: the config on mss/v1/{campaign}/config is unsigned and devices will "
            "not adopt it (give --fleet-key-file or $MSS_FLEET_KEY)")
        return json.dumps(cfg.to_dict())
    return seal(cfg.to_dict(), fleet_key, campaign, time.time())


def counters_table(counters, title, no_clock=(), skipped=None):
    table = Table(title=title)
    table.add_column("counter")
    table.add_column("value", justify="right")
    for name, value in counters.items():
        table.add_row(name, str(value))
    if no_clock:  # link health: boards whose reports wait for the time
        ids = ", ".join(d["device_id"] for d in no_clock[:5]) + (", ..." if len(no_clock) > 5 else "")
        table.add_row("[bold red]devices without a clock[/]", f"[bold red]{len(no_clock)}: {ids}[/]")
    if skipped and any(skipped.values()):  # boards whose budget was spent with no memo of their value
        table.add_row("[bold yellow]skipped epochs (budget spent)[/]",
                      "[bold yellow]" + ", ".join(f"{k} {v}" for k, v in skipped.items() if v) + "[/]")
    return table


def serve(agg, quiet=False, http=None, token=None, refresh=2.0, hosts=(), warn_idle=None, stopped=None):
    """Run until SIGINT/SIGTERM or until a thread dies; show live counters unless
    ``quiet``; with ``http`` ("host:port") serve the dashboard, JSON API and
    /metrics (``hosts``: more names its Host header may give, see WebServer);
    ``warn_idle`` (minutes, None or 0: never): log :meth:`Aggregator.idle_warning`
    once if no report has come by then; ``stopped``: called with the store's
    counters at the end (the CLI prints them).  A
    store failure raises StoreError, any other thread's death
    :class:`~mss_aggregator.collect.collectors.ThreadDied` ("<thread>: <cause>")."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    console = Console(stderr=True)
    web = view = reader = None
    try:
        if http:
            from mss_aggregator.web.live import LiveView
            from mss_aggregator.web.server import WebServer

            view = LiveView(agg.store.location, interval=refresh, brokers=agg.brokers, no_clock=agg.no_clock,
                            device=agg.device if isinstance(agg.device, dict) else None,
                            on_death=agg.failures.report)
            web = WebServer(view, http, token, hosts=hosts, log=agg.log, on_death=agg.failures.report).start()
            view.start()
            console.print(f"dashboard: {web.url}  (API: {web.url}api/openapi.json, metrics: {web.url}metrics)")
        agg.start()
        title = f"mss aggregate: config {agg.cfg.config_id_hex}, store {agg.store.name}"
        reader = open_store(agg.store.location)  # a second connection: the display never blocks the writer
        died = agg.failures.event
        idle_at = time.monotonic() + 60 * warn_idle if warn_idle else None

        def going():  # every half second
            nonlocal idle_at
            if idle_at is not None and time.monotonic() >= idle_at:
                idle_at = None
                if not agg.seen["report"]:
                    agg.log(agg.idle_warning(warn_idle))
            return not stop.is_set() and not died.wait(0.5)
        if quiet:
            while going():
                pass
        else:
            with Live(counters_table(reader.counters(), title, agg.no_clock(), reader.skipped_epochs()),
                      console=console, refresh_per_second=2,
                      redirect_stdout=sys.stdout.isatty()) as display:  # -v lines into a pipe stay in it
                while going():
                    display.update(counters_table(reader.counters(), title, agg.no_clock(), reader.skipped_epochs()))
    finally:
        agg.stop()
        if web is not None:
            web.stop()
        if view is not None:
            view.close()
        if reader is not None:
            try:
                if stopped is not None:
                    stopped(reader.counters())
            except StoreError:
                pass  # unreadable now: the error that stopped us says why
            reader.close()
    error = agg.writer.error
    if isinstance(error, StoreError):  # the writer stopped at the batch it could not commit
        raise StoreError(f"{error}; stopped, and nothing unstored was acknowledged (an MQTT broker "
                         f"redelivers it to the next run)")
    if agg.failures.first is not None:
        raise agg.failures.error()
