"""What the dashboard, its JSON API and /metrics show, refreshed in the background.

A :class:`LiveView` owns its own store connection (never the writer's) and,
every ``interval`` seconds when the counters or the campaign clock's epoch have moved, decodes the
counts of the epoch ``mss estimate`` decodes by default (:mod:`~mss_aggregator.collect.scope`:
each device once; estimates with SEs and 95% CIs), reads the counters and the devices per epoch,
and appends the
counters to a bounded history.  Requests read the latest snapshot, so a
busy dashboard never slows collection.  The privacy audit summary (exact
single-report reconstruction risk of this config against the eps-LDP
ceiling, uniform prior and the current estimate as prior) is recomputed
with each decode.  ``brokers`` (a callable: the aggregator's broker
connection states) is read at request time: a broken link shows at once;
so is ``no_clock`` (a callable: the devices that said they have no clock,
:class:`~mss_aggregator.collect.link_health.DeviceClocks`).
"""
import threading
import time
from collections import deque

import numpy as np

from mss_aggregator.collect import scope as scopes
from mss_aggregator.collect.store import open_store
from mss_aggregator.privacy import ceilings
from mss_protocol import postprocess, registry

AUDIT_MAX_K = 1 << 16  # the estimate-prior audit is O(k log k) per refresh; above this, uniform only


def _audit(channel, prior, label, epsilon):
    return {"prior": label, "bayes_exact": channel.bayes_exact(prior), "paper_rule": channel.paper_exact(prior),
            "ceiling": ceilings.ldp_prior(prior, epsilon), "no_information": ceilings.no_information(prior)}


class LiveView:
    def __init__(self, location, interval=2.0, history=720, brokers=list, no_clock=list):
        self.brokers, self.no_clock = brokers, no_clock
        self.store = open_store(location)
        self.cfg = self.store.cfg
        self.protocol = registry.from_config(self.cfg)
        self.channel = self.protocol.channel()
        self.interval = interval
        self.history = deque(maxlen=history)
        self.lock = threading.Lock()
        self.config = self._config()
        self.snapshot = None
        self.stop_event = threading.Event()
        self.refresh()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _config(self):
        cfg = self.cfg
        d = cfg.to_dict()
        d["bits_per_report"] = cfg.bits_per_report
        d["audit"] = [_audit(self.channel, np.full(cfg.k, 1 / cfg.k), "uniform", cfg.epsilon)]
        return d

    def refresh(self):
        counters = self.store.counters()
        now = time.time()
        point = {"t": now, **{k: counters[k] for k in ("received", "accepted", "duplicate", "rejected")}}
        current = scopes.current_epoch(self.store.clock(), now)
        if self.snapshot is not None and (counters, current) == (self.snapshot["counters"],
                                                                 self.snapshot["current_epoch"]):
            snap = dict(self.snapshot, updated=now, error=None)  # nothing new: keep the decode
        else:
            snap = self._decode(counters, now)
        with self.lock:
            self.snapshot = snap
            self.history.append(point)

    def _decode(self, counters, now):
        scope = scopes.select(self.store, now=now)
        counts = scope.counts
        est = scopes.decode(self.protocol, scope)
        audit = list(self.config["audit"][:1])
        if counts.total and self.cfg.k <= AUDIT_MAX_K:
            audit.append(_audit(self.channel, postprocess.simplex(est.raw), "current estimate", self.cfg.epsilon))
        epochs = self.store.devices_per_epoch()
        return {"updated": now, "n": counts.total, "config_id": self.cfg.config_id_hex, **scope.document(),
                "estimates": est.rows(), "decode_seconds": est.seconds, "counters": counters,
                "devices_per_epoch": [{"epoch": e, "devices": c} for e, c in epochs], "audit": audit,
                "error": None}  # a good refresh clears the last failure

    def _run(self):
        while not self.stop_event.wait(self.interval):
            try:
                self.refresh()
            except Exception as exc:  # keep the last snapshot, and say why it is stale (API, page)
                with self.lock:
                    self.snapshot = dict(self.snapshot, error=f"refresh failed: {exc}")

    def start(self):
        self.thread.start()
        return self

    def close(self):
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join(10)
        self.store.close()

    # -- the API's documents ------------------------------------------------
    def estimates(self, top=None):
        """The latest estimates; ``top``: only the largest ``top`` (largest first), for big k."""
        with self.lock:
            s = self.snapshot
        rows = s["estimates"]
        if top is not None:
            top = int(top)
            if top < 1:
                raise ValueError("top must be at least 1")
            rows = sorted(rows, key=lambda r: -r["estimate"])[:top]
        doc = {k: s[k] for k in ("updated", "n", "config_id", "epoch", "pooled", "epochs", "devices",
                                 "stderr_factor", "current_epoch", "selection", "decode_seconds")}
        return dict(doc, estimates=rows, error=s.get("error"))

    def counters(self):
        with self.lock:
            s = self.snapshot
            doc = {"updated": s["updated"], "counters": s["counters"], "history": list(self.history),
                   "devices_per_epoch": s["devices_per_epoch"], "error": s.get("error")}
        return dict(doc, brokers=self.brokers(), no_clock=self.no_clock())

    def config_doc(self):
        with self.lock:
            return dict(self.config, audit=self.snapshot["audit"])
