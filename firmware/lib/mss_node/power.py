"""device.sleep light or deep: the board sleeps between reports (loaded only then).

After a tick with nothing left to do (:meth:`Rest.due_ms`), the board
sleeps until the next thing due.  First the link puts its radio to sleep
(``link.sleep(ms)``: a LoRaWAN modem with its dialect's own command, woken
before the next command; an MQTT link disconnects, reconnecting on wake),
and with ``device.wifi.off_between_reports`` Wi-Fi goes off.  Then:

* ``light``: ``machine.lightsleep(ms)``; the program goes on where it
  slept, Wi-Fi is switched on again;
* ``deep``: ``machine.deepsleep(ms)``; the board boots again from boot.py
  (which brings Wi-Fi up) and main.py, with all it needs already in
  state.json (each report is queued, sent and marked in one write).

No single sleep outlasts half the watchdog's timeout (``device.watchdog_ms``;
the watchdog is fed between slices, and a deep sleep that ends early just
boots into another sleep); without a watchdog a slice is at most an hour
(rp2's lightsleep takes less than 2**32 us).  A port without lightsleep
waits with the CPU on, one without deepsleep sleeps light: each said once.

Without a clock (compact frames, :mod:`mss_node.pace`) the board sleeps until
the next paced uplink may leave; deep only on a port that tells a deep sleep's
wake (``machine.DEEPSLEEP_RESET``: the pace credits the time asleep), else light.
The same holds for a board with a budget (``device.budget``): its ledger's board
time credits a deep sleep only when the port tells that its timer ended it.
"""
from mss_device.frame import kind_index
from mss_node import log

try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x

_SLICE_MS = const(3600000)  # the longest single sleep without a watchdog


class Rest:
    """``rest(ms)``: the board's sleep between reports (see the module docstring)."""

    def __init__(self, node, feed, wait, offset, sane):
        device = node.s.device
        self.node, self.link, self.feed, self.wait = node, node.link, feed, wait
        self.offset, self.sane = offset, sane  # mss_node.app's: the port's time base, a clock set
        self.compact = kind_index("compact")
        # wake this far (s) into the next epoch, so that a fleet does not send in step
        self.phase = node.reporter.rng.below(max(1, min(device["period_s"] // 10, 3600)))
        self.deep = device["sleep"] == "deep"
        self.wifi = device["wifi"] if device["wifi"]["off_between_reports"] else None
        ms = device["watchdog_ms"]
        self.slice = max(1, min(ms // 2, _SLICE_MS)) if ms else _SLICE_MS
        try:
            import machine

            self.light = getattr(machine, "lightsleep", None)
            self.deepsleep = getattr(machine, "deepsleep", None)
            told = hasattr(machine, "DEEPSLEEP_RESET")  # the pace can tell a deep sleep's wake
        except ImportError:  # CPython
            self.light = self.deepsleep = None
            told = False
        self.timed = node.pace or node.ledger  # board time counts the sleep (mss_node.uptime)
        if self.deep and (self.deepsleep is None or self.timed and not told):
            log.warn("no machine.deepsleep (or DEEPSLEEP_RESET) on this port: sleeping light")
            self.deep = False
        if self.light is None:
            log.warn("no machine.lightsleep on this port: waiting with the CPU on")
            self.light = self._wait

    def due_ms(self):
        """ms (rounded up) until the board has something to do, 0 if it has now: the next epoch's
        report, ``phase`` s into it, or a queued report at the end of the link's back-off
        (``link.next_try``); without a clock, the next paced uplink (0 for dated frames)."""
        n = self.node
        d, st, now = n.s.device, n.state, n.clock()
        if int(now) + self.offset < max(d["epoch_origin"], self.sane):
            return n.pace.due_ms() if n.pace else 0
        e = n.epoch()
        wake = (e + 1) * d["period_s"] + d["epoch_origin"] - self.offset + self.phase
        if st.queue:
            t = getattr(self.link, "next_try", 0)
            if t > now:
                wake = min(wake, t)
            elif n.s.params.frame != self.compact or st.sent_in != e:
                return 0
        elif st.due(n.s.config_id, e):
            return 0  # no report this epoch yet (the sensor failed): the next tick tries again
        ms = (wake - now) * 1000
        # rounded up: a board that woke a fraction of a ms before its epoch began would find
        # nothing due and lose a poll (every poll, were its awake time nil)
        return int(ms) + (ms > int(ms))

    def _wait(self, ms):
        self.wait(ms / 1000)

    def __call__(self, ms):
        sleep = getattr(self.link, "sleep", None)
        try:  # the board sleeps whatever its radios do: the link wakes its own before use
            if sleep is not None:
                sleep(ms)
            if self.wifi is not None:
                wifi(False)
        except Exception as exc:
            log.warn("radio sleep failed: %r" % (exc,))
        self.feed()
        if self.deep:
            ms = min(ms, self.slice)
            if self.timed:  # the pace and the ledger count this sleep if the timer ends it (mss_node.uptime)
                try:
                    self.node.state.nap = ms
                    self.node.state.save()
                except Exception as exc:  # then it counts as zero: a period late at worst
                    log.warn("nap: %r" % (exc,))
            self.deepsleep(ms)  # does not return: the board boots again
            return
        while ms > 0:
            n = min(ms, self.slice)
            self.light(n)
            self.feed()
            if self.node.ledger:  # its ticks are read at least once a slice (wrap-safe for days)
                self.node.ledger.now()
            ms -= n
        if self.wifi is not None:
            try:
                wifi(True, self.wifi, self.feed, self.wait)
            except Exception as exc:  # the link reconnects when it can
                log.warn("wifi: %r" % (exc,))


def wifi(on, cfg=None, feed=None, wait=None):
    """Wi-Fi off, or on and joined to ``cfg``'s network (10 s at most, as boot.py); a
    port without ``network`` (unix, an emulated board) has nothing to switch."""
    try:
        import network
    except ImportError:
        return
    sta = network.WLAN(network.STA_IF)
    if not on:
        sta.active(False)
        return
    sta.active(True)
    if cfg["ssid"] and not sta.isconnected():
        sta.connect(cfg["ssid"], cfg["password"] or "")
        for _ in range(100):
            if sta.isconnected():
                return
            feed()
            wait(0.1)
        log.warn("wifi: not connected after the sleep")
