"""What the dashboard, its JSON API and /metrics show, refreshed in the background.

A :class:`LiveView` owns its own store connection (never the writer's) and,
every ``interval`` seconds when the counters or the campaign clock's epoch have moved, decodes the
counts of the epoch ``mss estimate`` decodes by default (:mod:`~mss_aggregator.collect.scope`:
each device once, never memoized copies pooled as independent reports; estimates with SEs and
95% CIs, and ``decoded``, the scope's phrase: "epoch 1234: 24 reports from 24 devices"), reads
the counters and the devices per epoch,
and appends the
counters to a bounded history.  Requests read the latest snapshot, so a
busy dashboard never slows collection.  The privacy audit summary (exact
single-report reconstruction risk of this config against the eps-LDP
ceiling, uniform prior and the current estimate as prior) is recomputed
with each decode.  ``brokers`` (a callable: the aggregator's broker
connection states) is read at request time: a broken link shows at once;
so is ``no_clock`` (a callable: the devices that said they have no clock,
:class:`~mss_aggregator.collect.link_health.DeviceClocks`).

The deployment's loss so far (``deployment`` in /api/config): from the
config's ``device`` section (``device``: period_s, memoize, budget; without
it the store's campaign clock and the firmware's defaults, memoize off) and
the epochs elapsed since the campaign's first epoch in the store (else since
``epoch_origin``): one device's fresh draws and epsilon spent, and the Bayes
product attacker's success at that horizon on a device holding a fixed value
(:func:`mss_aggregator.privacy.audit.loss_so_far`) beside the ceiling at the
epsilon spent, with the verdict of :func:`~mss_aggregator.privacy.ceilings.strength`
(also on each single-report row).  Recomputed off the request path with each
decode where it is exact (one draw, no layer: the single-report value), else
when the epoch changes (a simulation: the estimate prior's figure is then
the one of the epoch's first decode).
"""
import threading
import time
from collections import deque

import numpy as np

from mss_aggregator import estimates as estimates_lib
from mss_aggregator import view as views
from mss_aggregator.collect import central as centrals
from mss_aggregator.collect import scope as scopes
from mss_aggregator.collect.store import open_store
from mss_aggregator.privacy import ceilings
from mss_protocol import postprocess, registry

AUDIT_MAX_K = 1 << 16  # the estimate-prior audit is O(k log k) per refresh; above this, uniform only
LOSS_TRIALS, LOSS_DRAWS = 200, 200  # the loss-so-far attack: devices, and fresh draws simulated (then a lower bound)
LOSS_SMALL_K = 4096  # above: 50 devices and 50 draws (an MSS report's likelihood costs O(k))
STATE_RESETS_SHOWN = 20  # /api/counters state_resets.newest: the devices whose state went back last


def _audit(channel, prior, label, epsilon):
    best = channel.bayes_exact(prior)
    no_info = ceilings.no_information(prior)
    return {"prior": label, "bayes_exact": best, "paper_rule": channel.paper_exact(prior),
            "ceiling": ceilings.ldp_prior(prior, epsilon), "no_information": no_info,
            "strength": ceilings.strength(best, no_info)}


class LiveView:
    """``on_death(thread, exc)``: told if the refresh thread ends on an exception (a failed
    refresh does not end it: the snapshot says why it is stale, and the next one retries)."""

    def __init__(self, location, interval=2.0, history=720, brokers=list, no_clock=list, device=None,
                 on_death=None):
        self.brokers, self.no_clock, self.on_death = brokers, no_clock, on_death
        self.device = device  # the config's device section (period_s, memoize, budget), or None
        self._loss = {}  # (prior label, epochs, epoch) -> loss_so_far
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
        self.thread = threading.Thread(target=self._run, name="mss-dashboard", daemon=True)

    def _config(self):
        cfg = self.cfg
        d = cfg.to_dict()
        # the campaign name the store records (None for an older store, or one before Store.campaign)
        d["campaign"] = self.store.campaign()
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
        snap["skipped_epochs"] = self.store.skipped_epochs()  # per link (device.budget spent, no memo)
        snap["state_resets"] = self.store.state_resets(STATE_RESETS_SHOWN)  # sequences that went back
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
        prior = postprocess.simplex(est.raw) if counts.total and self.cfg.k <= AUDIT_MAX_K else None
        return {"updated": now, "n": counts.total, "config_id": self.cfg.config_id_hex, **scope.document(),
                "estimate": est, "categories": self.store.categories(), "decode_seconds": est.seconds,
                "counters": counters,
                "devices_per_epoch": [{"epoch": e, "devices": c} for e, c in epochs], "audit": audit,
                "deployment": self._deployment(now, prior), "central": self._central(scope),
                "integrity": estimates_lib.integrity_of(  # what the docs' default untrusted devices can do
                    self.protocol, counts.total, estimates_lib.DEFAULT_COMPROMISED.devices(scope.devices),
                    estimates_lib.reports_per_device(scope)),
                "error": None}  # a good refresh clears the last failure


    def _central(self, scope):
        """A shuffled store's guarantee of the decoded scope, as ``mss estimate --json`` states it
        (:func:`~mss_aggregator.collect.central.guarantee`, with its regime and the devices it
        counts) and its line (``text``), or None for a store of devices."""
        doc = centrals.guarantee(self.store, scope) if scope.counts.total else None
        return None if doc is None else dict(doc, text=centrals.line(doc))

    def _deployment(self, now, estimate_prior):
        """The deployment's loss so far: the document described in the module's docstring."""
        from mss_aggregator.privacy import audit as privacy_audit

        clock = self.store.clock() or {}
        device = dict(self.device) if self.device is not None else {}
        source = "config" if self.device is not None else "campaign clock; memoize and budget unknown (off assumed)"
        period = device.get("period_s") or clock.get("period_s")
        origin = device.get("epoch_origin", clock.get("epoch_origin", 0))
        if not period:
            return {"error": "no campaign clock (device.period_s): the epochs elapsed are unknown"}
        device["period_s"] = period
        current = int((now - origin) // period)
        first = self.store.first_epoch()
        since = "first epoch in the store" if first is not None else "epoch_origin"
        start = first if first is not None else 0
        epochs = max(1, current - start + 1)
        doc = {"source": source, "period_s": period, "epoch_origin": origin, "memoize": bool(device.get("memoize")),
               "budget": device.get("budget"), "irr": privacy_audit.irr_doc(self.cfg), "first_epoch": start,
               "counted_from": since, "current_epoch": current, "epochs": epochs,
               "days": epochs * period / 86400, "value": "fixed (a stable reading)", "attacker": []}
        small = self.cfg.k <= LOSS_SMALL_K
        trials, draws = (LOSS_TRIALS, LOSS_DRAWS) if small else (50, 50)
        priors = [("uniform", np.full(self.cfg.k, 1 / self.cfg.k))]
        if estimate_prior is not None:
            priors.append(("current estimate", estimate_prior))
        try:
            for label, prior in priors:
                key = (label, epochs, current)
                if key not in self._loss or self._loss[key]["exact"]:  # exact: cheap, follow the estimate
                    self._loss = {k: v for k, v in self._loss.items() if k[0] != label}
                    self._loss[key] = privacy_audit.loss_so_far(self.cfg, device, prior, epochs, trials=trials,
                                                                max_draws=draws)
                doc["attacker"].append(dict(self._loss[key], prior=label))
        except Exception as exc:  # noqa: BLE001  a config the attack cannot run: said, never the estimates' end
            doc["error"] = f"cannot compute the loss so far: {exc}"
        return doc

    def _run(self):
        try:
            while not self.stop_event.wait(self.interval):
                try:
                    self.refresh()
                except Exception as exc:  # keep the last snapshot, and say why it is stale (API, page)
                    with self.lock:
                        self.snapshot = dict(self.snapshot, error=f"refresh failed: {exc}")
        except Exception as exc:  # no more refreshes: never a dashboard showing stale figures unsaid
            if self.on_death is None:
                raise
            self.on_death("dashboard refresh", exc)

    def start(self):
        self.thread.start()
        return self

    def close(self):
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join(10)
        self.store.close()

    # -- the API's documents ------------------------------------------------
    def estimates(self, top=None, order=None, simultaneous=None, post=postprocess.DEFAULT_VIEW, robust="false"):
        """The latest estimates as :mod:`mss_aggregator.view` shows them: ``top`` (the
        largest, default every item, then in item order unless ``order``), ``order``
        (item or estimate), ``simultaneous`` (true/false; default: when top < k),
        ``post`` (the point estimate: postprocess.DEFAULT_VIEW unless none or clip;
        standard errors, intervals and detections are the unbiased estimate's) and
        ``robust`` (true: ``mss estimate --robust``'s recovery for the untrusted devices the
        integrity states, with ``robust`` and each item's ``plain_estimate``; the certified
        interval stays the plain decoder's); ``view`` says what was chosen, with the caption
        and the significance counts."""
        if post not in postprocess.CHOICES:
            raise ValueError(f"post must be one of {', '.join(postprocess.CHOICES)}, got {post!r}")
        with self.lock:
            s = self.snapshot
        if top is not None:
            try:
                top = int(top)
            except ValueError:  # int's own message names int() and base 10
                raise ValueError(f"top must be a whole number, got {top!r}") from None
            if top < 1:
                raise ValueError("top must be at least 1")
        elif order is None:
            order = "item"
        if simultaneous is not None:
            if simultaneous not in ("true", "false"):
                raise ValueError(f"simultaneous must be true or false, got {simultaneous!r}")
            simultaneous = simultaneous == "true"
        if robust not in ("true", "false"):
            raise ValueError(f"robust must be true or false, got {robust!r}")
        est, cats, integrity = s["estimate"], s["categories"], s["integrity"]
        plain = recovered = None
        if robust == "true":
            recovery, robust_est = estimates_lib.robust_estimate(self.protocol, est, integrity)
            est, plain, recovered = robust_est, est.post_processed(post), {"robust": recovery.document()}
        est = est.post_processed(post)
        view = views.make(est=est, categories=cats, order=order, top=top or self.cfg.k, simultaneous=simultaneous)
        rows = est.rows(view.shown())
        if cats.labels:
            for r in rows:
                r["label"] = cats.name(r["item"])
        estimates_lib.with_certified(rows, integrity, None if plain is None else plain.rows(view.shown()))
        doc = {k: s[k] for k in ("updated", "n", "config_id", "epoch", "pooled", "epochs", "devices",
                                 "stderr_factor", "current_epoch", "selection", "memoized", "decoded",
                                 "decode_seconds", "central")}
        return dict(doc, post=post, view=dict(view.document(), caption=view.caption()), estimates=rows,
                    integrity=dict(integrity.document(), text=integrity.headline()), error=s.get("error"),
                    **(recovered or {}))

    def counters(self):
        with self.lock:
            s = self.snapshot
            doc = {"updated": s["updated"], "counters": s["counters"], "history": list(self.history),
                   "devices_per_epoch": s["devices_per_epoch"], "error": s.get("error"),
                   "skipped_epochs": s["skipped_epochs"], "state_resets": s["state_resets"]}
        return dict(doc, brokers=self.brokers(), no_clock=self.no_clock())

    def config_doc(self):
        with self.lock:
            return dict(self.config, audit=self.snapshot["audit"], deployment=self.snapshot.get("deployment"))
