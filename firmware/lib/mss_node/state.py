"""Persistent device state in one JSON file (one atomic write per change).

``seq`` is the next sequence number, ``last`` maps config id -> last epoch
reported, ``queue`` holds unsent reports (hex) oldest first, ``dropped``
counts reports lost to a full queue, ``sent_in`` is the epoch the last
report without an epoch of its own (compact frame) was sent in.  The epoch is marked used in the same
write that queues its report, so a reboot can neither send a second fresh
report for that epoch nor lose a queued one.

``memo`` (``device.memoize``) maps the active config id to its memoized
draws, least recently used first: ``[[value, body hex], ...]`` with the
report body (j, Z) of SPEC.md section 4.  A draw is memoized in the write
that queues its report; memos of other configs go in that write.

Pacing (compact frames, SPEC.md section 11): ``ago`` is the board time (ms)
from the last uplink that went, or may have gone, on air to this write (-1:
none yet); ``fly`` is set in a write made before a report is handed to the
modem and cleared by the write that follows its end: the epoch it left in, -1
without a clock (None: no uplink in flight); ``blind`` says the last uplink
left without a clock, so its epoch is not known.  After a reset the board
counts the time it was off as zero (:attr:`age` resumes from ``ago``), except
a deep sleep: ``nap`` (ms, 0: none) is written just before one and credited to
``ago`` at the next boot only if the timer woke it (:mod:`mss_node.uptime`).

The budget's ledger (``device.budget``, :mod:`mss_node.ledger`; SPEC.md section 10):
``bt`` is the board time (ms, :mod:`mss_node.uptime`) at this write and ``spent``
the fresh draws of the last window, grouped by their ratio: ``[[hi, lo, t, ...],
...]`` with each draw's board time t, oldest first.  A fresh draw's entry is
written in the write that queues its report (spend before send).  ``spent`` and
``bt`` are the device's, not a config's: a switch keeps them, and a board without
a budget keeps them as they are.  A state file that is there but unreadable or
tampered starts fresh with ``spent`` = ``[[1, 0, 0]]`` (a ratio 1/0: the budget
spent for a whole window from now), never with an empty ledger.
"""
from mss_node import files, log

SPENT_MAX = 256  # fresh draws a ledger holds (mss_node.settings refuses a budget allowing more)
BLOCKED = [[1, 0, 0]]  # the ledger of a lost state: spent for a whole window from board time 0


class State:
    def __init__(self, path, queue_max, memo_max=16):
        self.path = path
        self.queue_max = queue_max
        self.memo_max = memo_max
        d = files.load(path, None)
        # a torn temp file without the file is a first write cut short: nothing was spent yet
        self.broken = not _valid(d) and (d is not None or _exists(path))
        if self.broken:  # unreadable or tampered: start fresh rather than crash the loop
            log.warn("state file %s unreadable or tampered: starting fresh (a device.budget counts as "
                     "spent for a whole window)" % path)
            d = {"spent": [list(g) for g in BLOCKED]}  # a copy: the ledger is changed in place
        elif d is None:
            d = {}  # the first boot
        self.seq = d.get("seq", 0)
        self.last = d.get("last", {})
        self.queue = d.get("queue", [])
        self.dropped = d.get("dropped", 0)
        self.memo = d.get("memo", {})
        self.sent_in = d.get("sent_in", -1)
        self.ago = d.get("ago", -1)
        self.fly = d.get("fly")
        self.blind = d.get("blind", False)
        self.nap = d.get("nap", 0)
        self.spent = d.get("spent", [])
        self.bt = d.get("bt", 0)
        self.age = None  # the node's: ms since the last uplink now (None: none), written as ``ago``
        self.board = None  # the ledger's: board time now (ms), written as ``bt``
        self.napped = None  # the deep sleep's ms credited at this boot (mss_node.uptime.napped)

    def save(self):
        if self.age is not None:
            a = self.age()
            self.ago = -1 if a is None else a
        if self.board is not None:
            self.bt = self.board()
        files.save(self.path, {"seq": self.seq, "last": self.last, "queue": self.queue,
                               "dropped": self.dropped, "memo": self.memo, "sent_in": self.sent_in,
                               "ago": self.ago, "fly": self.fly, "blind": self.blind, "nap": self.nap,
                               "spent": self.spent, "bt": self.bt})

    def due(self, config_id, epoch):
        return epoch > self.last.get(config_id, -1)

    def add(self, config_id, epoch, report, memo=None, spent=None):
        """Queue a report made for ``epoch``; drop the oldest when full.
        ``memo`` is the new ``memo`` dict (mss_node.memo.remember), ``spent``
        the new ledger with this fresh draw in it (mss_node.ledger.Ledger.spend).
        If the flash write fails nothing changes: the report is not queued (so
        not sent), as after a reboot it would not be remembered."""
        before = (list(self.queue), self.dropped, dict(self.last), self.seq, self.memo, self.spent)
        self.queue.append(report.hex())
        while len(self.queue) > self.queue_max:
            self.queue.pop(0)
            self.dropped += 1
        self.last[config_id] = max(self.last.get(config_id, -1), epoch)
        self.seq = (self.seq + 1) & 0xFFFF
        if memo is not None:
            self.memo = memo
        if spent is not None:
            self.spent = spent
        try:
            self.save()
        except Exception:
            self.queue, self.dropped, self.last, self.seq, self.memo, self.spent = before
            raise

    def skip(self, config_id, epoch):
        """``epoch`` is used without a report (device.budget spent, no memo): no second
        attempt in it, after a reboot either."""
        self.last[config_id] = max(self.last.get(config_id, -1), epoch)
        self.save()

    def forget_memos(self):
        """Drop every memo (memoize turned off: no raw value stays in flash)."""
        if self.memo:
            self.memo = {}
            self.save()

    def sent(self, config_id=None, epoch=None):
        """The oldest queued report is sent.  With ``epoch`` (a compact frame,
        dated by its arrival) it stands for that epoch of ``config_id``."""
        self.queue.pop(0)
        if epoch is not None:
            self.sent_in = epoch
            self.last[config_id] = max(self.last.get(config_id, -1), epoch)
        self.fly = None
        self.save()

    def carry(self, old_id, new_id):
        """A switch of config: the epochs the old one reported stay used, so a
        switch never brings a second report in one epoch."""
        last = max(self.last.get(old_id, -1), self.last.get(new_id, -1))
        if last >= 0:
            self.last[new_id] = last
            self.save()


def _exists(path):
    try:
        import os

        os.stat(path)
        return True
    except OSError:
        return False


def _hex(text):
    try:
        bytes.fromhex(text)
        return True
    except (TypeError, ValueError):
        return False


def _entry(e):
    return (isinstance(e, list) and len(e) == 2 and type(e[0]) is int and isinstance(e[1], str)
            and _hex(e[1]))


def _valid(d):
    if not isinstance(d, dict):
        return False
    for key in ("seq", "dropped", "sent_in", "ago", "nap", "bt"):
        if type(d.get(key, 0)) is not int:
            return False
    if not valid_ledger(d.get("spent", []), d.get("bt", 0)):
        return False
    if type(d.get("fly", 0)) not in (int, type(None)) or type(d.get("blind", False)) is not bool:
        return False
    last, queue, memo = d.get("last", {}), d.get("queue", []), d.get("memo", {})
    if not isinstance(last, dict) or not all(type(v) is int for v in last.values()):
        return False
    if not isinstance(memo, dict) or not all(isinstance(v, list) and all(_entry(e) for e in v)
                                             for v in memo.values()):
        return False
    return isinstance(queue, list) and all(isinstance(q, str) and _hex(q) for q in queue)


def valid_ledger(spent, bt):
    """``spent`` is a ledger written at board time ``bt``: groups ``[hi, lo, t, ...]`` of
    integers, each ratio hi/lo >= 1 (lo 0: spent), times ascending within 0..bt, 256 in all."""
    if not isinstance(spent, list) or bt < 0:
        return False
    n = 0
    for g in spent:
        if not isinstance(g, list) or len(g) < 3 or not all(type(x) is int for x in g):
            return False
        if not (g[0] >= 1 and g[1] >= 0 and g[0] >= g[1]) or g[2] < 0 or g[-1] > bt:
            return False
        for i in range(3, len(g)):
            if g[i] < g[i - 1]:
                return False
        n += len(g) - 2
    return n <= SPENT_MAX
