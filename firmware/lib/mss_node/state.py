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
``ago`` at the next boot only if the timer woke it (:mod:`mss_node.pace`).
"""
from mss_node import files


class State:
    def __init__(self, path, queue_max, memo_max=16):
        self.path = path
        self.queue_max = queue_max
        self.memo_max = memo_max
        d = files.load(path, None)
        if not _valid(d):
            d = {}  # unreadable or tampered: start fresh rather than crash the loop
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
        self.age = None  # the node's: ms since the last uplink now (None: none), written as ``ago``

    def save(self):
        if self.age is not None:
            a = self.age()
            self.ago = -1 if a is None else a
        files.save(self.path, {"seq": self.seq, "last": self.last, "queue": self.queue,
                               "dropped": self.dropped, "memo": self.memo, "sent_in": self.sent_in,
                               "ago": self.ago, "fly": self.fly, "blind": self.blind, "nap": self.nap})

    def due(self, config_id, epoch):
        return epoch > self.last.get(config_id, -1)

    def add(self, config_id, epoch, report, memo=None):
        """Queue a report made for ``epoch``; drop the oldest when full.
        ``memo`` is the new ``memo`` dict (mss_node.memo.remember).  If the
        flash write fails nothing changes: the report is not queued (so not
        sent), as after a reboot it would not be remembered."""
        before = (list(self.queue), self.dropped, dict(self.last), self.seq, self.memo)
        self.queue.append(report.hex())
        while len(self.queue) > self.queue_max:
            self.queue.pop(0)
            self.dropped += 1
        self.last[config_id] = max(self.last.get(config_id, -1), epoch)
        self.seq = (self.seq + 1) & 0xFFFF
        if memo is not None:
            self.memo = memo
        try:
            self.save()
        except Exception:
            self.queue, self.dropped, self.last, self.seq, self.memo = before
            raise

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
    for key in ("seq", "dropped", "sent_in", "ago", "nap"):
        if type(d.get(key, 0)) is not int:
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
