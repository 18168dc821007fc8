"""Durable report store: SQLite (one worker) or PostgreSQL (several workers).

``open_store(location)`` takes a file path (SQLite in WAL mode,
synchronous=FULL) or a ``postgresql://`` URL (psycopg 3).  Both run the
same SQL; every received message ends in exactly one place, in the same
transaction that updates the counters:

* ``reports`` with status ``accepted`` -- the one counted report of a
  (config, device, epoch);
* ``reports`` with status ``extra`` -- a later, different report for an
  epoch that already has one (kept aside, counted as rejected: a device
  cannot outvote the others); at most ``extra_max`` (EXTRA_MAX, 4) rows a
  (config, device, epoch): past that a new one is still counted
  (``rejected_extra_in_epoch``) but not stored, and counted as
  ``extra_dropped``, so one device id cannot fill the disk with new sequence
  numbers or FCnts;
* ``quarantine`` -- anything invalid, with the reason, its length, SHA-256
  and at most its first 4 KiB (cut by the ingest); at most
  ``quarantine_max_rows`` rows: past that a quarantined message is still
  counted (``rejected_<reason>``) but its row is dropped and counted as
  ``quarantine_dropped``, so junk cannot fill the disk;
* nowhere, counted as ``duplicate`` -- a redelivery of a stored
  (config, device, epoch, sequence).

Beside them, ``sequences`` follows each device's full-frame sequence number and
counts ``state_resets``: a newer report whose sequence went back (:func:`went_back`:
its state file started again, deleted, corrupt or reflashed; SPEC.md section 10),
per device (:meth:`Store.state_resets`: ``mss quarantine``, the dashboard).

The database enforces both rules with unique indexes, and a report is
inserted with ``ON CONFLICT DO NOTHING``, so two workers that receive the
same report can never both count it: the second one's insert waits for the
first transaction and then does nothing.  The extras cap is exact with
several workers too: a worker locks the epoch's accepted row (``SELECT ...
FOR UPDATE``; SQLite: its write transaction) before it counts the extras.
A batch is committed before its messages are acknowledged to the broker, so
an acknowledged report is stored.  The counts decoded by :meth:`counts` come
only from accepted rows.

Growth from one device id is bounded: at most 1 + EXTRA_MAX = 5 rows per
(config, device, epoch) (before the cap: one per new u16 sequence number or
FCnt, 65,536 an epoch).  A row is ~85 bytes plus the report's frame and its
subset (4 bytes a member): 160 B measured in SQLite with its indexes for a
15-byte MSS report at k = 64, so ~0.8 kB per device and epoch.  The
campaign clock bounds the epochs (``mss aggregate`` requires one): at most
accept_past_epochs + 2 are open at once (34 by default: 170 rows, ~27 kB),
one more each period, so over a campaign of T epochs one device id stores
at most 5 (T + accept_past_epochs + 2) rows.

A **shuffled store** (``mss aggregate --shuffled``, ``meta.reports_from`` =
"shuffler") holds a shuffler's batches and no device id: each batch is a
row of ``shuffle_batches`` (its random batch id, config, release epoch,
first epoch, n bodies, one a device, the reports decoded of them and the
devices its shuffler assumes collude), and each decoded
body a ``reports`` row whose ``device_id`` is a slot name made of the batch
id and the body's position in the permuted batch (:func:`slot`: it names no
device), ``seq`` that position and ``source`` "shuffler", so that
:meth:`Store.counts` and the estimate decode them as any report.  A batch
id already stored is a duplicate: its n reports are counted as
``duplicate`` once (a shuffler re-publishes after a crash).  A store takes
reports of one kind (:meth:`Store.record_mode`): a device report into a
shuffled store, or a batch into a device store, is a StoreError.

``meta`` also records the config, the campaign (:meth:`Store.record_campaign`:
an aggregator of another campaign is refused, and one without ``--campaign``
resumes the recorded one), the campaign clock and the items' names.

The schema is versioned (``meta.schema``) and created or migrated on open
(in one transaction, under an advisory lock on PostgreSQL so that workers
starting together agree); a store that is up to date is only read, so
readers such as ``mss estimate`` need no write rights.

Every failure of the database is a :class:`StoreError` naming the store and
the cause (a full disk, a read-only file, not a database), never a driver
traceback; the aggregator checks the store writable before it subscribes
(:meth:`Store.check_writable`) and stops at the first batch it cannot
commit, leaving that batch unacknowledged for the broker to redeliver.
"""
import json
import os
import time
from contextlib import closing, contextmanager

import numpy as np

from mss_aggregator.remedies import with_remedy
from mss_protocol.config_file import ConfigError
from mss_protocol.configs import load_dict
from mss_protocol.counts import Counts

# (version, statements); {id}, {blob}, {real} are the dialect's types.
MIGRATIONS = [
    (1, ["CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
         """CREATE TABLE IF NOT EXISTS reports (
            id {id}, config_id TEXT NOT NULL, device_id TEXT NOT NULL,
            epoch BIGINT NOT NULL, seq INTEGER NOT NULL, j INTEGER NOT NULL, subset {blob} NOT NULL,
            payload {blob} NOT NULL, source TEXT NOT NULL, received {real} NOT NULL, status TEXT NOT NULL,
            UNIQUE (config_id, device_id, epoch, seq))""",
         """CREATE UNIQUE INDEX IF NOT EXISTS one_per_epoch ON reports (config_id, device_id, epoch)
            WHERE status = 'accepted'""",
         """CREATE TABLE IF NOT EXISTS quarantine (
            id {id}, received {real} NOT NULL, source TEXT NOT NULL, topic {blob},
            payload {blob}, reason TEXT NOT NULL)""",
         "CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)"]),
    (2, ["CREATE INDEX IF NOT EXISTS accepted_by_epoch ON reports (epoch) WHERE status = 'accepted'"]),
    (3, ["ALTER TABLE quarantine ADD COLUMN length BIGINT",  # of what arrived; NULL in older rows
         "ALTER TABLE quarantine ADD COLUMN sha256 TEXT"]),
    # epochs a board skipped (device.budget spent, no memo: SPEC.md section 10), once each
    (4, ["""CREATE TABLE IF NOT EXISTS skips (
            link TEXT NOT NULL, device_id TEXT NOT NULL, epoch BIGINT NOT NULL, received {real} NOT NULL,
            PRIMARY KEY (link, device_id, epoch))"""]),
    # a shuffler's batches (mss aggregate --shuffled): n bodies, of which `reports` decoded and stored
    (5, ["""CREATE TABLE IF NOT EXISTS shuffle_batches (
            batch_id TEXT PRIMARY KEY, config_id TEXT NOT NULL, epoch BIGINT NOT NULL,
            first_epoch BIGINT NOT NULL, n BIGINT NOT NULL, reports BIGINT NOT NULL, received {real} NOT NULL)"""]),
    # the devices of a batch its shuffler assumes collude (SPEC.md section 12, version 2: one body a
    # device); NULL for a batch stored before, whose n counted reports, not devices
    (6, ["ALTER TABLE shuffle_batches ADD COLUMN colluding BIGINT"]),
    # each device's newest full-frame (epoch, sequence) and the times its state went back (SPEC.md section 10,
    # "State resets"): resets counted, the last one's epoch and time
    (7, ["""CREATE TABLE IF NOT EXISTS sequences (
            device_id TEXT PRIMARY KEY, epoch BIGINT NOT NULL, seq INTEGER NOT NULL, resets BIGINT NOT NULL,
            reset_epoch BIGINT, reset_received {real})"""]),
]
DEVICES, SHUFFLER = "devices", "shuffler"  # meta.reports_from: who sends a store its reports
LINKS = ("mqtt", "serial", "lorawan")  # the links whose skipped epochs are counted
SCHEMA_VERSION = MIGRATIONS[-1][0]
RETRIES = 5  # a batch that loses a deadlock against another worker is retried
QUARANTINE_MAX_ROWS = 10_000  # default cap; a row is at most ~4.6 KB (4 KiB payload, 256 B topic)
EXTRA_MAX = 4  # extra rows kept per (config, device, epoch); more are counted (extra_dropped), not stored
SEQ_MOD = 1 << 16  # a full frame's sequence number is u16 (SPEC.md section 4)
ABANDONED = []  # SQLite connections left open on purpose (SqliteStore.close), alive until the exit


class StoreError(RuntimeError):
    pass


def went_back(epoch0, seq0, epoch, seq):
    """A device's full frame (``epoch``, ``seq``) after its newest one (``epoch0``, ``seq0``),
    ``epoch`` >= ``epoch0``, says its state file started again: the sequence number counts the
    reports it queued (u16), one at most an epoch, so a board whose state is intact moves it by
    d = (seq - seq0) mod 2^16 with 1 <= d <= epoch - epoch0 (fewer when reports were lost);
    a lost or deleted state file starts it again at 0 (SPEC.md sections 4 and 10).  In the same
    epoch (a second report: an extra) only a sequence behind (d >= 2^15) counts: a step forward
    there is a board reporting twice, not one that forgot.  Blind to a restart that happens to
    land in the range (the epochs between as many as seq0, or 2^15 and more), and to compact
    frames, which carry no sequence."""
    d = (seq - seq0) % SEQ_MOD
    if epoch == epoch0:
        return d >= SEQ_MOD // 2
    return d == 0 or d > epoch - epoch0


def open_store(location, cfg=None, campaign=None):
    """The store at ``location``: a ``postgresql://`` URL or an SQLite file path.
    ``campaign``: the one the caller means to collect, named if the config differs."""
    location = str(location)
    if location.startswith(("postgresql://", "postgres://")):
        return PostgresStore(location, cfg, campaign)
    return SqliteStore(location, cfg, campaign)


class Store:
    """One campaign's reports under one config.  Subclasses give the connection,
    the dialect's types and placeholders, and transactions."""

    TYPES = {}
    FOR_UPDATE = ""  # a row lock for the transaction's rest (SQLite: the write transaction holds the file)
    quarantine_max_rows = QUARANTINE_MAX_ROWS
    extra_max = EXTRA_MAX

    def _open(self, cfg, campaign=None):
        meta = self._read_meta()
        if meta.get("schema") != str(SCHEMA_VERSION) or "config" not in meta:
            meta = self._set_up(cfg)  # only then write: readers may hold read-only rights
        if "config" not in meta:
            raise StoreError(f"{self.name}: empty store and no config given")
        stored = load_dict(json.loads(meta["config"]), source=f"{self.name}: config")
        if cfg is not None and cfg.config_id != stored.config_id:
            recorded = meta.get("campaign")
            raise with_remedy(ConfigError, f"{self.name} holds reports of config {stored.config_id_hex}"
                              + (f" (campaign {recorded!r})" if recorded else "")
                              + f", not {cfg.config_id_hex}" + (f" (campaign {campaign!r})" if campaign else ""),
                              "another-store")
        self.cfg = stored
        self.mode = meta.get("reports_from")  # DEVICES, SHUFFLER, or None: nothing recorded yet

    def record_mode(self, mode):
        """Record who sends this store its reports (DEVICES, or SHUFFLER for
        ``mss aggregate --shuffled``) on first use (the first writer wins; a store of
        an older aggregator with reports is a DEVICES one); StoreError if it is the other."""
        if mode not in (DEVICES, SHUFFLER):
            raise ValueError(f"mode must be {DEVICES!r} or {SHUFFLER!r}, got {mode!r}")
        older = self.mode is None and self._query("SELECT 1 FROM reports LIMIT 1")
        recorded = self.remembered("reports_from", lambda: DEVICES if older else mode)
        self.mode = recorded
        if recorded != mode:
            raise with_remedy(StoreError, f"{self.name} holds " + ("a shuffler's batches (a shuffled store)"
                                                                   if recorded == SHUFFLER else "reports of devices")
                              + ", not " + ("a shuffler's batches" if mode == SHUFFLER else "device reports")
                              + ": a store takes one or the other (an aggregator of shuffled batches never "
                                "holds a device id)", "another-store")
        return recorded

    def campaign(self):
        """The campaign name the aggregator recorded here (str), or None: a store no
        aggregator has collected into since stores record their campaign."""
        return self._read_meta().get("campaign")

    def record_campaign(self, campaign):
        """Record ``campaign`` as this store's on first use (workers starting together
        agree: the first writer wins); StoreError naming both campaigns and the config
        if the store holds another one, whose topics the caller would not hear."""
        recorded = self.remembered("campaign", lambda: campaign)
        if recorded != campaign:
            cid = self.cfg.config_id_hex
            raise with_remedy(StoreError, f"{self.name} holds campaign {recorded!r} (config {cid}), not campaign "
                                          f"{campaign!r} (config {cid})", "recorded-campaign", recorded=recorded)
        return recorded

    def _read_meta(self):
        try:
            with closing(self.db.cursor()) as cur:
                return dict(self._exec(cur, "SELECT key, value FROM meta").fetchall())
        except self.NO_TABLE:
            return {}

    def _set_up(self, cfg):
        """Create or migrate the schema and store the config, in one locked transaction."""
        with self._transaction() as cur:
            self._lock(cur)
            self._exec(cur, MIGRATIONS[0][1][0])
            meta = dict(self._exec(cur, "SELECT key, value FROM meta").fetchall())
            version = int(meta.get("schema", 0))
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.name}: schema version {version} is newer than this "
                                 f"program's {SCHEMA_VERSION}; upgrade mss-iot")
            for v, statements in MIGRATIONS:
                if v > version:
                    for sql in statements:
                        self._exec(cur, sql.format(**self.TYPES))
            self._exec(cur, "INSERT INTO meta VALUES ('schema', ?) ON CONFLICT (key) DO UPDATE "
                            "SET value = excluded.value", (str(SCHEMA_VERSION),))
            meta["schema"] = str(SCHEMA_VERSION)
            if "config" not in meta and cfg is not None:
                meta["config"] = json.dumps(cfg.to_dict())
                self._exec(cur, "INSERT INTO meta VALUES ('config', ?)", (meta["config"],))
        return meta

    def remembered(self, key, make):
        """The value of ``meta`` key ``key``, stored as ``make()`` on first use
        (e.g. the aggregator's generated MQTT client id, which must survive
        restarts); the first writer wins, so workers starting together agree."""
        value = self._read_meta().get(key)
        if value is not None:
            return value
        with self._transaction() as cur:
            self._exec(cur, "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO NOTHING", (key, make()))
            return self._exec(cur, "SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0]

    def _lock(self, cur, key=None):
        """Serialise schema set-up, or (``key`` "quarantine") the quarantine cap,
        between processes (SQLite: the write transaction does)."""

    def _lock_epoch(self, cur, cid, device, epoch):
        """Serialise the extras of one (config, device, epoch) between
        processes, for the extras cap (SQLite: the write transaction does)."""

    def _sql(self, sql):
        """``sql`` in the driver's placeholders."""
        return sql

    def _exec(self, cur, sql, args=()):
        cur.execute(self._sql(sql), args)
        return cur

    def close(self):
        self.db.close()

    # -- writing (one batch = one transaction) -------------------------------
    def check_writable(self):
        """Commit a write that changes nothing, or raise StoreError: the
        aggregator checks before it subscribes, so a read-only store is
        refused at the start, not at the first report."""
        try:
            with self._transaction() as cur:
                self._exec(cur, "UPDATE meta SET value = value WHERE key = 'schema'")
        except self.ERRORS as exc:
            raise StoreError(f"{self.name}: the store is not writable: {exc}") from None

    def write_batch(self, items):
        """Store a batch of classified messages; return per-item outcomes.

        ``items``: dicts with ``source``, ``topic``, ``payload`` and either
        ``reason`` and ``detail`` (quarantine; optional ``length`` and
        ``sha256`` of what arrived) or ``device_id`` and ``report``.
        Outcomes: "accepted", "extra", "duplicate" or "quarantined" (whether
        or not the quarantine row was kept under the cap).  An item with
        ``skip`` (a link), ``device_id`` and ``epoch`` is a board's skipped
        epoch (its status): counted once per (link, device, epoch) as
        ``skipped_<link>``, not as received (outcome "skipped"; "duplicate"
        when seen before, "ignored" with epoch None: outside the window).  A
        batch that cannot be committed raises StoreError (and nothing of it
        is stored).
        """
        try:
            for attempt in range(RETRIES):
                try:
                    return self._write(items)
                except self.RETRYABLE:
                    if attempt == RETRIES - 1:
                        raise
                    time.sleep(0.05 * (attempt + 1))
        except self.ERRORS as exc:
            raise StoreError(f"{self.name}: cannot store reports: {exc}") from None

    def _write(self, items):
        now = time.time()
        self._check_mode(items)
        outcomes, bump = {}, {"received": sum(len(it["batch"].bodies) if "batch" in it else 1
                                              for it in items if "skip" not in it)}
        cid = self.cfg.config_id_hex
        insert = ("INSERT INTO reports (config_id, device_id, epoch, seq, j, subset, payload, source, "
                  "received, status) VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING")

        def key(i):  # (device, epoch) order: concurrent workers take row locks in one order, and
            it = items[i]  # the stable sort keeps arrival order within an epoch (first one counts)
            if "batch" in it:  # batches in batch id order, for the same reason
                return (0, it["batch"].batch_id_hex, 0)
            if "reason" in it or "ignored" in it or "skip" in it:
                return (0, "", 0)
            return (1, it["device_id"], it["report"].epoch)
        with self._transaction() as cur:
            room = [self._quarantine_room(cur) if any("reason" in it or it.get("bad") for it in items) else 0]
            for i in sorted(range(len(items)), key=key):
                it = items[i]
                if "skip" in it:  # a skipped epoch: once per (link, device, epoch)
                    outcomes[i] = self._skip(cur, it, now, bump)
                    continue
                if "batch" in it:  # a shuffler's batch: its reports and bad bodies count themselves
                    outcomes[i] = self._batch(cur=cur, it=it, now=now, bump=bump, room=room)
                    continue
                if "ignored" in it:  # no report (a time probe): counted only
                    outcome = counter = it["ignored"]
                elif "reason" in it:
                    outcome, counter = self._quarantine(cur=cur, it=it, now=now, bump=bump, room=room)
                else:
                    r = it["report"]
                    row = (cid, it["device_id"], r.epoch, r.seq, r.j,
                           np.asarray(r.subset, dtype="<u4").tobytes(), it["payload"], it["source"], now)
                    if self._exec(cur, insert, row + ("accepted",)).rowcount == 1:
                        outcome = counter = "accepted"
                    else:  # the epoch has its accepted report
                        outcome, counter, dropped = self._extra(cur, row, insert)
                        if dropped:
                            bump["extra_dropped"] = bump.get("extra_dropped", 0) + 1
                    if outcome != "duplicate" and r.frame == "full":
                        self._sequence(cur=cur, device=it["device_id"], epoch=r.epoch, seq=r.seq, now=now, bump=bump)
                outcomes[i] = outcome
                bump[counter] = bump.get(counter, 0) + 1
            for name in sorted(bump):
                self._exec(cur, "INSERT INTO counters VALUES (?, ?) ON CONFLICT (name) "
                                "DO UPDATE SET value = counters.value + excluded.value", (name, bump[name]))
        return [outcomes[i] for i in range(len(items))]

    def _check_mode(self, items):
        """StoreError for a device report into a shuffled store or a batch into any other."""
        shuffled = self.mode == SHUFFLER
        wrong = next((it for it in items if (("report" in it or "skip" in it) if shuffled else "batch" in it)), None)
        if wrong is not None:
            raise StoreError(f"{self.name}: " + (
                "a shuffled store (one of a shuffler's batches) takes no report or status of a device"
                if shuffled else "a shuffler's batch goes to a shuffled store only (one that records "
                                 "batches), not to one of device reports") + "; nothing of this batch is stored")

    def _quarantine(self, cur, it, now, bump, room):
        """Keep quarantine item ``it`` while ``room[0]`` (the rows the cap allows) lasts;
        (outcome, counter)."""
        if room[0] > 0:
            self._exec(cur, "INSERT INTO quarantine (received, source, topic, payload, reason, "
                            "length, sha256) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (now, it["source"], it["topic"], it["payload"],
                        f"{it['reason']}: {it.get('detail', '')}", it.get("length"), it.get("sha256")))
            room[0] -= 1
        else:
            bump["quarantine_dropped"] = bump.get("quarantine_dropped", 0) + 1
        return "quarantined", f"rejected_{it['reason']}"

    def _batch(self, cur, it, now, bump, room):
        """Store shuffled batch ``it`` (``batch``: a ShuffledBatch, ``reports``: [(position,
        Report)] of its bodies that decoded, ``bad``: quarantine items of those that did not):
        "accepted", or "duplicate" when its batch id is stored (every body counted duplicate)."""
        b, n = it["batch"], len(it["batch"].bodies)
        cid = self.cfg.config_id_hex
        if self._exec(cur, "INSERT INTO shuffle_batches (batch_id, config_id, epoch, first_epoch, n, reports, "
                           "received, colluding) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                      (b.batch_id_hex, cid, b.epoch, b.first_epoch, n, len(it["reports"]), now,
                       b.colluding)).rowcount != 1:
            bump["duplicate"] = bump.get("duplicate", 0) + n
            bump["duplicate_batches"] = bump.get("duplicate_batches", 0) + 1
            return "duplicate"
        # a new batch id: its slots are new too, so a conflict here is a bug, and raises
        cur.executemany(self._sql("INSERT INTO reports (config_id, device_id, epoch, seq, j, subset, payload, "
                                  "source, received, status) VALUES (?,?,?,?,?,?,?,?,?,'accepted')"),
                        [(cid, slot(b.batch_id_hex, pos), r.epoch, pos, r.j,
                          np.asarray(r.subset, dtype="<u4").tobytes(), b.bodies[pos], SHUFFLER, now)
                         for pos, r in it["reports"]])
        for q in it["bad"]:
            _, counter = self._quarantine(cur=cur, it=q, now=now, bump=bump, room=room)
            bump[counter] = bump.get(counter, 0) + 1
        bump["accepted"] = bump.get("accepted", 0) + len(it["reports"])
        bump["batches"] = bump.get("batches", 0) + 1
        return "accepted"

    def _skip(self, cur, it, now, bump):
        if it["epoch"] is None or it["skip"] not in LINKS:
            return "ignored"
        if self._exec(cur, "INSERT INTO skips (link, device_id, epoch, received) VALUES (?, ?, ?, ?) "
                           "ON CONFLICT DO NOTHING", (it["skip"], it["device_id"], it["epoch"], now)).rowcount != 1:
            return "duplicate"
        name = "skipped_" + it["skip"]
        bump[name] = bump.get(name, 0) + 1
        return "skipped"

    def _sequence(self, cur, device, epoch, seq, now, bump):
        """Follow ``device``'s full-frame sequence: a report newer than its newest (or in the
        same epoch) whose sequence :func:`went_back` counts a state reset (``state_resets``, and
        the device's ``resets``); an older one (delivered late) changes nothing."""
        if self._exec(cur, "INSERT INTO sequences (device_id, epoch, seq, resets) VALUES (?, ?, ?, 0) "
                           "ON CONFLICT DO NOTHING", (device, epoch, seq)).rowcount == 1:
            return  # its first
        epoch0, seq0 = self._exec(cur, "SELECT epoch, seq FROM sequences WHERE device_id = ?" + self.FOR_UPDATE,
                                  (device,)).fetchone()
        if epoch < int(epoch0):
            return
        if went_back(int(epoch0), int(seq0), epoch, seq):
            self._exec(cur, "UPDATE sequences SET epoch = ?, seq = ?, resets = resets + 1, reset_epoch = ?, "
                            "reset_received = ? WHERE device_id = ?", (epoch, seq, epoch, now, device))
            bump["state_resets"] = bump.get("state_resets", 0) + 1
        else:
            self._exec(cur, "UPDATE sequences SET epoch = ?, seq = ? WHERE device_id = ?", (epoch, seq, device))

    def _extra(self, cur, row, insert):
        """(outcome, counter, dropped) of a report whose epoch has an accepted
        one: a duplicate of a stored row, an extra stored while the epoch has
        fewer than ``extra_max``, else an extra counted but not stored."""
        cid, device, epoch, seq = row[:4]
        stored = ("SELECT 1 FROM reports WHERE config_id = ? AND device_id = ? AND epoch = ? AND seq = ?",
                  (cid, device, epoch, seq))
        if self._exec(cur, *stored).fetchone():  # a redelivery: the common case, no lock needed
            return "duplicate", "duplicate", False
        self._lock_epoch(cur, cid, device, epoch)  # from here on no other worker adds extras to this epoch
        have = self._exec(cur, "SELECT COUNT(*) FROM (SELECT 1 FROM reports WHERE config_id = ? AND device_id = ? "
                               "AND epoch = ? AND status = 'extra' LIMIT ?) e",
                          (cid, device, epoch, self.extra_max)).fetchone()[0]
        if int(have) < self.extra_max:
            if self._exec(cur, insert, row + ("extra",)).rowcount == 1:
                return "extra", "rejected_extra_in_epoch", False
            return "duplicate", "duplicate", False  # stored by another worker meanwhile
        if self._exec(cur, *stored).fetchone():  # stored by another worker before we had the lock
            return "duplicate", "duplicate", False
        return "extra", "rejected_extra_in_epoch", True

    def _quarantine_room(self, cur):
        """Rows the quarantine table may still take (rows deleted by hand make
        room again); taken under a lock so that workers together keep the cap.
        The lock comes first in the transaction, before any report's row lock."""
        self._lock(cur, "quarantine")
        cap = self.quarantine_max_rows
        have = self._exec(cur, "SELECT COUNT(*) FROM (SELECT 1 FROM quarantine LIMIT ?) q", (cap,)).fetchone()[0]
        return cap - int(have)

    def set_clock(self, clock):
        """Record the campaign clock (``{"period_s", "epoch_origin",
        "accept_past_epochs"}``, or None) for readers: the default estimate
        needs the current epoch (:mod:`.scope`)."""
        self._set_meta("clock", clock)

    def clock(self):
        """The campaign clock of the last aggregator that wrote here, or None."""
        value = self._read_meta().get("clock")
        return json.loads(value) if value else None

    def record_memoize(self, memoize):
        """Record whether the boards memoize their reports (the config's ``device.memoize``)
        for readers: pooled standard errors are widened for memoized copies only
        (:mod:`.scope`).  Once an aggregator recorded true the store keeps it: the
        copies sent then are still in it."""
        self._set_meta("memoize", bool(memoize) or self.memoized() is True)

    def memoized(self):
        """True or False as the aggregators recorded it (:meth:`record_memoize`), or None
        for a store written before they did (unknown: :mod:`.scope` widens as if memoized)."""
        value = self._read_meta().get("memoize")
        return None if value is None else bool(json.loads(value))

    def set_categories(self, categories):
        """Record the config's names and order of the items
        (:class:`mss_protocol.categories.Categories`) for the views."""
        self._set_meta("categories", categories.to_dict())

    def categories(self):
        """The :class:`~mss_protocol.categories.Categories` the last aggregator recorded
        (names and order are display only: a config's may change between runs)."""
        from mss_protocol.categories import from_config

        value = self._read_meta().get("categories")
        return from_config(json.loads(value) if value else {}, self.cfg.k, f"{self.name}: categories")

    def _set_meta(self, key, doc):
        """meta ``key`` = ``doc`` as JSON, written only when it changed (readers may be read-only)."""
        value = json.dumps(doc, sort_keys=True)
        if self._read_meta().get(key) != value:
            with self._transaction() as cur:
                self._exec(cur, "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                                "SET value = excluded.value", (key, value))

    # -- reading ------------------------------------------------------------
    def _query(self, sql, args=()):
        try:
            with closing(self.db.cursor()) as cur:
                return self._exec(cur, sql, args).fetchall()
        except self.ERRORS as exc:
            raise StoreError(f"{self.name}: cannot read the store: {exc}") from None

    def counters(self):
        """{"received", "accepted", "duplicate", "rejected", "rejected_<reason>": ...,
        "time_probes", "quarantine_dropped", "extra_dropped"}: received = accepted +
        duplicate + rejected + time_probes (LoRaWAN uplinks on ``time_fport``: no
        report, present once non-zero); ``quarantine_dropped`` and
        ``extra_dropped`` (each present once non-zero) count rejected messages
        whose quarantine row, or extra row, a cap left out.  A shuffled store counts
        reports too (a batch of n bodies is n received), a batch refused whole as one
        message, and its batches stored and re-published (``batches``,
        ``duplicate_batches``, present once non-zero)."""
        c = {k: int(v) for k, v in self._query("SELECT name, value FROM counters")}
        out = {name: c.get(name, 0) for name in ("received", "accepted", "duplicate")}
        out["rejected"] = sum(v for k, v in c.items() if k.startswith("rejected_"))
        out.update(sorted((k, v) for k, v in c.items() if k.startswith("rejected_")))
        for name in ("time_probes", "quarantine_dropped", "extra_dropped", "batches", "duplicate_batches"):
            if c.get(name):
                out[name] = c[name]
        return out

    def quarantined(self, reason=None, limit=50):
        """(rows matching, the newest ``limit`` of them, newest first) of the quarantine
        table, of reason code ``reason`` only if given (``wire_config``, ``topic``, ...).
        A row: dict of id, received (unix time), source, topic (bytes, None for serial),
        reason, detail, length (None in rows of schema < 3), sha256 and payload (the
        bytes kept, at most the first 4 KiB)."""
        where, args = "", ()
        if reason is not None:  # stored as "<reason>: <detail>"
            where, args = " WHERE substr(reason, 1, ?) = ?", (len(reason) + 2, reason + ": ")
        total = self._query("SELECT COUNT(*) FROM quarantine" + where, args)[0][0]
        rows = self._query("SELECT id, received, source, topic, payload, reason, length, sha256 FROM quarantine"
                           + where + " ORDER BY id DESC LIMIT ?", args + (limit,))
        out = []
        for qid, received, source, topic, payload, text, length, sha in rows:
            code, _, detail = text.partition(": ")
            out.append({"id": int(qid), "received": float(received), "source": source,
                        "topic": None if topic is None else bytes(topic), "reason": code, "detail": detail,
                        "length": None if length is None else int(length), "sha256": sha,
                        "payload": None if payload is None else bytes(payload)})
        return int(total), out

    def state_resets(self, limit=100):
        """{"events", "devices", "newest"}: the times a device's full-frame sequence went back
        (its state file started again: deleted, corrupt, a reflash; :func:`went_back`), the
        devices it happened to, and the ``limit`` of them with the newest reset, newest first:
        dicts of device_id, resets, epoch (the last reset's) and received (unix time).  Not in
        :meth:`counters`: no outcome of a message (the report itself is accepted or extra)."""
        events = self._query("SELECT value FROM counters WHERE name = 'state_resets'")
        devices = self._query("SELECT COUNT(*) FROM sequences WHERE resets > 0")[0][0]
        rows = self._query("SELECT device_id, resets, reset_epoch, reset_received FROM sequences WHERE resets > 0 "
                           "ORDER BY reset_received DESC, device_id LIMIT ?", (limit,))
        return {"events": int(events[0][0]) if events else 0, "devices": int(devices),
                "newest": [{"device_id": d, "resets": int(n), "epoch": int(e), "received": float(t)}
                           for d, n, e, t in rows]}

    def skipped_epochs(self):
        """{"mqtt": n, "serial": n, "lorawan": n}: the epochs boards skipped (device.budget
        spent and no memo of their value), each (link, device, epoch) once."""
        c = {k: int(v) for k, v in self._query("SELECT name, value FROM counters")}
        return {link: c.get("skipped_" + link, 0) for link in LINKS}

    excluded = frozenset()  # device ids whose reports counts() and tally() leave out (exclude_devices)

    def exclude_devices(self, devices):
        """Leave the reports of ``devices`` (device ids) out of :meth:`counts` and :meth:`tally`
        from now on (``mss estimate --exclude-suspects``: :mod:`mss_aggregator.integrity.detect`)."""
        self.excluded = frozenset(devices)

    def _without_excluded(self, sql, args):
        """``sql`` (a WHERE clause's end) and ``args`` with the excluded devices left out."""
        if not self.excluded:
            return sql, args
        ids = sorted(self.excluded)
        return sql + f" AND device_id NOT IN ({', '.join('?' * len(ids))})", args + tuple(ids)

    def counts(self, epoch=None):
        """The additive counts of the accepted reports (vectorised tally), of one
        ``epoch`` only if given (memoized reports repeat across epochs, so a
        campaign with ``device.memoize`` is decoded one epoch at a time)."""
        sql, args = "SELECT j, subset FROM reports WHERE status='accepted'", ()
        if epoch is not None:
            sql, args = sql + " AND epoch=?", (epoch,)
        rows = self._query(*self._without_excluded(sql, args))
        j = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        blobs = [bytes(r[1]) for r in rows]
        sizes = np.fromiter((len(b) // 4 for b in blobs), dtype=np.int64, count=len(rows))
        members = np.frombuffer(b"".join(blobs), dtype="<u4").astype(np.int64)
        return Counts(self.cfg).add_tally(j, members, sizes)

    def epoch_devices(self, epochs):
        """{epoch: devices with an accepted report} of the given ``epochs`` (absent: none)."""
        epochs = [int(e) for e in epochs]
        if not epochs:
            return {}
        rows = self._query("SELECT epoch, COUNT(*) FROM reports WHERE status='accepted' AND epoch IN "
                           f"({', '.join('?' * len(epochs))}) GROUP BY epoch", tuple(epochs))
        return {int(e): int(c) for e, c in rows}

    def fullest_epoch(self, until=None):
        """(epoch, devices) of the epoch with the most devices (ties: the latest;
        none after ``until`` if given), or None without accepted reports."""
        sql, args = "SELECT epoch, COUNT(*) AS c FROM reports WHERE status='accepted'", ()
        if until is not None:
            sql, args = sql + " AND epoch <= ?", (until,)
        rows = self._query(sql + " GROUP BY epoch ORDER BY c DESC, epoch DESC LIMIT 1", args)
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def tally(self, epoch=None):
        """(reports, devices, sum over devices of their reports squared, epochs)
        of the accepted reports, of ``epoch`` only if given: the size of an
        estimate and what its pooled standard errors are widened by.

        A shuffled store knows no device: a device has at most one report in
        each campaign epoch (the shuffler's check), so R_d <= C, the campaign
        epochs the batches cover (first_epoch..epoch of each: a merged batch
        covers several), the sum of squares is at most C N (N reports), and the
        devices are at least the largest batch's reports (one body a device;
        a batch of an older shuffler, which counted reports, r reports over s
        epochs: at least r / s devices).  It returns
        those bounds, so standard errors are widened by sqrt(C), as if every
        device had reported in every epoch covered (:mod:`.scope`)."""
        where, args = "status='accepted'", ()
        if epoch is not None:
            where, args = where + " AND epoch=?", (epoch,)
        where, args = self._without_excluded(where, args)
        if self.mode == SHUFFLER:
            per_epoch = f"SELECT COUNT(*) AS c FROM reports WHERE {where} GROUP BY epoch"
            reports, epochs = self._query(f"SELECT SUM(c), COUNT(*) FROM ({per_epoch}) e", args)[0]
            reports, epochs = int(reports or 0), int(epochs or 0)
            batches = self.shuffle_batches(None if epoch is None else [epoch])
            fullest = max((stored if colluding is not None else -(-stored // (last - first + 1))
                           for last, first, _, stored, colluding in batches), default=0)
            return reports, fullest, reports * covered_epochs(batches), epochs
        per_device = f"SELECT COUNT(*) AS c FROM reports WHERE {where} GROUP BY device_id"
        reports, devices, squares = self._query(f"SELECT SUM(c), COUNT(*), SUM(c * c) FROM ({per_device}) d",
                                                args)[0]
        epochs = self._query(f"SELECT COUNT(DISTINCT epoch) FROM reports WHERE {where}", args)[0][0]
        return tuple(int(v or 0) for v in (reports, devices, squares, epochs))

    def shuffle_batches(self, epochs=None):
        """[(epoch, first_epoch, n bodies, reports stored, colluding)] of the shuffler's batches
        stored (of the release ``epochs`` only, if given), by epoch: what the central
        guarantee of a shuffled store's release is computed from.  ``colluding`` is None
        for a batch of format version 1, whose bodies were not one a device."""
        sql, args = "SELECT epoch, first_epoch, n, reports, colluding FROM shuffle_batches", ()
        if epochs is not None:
            epochs = [int(e) for e in epochs]
            if not epochs:
                return []
            sql, args = sql + f" WHERE epoch IN ({', '.join('?' * len(epochs))})", tuple(epochs)
        return [tuple(None if v is None else int(v) for v in row)
                for row in self._query(sql + " ORDER BY epoch, first_epoch, n", args)]

    def devices_per_epoch(self, last=48):
        """[(epoch, devices with an accepted report)] for the ``last`` epochs seen, oldest first;
        for a shuffled store the devices an epoch's release has at least (its largest batch's:
        one body a device; never its reports, which may count a device once a batch)."""
        if self.mode == SHUFFLER:
            most = {}
            for epoch, first, _, stored, colluding in self.shuffle_batches():
                if stored:
                    d = stored if colluding is not None else -(-stored // (epoch - first + 1))
                    most[epoch] = max(most.get(epoch, 0), d)
            return sorted(most.items())[-last:] if last > 0 else []
        rows = self._query("SELECT epoch, COUNT(*) FROM reports WHERE status='accepted' "
                           "GROUP BY epoch ORDER BY epoch DESC LIMIT ?", (last,))
        return [(int(e), int(c)) for e, c in reversed(rows)]

    def first_epoch(self):
        """The campaign's first epoch with an accepted report, or None (the dashboard's loss so far)."""
        rows = self._query("SELECT MIN(epoch) FROM reports WHERE status='accepted'")
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    def report_epochs(self):
        """[(device_id, epoch, status)] of every stored report, accepted and extra (for a
        campaign's once-per-epoch check, ``mss demo --epochs``)."""
        return [(d, int(e), s) for d, e, s in self._query("SELECT device_id, epoch, status FROM reports")]

    def accepted_reports(self):
        """[(device_id, epoch, j, subset blob)] of every accepted report, by device and epoch (the
        per-device tests of :mod:`mss_aggregator.integrity.detect`)."""
        return self._query("SELECT device_id, epoch, j, subset FROM reports WHERE status='accepted' "
                           "ORDER BY device_id, epoch")

    def accepted_keys(self):
        """Set of (device_id, epoch, seq) of accepted reports (for audits and tests)."""
        return set(map(tuple, self._query("SELECT device_id, epoch, seq FROM reports "
                                          "WHERE status='accepted'")))


def covered_epochs(batches):
    """How many campaign epochs the ``batches`` ([(epoch, first_epoch, ...)]) cover together:
    the size of the union of their ranges first_epoch..epoch."""
    count, end = 0, -1
    for first, last in sorted((b[1], b[0]) for b in batches):
        if last > end:
            count += last - max(first, end + 1) + 1
            end = last
    return count


def slot(batch_id_hex, position):
    """The ``device_id`` of a shuffled report: its batch and its position in the
    permuted batch (no device's name, nothing of its arrival)."""
    return f"shuffled-{batch_id_hex}-{position}"


class SqliteStore(Store):
    """One file, WAL journal, synchronous=FULL: the embedded default for one worker."""

    TYPES = {"id": "INTEGER PRIMARY KEY", "blob": "BLOB", "real": "REAL"}
    RETRYABLE = ()

    def __init__(self, path, cfg=None, campaign=None):
        import sqlite3

        self.NO_TABLE, self.ERRORS = sqlite3.OperationalError, sqlite3.Error
        if cfg is None and not os.path.exists(path):
            raise StoreError(f"{path}: no such store")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise StoreError(f"{path}: no such directory {folder}")
        self.location = self.name = str(path)
        self.opened_writable = False  # known once open
        try:
            self.db = sqlite3.connect(self.name, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self._open(cfg, campaign)
        except sqlite3.Error as exc:
            hint = "" if os.access(folder, os.W_OK) else (
                f" (the folder {folder} is read-only, and SQLite's WAL mode creates "
                f"{os.path.basename(path)}-shm there)")
            raise StoreError(f"{path}: cannot open the store: {exc}{hint}") from None
        self.opened_writable = self._unwritable() is None

    def _unwritable(self):
        """The first of the store's files that cannot be written (read-only,
        immutable, on a read-only mount), or None."""
        for path in (self.name, self.name + "-wal", self.name + "-shm"):
            if os.path.exists(path) and not os.access(path, os.W_OK):
                return path
        return None

    def _check_still_writable(self, doing):
        """Raise StoreError if files that were writable no longer are: SQLite's
        index of the WAL is a memory map of -shm, which reads update too, and
        touching the map of a file made immutable since kills the process with
        SIGBUS before any error is seen."""
        path = self.opened_writable and self._unwritable()
        if path:
            raise StoreError(f"{self.name}: cannot {doing}: {path} is no longer writable (read-only or immutable)")

    def write_batch(self, items):
        self._check_still_writable("store reports")
        return super().write_batch(items)

    def _query(self, sql, args=()):
        self._check_still_writable("read the store")
        return super()._query(sql, args)

    def close(self):
        """Close, unless files that were writable no longer are: closing
        checkpoints the WAL through that memory map (SIGBUS), so the
        connection is kept open in ABANDONED and the process must end with
        ``os._exit``.  What was committed is in the WAL, and the next open
        recovers it."""
        if self.opened_writable and self._unwritable():
            ABANDONED.append(self.db)
            return
        self.db.close()

    @contextmanager
    def _transaction(self):
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
            self._check_still_writable("store reports")  # the last moment before COMMIT writes -shm
            cur.execute("COMMIT")
        except BaseException:
            # SQLite itself rolls back after some failures (a full disk); a rollback writes -shm too,
            # so with files made immutable meanwhile it is left to the exit (the connection is abandoned)
            if self.db.in_transaction and not (self.opened_writable and self._unwritable()):
                cur.execute("ROLLBACK")
            raise
        finally:
            cur.close()


class PostgresStore(Store):
    """PostgreSQL through psycopg 3: the shared store of several workers."""

    TYPES = {"id": "BIGSERIAL PRIMARY KEY", "blob": "BYTEA", "real": "DOUBLE PRECISION"}
    LOCK_ID = 0x6D73_7369  # advisory lock key of schema set-up ("mssi"); + 1: the quarantine cap
    FOR_UPDATE = " FOR UPDATE"

    def __init__(self, url, cfg=None, campaign=None):
        import psycopg

        self.location, self.name = url, url.split("@")[-1]  # never print a password
        self.RETRYABLE = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
        self.NO_TABLE, self.ERRORS = psycopg.errors.UndefinedTable, psycopg.Error
        try:
            self.db = psycopg.connect(url, autocommit=True)
        except psycopg.OperationalError as exc:
            raise StoreError(f"cannot connect to PostgreSQL at {self.name}: {str(exc).strip()}") from None
        try:
            self._open(cfg, campaign)
        except psycopg.Error as exc:
            raise StoreError(f"{self.name}: cannot open the store: {str(exc).strip()}") from None

    def _sql(self, sql):
        return sql.replace("?", "%s")

    def _lock(self, cur, key=None):
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (self.LOCK_ID + (key == "quarantine"),))

    def _lock_epoch(self, cur, cid, device, epoch):
        # the epoch's accepted row, committed (or ours): a worker that waited here then counts, in a
        # new statement (READ COMMITTED), the extras the other one committed
        self._exec(cur, "SELECT 1 FROM reports WHERE config_id = ? AND device_id = ? AND epoch = ? "
                        "AND status = 'accepted' FOR UPDATE", (cid, device, epoch))

    @contextmanager
    def _transaction(self):
        with self.db.transaction(), self.db.cursor() as cur:
            yield cur
