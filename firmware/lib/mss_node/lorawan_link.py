"""Reports as unconfirmed LoRaWAN uplinks through an AT-command modem.

* OTAA join, one attempt at a time, retried with exponential back-off and
  random jitter (so a fleet that lost its gateway does not rejoin in step);
* one unconfirmed uplink per report on ``device.lorawan.fport``; any
  refusal (not joined, busy, no free channel, duty cycle, length error
  after a data-rate fall back) keeps the report queued in flash for a later
  try; "not joined" also forces a rejoin;
* a downlink that arrives in the answer to an uplink goes to
  ``on_downlink(fport, data)`` (data None if the modem's line was garbled);
* with ``device.sleep``, ``sleep(ms)`` puts the modem to sleep with its
  dialect's command between uplinks, and the link wakes it before its next
  command (also after a boot: a deep sleep may have left it asleep);
* network time (LoRaWAN DeviceTimeReq, where the dialect has ``ask_time``):
  while the board has no clock, or had it from the network, the first uplink
  after a boot asks for it, then one a day after it was set, one an hour
  after a failure; the answer sets the node's clock (mss_node.pace.Clock).  A
  reply that cannot be read is logged and leaves the clock as it was: a
  clockless board goes on reporting by pacing;
* at link start, a board without a clock reads the modem's own clock
  (``modem_time``: RAK3172 ``AT+LTIME=?``, Wio-E5 ``AT+RTC=UTCMS``), which
  keeps network time across MCU resets that leave the modem powered; a time
  before 2024 (a modem never synced: the Wio-E5's RTC starts at 2020) is
  ignored;
* ``probe()``: a booting board still without a clock, on a modem with network
  time, sends right after the join one uplink without a report on
  ``device.lorawan.time_fport`` (default 3) carrying DeviceTimeReq; the
  aggregator counts those uplinks (``time_probes``) and stores nothing;
* ``status("skipped...")``: the epoch has no report (device.budget spent, no
  memo): one uplink of the byte 01 on ``time_fport``, counted by the aggregator
  (``skipped_epochs``);
* ``before_air``, if set, is called right before a report goes to the modem
  (the node marks it in flight in flash).

Class A: downlinks come only after an uplink, so ``poll`` has nothing to do.
"""
import time

from mss_device.rng import ByteRng
from mss_node import log
from mss_node.modem import DIALECTS, SENT, UNJOINED, open_modem
from mss_node.pace import set_clock

# device.lorawan: baud None is the modem's default; path: a tty instead of a UART (tests)
DEFAULTS = {"modem": "rak3172", "uart": None, "baud": None, "tx": None, "rx": None, "path": None,
            "fport": 1, "config_fport": 2, "time_fport": 3, "join_timeout_s": 30, "tx_timeout_s": 20,
            "retry_s": 30, "backoff_max_s": 3600, "pace_margin_ms": None}
SKIP = "01"  # the payload of a skip uplink on time_fport (SPEC.md section 11)
RESYNC_S = 86400  # network time asked again a day after it was set
RETIME_S = 3600  # ... an hour after it failed


def check(lw):
    """device.lorawan as mss_node.settings loads it: ValueError naming the field."""
    if lw["modem"] not in DIALECTS:
        raise ValueError("device.lorawan.modem must be one of %s" % ", ".join(DIALECTS))
    if lw["uart"] is None and not lw["path"]:
        raise ValueError("device.lorawan needs the modem's uart (number) or path")
    for key in ("fport", "config_fport", "time_fport"):
        if type(lw[key]) is not int or not 1 <= lw[key] <= 223:
            raise ValueError("device.lorawan.%s must be an application port, 1 to 223" % key)
    if len(set((lw["fport"], lw["config_fport"], lw["time_fport"]))) < 3:
        raise ValueError("device.lorawan.fport, config_fport and time_fport must differ")
    for key in ("join_timeout_s", "tx_timeout_s", "retry_s", "backoff_max_s"):
        if type(lw[key]) is not int or lw[key] < 1:
            raise ValueError("device.lorawan.%s must be a positive integer" % key)
    m = lw["pace_margin_ms"]  # None: period_s * 1000 / 32 (mss_node.app)
    if m is not None and (type(m) is not int or m < 0):
        raise ValueError("device.lorawan.pace_margin_ms must be a non-negative integer or null")
    return lw


def make(node):
    """The link of the node (mss_node.app.Node); its downlinks go to :func:`downlink`."""
    link = LorawanLink(node.s, lambda fport, data: downlink(node, fport, data), node.clock, node.rng)
    link.boot_time()
    return link


def downlink(node, fport, data):
    """A downlink for the node: a switch to a held config (:mod:`mss_node.switch`)."""
    if not node.s.device["configs"]:
        log.warn("ignored downlink on port %d: this board holds no other config" % fport)
        return
    from mss_node.switch import downlink as switch

    switch(node, fport, data)


class LorawanLink:
    def __init__(self, settings, on_downlink, clock=time.time, rng=None):
        self.cfg = settings.device["lorawan"]
        self.on_downlink = on_downlink
        self.clock = clock
        self.rng = rng or ByteRng()
        self.feed = None  # the watchdog's feed, called while waiting on the modem
        self.modem = open_modem(self.cfg, self._feed)
        self.joined = False
        self.backoff = self.cfg["retry_s"]
        self.next_try = 0
        self.asleep = settings.device["sleep"] != "none"  # may be, after a deep sleep
        self.before_air = None
        self.time_next = None  # clock time of the next network time request (None: the next uplink)
        self.told = False  # "this modem gives no network time" said

    def _feed(self):
        if self.feed is not None:
            self.feed()

    def _awake(self):
        if self.asleep:
            self.asleep = False
            if not self.modem.wake():
                log.warn("lorawan: the modem did not answer its wake-up")

    def sleep(self, ms):
        """The modem sleeps ``ms`` (or until woken before the next command)."""
        self._awake()  # it may still sleep from an earlier rest
        self.asleep = self.modem.sleep(ms)

    def dev_eui(self):
        self._awake()
        return self.modem.dev_eui()

    def _later(self, why):
        wait = self.backoff + self.rng.below(self.backoff + 1)  # jitter in [0, backoff]
        log.warn("lorawan: %s; retry in %d s" % (why, wait))
        self.next_try = self.clock() + wait
        self.backoff = min(self.backoff * 2, self.cfg["backoff_max_s"])

    def _up(self):
        if self.joined:
            return True
        if self.clock() < self.next_try:
            return False
        self._awake()
        ok, why = self.modem.join(self.cfg["join_timeout_s"] * 1000)
        if not ok:
            self._later("join failed (%s)" % why)
            return False
        self.joined = True
        self.backoff = self.cfg["retry_s"]
        log.info("lorawan joined")
        return True

    def send(self, report):
        if not self._up() or self.clock() < self.next_try:
            return False
        self._awake()
        if self.before_air is not None:
            self.before_air()
        timed = self._ask_time()
        status, why, down = self.modem.send(self.cfg["fport"], report.hex(),
                                            self.cfg["tx_timeout_s"] * 1000)
        self._downlink(down)  # the uplink went: it must count as sent whatever the downlink does
        if status == SENT:
            self.backoff = self.cfg["retry_s"]
            if why != "sent":
                log.warn("lorawan: modem took the uplink but gave no end of send (%s); "
                         "counted as sent, not sent again" % why)
            if timed:
                self._read_time()
            return True
        if status == UNJOINED:
            self.joined = False
        self._later("uplink refused (%s)" % why)
        return False

    def _downlink(self, down):
        if down is not None:
            try:
                self.on_downlink(down[0], down[1])
            except Exception as exc:
                log.warn("lorawan: downlink failed: %r" % (exc,))

    def status(self, word):
        """``skipped...`` (device.budget spent and no memo: the epoch has no report): one
        uplink of the 1 byte ``01`` on ``time_fport`` (a time probe's is ``00``), in place of
        the epoch's report and shorter on air; best effort, not retried.  Others: nothing."""
        if not word.startswith("skipped") or not self._up() or self.clock() < self.next_try:
            return
        self._awake()
        status, why, down = self.modem.send(self.cfg["time_fport"], SKIP, self.cfg["tx_timeout_s"] * 1000)
        self._downlink(down)
        if status == SENT:
            return
        if status == UNJOINED:
            self.joined = False
        self._later("skip uplink refused (%s)" % why)

    def poll(self):
        pass

    def boot_time(self):
        """Set a clockless board's clock from the modem's (module docstring); True if it did."""
        c = self.clock
        read = getattr(self.modem, "modem_time", None)
        if read is None or not hasattr(c, "net") or c.ok():
            return False
        try:
            self._awake()
            t = read()
        except Exception as exc:  # an unreadable answer: no time, never fatal
            log.warn("lorawan: modem clock unreadable: %r" % (exc,))
            return False
        if t is None or not set_clock(c, t):
            return False
        self.time_next = c() + RESYNC_S
        log.info("lorawan: clock set from the modem's network time: unix %d" % t)
        return True

    def probe(self):
        """A time probe (module docstring) if the board has no clock and the modem can ask
        the network for the time; True once done or not needed, False to try again (not joined)."""
        c = self.clock
        if not hasattr(c, "net") or c.ok() or getattr(self.modem, "ask_time", None) is None:
            return True
        if not self._up() or self.clock() < self.next_try:
            return False
        self._awake()
        if not self.modem.ask_time():
            log.warn("lorawan: the modem refused the network time request of the time probe")
            return True
        status, why, down = self.modem.send(self.cfg["time_fport"], "00", self.cfg["tx_timeout_s"] * 1000)
        self._downlink(down)
        if status == SENT:
            self._read_time()
            return True
        if status == UNJOINED:
            self.joined = False
        log.warn("lorawan: time probe refused (%s)" % why)
        return status != UNJOINED

    def _ask_time(self):
        """True if this uplink carries a network time request (see the module docstring)."""
        c = self.clock
        if not hasattr(c, "net") or (c.ok() and not c.net):  # a plain clock, or NTP/an RTC set it
            return False
        ask = getattr(self.modem, "ask_time", None)
        if ask is None:
            if not self.told:
                self.told = True
                log.warn("lorawan: %s modems give no network time (no DeviceTimeReq)" % self.cfg["modem"])
            return False
        if self.time_next is not None and c() < self.time_next:
            return False
        if ask():
            return True
        log.warn("lorawan: the modem refused the network time request (asked again with the next uplink)")
        return False

    def _read_time(self):
        c = self.clock
        try:
            t, why = self.modem.read_time()
        except Exception as exc:  # a reply no parser foresaw: logged, never fatal
            t, why = None, "unreadable reply: %r" % (exc,)
        if t is not None:
            was = c() if c.ok() else None
            if set_clock(c, t):
                if was is None or not -1 <= c() - was <= 1:  # set, or moved: the pace checks the record
                    c.stepped = True
                self.time_next = c() + RESYNC_S
                log.info("lorawan: clock set from the network (DeviceTimeAns): unix %d" % t)
                return
            why = "modem time %d: before 2024, no answer" % t
        self.time_next = c() + RETIME_S
        log.warn("lorawan: no network time (%s)%s" % (why, "" if c.ok() else "; no clock: reports stay paced"))
