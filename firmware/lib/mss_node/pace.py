"""Compact frames (LoRaWAN only; loaded for them): pacing without a clock, the
in-flight mark, and the hand-over once a clock is set (SPEC.md section 11,
"Boards without a clock").

A compact frame is dated by its arrival, so a board needs no clock to send
one, only to send no two in one epoch of the network server:

* without a clock an uplink leaves no sooner than ``ms`` (one period plus a
  margin: ``device.lorawan.pace_margin_ms``, default period / 32) of board
  time after the last one that left, or may have left; board time is
  ``time.ticks_ms`` deltas (wrap-safe) added to what state.json keeps
  (``ago``), the time the board was off counted as zero, so board time never
  runs ahead of real time: two uplinks are always a period apart in real time,
  and after any reset the next one leaves within ``ms`` of the boot; a deep
  sleep's time (``nap``) is added only after a wake by its timer;
* before a report goes to the modem, a write marks it in flight (``fly``):
  after a reset during the uplink it counts as sent (for the pace, and for its
  epoch with a clock) and, still queued, leaves again a pace (an epoch) later:
  never lost, never twice in one epoch;
* once a clock is set (NTP, network time), the epoch of the last uplink sent
  without one is not known: it ended ``age`` ago at the latest (the pace of a
  clockless uplink counts from its end; the time off counted as zero), so the
  epoch of ``clock - age`` (whole seconds of age: the network's time is read
  in whole seconds, behind by up to 1 s) is marked used, and every one before;
  the epoch after it stays free.  When the uplink itself brought the time
  (DeviceTimeReq) this is done at once, before any sleep;
* a booting board without a clock on a modem with network time first sends a
  time probe (:meth:`LorawanLink.probe`: an uplink on ``time_fport`` with no
  report, carrying DeviceTimeReq) right after the join: with the time it
  reports by clock epochs at once instead of waiting a pace;
* with a clock, waits end ``guard`` s into the next epoch (the margin, 2 s at
  most), not on its edge: a clock a little ahead does not date an uplink in
  the epoch before;
* a clock that contradicts the record (:meth:`Pace.doubt`): a mark of
  state.json ahead of the clock's epoch (no right clock dates a mark in its
  future), or, after network time set or moved the clock, a last uplink
  recorded before u - 1, where u is the epoch of ``clock + 1 - age`` (board
  time dates the last uplink no later than that; the clock may be 1 s behind
  the network's): marks ahead are lowered to the epoch before the clock's and
  u is marked used.  One forged time costs a report at most, never silence
  until the forged epoch, never two uplinks in one epoch of the network's
  clock; a record that agrees (the usual reboot, a daily resync) is kept, so
  an honest board loses nothing, except one report after an outage that
  spans epochs (it looks like a clock that was behind); the ledger (board
  time) is not touched.

The margin costs a skipped epoch about once every 32 periods (the pace
drifts by the margin each period); a board with a clock skips none.
"""
from mss_node import log
from mss_node.uptime import napped, ticks_diff, ticks_ms
from mss_node.wallclock import CLOCK_SANE, UNIX_OFFSET

_DIV = 32  # the default margin: period / 32


class Clock:
    """A LoRaWAN board's wall clock: ``wall()`` (the port's time.time, which NTP or a
    battery-backed RTC sets) plus ``offset``, which network time (DeviceTimeAns,
    :func:`set_clock`) sets where the RTC cannot be (the unix port); ``net`` once it did."""

    def __init__(self, wall):
        self.wall = wall
        self.offset = 0
        self.net = False
        self.stepped = False  # network time set it, or moved it by more than 1 s (taken by Pace.doubt)

    def __call__(self):
        return self.wall() + self.offset

    def ok(self):
        """True once the clock was set (it reads 2024 or later)."""
        return int(self()) + UNIX_OFFSET >= CLOCK_SANE


class Pace:
    def __init__(self, node):
        d, st = node.s.device, node.state
        self.node = node
        m = d["lorawan"]["pace_margin_ms"]
        if m is None:
            m = d["period_s"] * 1000 // _DIV
        self.ms = d["period_s"] * 1000 + m
        self.guard = min(m, 2000) / 1000
        a = st.ago
        if a >= 0:  # a deep sleep's time, credited only if it ran to its end (mss_node.uptime)
            a += napped(st)
        self.since = None if a < 0 else min(a, self.ms)  # ms since the last uplink
        self.t = ticks_ms()
        st.age = self.age  # the node then clears nap (used once: a reset after this boot credits nothing)
        if st.fly is not None:  # a reset while an uplink was with the modem: it may have left
            if st.fly >= 0:
                _used(st, node.s.config_id, st.fly)
            else:
                st.blind = True
            st.fly = None
        self.said = False
        self.probed = False  # the time probe of this boot (sent, or not needed)

    def age(self):
        """ms since the last uplink that left or may have (None: none yet); it stops at ``ms``."""
        now = ticks_ms()
        if self.since is not None:
            self.since = min(self.since + ticks_diff(now, self.t), self.ms)
        self.t = now
        return self.since

    def due_ms(self):
        """ms until a compact frame may leave without a clock (0: now)."""
        a = self.age()
        return 0 if a is None else self.ms - a

    def wait_s(self, poll):
        n = self.node
        if n.clocked():
            d = n.s.device
            left = (n.epoch() + 1) * d["period_s"] + d["epoch_origin"] - UNIX_OFFSET - n.clock() + self.guard
        else:
            left = self.due_ms() / 1000
        return min(poll, left) if left > 0 else poll

    def paced(self, cid):
        """A tick without a clock: one draw and one uplink a pace at most."""
        if not self.said:
            self.said = True
            log.warn("no clock: compact reports paced, %d ms apart at least" % self.ms)
        n, st = self.node, self.node.state
        if not self.probed:
            probe = getattr(n.link, "probe", None)
            self.probed = probe is None or probe()
            if n.clocked():  # the probe brought the time: the next tick reports by the clock
                return
        if self.due_ms():
            return
        skipped = not st.queue and n.draw(cid, n.epoch())  # the unset clock's epoch: a compact frame lacks it
        if st.queue:
            self.send(cid, None)
        elif skipped:  # device.budget spent, no memo: the next try a pace later
            self.since, self.t = 0, ticks_ms()
            st.save()

    def doubt(self, cid, epoch):
        """A tick with a clock in ``epoch``: state.json's epoch marks checked against the clock
        and board time (module docstring; SPEC.md section 11, "A time that contradicts the record")."""
        n, st = self.node, self.node.state
        stepped = getattr(n.clock, "stepped", False)  # a plain clock function has none
        if stepped:
            n.clock.stepped = False
        ahead = st.sent_in > epoch or st.last.get(cid, -1) > epoch  # no right clock dates a mark in its future
        if not (ahead or stepped):
            return
        a = self.age()
        if a is None and not ahead:  # no uplink since the state began: nothing for the clock to contradict
            return
        u = epoch - 1 if a is None else min(epoch, n.epoch(n.clock() + 1 - a // 1000))  # the last uplink's, at the latest
        if not ahead and st.sent_in >= u - 1:  # the record agrees with board time (a reboot, a resync)
            return
        for c in st.last:
            if st.last[c] > epoch:
                st.last[c] = epoch - 1
        st.sent_in = min(st.sent_in, epoch - 1)
        _used(st, cid, u)
        log.warn("clock and state.json disagree on the last uplink's epoch: epoch %d taken as used" % u)
        st.save()

    def resolve(self, cid):
        """The clock is set and the last uplink left without one (or by a clock found wrong):
        mark the epochs it may be in."""
        n, st = self.node, self.node.state
        a = self.age()
        if a is not None:  # it ended a ago at the latest (board time never runs ahead)
            _used(st, cid, n.epoch(n.clock() - a // 1000))
        st.blind = False
        st.save()

    def send(self, cid, epoch):
        """Send the oldest queued report (``epoch`` None: no clock), marked in flight first."""
        link, st, before = self.node.link, self.node.state, self.since

        def air():
            st.fly = -1 if epoch is None else epoch
            self.since, self.t = 0, ticks_ms()
            try:
                st.save()
            except Exception:
                st.fly, self.since = None, before
                raise

        link.before_air = air
        try:
            ok = link.send(bytes.fromhex(st.queue[0]))
        finally:
            link.before_air = None
        if ok:
            st.blind = epoch is None
            if epoch is None:  # the pace counts from the end of a clockless uplink: it has arrived by now
                self.since, self.t = 0, ticks_ms()
            st.sent(cid, epoch)
            if epoch is None and self.node.clocked():  # this uplink brought the time (DeviceTimeAns)
                self.resolve(cid)
        elif st.fly is not None:  # the modem refused it: not on air
            st.fly, self.since = None, before


def _used(st, cid, epoch):
    """``epoch`` of config ``cid`` is taken (an uplink left in it, or may have): no compact
    frame leaves in it again (saved with the next write)."""
    st.sent_in = max(st.sent_in, epoch)
    st.last[cid] = max(st.last.get(cid, -1), epoch)


def set_clock(clock, unix):
    """Set the node's :class:`Clock` to ``unix`` (whole seconds, UTC):
    machine.RTC where the port has one, and its offset; False for a time before 2024."""
    unix = int(unix)
    if unix < CLOCK_SANE:
        return False
    t = unix - UNIX_OFFSET  # the port's time base
    try:
        from machine import RTC
        import time

        tm = time.gmtime(t)
        RTC().datetime((tm[0], tm[1], tm[2], tm[6], tm[3], tm[4], tm[5], 0))
    except Exception:  # no RTC (the unix port), or the port refused it: the offset keeps the time
        pass
    clock.offset = t - clock.wall()  # the fraction dropped: behind, never ahead
    clock.net = True
    return True
