"""Persistent device state in one JSON file (one atomic write per change).

``seq`` is the next sequence number, ``last`` maps config id -> last epoch
reported, ``queue`` holds unsent reports (hex) oldest first, ``dropped``
counts reports lost to a full queue.  The epoch is marked used in the same
write that queues its report, so a reboot can neither send a second fresh
report for that epoch nor lose a queued one.
"""
from mss_node import files


class State:
    def __init__(self, path, queue_max):
        self.path = path
        self.queue_max = queue_max
        d = files.load(path, None)
        if not _valid(d):
            d = {}  # unreadable or tampered: start fresh rather than crash the loop
        self.seq = d.get("seq", 0)
        self.last = d.get("last", {})
        self.queue = d.get("queue", [])
        self.dropped = d.get("dropped", 0)

    def save(self):
        files.save(self.path, {"seq": self.seq, "last": self.last, "queue": self.queue,
                               "dropped": self.dropped})

    def due(self, config_id, epoch):
        return epoch > self.last.get(config_id, -1)

    def add(self, config_id, epoch, report):
        """Queue a report made for ``epoch``; drop the oldest when full."""
        self.queue.append(report.hex())
        while len(self.queue) > self.queue_max:
            self.queue.pop(0)
            self.dropped += 1
        self.last[config_id] = epoch
        self.seq = (self.seq + 1) & 0xFFFF
        self.save()

    def sent(self):
        self.queue.pop(0)
        self.save()


def _hex(text):
    try:
        bytes.fromhex(text)
        return True
    except (TypeError, ValueError):
        return False


def _valid(d):
    if not isinstance(d, dict):
        return False
    for key in ("seq", "dropped"):
        if type(d.get(key, 0)) is not int:
            return False
    last, queue = d.get("last", {}), d.get("queue", [])
    if not isinstance(last, dict) or not all(type(v) is int for v in last.values()):
        return False
    return isinstance(queue, list) and all(isinstance(q, str) and _hex(q) for q in queue)
