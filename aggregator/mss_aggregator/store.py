"""Durable report store (SQLite in WAL mode).

Every received message ends in exactly one place, in the same transaction
that updates the counters:

* ``reports`` with status ``accepted`` -- the one counted report of a
  (config, device, epoch);
* ``reports`` with status ``extra`` -- a later, different report for an
  epoch that already has one (kept aside, counted as rejected: a device
  cannot outvote the others);
* ``quarantine`` -- anything invalid, with the reason;
* nowhere, counted as ``duplicate`` -- a redelivery of a stored
  (config, device, epoch, sequence).

A batch is committed (synchronous=FULL) before its messages are
acknowledged to the broker, so an acknowledged report is on disk.  The
counts decoded by :meth:`counts` come only from accepted rows, so
re-opening the file rebuilds exactly the same state.
"""
import json
import sqlite3
import time
from contextlib import closing

import numpy as np

from mss_aggregator.counts import Counts
from mss_protocol.config import ConfigError, MssConfig

SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reports (
    id INTEGER PRIMARY KEY, config_id TEXT NOT NULL, device_id TEXT NOT NULL,
    epoch INTEGER NOT NULL, seq INTEGER NOT NULL, j INTEGER NOT NULL, subset BLOB NOT NULL,
    payload BLOB NOT NULL, source TEXT NOT NULL, received REAL NOT NULL, status TEXT NOT NULL,
    UNIQUE (config_id, device_id, epoch, seq));
CREATE UNIQUE INDEX IF NOT EXISTS one_per_epoch ON reports (config_id, device_id, epoch)
    WHERE status = 'accepted';
CREATE TABLE IF NOT EXISTS quarantine (
    id INTEGER PRIMARY KEY, received REAL NOT NULL, source TEXT NOT NULL, topic BLOB,
    payload BLOB, reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


class StoreError(RuntimeError):
    pass


class Store:
    """One campaign's reports under one config, in one SQLite file."""

    def __init__(self, path, cfg=None):
        self.path = str(path)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        meta = dict(self.db.execute("SELECT key, value FROM meta"))
        if meta.get("schema") not in (None, str(SCHEMA_VERSION)):
            raise StoreError(f"{path}: schema version {meta['schema']} is not {SCHEMA_VERSION}")
        if "config" in meta:
            stored = MssConfig.from_dict(json.loads(meta["config"]), source=f"{path}: config")
            if cfg is not None and cfg.config_id != stored.config_id:
                raise ConfigError(f"{path} holds reports of config {stored.config_id_hex}, "
                                  f"not {cfg.config_id_hex}; use another --store")
            self.cfg = stored
        elif cfg is None:
            raise StoreError(f"{path}: empty store and no config given")
        else:
            self.cfg = cfg
            with self.db:
                self.db.execute("BEGIN")
                self.db.executemany("INSERT INTO meta VALUES (?, ?)",
                                    [("schema", str(SCHEMA_VERSION)),
                                     ("config", json.dumps(cfg.to_dict()))])

    def close(self):
        self.db.close()

    # -- writing (one batch = one transaction) -------------------------------
    def write_batch(self, items):
        """Store a batch of classified messages; return per-item outcomes.

        ``items``: dicts with ``source``, ``topic``, ``payload`` and either
        ``reason`` and ``detail`` (quarantine) or ``device_id`` and ``report``.
        Outcomes: "accepted", "extra", "duplicate" or "quarantined".
        """
        now = time.time()
        outcomes, bump = [], {"received": len(items)}
        cid = self.cfg.config_id_hex
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for it in items:
                if "reason" in it:
                    cur.execute("INSERT INTO quarantine (received, source, topic, payload, reason) "
                                "VALUES (?, ?, ?, ?, ?)",
                                (now, it["source"], it["topic"], it["payload"],
                                 f"{it['reason']}: {it.get('detail', '')}"))
                    outcome, counter = "quarantined", f"rejected_{it['reason']}"
                else:
                    r = it["report"]
                    key = (cid, it["device_id"], r.epoch, r.seq)
                    if cur.execute("SELECT 1 FROM reports WHERE config_id=? AND device_id=? "
                                   "AND epoch=? AND seq=?", key).fetchone():
                        outcome = counter = "duplicate"
                    else:
                        taken = cur.execute("SELECT 1 FROM reports WHERE config_id=? AND device_id=? "
                                            "AND epoch=? AND status='accepted'", key[:3]).fetchone()
                        outcome = "extra" if taken else "accepted"
                        counter = "rejected_extra_in_epoch" if taken else "accepted"
                        cur.execute("INSERT INTO reports (config_id, device_id, epoch, seq, j, subset, "
                                    "payload, source, received, status) VALUES (?,?,?,?,?,?,?,?,?,?)",
                                    key + (r.j, np.asarray(r.subset, dtype="<u4").tobytes(),
                                           it["payload"], it["source"], now, outcome))
                outcomes.append(outcome)
                bump[counter] = bump.get(counter, 0) + 1
            cur.executemany("INSERT INTO counters VALUES (?, ?) ON CONFLICT(name) "
                            "DO UPDATE SET value = value + excluded.value", list(bump.items()))
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        return outcomes

    # -- reading ------------------------------------------------------------
    def counters(self):
        """{"received", "accepted", "duplicate", "rejected", "rejected_<reason>": ...}."""
        c = dict(self.db.execute("SELECT name, value FROM counters"))
        out = {name: c.get(name, 0) for name in ("received", "accepted", "duplicate")}
        out["rejected"] = sum(v for k, v in c.items() if k.startswith("rejected_"))
        out.update(sorted((k, v) for k, v in c.items() if k.startswith("rejected_")))
        return out

    def counts(self, epoch=None):
        """The additive counts of the accepted reports (vectorised tally), of one
        ``epoch`` only if given (memoized reports repeat across epochs, so a
        campaign with ``device.memoize`` is decoded one epoch at a time)."""
        sql, args = "SELECT j, subset FROM reports WHERE status='accepted'", ()
        if epoch is not None:
            sql, args = sql + " AND epoch=?", (epoch,)
        with closing(self.db.execute(sql, args)) as cur:
            rows = cur.fetchall()
        j = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        members = np.frombuffer(b"".join(r[1] for r in rows), dtype="<u4").astype(np.int64)
        return Counts(self.cfg).add_tally(j, members)

    def accepted_keys(self):
        """Set of (device_id, epoch, seq) of accepted reports (for audits and tests)."""
        return set(self.db.execute("SELECT device_id, epoch, seq FROM reports WHERE status='accepted'"))
