"""The shuffler's durable queue: identity checks, held bodies, batches not yet forwarded.

One SQLite file (WAL, ``synchronous=FULL``, ``secure_delete=ON``), written
by the collectors' :class:`~mss_aggregator.collect.collectors.Writer`
through :meth:`ShuffleQueue.write_batch`, the interface of a store: a batch
of classified messages is committed in one transaction before the Writer
acknowledges any of it, so an acknowledged report survives ``kill -9``.

Tables, and why each holds what it holds:

* ``seen (config_id, device, epoch, seq)``, one row per (config, device,
  epoch): the rule one report per device per epoch.  ``device`` is
  HMAC-SHA256(shuffle key, "mss-shuffle-device" || id) cut to 16 bytes, so the
  file holds no device id (a reader without the key cannot test a guessed id
  either).  A report whose (device, epoch) is there with the same ``seq`` is a
  redelivery (``duplicate``); with another ``seq`` it is a second report
  (``extra``: counted as ``rejected_extra_in_epoch``, not kept, so its
  redelivery is counted again).  Rows of epochs before the window of accepted
  epochs are pruned (:meth:`ShuffleQueue.prune`): the ingest refuses those epochs anyway.
* ``held (k, epoch, dev, body)``: each accepted report's compact frame under a
  random 16-byte key ``k``, ``WITHOUT ROWID``, so the b-tree is ordered by
  ``k``: the file keeps no arrival order.  ``dev`` is a second keyed digest of
  the device, HMAC-SHA256(shuffle key, "mss-shuffle-held" || id) cut to 16
  bytes: another label than ``seen``'s, so no value of the file equals a
  ``seen`` row's and nothing links a body to one but the epoch they share (an
  epoch of one device is that device's report: which is why a batch is never
  forwarded below ``--min-batch`` devices).  It is what lets a batch take **at
  most one body a device** (:meth:`ShuffleQueue.make_batch`), so that a
  batch's n is its distinct devices, the n of the amplification theorems:
  counting reports, one board's queue of 34 epochs merged into a batch counted
  34 times, and 3 compromised boards made a "batch of 100" around one victim
  (issue 44).  The cost: while a device's bodies of several epochs are held,
  a reader of the file links them to one another (never to the device without
  the key); they leave the file with their batch.
* ``batches (batch_id, epoch, n, data)``: a batch written in the same
  transaction that deletes its bodies from ``held``, deleted once the
  forward broker acknowledged it (PUBACK); on restart the rows left are
  published again with the same batch id, which the aggregator drops if it
  has it.
* ``counters``, ``meta`` (config, campaign, the key's fingerprint, the MQTT
  client nonce).

Deleted rows are overwritten (``secure_delete``) and the WAL is truncated
after each forwarded batch (``wal_checkpoint(TRUNCATE)``), so a forwarded
body's bytes do not stay in either file.  The permutation is
``random.SystemRandom().shuffle``: Fisher-Yates whose every index is drawn by
``_randbelow``, rejection sampling on ``getrandbits``, i.e. on ``os.urandom``
bytes, so each of the n! orders has probability exactly 1/n! (no modulo
bias; Knuth, TAOCP vol. 2, section 3.4.2, algorithm P).
"""
import hashlib
import hmac
import os
import random
import sqlite3
from contextlib import contextmanager

from mss_aggregator.remedies import with_remedy
from mss_protocol.shuffled_batch import BATCH_ID_BYTES, DEFAULT_COLLUDING, compact_body, encode_batch

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS seen (config_id TEXT NOT NULL, device BLOB NOT NULL, epoch INTEGER NOT NULL,
       seq INTEGER NOT NULL, PRIMARY KEY (config_id, device, epoch)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS held (k BLOB PRIMARY KEY, epoch INTEGER NOT NULL, dev BLOB NOT NULL,
       body BLOB NOT NULL) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS batches (batch_id BLOB PRIMARY KEY, epoch INTEGER NOT NULL, n INTEGER NOT NULL,
       data BLOB NOT NULL) WITHOUT ROWID""",
    "CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
]
KEY_BYTES = 16  # of a held body's random key and of a device's keyed digest
DEVICE_LABEL = b"mss-shuffle-device\0"
HELD_LABEL = b"mss-shuffle-held\0"
FINGERPRINT_LABEL = b"mss-shuffle-fingerprint\0"


class QueueError(RuntimeError):
    """The queue file cannot be opened or written; the message names the file and the cause."""


class ShuffleQueue:
    """The queue at ``path`` for config ``cfg`` of ``campaign``, under the shuffle ``key``;
    its batches say that ``colluding`` of their devices may collude with the aggregator
    (``mss shuffle --assume-colluding``, SPEC.md section 12).

    A file made for another config, campaign or key is refused (QueueError): its
    ``seen`` digests would not match, and one device could report twice in an epoch.
    So is a file of an older shuffler holding reports without their ``dev`` digest
    (they could not be batched one a device)."""

    def __init__(self, path, cfg, campaign, key, colluding=DEFAULT_COLLUDING):
        self.name, self.cfg, self.campaign, self.key = str(path), cfg, campaign, key
        self.colluding = colluding
        folder = os.path.dirname(os.path.abspath(self.name))
        if not os.path.isdir(folder):
            raise QueueError(f"{self.name}: no such directory {folder}")
        try:
            if not os.path.exists(self.name):  # a new queue: its owner's only (-wal and -shm take its mode);
                # never a file open here: closing any descriptor of it drops this process's POSIX locks
                os.close(os.open(self.name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            self.db = self._connect()
            with self._transaction() as cur:
                self._drop_old_held(cur)
                for sql in SCHEMA:
                    cur.execute(sql)
                self._check_meta(cur, {"config_id": cfg.config_id_hex, "campaign": campaign,
                                       "key": hmac.new(key, FINGERPRINT_LABEL, hashlib.sha256).hexdigest()[:16]})
        except (OSError, sqlite3.Error) as exc:
            raise QueueError(f"{self.name}: cannot open the shuffle queue: {exc}") from None

    def _connect(self):
        db = sqlite3.connect(self.name, isolation_level=None, check_same_thread=False, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA secure_delete=ON")
        return db

    def _drop_old_held(self, cur):
        """An older shuffler's empty ``held`` (no ``dev`` column) is replaced; one holding reports is refused."""
        cols = [row[1] for row in cur.execute("PRAGMA table_info(held)")]
        if cols and "dev" not in cols:
            if cur.execute("SELECT COUNT(*) FROM held").fetchone()[0]:
                raise with_remedy(QueueError, f"{self.name} holds reports of an older mss shuffle, which kept no "
                                              f"device digest with them (a batch could not take one a device)",
                                  "older-queue")
            cur.execute("DROP TABLE held")

    def _check_meta(self, cur, want):
        have = dict(cur.execute("SELECT key, value FROM meta").fetchall())
        for name, value in want.items():
            if name not in have:
                cur.execute("INSERT INTO meta VALUES (?, ?)", (name, value))
            elif have[name] != value:
                what = {"config_id": "config", "campaign": "campaign", "key": "shuffle key"}[name]
                shown = "" if name == "key" else f" {have[name]!r}, not {value!r}"
                raise with_remedy(QueueError, f"{self.name} is the queue of another {what}{shown}", "another-queue")

    @contextmanager
    def _transaction(self):
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
            cur.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
                cur.execute("ROLLBACK")
            raise
        finally:
            cur.close()

    def reader(self):
        """Another connection to the same file (the display, the forwarder): never blocks the writer's."""
        return ShuffleQueue(path=self.name, cfg=self.cfg, campaign=self.campaign, key=self.key, colluding=self.colluding)

    def close(self):
        self.db.close()

    def device_digest(self, device_id, label=DEVICE_LABEL):
        return hmac.new(self.key, label + device_id.encode(), hashlib.sha256).digest()[:KEY_BYTES]

    def remembered(self, key, make):
        """meta[key], made by ``make()`` and kept on first use (the MQTT client nonce)."""
        with self._transaction() as cur:
            row = cur.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            if row:
                return row[0]
            value = make()
            cur.execute("INSERT INTO meta VALUES (?, ?)", (key, value))
            return value

    # -- the Writer's side ---------------------------------------------------
    def write_batch(self, items):
        """Queue a batch of classified messages (Ingest results, as a store takes them);
        return per-item outcomes: "accepted" (its body held), "duplicate", "extra",
        "quarantined" (counted as ``rejected_<reason>``, nothing kept: a quarantine row
        would keep a topic naming the device), "ignored" (a time probe, a board's
        skipped epoch: counted).  One transaction; QueueError if it cannot commit."""
        try:
            with self._transaction() as cur:
                return self._write(cur, items)
        except sqlite3.Error as exc:
            raise QueueError(f"{self.name}: cannot queue reports: {exc}") from None

    def _write(self, cur, items):
        cid = self.cfg.config_id_hex
        bump, outcomes = {"received": 0}, []
        for it in items:
            if "skip" in it or "ignored" in it:
                outcome, counter = "ignored", "skipped" if "skip" in it else it["ignored"]
            elif "reason" in it:
                outcome, counter = "quarantined", f"rejected_{it['reason']}"
            else:
                r = it["report"]
                row = (cid, self.device_digest(it["device_id"]), r.epoch, r.seq)
                if cur.execute("INSERT INTO seen VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING", row).rowcount == 1:
                    cur.execute("INSERT INTO held VALUES (?, ?, ?, ?)",
                                (os.urandom(KEY_BYTES), r.epoch, self.device_digest(it["device_id"], HELD_LABEL),
                                 compact_body(self.cfg, r.frame, it["payload"])))
                    outcome = counter = "accepted"
                elif cur.execute("SELECT 1 FROM seen WHERE config_id = ? AND device = ? AND epoch = ? AND seq = ?",
                                 row).fetchone():
                    outcome = counter = "duplicate"
                else:
                    outcome, counter = "extra", "rejected_extra_in_epoch"
            bump["received"] += "skip" not in it
            bump[counter] = bump.get(counter, 0) + 1
            outcomes.append(outcome)
        self._bump(cur, bump)
        return outcomes

    @staticmethod
    def _bump(cur, bump):
        for name in sorted(bump):
            cur.execute("INSERT INTO counters VALUES (?, ?) ON CONFLICT (name) "
                        "DO UPDATE SET value = counters.value + excluded.value", (name, bump[name]))

    # -- the forwarder's side ------------------------------------------------
    def held_through(self, last_epoch):
        """How many distinct devices the held bodies of epochs <= ``last_epoch`` are of:
        the size of the batch :meth:`make_batch` would make of them."""
        return self.db.execute("SELECT COUNT(DISTINCT dev) FROM held WHERE epoch <= ?", (last_epoch,)).fetchone()[0]

    def prune(self, before):
        """Forget the ``seen`` rows of epochs before ``before`` (the first epoch of the window)."""
        with self._transaction() as cur:
            cur.execute("DELETE FROM seen WHERE epoch < ?", (before,))

    def make_batch(self, last_epoch, min_batch):
        """Make batches of the held bodies of epochs <= ``last_epoch``, **one body a
        device in each**, in a uniformly random order: the first of every device's
        latest body, the next of every device's latest body left, and so on (a board's
        queue after an outage leaves in several batches), each only if it holds at
        least ``min_batch`` distinct devices; the batches (encoded, each with a fresh
        random batch id and ``colluding``) are written and every one of those bodies
        deleted in one transaction.  Bodies left over (a device's earlier ones, too few
        devices for a batch of their own) are dropped and counted ``superseded``: a
        memoized one is a copy of the body sent.  Return (batch_id, n devices) of the
        first batch, or None (too few devices: all stay held)."""
        with self._transaction() as cur:
            rows = cur.execute("SELECT dev, epoch, body FROM held WHERE epoch <= ?", (last_epoch,)).fetchall()
            per_device = {}
            for dev, epoch, body in rows:
                per_device.setdefault(dev, []).append((epoch, body))
            queues = [sorted(bodies, key=lambda b: b[0], reverse=True) for bodies in per_device.values()]
            made, sent = [], 0
            for r in range(max(map(len, queues), default=0)):
                picked = [q[r] for q in queues if len(q) > r]
                if len(picked) < max(1, min_batch):
                    break
                bodies = [body for _, body in picked]
                random.SystemRandom().shuffle(bodies)  # uniform over the n! orders: see the module's docstring
                epochs = [e for e, _ in picked]
                batch_id = os.urandom(BATCH_ID_BYTES)
                data = encode_batch(key=self.key, config=self.cfg, batch_id=batch_id, epoch=max(epochs),
                                    first_epoch=min(epochs), bodies=bodies, colluding=self.colluding)
                cur.execute("INSERT INTO batches VALUES (?, ?, ?, ?)", (batch_id, max(epochs), len(bodies), data))
                made.append((batch_id, len(bodies)))
                sent += len(bodies)
            if not made:
                return None
            cur.execute("DELETE FROM held WHERE epoch <= ?", (last_epoch,))
            bump = {"batches_made": len(made)}
            if len(rows) > sent:
                bump["superseded"] = len(rows) - sent
            self._bump(cur, bump)
        return made[0]

    def unforwarded(self):
        """The ids of the batches made and not yet acknowledged, oldest epoch first."""
        return [b for (b,) in self.db.execute("SELECT batch_id FROM batches ORDER BY epoch")]

    def batch(self, batch_id):
        """The bytes of batch ``batch_id`` (one of :meth:`unforwarded`)."""
        return self.db.execute("SELECT data FROM batches WHERE batch_id = ?", (batch_id,)).fetchone()[0]

    def forwarded(self, batch_id):
        """The forward broker acknowledged ``batch_id``: delete it (overwritten), count it,
        and truncate the WAL so that its bytes leave that file too."""
        with self._transaction() as cur:
            row = cur.execute("SELECT n FROM batches WHERE batch_id = ?", (batch_id,)).fetchone()
            if row is None:
                return
            cur.execute("DELETE FROM batches WHERE batch_id = ?", (batch_id,))
            self._bump(cur, {"batches_forwarded": 1, "reports_forwarded": row[0]})
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def forward_refused(self):
        """The forward broker refused a batch (a PUBACK that is not Success): count it; the batch stays."""
        with self._transaction() as cur:
            self._bump(cur, {"forwards_refused": 1})

    def counters(self):
        """{"received", "accepted", "duplicate", "rejected", "rejected_<reason>", ...,
        "held", "batches_made", "batches_forwarded", "reports_forwarded", "batches_unforwarded",
        "forwards_refused"}: received = accepted + duplicate + rejected + ignored ones (time probes);
        accepted = held + reports in batches made + superseded (bodies left out:
        one a device a batch, no batch below --min-batch devices); forwards_refused counts every refusing PUBACK
        (a batch refused again after its back-off counts again)."""
        c = dict(self.db.execute("SELECT name, value FROM counters").fetchall())
        out = {name: c.get(name, 0) for name in ("received", "accepted", "duplicate")}
        out["rejected"] = sum(v for k, v in c.items() if k.startswith("rejected_"))
        out.update(sorted((k, v) for k, v in c.items() if k.startswith("rejected_")))
        out["held"] = self.db.execute("SELECT COUNT(*) FROM held").fetchone()[0]
        for name in ("batches_made", "batches_forwarded", "reports_forwarded"):
            out[name] = c.get(name, 0)
        out["batches_unforwarded"] = self.db.execute("SELECT COUNT(*) FROM batches").fetchone()[0]
        out["forwards_refused"] = c.get("forwards_refused", 0)
        for name in ("skipped", "time_probes", "superseded"):
            if c.get(name):
                out[name] = c[name]
        return out

