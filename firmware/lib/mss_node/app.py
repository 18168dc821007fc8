"""The device main loop.

Every tick: feed the watchdog; if the current epoch has no report yet for
the active config, read the sensor, privatise the value (with
device.memoize: re-send the value's memoized draw) and queue the report
in flash; send queued reports oldest first; poll the transport (a new
retained config may arrive).  A missing or corrupt config leaves the
board idle, logging why and re-reading the file every minute.  Between
ticks the board waits ``poll_s`` with the CPU on (``device.sleep`` none) or,
once nothing is left to do, sleeps until the next thing due (light or deep:
:mod:`mss_node.power`).
"""
import time

from mss_device.frame import KINDS, kind_index
from mss_node import log, settings
from mss_node.reporter import Reporter
from mss_node.state import State
from mss_node.wallclock import CLOCK_SANE, UNIX_OFFSET

IDLE_RETRY_S = 60
_COMPACT = kind_index("compact")
_TELL_S = 60  # "no clock" is said at most once a minute
_MIN_REST_MS = 1000  # a shorter wait is a poll_s one: not worth a modem sleep


def _idle():
    pass


def _skip(s):
    pass


def watchdog(ms):
    """The feed of a machine.WDT with this timeout; a no-op without one (ms 0, or none on the port)."""
    if ms:
        try:
            from machine import WDT

            return WDT(timeout=ms).feed
        except (ImportError, AttributeError, TypeError, ValueError):
            log.warn("no watchdog with a %d ms timeout on this port" % ms)
    return _idle


class Node:
    """Without a clock (it reads before 2024 or ``epoch_origin``) compact frames
    are paced (``pace``, :mod:`mss_node.pace`); dated frames (full,
    compact-epoch) need the epoch: they wait for a clock, saying so."""

    def __init__(self, config_path, state_path, sensor, rng=None, clock=time.time, link=None):
        self.config_path = config_path
        self.sensor = sensor
        self.rng = rng
        self.clock = clock
        self.s = settings.load(config_path)
        if self.s.device["transport"] == "lorawan":  # network time may set it (mss_node.pace.Clock)
            from mss_node.pace import Clock

            self.clock = Clock(clock)
        self.state = State(state_path, self.s.device["queue_max"], self.s.device["memo_max"])
        if not self.s.device["memoize"]:
            self.state.forget_memos()
        self.link = link or self._make_link()
        if self.s.device["transport"] == "lorawan":  # the network server knows the board by its DevEUI
            self.s.device_id = self._dev_eui()
        self.reporter = Reporter(self.s.params, rng, self.s.device_id)
        self.ledger = None  # device.budget (mss_node.ledger): loaded only with one
        if self.s.budget is not None:
            from mss_node.ledger import Ledger

            self.ledger = Ledger(self.state, self.s.budget)
        self.pace = None
        if self.s.params.frame == _COMPACT:
            from mss_node.pace import Pace

            self.pace = Pace(self)
        if self.state.nap:  # the deep sleep's time is credited now (pace, ledger): used once
            self.state.nap = 0
            self.state.save()
        self._told = None  # clock time of the last "no clock" line
        self.skipped = None  # the epoch last skipped for the budget (None: reporting)

    def clocked(self):
        return int(self.clock()) + UNIX_OFFSET >= max(self.s.device["epoch_origin"], CLOCK_SANE)

    def _dev_eui(self):
        """The id this LoRaWAN board seeds with: its modem's DevEUI, which ``device.device_id``
        (lowercase by now), if set, must equal (SPEC.md section 4, "Device ids")."""
        eui, given = self.link.dev_eui(), self.s.device_id
        if given is not None and eui is not None and eui != given:
            raise ValueError("device.device_id %s is not the modem's DevEUI %s: leave device.device_id out "
                             "(the modem's is used) or set it to the modem's" % (given, eui))
        if eui is None and given is None:
            raise ValueError("the modem gave no DevEUI; set device.device_id to it")
        return eui or given

    def _make_link(self):
        """The transport's link: ``make(node)`` of its module (settings.LINKS), loaded now."""
        return __import__(settings.LINKS[self.s.device["transport"]], None, None, ["make"]).make(self)

    def epoch(self, t=None):
        # Subtract in the port's own time base: on 2000-based ports every
        # term stays a small int; on 1970-based ports time.time() itself is
        # already a big int (the one exception besides the subset rank).
        d = self.s.device
        return (int(self.clock() if t is None else t) - (d["epoch_origin"] - UNIX_OFFSET)) // d["period_s"]

    def tick(self):
        cid, st, p = self.s.config_id, self.state, self.pace
        if self.ledger:
            self.ledger.now()  # board time: its ticks are read at least once a tick
        if not self.clocked():
            if p:
                p.paced(cid)
            else:
                self._no_clock()
            self.link.poll()
            return
        if self._told is not None:  # it had said it had no clock
            self._told = None
            log.info("clock set: reporting")
            getattr(self.link, "status", _skip)("online")
        epoch = self.epoch()
        if p:
            p.doubt(cid, epoch)  # state.json's marks against the clock and board time (mss_node.pace)
        if p and st.blind:  # the last uplink left without a clock
            p.resolve(cid)
        # A compact frame carries no epoch: the aggregator dates it by its arrival.  So at most
        # one leaves per epoch, and a report that waited past its epoch stands for the epoch it
        # is sent in (no fresh draw for that one): none lost, none twice in an epoch.
        if st.due(cid, epoch) and not (p and st.queue):
            self.draw(cid, epoch)
        if not p:
            while st.queue and self.link.send(bytes.fromhex(st.queue[0])):
                st.sent()
        elif st.queue and st.sent_in != epoch:
            p.send(cid, epoch)
        self.link.poll()

    def draw(self, cid, epoch):
        """Read the sensor and queue this epoch's report; True if the budget made it skip the epoch."""
        try:
            value = self.sensor()
        except Exception as exc:  # a user's sensor code must not stop the board
            log.error("sensor failed: %r" % (exc,))
            value = None
        if self.reporter.valid(value):
            report, memo = self._report(cid, value, epoch)
            if report is None:
                return self._skip_epoch(cid, epoch)
            if self.ledger and (memo is not None or not self.s.device["memoize"]):  # a fresh draw
                # its spend goes in the write that queues it: spend before send
                self.state.add(cid, epoch, report, memo, self.ledger.spend(self.s.ratio))
            else:
                self.state.add(cid, epoch, report, memo)
            if self.skipped is not None:
                self.skipped = None
                getattr(self.link, "status", _skip)("online")
        else:
            log.warn("sensor value %r is not a category in [0, %d); no report"
                     % (value, self.s.params.k))
        return False

    def _no_clock(self):
        """Dated frames without a clock: nothing is drawn; said at most once a minute,
        in the log and to the link (status ``no-clock``, SPEC.md sections 8 and 9)."""
        t = self.clock()
        if self._told is not None and 0 <= t - self._told < _TELL_S:
            return
        self._told = t
        log.warn("no clock (no NTP yet?): %s frames need the time; not reporting" % KINDS[self.s.params.frame])
        getattr(self.link, "status", _skip)("no-clock")  # the link says it its own way (SPEC.md sections 8, 9)

    def _report(self, cid, value, epoch):
        """(report, new memo dict or None); with device.memoize see :mod:`mss_node.memo`.
        (None, None): device.budget is spent and the value has no memo."""
        may = self._may_draw if self.ledger else None
        if not self.s.device["memoize"]:
            if may is not None and not may():
                return None, None
            return self.reporter.report(value, epoch, self.state.seq), None
        from mss_node.memo import report

        return report(self.reporter, self.state, cid, value, epoch, may)

    def _may_draw(self):
        return self.ledger.allows(self.s.ratio)

    def _skip_epoch(self, cid, epoch):
        """device.budget spent and no memo of the value: the epoch is used, nothing is queued;
        logged once and told to the link (status ``skipped-<epoch>``, SPEC.md section 10)."""
        clocked = self.clocked()
        self.state.skip(cid, epoch)
        self.skipped = epoch
        self.ledger.skipped(self.s.ratio, epoch if clocked else None, self.s.device["memoize"])
        getattr(self.link, "status", _skip)("skipped-%d" % epoch if clocked else "skipped")
        return True

    def new_config(self, msg):
        """A config pushed to a board with a fleet key and a cap (the MQTT link passes
        nothing else on): signed and checked by :func:`mss_node.auth.pushed`, adopted by
        :func:`mss_node.switch.adopt`."""
        from mss_node.auth import pushed

        got = pushed(self, msg)
        if got is not None:
            from mss_node.switch import adopt

            adopt(self, got[0], "pushed config", got[1])


def run(config_path="config.json", state_path="state.json", sensor=None, rng=None,
        clock=time.time, sleep=time.sleep, ticks=None, link=None, until_sent=False):
    """Run the node; ``ticks`` bounds the loop (tests, emulators), None runs
    forever.  ``until_sent`` stops once this epoch's report has been sent (with
    ``device.sleep``, after the board went to sleep: an emulated ``machine``
    records it; waits of a port without lightsleep are skipped)."""
    feed = None  # the watchdog's, armed with the first config that loads
    n = 0
    while ticks is None or n < ticks:
        n += 1
        try:
            node = Node(config_path, state_path, sensor, rng, clock, link)
        except Exception as exc:  # bad config, missing hardware: stay idle, say why
            log.error("idle: %s" % exc)
            if feed is None:
                feed = _idle
            for _ in range(IDLE_RETRY_S):
                feed()
                sleep(1)
            continue
        if feed is None:
            feed = watchdog(node.s.device["watchdog_ms"])
        node.link.feed = feed  # links that wait on a modem keep the watchdog fed
        rest = None
        if node.s.device["sleep"] != "none":
            from mss_node.power import Rest

            rest = Rest(node, feed, _skip if until_sent else sleep, UNIX_OFFSET, CLOCK_SANE)
        log.info("device %s reporting config %s (k=%d) every %d s"
                 % (node.s.device_id, node.s.config_id, node.s.params.k, node.s.device["period_s"]))
        n -= 1  # the attempt that built the node is not a tick
        while ticks is None or n < ticks:
            n += 1
            feed()
            try:
                node.tick()
            except Exception as exc:  # flash or link trouble: log, keep going (the watchdog backs this)
                log.error("tick failed: %r" % (exc,))
            done = until_sent and not node.state.queue and not node.state.due(node.s.config_id, node.epoch())
            ms = rest.due_ms() if rest else 0
            if ms >= _MIN_REST_MS:
                rest(ms)
            elif not done:
                sleep(node.pace.wait_s(node.s.device["poll_s"]) if node.pace else node.s.device["poll_s"])
            if done:
                break
        return node


def main(argv):
    """Device emulator: CONFIG STATE VALUE [MAX_TICKS]; reports VALUE for the
    current epoch and exits once it is sent (exit status 1 if it never was)."""
    value = int(argv[2])
    ticks = int(argv[3]) if len(argv) > 3 else 30
    node = run(argv[0], argv[1], sensor=lambda: value, ticks=ticks, until_sent=True)
    if node is None or node.state.queue:
        raise SystemExit(1)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
