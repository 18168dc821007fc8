"""The demo's workflow (``mss demo``): a broker (embedded, or the caller's), an aggregator, an
emulated fleet reporting once a device (or, with ``epochs``, a field campaign in real time:
:mod:`mss_aggregator.devices.field`), and the estimate decoded from what was stored.

The fleet reports as ``mss plan --device-config`` configures boards by default: memoized and
budgeted (so OLH hashes with one seed a device, and may use compact frames); with LoRaWAN through
emulated modems and a ChirpStack v4 network-server emulator, planned for the region's DR0: US915's
11 bytes, or EU868's 51 (``region``), with the radio's airtime, EU868's duty cycle and the
DeviceTimeReq probes accounted (:func:`radio_summary`).
:class:`Demo` runs it and keeps what outlives the run (the dashboard, the embedded broker, the
temporary store) until it is left; :class:`DemoResult` is what it found, for a caller to render.

    >>> with Demo(DemoRequest(devices=20)) as demo:      # doctest: +SKIP
    ...     result = demo.run()
    >>> result.document["estimate"]["n"]                  # doctest: +SKIP
    20
"""
import tempfile
import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from mss_aggregator.campaign import Campaign
from mss_aggregator.collect import scope as scopes
from mss_aggregator.collect.collectors import parse_broker
from mss_aggregator.collect.embedded_broker import EmbeddedBroker
from mss_aggregator.collect.links import Links, MqttEndpoint
from mss_aggregator.collect.lorawan import parse_spec
from mss_aggregator.collect.service import Aggregator
from mss_aggregator.collect.store import open_store
from mss_aggregator.devices.field import FIELD_KEYS, NO_CLOCK_LEFT_OUT, FieldRun, fleet_dialects, run_field, summarize
from mss_aggregator.devices.fleet import (BoardRun, Boards, FleetClock, clear_retained, draw_values, run_fleet,
                                          status_topic)
from mss_aggregator.distributions import parse
from mss_node.settings import DEVICE_DEFAULTS
from mss_protocol import registry
from mss_protocol.budget import default_device, describe
from mss_protocol.choose import Limits, Reporting, choose
from mss_protocol.configs import load_dict
from mss_protocol.lorawan import EU868_DUTY_CYCLE, budget, parse_link

LINKS = {"us915": "lorawan:us915:0", "eu868": "lorawan:eu868:0"}  # the region's DR0: the longest range
LINK = LINKS["us915"]  # the default: the tightest common link, 11 bytes
REGIONS = tuple(LINKS)
PERIOD_S = DEVICE_DEFAULTS["period_s"]  # an MQTT fleet's period: the boards' own default
FIELD_PERIOD_S = 4  # with epochs: the default period (real seconds)
ID_PREFIX = "dev"  # the MQTT fleet's device ids: dev0, dev1, ...
WAIT_S = 30  # how long the aggregator is given to store what was sent


class DemoError(RuntimeError):
    """The demo cannot run: the broker is unreachable, the dashboard's address is taken, a
    package the LoRaWAN emulator needs is missing."""


@dataclass(frozen=True)
class DemoRequest:
    """What to run: ``devices`` boards, values from ``dist`` (``seed``), a config planned for ``k``
    categories and ``epsilon`` by ``protocol``; ``lorawan`` through emulated modems and ChirpStack;
    ``region`` the LoRaWAN region (:data:`LINKS`: its DR0);
    ``epochs`` a field campaign (LoRaWAN) of that many epochs of ``period_s`` (default
    :data:`FIELD_PERIOD_S`; an MQTT fleet: :data:`PERIOD_S`), boards without a clock
    (``no_clock``), each reset ``resets`` times; ``broker`` a URL (None: an embedded one);
    ``http`` HOST:PORT of a live dashboard (already checked)."""
    devices: int = 200
    k: int = 16
    protocol: str = "auto"
    epsilon: float = 3.0
    dist: str = "zipf:1.1"
    seed: int = 1
    lorawan: bool = False
    region: str = "us915"
    epochs: int | None = None
    period_s: int | None = None
    no_clock: bool = False
    resets: int = 0
    broker: str | None = None
    http: str | None = None

    @property
    def period(self):
        return self.period_s or (FIELD_PERIOD_S if self.epochs else PERIOD_S)


@dataclass
class DemoResult:
    """What a demo found: ``document`` its outcome (``mss demo --json``); ``truth`` the values'
    frequencies, ``estimate`` the decoded one, ``scope`` what it decoded, ``counters`` the store's;
    ``sent`` reports (uplinks on air in a field campaign); ``summary`` a field campaign's checks
    (:func:`mss_aggregator.devices.field.summarize`) or None."""
    document: dict
    truth: object
    estimate: object
    scope: object
    counters: dict
    sent: int
    summary: dict | None = None

    @property
    def failed(self):
        return self.summary is not None and not self.summary["ok"]


def _log(line):
    print(line)


class Demo:
    """One demo run of ``request``; ``log`` takes each line of what it does.  A context manager:
    leaving it stops the dashboard, the embedded broker, and removes the temporary store."""

    def __init__(self, request, log=_log):
        self.request, self.log = request, log
        self.runtime = self.embedded = self.web = self.view = self.tmp = None

    def __enter__(self):
        from mss_aggregator.devices.runtime import micropython_path

        self.tmp = tempfile.TemporaryDirectory()
        self.runtime = "micropython" if micropython_path() else "cpython"
        if self.runtime == "cpython":
            self.log("note: no MicroPython binary; the devices run the firmware under CPython")
        self.embedded = None if self.request.broker else EmbeddedBroker().start()
        self.url = self.request.broker or self.embedded.url
        self.log(f"broker: {self.url}" + (" (embedded amqtt on loopback)" if self.embedded else ""))
        self.campaign = f"demo-{uuid.uuid4().hex[:8]}"
        return self

    def __exit__(self, *exc):
        if self.web is not None:
            self.web.stop()
        if self.view is not None:
            self.view.close()  # before the store's folder goes
        if self.embedded:
            self.embedded.stop()
        self.tmp.cleanup()

    def run(self, meter=None):
        """Plan, collect, decode: the :class:`DemoResult`.  ``meter(label, total)``, a context
        manager yielding a step callback (or None), shows the fleet's progress."""
        r, meter = self.request, meter or (lambda label, total: nullcontext())
        plan, device, origin = self._plan()
        cfg, link = plan["cfg"], plan["link"]
        store_path = f"{self.tmp.name}/store.sqlite"
        server, network = self._network(link, plan["frame_bytes"])
        agg = Aggregator(Campaign.read(plan["path"]), store_path, Links(MqttEndpoint(self.url), lorawan=server),
                         name=self.campaign, log=self.log).start()
        try:
            values = draw_values(parse(r.dist, r.k), r.devices, r.seed)
            if not agg.wait_connected(15):
                raise DemoError(f"could not connect to {self.url}")
            self._dashboard(store_path, agg, device)
            if r.epochs:
                boards = self._field(plan, values, network, origin=origin, meter=meter)
                sent, wait_for = sum(len(b.arrivals) for b in boards), "received"  # uplinks on air
            else:
                times = {}
                with meter(f"{r.devices} devices running the firmware on {self.runtime}"
                           + (" with emulated LoRaWAN modems" if link else ""), r.devices) as step:
                    results = run_fleet(cfg, self.url, self.campaign, values, network=network,
                                        clock=FleetClock(period_s=r.period),
                                        boards=Boards(id_prefix=ID_PREFIX, privacy=plan["privacy"]),
                                        run=BoardRun(runtime=self.runtime, times=times, on_done=step))
                sent, wait_for = sum(1 for _, rc, _ in results.values() if rc == 0), "accepted"
            deadline = time.time() + WAIT_S
            while agg.store.counters()[wait_for] < sent and time.time() < deadline:
                time.sleep(0.2)
        finally:
            agg.stop()
            if network is not None:
                network.close()
            if r.broker and not link:  # the user's broker keeps what is retained: the boards' statuses, the config
                self._clear_retained()
        result = self._decode(store_path, plan, values, sent=sent, origin=origin, boards=boards if r.epochs else None)
        if not r.epochs:
            result.document.update(per_device=device_rows(results, times),
                                   awake_fraction={d: t["mcu"]["awake_fraction"] for d, t in times.items()})
        if link:
            result.document["radio"] = radio_summary(link, plan["frame_bytes"], r.period, result.document["per_device"])
        return result

    def _plan(self):
        """The config the fleet runs, saved as a campaign file with its device section."""
        r = self.request
        link = parse_link(LINKS[r.region]) if r.lorawan else None
        result = choose(r.k, r.epsilon, r.protocol,
                        limits=Limits(max_bytes=link and link.max_payload, frame="compact" if link else "full"),
                        reporting=Reporting(olh_seed="device"))
        cfg = load_dict(result["config"])
        privacy = default_device(r.epsilon)
        # the fleet's period: the aggregator bounds the epochs it accepts (and dates compact frames) by it;
        # a field campaign's epochs are numbered from its start (epoch 0 begins as the boards boot)
        origin = int(time.time()) + 2 if r.epochs else 0
        device = {"period_s": r.period, "epoch_origin": origin, **privacy}
        path = f"{self.tmp.name}/cfg.json"
        cfg.save(path, {"device": device})
        self.log(f"config {cfg.config_id_hex}: {result['protocol'].upper()}, k={r.k}, epsilon={r.epsilon} "
                 f"(eps_effective {cfg.eps_effective:.6f})"
                 + (f", moduli {result['moduli']}" if result["moduli"] else "")
                 + f", {cfg.bits_per_report['max']} bits per report ({result['frame_bytes']}-byte frames)")
        self.log(describe(cfg, device)[0])
        return (dict(cfg=cfg, link=link, privacy=privacy, path=path, protocol=result["protocol"],
                     frame_bytes=result["frame_bytes"]), device, origin)

    def _network(self, link, frame_bytes):
        """(the aggregator's LoRaWAN spec, the ChirpStack emulator), or (None, None) over MQTT."""
        if not link:
            return None, None
        for line in link_lines(link, frame_bytes, self.request.period):
            self.log(line)
        from mss_aggregator.devices.network_server import ChirpStackEmulator

        server = parse_spec(f"chirpstack:{self.campaign}")
        host, port, user, password, _ = parse_broker(self.url)
        try:
            network = ChirpStackEmulator(host, port, self.campaign, user=user, password=password, link=link)
        except RuntimeError as exc:  # chirpstack-api missing: the emulator builds official events
            raise DemoError(str(exc)) from None
        self.log(f"network server: ChirpStack v4 JSON on {server.uplink_topic}")
        return server, network

    def _dashboard(self, store_path, agg, device):
        if not self.request.http:
            return
        from mss_aggregator.web.live import LiveView
        from mss_aggregator.web.server import HttpError, WebServer

        self.view = LiveView(store_path, interval=0.5, brokers=agg.brokers, device=device).start()
        try:
            self.web = WebServer(self.view, self.request.http).start()
        except HttpError as exc:
            raise DemoError(f"the dashboard at {exc}") from None
        self.log(f"dashboard: {self.web.url}")

    def _field(self, plan, values, network, origin, meter):
        """The boards from the start of epoch 0 (the warm-up: they boot, join, report for the
        first time) to the end of the last epoch (devices.field.FieldBoard, stopped)."""
        r = self.request
        t_end = origin + (r.epochs + 1) * r.period
        time.sleep(max(0.0, origin - time.time()))
        self.log(f"field campaign: {len(values)} boards in real time, epoch 0 (warm-up) and epochs 1..{r.epochs} of "
                 f"{r.period} s" + (", clocks reading 2000-01-01 at every boot" if r.no_clock else ", clocks set")
                 + (f", each reset {r.resets} times at random moments (seed {r.seed})" if r.resets else "")
                 + ", sleeping light between reports")
        if r.no_clock:
            self.log(f"modems: {', '.join(fleet_dialects(True))}; {NO_CLOCK_LEFT_OUT}")
        workdir = Path(self.tmp.name) / "boards"
        workdir.mkdir()
        with meter(f"{len(values)} boards running the firmware's loop on {self.runtime} until "
                   f"{time.strftime('%H:%M:%S', time.localtime(t_end))}", None):
            return run_field(plan["cfg"], self.campaign, values, network,
                             clock=FleetClock(period_s=r.period, epoch_origin=origin),
                             course=FieldRun(t_end=t_end, no_clock=r.no_clock, resets=r.resets, seed=r.seed),
                             boards=Boards(privacy=plan["privacy"]),
                             run=BoardRun(runtime=self.runtime, workdir=workdir))

    def _clear_retained(self):
        """Delete the retained messages an MQTT demo left on the caller's broker: each device's
        status (its own login: devices.fleet.clear_retained) and the aggregator's config."""
        ids = [f"{ID_PREFIX}{i}" for i in range(self.request.devices)]
        left = clear_retained(self.url, [(d, None, [status_topic(self.campaign, d)]) for d in ids]
                              + [(None, None, [f"mss/v1/{self.campaign}/config"])])
        for line in left:
            self.log(f"warning: retained message not deleted: {line}")

    def _decode(self, store_path, plan, values, sent, origin, boards):
        """The :class:`DemoResult` of the store: the scope decoded, the estimate, the outcome."""
        r, cfg = self.request, plan["cfg"]
        store = open_store(store_path)
        scope = decoded_scope(store, r.epochs)
        counts, counters, accepted = scope.counts, store.counters(), store.tally()[0]
        rows = store.report_epochs() if r.epochs else None
        store.close()
        est = scopes.decode(registry.from_config(cfg), scope)
        truth = np.bincount(values, minlength=r.k) / r.devices
        doc = {"campaign": self.campaign, "config_id": cfg.config_id_hex, "protocol": plan["protocol"],
               "link": plan["link"] and plan["link"].spec,
               "runtime": self.runtime, "period_s": r.period, "devices": r.devices, "sent": sent,
               "reports": accepted, "counters": counters,
               # what the estimate decoded (mss estimate --json's scope fields) and every item's estimate,
               # interval and true frequency: the printed intervals' coverage (tests/test_field_demo.py)
               "estimate": dict(scope.document(), n=counts.total,
                                items=[dict(row, true=float(truth[row["item"]])) for row in est.rows()])}
        summary = None
        if r.epochs:
            summary = summarize(boards, rows, counters, list(range(1, r.epochs + 1)), period_s=r.period,
                                epoch_origin=origin, resets=r.resets)
            doc.update(epochs=r.epochs, epoch_origin=origin, no_clock=r.no_clock, resets=r.resets,
                       **{key: summary[key] for key in FIELD_KEYS})
        return DemoResult(document=doc, truth=truth, estimate=est, scope=scope, counters=counters, sent=sent,
                          summary=summary)


def device_rows(results, times):
    """--json's per_device: each device's outcome and, where measured (LoRaWAN boards), the
    MCU's awake/asleep time (runtime.board_times: real run time plus the radio's exchanges it
    waits through, which the emulated modem answers in 50 ms / emulated sleeps, which take no
    real time) and its modem's (ModemEmulator.stats: TX and RX from airtime, awake to the end
    of each exchange's last receive window, as mss_protocol.energy counts a report)."""
    rows = []
    for device_id, (value, rc, _) in sorted(results.items()):
        row = {"device_id": device_id, "sent": rc == 0}
        t = times.get(device_id)
        if t:
            mcu, radio = t["mcu"], t["radio"]
            row.update(modem=t["modem"], awake_s=mcu["awake_s"], asleep_s=mcu["asleep_s"],
                       awake_fraction=mcu["awake_fraction"], sleeps=mcu["light"] + mcu["deep"],
                       modem_awake_s=radio["awake_s"], modem_asleep_s=radio["asleep_s"],
                       modem_sleeps=radio["sleeps"], tx_s=radio["tx_s"], rx_s=radio["rx_s"],
                       uplinks=radio["uplinks"], joins=radio["joins"], time_requests=radio["time_requests"])
        rows.append(row)
    return rows


def link_lines(link, frame_bytes, period_s):
    """What the fleet's link allows one report of ``frame_bytes`` (:func:`mss_protocol.lorawan.budget`),
    as lines: its airtime, TTN's fair use, EU868's duty cycle, and the field period they need
    beside the demo's ``period_s`` (the demo's time is accelerated)."""
    air = budget(link, frame_bytes)
    lines = [f"link {link.spec} (SF{link.sf}, {link.bw_khz} kHz): {air['airtime_ms']:.0f} ms on air per report "
             f"of {frame_bytes} bytes; TTN's fair use (30 s of airtime a day): {air['fair_use_reports_per_day']} "
             f"reports a day"]
    if air["duty_cycle_gap_s"] is not None:
        lines.append(f"duty cycle: EU868's {EU868_DUTY_CYCLE:.0%} per sub-band keeps a device off its sub-band "
                     f"{air['duty_cycle_gap_s'] - air['airtime_ms'] / 1000:.1f} s after each uplink "
                     f"({air['duty_cycle_reports_per_day']} reports a day at most)")
    if period_s < air["min_period_s"]:
        lines.append(f"the demo's {period_s} s periods are accelerated: in the field a period of at least "
                     f"{air['min_period_s']} s keeps within "
                     + ("the duty cycle and the fair use" if air["duty_cycle_gap_s"] is not None else "the fair use"))
    return lines


def radio_summary(link, frame_bytes, period_s, rows):
    """What the fleet's radios did (``rows``: --json's per_device, each with ``uplinks``, ``joins``,
    ``tx_s``, ``time_requests``): uplinks and joins, airtime in all (``tx_s``: the uplinks' at the
    budget's ``airtime_ms`` each and the join requests'), the most a device spent on air, and
    against the link's limits at the demo's period: the duty
    cycle a device used (its airtime over the period, EU868: against 1 % per sub-band) and the
    field period (``min_period_s``) that keeps within the duty cycle and TTN's fair use;
    ``time_requests``: the DeviceTimeReq probes the modems carried."""
    air = budget(link, frame_bytes)
    rows = [r for r in rows if "tx_s" in r]
    uplinks, joins, tx = (sum(r[key] for r in rows) for key in ("uplinks", "joins", "tx_s"))
    used = air["airtime_ms"] / 1000 / period_s
    return {"link": link.spec, "sf": link.sf, "bw_khz": link.bw_khz, "frame_bytes": frame_bytes,
            "airtime_ms": air["airtime_ms"], "uplinks": uplinks, "joins": joins, "tx_s": tx,
            "max_device_tx_s": max((r["tx_s"] for r in rows), default=0.0),
            "duty_cycle_limit": EU868_DUTY_CYCLE if air["duty_cycle_gap_s"] is not None else None,
            "duty_cycle_off_s": (air["duty_cycle_gap_s"] - air["airtime_ms"] / 1000
                                 if air["duty_cycle_gap_s"] is not None else None),
            "duty_cycle_at_period": used, "period_s": period_s, "min_period_s": air["min_period_s"],
            "fair_use_reports_per_day": air["fair_use_reports_per_day"],
            "time_requests": sum(r.get("time_requests") or 0 for r in rows)}


def decoded_scope(store, epochs):
    """The :class:`~mss_aggregator.collect.scope.Scope` the demo decodes, its ``selection``
    saying why.  A field campaign (``epochs``): its last epoch, each device once; its boards
    are memoized (as ``mss plan`` configures them), so the copies they re-sent in the other
    epochs are the same draws, and pooling them as independent reports would give intervals
    about sqrt(epochs + 1) too narrow.  An MQTT fleet reports once a device: every epoch
    pooled (a run across an epoch's end keeps every device), each device once, nothing widened."""
    if not epochs:
        return replace(scopes.select(store, all_epochs=True),
                       selection="an MQTT fleet reports once a device (every epoch pooled: a run across an "
                                 "epoch's end keeps every device)")
    held, _, _, spanned = store.tally()
    return replace(scopes.select(store, epoch=epochs),
                   selection=f"the campaign's last epoch, each device once (the store's {held} reports in "
                             f"{spanned} epochs are memoized copies of the same draws: not pooled)")
