"""The aggregator service: collectors -> writer -> store.

It takes a campaign already read (:class:`mss_aggregator.campaign.Campaign`) and links already
checked (:class:`~.links.Links`); the command line shows its live counters."""
import json
import secrets
import time
from dataclasses import replace

from mss_aggregator.collect.collectors import Failures, MqttCollector, SerialCollector, Writer, check_topic_level
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.link_health import DeviceClocks
from mss_aggregator.collect.shuffled import ShuffledIngest
from mss_aggregator.collect.store import DEVICES, SHUFFLER, StoreError, open_store
from mss_aggregator.collect.webhook import WebhookReceiver
from mss_node.settings import DEVICE_DEFAULTS
from mss_protocol import shuffled_batch
from mss_protocol.sealed import seal


DEFAULT_CAMPAIGN = DEVICE_DEFAULTS["campaign"]  # of a new store collected without a campaign name
REPORTS = ("accepted", "duplicate", "extra")  # outcomes of a message that is a report of this campaign


class Aggregator:
    """Collect one campaign's reports into ``store_path``.

    ``campaign`` is a :class:`~mss_aggregator.campaign.Campaign` (a file from ``mss plan
    --device-config``) with a clock (its ``device.period_s``, with ``epoch_origin``): the
    campaign clock, which dates compact frames, bounds the epochs accepted to a window around the
    current one and picks the default estimate's epoch (:mod:`.scope`).  A campaign without it is
    refused (:class:`~mss_aggregator.campaign.NoClock`): without a window one device id could
    store a report in each of 2^32 epochs.  ``links`` (a :class:`~.links.Links`): with ``lorawan``
    (a :class:`~mss_aggregator.collect.lorawan.Server`) the broker is that network server's and the
    reports are its uplinks on the campaign's FPort; no config is published, LoRaWAN devices do not
    read it; with a :class:`~.links.Webhook` its POSTs come to the HTTP server instead
    (:attr:`webhook`, a :class:`~.webhook.WebhookReceiver` the caller gives the
    :class:`~mss_aggregator.web.server.WebServer`; None without).  ``fleet_key`` (bytes) signs the published config; boards adopt nothing unsigned.
    ``name``: the campaign's name, an MQTT topic level (ValueError).  The store is checked writable
    here, before anything subscribes.  The store records its campaign: another ``name`` is refused
    (StoreError naming both), None takes the recorded one (a new store: DEFAULT_CAMPAIGN, said in
    the log).  A collector, the writer or the HTTP server that dies tells ``failures`` (the caller
    stops on it).  ``verbose``: called with one line (:func:`message_line`) per message once it is
    stored (``mss aggregate -v``).

    With ``links.shuffled`` it takes a shuffler's batches only (:mod:`.shuffled`), authenticated
    with ``shuffle_key`` (bytes): one subscription, to ``mss/v1/<campaign>/shuffled`` on the broker,
    no device topic, status or retained config, and a store that records itself as shuffled
    (:meth:`~.store.Store.record_mode`: a store of device reports is refused).
    """

    def __init__(self, campaign, store_path, links, name=None, fleet_key=None, shuffle_key=None, log=print,
                 verbose=None):
        if name is not None:
            check_topic_level(name, "campaign name")
        if links.shuffled != (shuffle_key is not None):
            raise ValueError("a shuffler's batches are taken with the shuffle key, and only they")
        self.cfg, self.categories = campaign.cfg, campaign.categories  # the views' names, order
        self.device = campaign.device  # the boards' section: the dashboard's loss so far (web.live)
        clock = campaign.require_clock("the aggregator needs it to bound the epochs it accepts and to choose "
                                       "the default estimate")
        campaign.check_links(links)
        self.store = open_store(store_path, self.cfg, name)
        self.store.quarantine_max_rows = campaign.quarantine_max_rows
        try:
            self.store.check_writable()
            if name is None:
                recorded = self.store.campaign()
                name = recorded or DEFAULT_CAMPAIGN
                log(f"campaign {name!r}: " + (f"recorded in {self.store.name}" if recorded else
                    f"no --campaign given and {self.store.name} records none; boards of another campaign "
                    f"are not heard (give --campaign NAME)"))
            self.store.record_campaign(name)
            self.store.record_mode(SHUFFLER if links.shuffled else DEVICES)
        except StoreError:
            self.store.close()
            raise
        self.campaign, self.verbose = name, verbose
        self.seen = dict.fromkeys(("report", "quarantined"), 0)  # messages of this run (the idle warning)
        self.started = False
        self.store.set_clock(clock)
        # memoized copies repeat a draw: pooled estimates widen their standard errors for them (scope)
        self.store.record_memoize(campaign.setting("memoize"))
        self.store.set_categories(self.categories)
        if links.shuffled:
            self.ingest = ShuffledIngest(self.cfg, name, shuffle_key)
        else:
            self.ingest = Ingest(self.cfg, name, clock["period_s"], clock["epoch_origin"],
                                 lorawan=links.network_server(),
                                 past_epochs=clock["accept_past_epochs"],
                                 ports=campaign.lorawan_ports() if links.lorawan else (None, None))
            self.ingest.allowed = links.allowed  # the provisioned ids only, if given (allow_list)
        self.log, self.failures = log, Failures()
        self.clocks = DeviceClocks(log)  # boards that said they have no clock (link_health)
        self.writer = Writer(self.store, self.ingest, on_batch=self._reported, failures=self.failures)
        # a network server's POSTs, taken by the HTTP server (mss_aggregator.web.server.WebServer's webhook)
        self.webhook = WebhookReceiver(links.webhook(), self.writer) if links.webhook() else None
        self.collectors = []
        if links.mqtt:
            self.collectors.append(self._mqtt_collector(links, fleet_key))
        self.collectors += [SerialCollector(spec, self.writer, log=log, failures=self.failures, clocks=self.clocks)
                            for spec in links.serial]

    def _mqtt_collector(self, links, fleet_key):
        """The broker's collector: a shuffler's topic (no status, no retained config: devices are not
        there), a network server's uplinks (LoRaWAN devices read no retained config) or the fleet's
        reports, statuses and retained config."""
        name, endpoint = self.campaign, links.mqtt
        if endpoint.client_id is None:
            endpoint = replace(endpoint, client_id=default_client_id(self.store, name))
        common = {"log": self.log, "failures": self.failures}
        if links.shuffled:
            return MqttCollector(endpoint, self.writer, (shuffled_batch.topic(name), self.ingest.receive_mqtt, 1),
                                 **common)
        if links.lorawan:
            return MqttCollector(endpoint, self.writer,
                                 (links.lorawan.uplink_topic, self.ingest.receive_lorawan, links.lorawan.qos),
                                 status_topic=f"mss/v1/{name}/+/status", **common)
        return MqttCollector(endpoint, self.writer, (f"mss/v1/{name}/+/report", self.ingest.receive_mqtt, 1),
                             retained=(f"mss/v1/{name}/config", config_message(self.cfg, name, fleet_key, self.log)),
                             clocks=self.clocks, status_topic=f"mss/v1/{name}/+/status", **common)

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
        return ([f"{c.topic} at {c.host}:{c.port}" if isinstance(c, MqttCollector) else f"serial {c.port}"
                 for c in self.collectors]
                + ([f"{self.webhook.name} POSTs to {self.webhook.path}"] if self.webhook else []))

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
