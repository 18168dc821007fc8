"""What every emulated LoRaWAN modem shares: a pty, faults, sleep, radio time, network time.

:class:`ModemEmulator` owns the master side of a pty whose slave path the
firmware opens as its modem UART.  Its subclasses, one module per dialect
beside this one as in ``firmware/lib/mss_node/modem/`` (the sources), answer
the command dialects of the RAK3172 (RUI3, in the old and the
colon-separated event forms), the Seeed LoRa-E5 / Wio-E5 and the Microchip
RN2483/RN2903 as their manuals give them.  A modem can be told to
refuse: a list of ``faults`` per operation is consumed one per join or
send.  Join faults: ``fail``, ``busy``.  Send faults: ``busy``,
``no_channel``, ``duty_cycle``, ``unjoined``, ``length`` (as after a fall
back to a data rate whose payload limit is below the frame), ``mac_err``
(accepted, then not sent), ``silent`` (accepted, then no end of send: the
frame did go on air).  A frame longer than ``max_payload`` is refused as
``length`` too.  While its ``down`` event is set the network is out of
reach: the modem has lost its session (its link checks went unanswered),
so every send is refused as not joined and every join attempt times out.
Downlinks queued with :meth:`ModemEmulator.downlink` come in the answer to
the next uplink, as in LoRaWAN class A.  A modem runs its own thread
(``start``), or :class:`ModemPool` serves many from one thread.

Every uplink that went on air is passed to ``on_uplink(modem, fport, fcnt,
data)``; the frame counter restarts at 0 on every join, as in LoRaWAN 1.0.

Sleep between uplinks, each dialect's own (see the firmware's dialects for
the sources): RAK3172 ``AT+SLEEP=<ms>`` answers ``OK``, and any line wakes
it early and is answered; Wio-E5 ``AT+LOWPOWER=<ms>`` answers ``+LOWPOWER:
SLEEP``, and a line while it sleeps wakes it with ``+LOWPOWER: WAKEUP``
without being run; RN2483 ``sys sleep <ms>`` answers ``ok`` when it wakes,
at the end of the sleep or early on a break then 0x55 (a NUL then ``U`` on
the pty: auto-baud), and lines while it sleeps are lost.  The modem keeps,
on its ``clock`` (the board's time: an emulated board's sleeps take no real
time, see :mod:`.runtime`), the time it was awake and asleep, and the time
its radio transmitted (each uplink's and join request's airtime on
``link``, :func:`mss_protocol.lorawan.airtime_ms`) and listened (both
receive windows, empty: :func:`mss_protocol.energy.rx_windows_s`, or the
downlink's airtime in RX1): :meth:`ModemEmulator.stats`.

The emulator answers a send or a join in ``delays_s`` (50 ms), but a real
modem is awake from the uplink to the end of its last receive window: the
uplink's airtime, then RX2 RECEIVE_DELAY2 = 2 s after it and its empty
window (or RX1 at RECEIVE_DELAY1 = 1 s with the downlink in it), a join
request's the same at JOIN_ACCEPT_DELAY1 = 5 s / JOIN_ACCEPT_DELAY2 = 6 s
(RP002-1.0.x section 3.3, "Default Settings"): the exchange's physical
time, :meth:`ModemEmulator.exchange_s`, as :func:`mss_protocol.energy.report`
counts a report (``times_s["wait"]``).  The modem keeps its times on
``clock`` plus what the emulator compressed (each exchange's physical time
less the answer's delay, ``stretch_s``), so it is never awake less than its
radio's exchanges took, and a sleep commanded after one starts at its end.

Network time (LoRaWAN DeviceTimeReq/Ans): RAK3172 ``AT+TIMEREQ=1`` (not
joined: ``AT_NO_NETWORK_JOINED``) and Wio-E5 ``AT+LW=DTR`` (``+LW: DTR``)
put the request on the next uplink; the network answers with the GPS time
at the end of that uplink, ``net_clock() + net_offset`` (unix) + 18 leap
seconds - 315964800, in 1/256 s, which the modem turns back into UTC
(``gps + 315964800 - 18``) and keeps ticking on ``net_clock``.  The RAK3172
then says ``+EVT:TIMEREQ_OK`` before ``+EVT:TX_DONE`` (after it, with
``timereq_after_done``), clears the request and answers ``AT+LTIME=?`` with
``LTIME: 04h36m00s on 11/27/2023`` (the older manual's ``LTIME: 00h37m58s
2018-11-14`` as ``rak3172-old``; 1970 plus its uptime before any answer); the
Wio-E5 answers ``AT+RTC=UTCMS`` with ``+RTC: 2026-04-30 12:30:49.465`` (2020
plus its uptime before any answer).  ``time_reply``: None (answers),
``"none"`` (the network never answers: ``+EVT:TIMEREQ_FAILED``, the RTC
stays unset) or ``"garbage"`` (the read-back is a line no parser reads).
``power_off()`` is a power cycle: no session, no time, no pending request.
RN2483: no such commands (``invalid_param``).

OTAA keys (``dev_eui``, ``join_eui``, ``app_key``, lowercase hex; a new modem's
JoinEUI and AppKey are zeros) are written and read back with each dialect's
commands (:mod:`mss_aggregator.deploy.keys` cites the manuals): the RAK3172
reads back all three, the Wio-E5 and the RN2483 the two EUIs only; the RN2483
keeps what ``mac save`` saved over a power cycle, the others write through.
"""
import os
import pty
import select
import selectors
import threading
import time
import tty
from datetime import datetime, timezone

from mss_protocol import energy, lorawan

GPS_UNIX_OFFSET = 315964800  # unix time of the GPS epoch, 1980-01-06 (LoRaMac-node UNIX_GPS_EPOCH_OFFSET)
LEAP_SECONDS = 18  # GPS - UTC since 2017-01-01 (RUI3 and ST's AT firmware hard-code it)
DELAYS_S = (0.05, 0.05)  # (join, send): how long the modem takes to answer a join and a send


class ModemEmulator(threading.Thread):
    """One emulated modem on a pty (the module docstring); a dialect's subclass answers
    its commands (``_answer``) and says what a line heard asleep does (``_while_asleep``)."""

    SLEEP_COMMAND = None  # the dialect's sleep command, up to its argument

    def __init__(self, dialect, dev_eui, on_uplink=None, faults=None, max_payload=51, delays_s=DELAYS_S, clock=None,
                 link="lorawan:us915:0"):
        super().__init__(name=f"modem-{dev_eui}", daemon=True)
        self.dialect, self.dev_eui = dialect, dev_eui.lower()
        self.join_eui, self.app_key = "0" * 16, "0" * 32  # OTAA keys as a new modem holds them
        self.on_uplink = on_uplink or (lambda *a: None)
        self.faults = {"join": [], "send": []}
        self.faults.update(faults or {})
        self.max_payload = max_payload
        self.join_delay_s, self.tx_delay_s = delays_s
        self.joined, self.fcnt, self.fport = False, 0, 1
        self.joins = 0
        self.uplinks = []  # (fport, fcnt, data) of every frame that went on air
        self.commands = []  # every line received
        self.pending = []  # downlinks (fport, hex text) for the next uplink
        self.down = threading.Event()  # set: the network is out of reach (see the module docstring)
        self.net_clock, self.net_offset = time.time, 0.0  # the network's time (module docstring)
        self.time_reply, self.timereq_after_done = None, False
        self.time_requests = 0  # DeviceTimeReq carried by uplinks
        self._timereq, self._synced, self._booted = False, None, time.time()
        self._buf = b""
        self.master, slave = pty.openpty()
        tty.setraw(slave)  # no echo, no CR/LF translation: a UART
        self.path = os.ttyname(slave)
        self._slave = slave  # held open so the pty lives while the device reconnects
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self.clock = clock or time.monotonic
        self.link = lorawan.parse_link(link)
        self.sleeps = []  # (clock time, ms) of every sleep command taken
        self.woken = 0  # sleeps ended early by UART traffic
        self.lost = 0  # lines sent while it slept that it could not hear (RN2483)
        self._first = None  # clock time of the first line
        self._asleep = None  # (since, until) while asleep; until may be inf
        self._asleep_s = self._tx_s = self._rx_s = 0.0
        self.stretch_s = 0.0  # radio time the emulator did not spend on clock (the module docstring)

    # -- control -------------------------------------------------------------
    def power_off(self):
        """A power cycle of the modem: it forgets its session, its time and a pending time request."""
        with self._lock:
            self.joined, self.fcnt, self.fport = False, 0, 1
            self._timereq, self._synced, self._booted = False, None, self.net_clock()

    def _set_key(self, field, text):
        """Set the OTAA key ``field`` from the hex ``text``: True, or False if it is not hex of its length."""
        digits = text.strip().strip('"').lower()
        if len(digits) != (32 if field == "app_key" else 16) or any(c not in "0123456789abcdef" for c in digits):
            return False
        setattr(self, field, digits)
        return True

    def _device_time(self):
        """An uplink carrying DeviceTimeReq went on air: True if the network answered (the modem's
        time is set, module docstring)."""
        self._timereq = False
        self.time_requests += 1
        if self.time_reply == "none":
            return False
        now = self.net_clock()
        gps = now + self.net_offset - GPS_UNIX_OFFSET + LEAP_SECONDS
        ans = int(gps) + int((gps - int(gps)) * 256) / 256  # DeviceTimeAns: u32 seconds, 1/256 s
        self._synced = (ans + GPS_UNIX_OFFSET - LEAP_SECONDS, now)
        return True

    def modem_time(self):
        """The UTC unix time the modem keeps: from the last DeviceTimeAns, else ``None``."""
        if self._synced is None:
            return None
        t, at = self._synced
        return t + self.net_clock() - at

    def _rtc(self, unset_from):
        t = self.modem_time()
        return datetime.fromtimestamp(unset_from + self.net_clock() - self._booted if t is None else t,
                                      timezone.utc)

    def downlink(self, fport, data):
        """Deliver ``data`` (bytes, or a str written as is: garbled hex) on ``fport``."""
        with self._lock:
            self.pending.append((fport, data.hex().upper() if isinstance(data, bytes) else data))

    def stop(self):
        self._halt.set()
        if self.ident is not None:  # started as its own thread (not served by a ModemPool)
            self.join(2)
        self.close()

    def close(self):
        for fd in (self.master, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass

    def now(self):
        """The modem's physical time: ``clock`` plus ``stretch_s`` (the module docstring)."""
        return self.clock() + self.stretch_s

    def stats(self):
        """Times (s, on :meth:`now`) since the first command: ``awake_s`` (never less than its
        radio's exchanges, :meth:`exchange_s`), ``asleep_s`` (a sleep still running counts to its
        end), ``tx_s``, ``rx_s`` (radio on, within the awake time), with ``sleeps`` commands taken,
        ``uplinks`` on air, ``joins`` accepted, ``stretch_s`` and ``time_requests`` (DeviceTimeReq carried)."""
        with self._lock:
            now, asleep = self.now(), self._asleep_s
            end = now
            if self._asleep is not None:
                since, until = self._asleep
                end = max(now, until) if until != float("inf") else now
                asleep += end - since
            span = 0.0 if self._first is None else end - self._first
            return {"awake_s": max(0.0, span - asleep), "asleep_s": asleep, "tx_s": self._tx_s,
                    "rx_s": self._rx_s, "sleeps": len(self.sleeps), "uplinks": len(self.uplinks),
                    "stretch_s": self.stretch_s, "time_requests": self.time_requests, "joins": self.joins}

    def poll(self):
        """End a timed sleep that is over (an RN2483 then says ``ok``); the serving loops call it."""
        self._wake_due(self.now())

    def _sleep(self, ms):
        now = self.now()
        with self._lock:
            self.sleeps.append((now - self.stretch_s, ms))  # on clock, as the board saw it
            self._asleep = (now, now + ms / 1000 if ms is not None else float("inf"))

    def _woke(self, at):
        with self._lock:
            since, _ = self._asleep
            self._asleep_s += max(0.0, at - since)
            self._asleep = None

    def _wake_due(self, now):
        if self._asleep is not None and now >= self._asleep[1]:
            self._woke(self._asleep[1])
            self._timer_woke()

    def _timer_woke(self):
        """What the dialect says when its sleep's timer ends it (RN2483: ``ok``)."""

    def _join_radio(self, accepted):
        """A join request on air, then a join-accept in RX1 or two empty windows."""
        self._radio(lorawan.JOIN_REQUEST_BYTES, lorawan.JOIN_ACCEPT_BYTES if accepted else None, join=True)  # no CFList

    def _air(self, phy_bytes, sf, bw_khz):
        return lorawan.airtime_ms(phy_bytes - lorawan.OVERHEAD_BYTES, sf, bw_khz) / 1000

    def exchange_s(self, up_bytes, down_bytes=None, join=False):
        """(TX, RX, awake) s of one exchange on ``link``: an uplink of ``up_bytes`` (PHYPayload) on
        air, then RX1 and RX2 empty (awake to the end of RX2) or RX1 with a downlink of
        ``down_bytes`` (awake to its end); ``join``: a join request, at the join-accept delays."""
        link, rx = self.link, energy.DOWNLINK_DRS[self.link.region]
        delay1, delay2 = ((energy.JOIN_ACCEPT_DELAY1_S, energy.JOIN_ACCEPT_DELAY2_S) if join
                          else (energy.RECEIVE_DELAY1_S, energy.RECEIVE_DELAY2_S))
        tx = self._air(up_bytes, link.sf, link.bw_khz)
        if down_bytes is None:
            rx1, rx2 = energy.rx_windows_s(link)
            return tx, rx1 + rx2, tx + delay2 + rx2
        down = self._air(down_bytes, *rx[energy.RX1_DR[link.region][link.dr]])
        return tx, down, tx + delay1 + down

    def _radio(self, up_bytes, down_bytes, join=False):
        """An exchange (:meth:`exchange_s`) took place: its radio time counted, and what the
        emulator's answer (``delays_s``) did not spend of its physical time added to ``stretch_s``."""
        tx, rx, awake = self.exchange_s(up_bytes, down_bytes, join)
        with self._lock:
            self._tx_s += tx
            self._rx_s += rx
            self.stretch_s += max(0.0, awake - (self.join_delay_s if join else self.tx_delay_s))

    # -- the serial line -----------------------------------------------------
    def run(self):
        while not self._halt.is_set():
            try:
                ready, _, _ = select.select([self.master], [], [], 0.1)
                if not ready:
                    self.poll()
                    continue
                data = os.read(self.master, 1024)
            except OSError:  # the device closed its end; it may open it again
                time.sleep(0.05)
                continue
            self.feed(data)

    def feed(self, data):
        """Take ``data``, bytes the device wrote, and answer every complete line."""
        self._buf += data
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            text = line.strip().decode("ascii", "replace")
            if text:
                self.commands.append(text)
                now = self.now()
                if self._first is None:
                    self._first = now
                self._wake_due(now)
                if self._asleep is None or self._while_asleep(text, now):
                    self._answer(text)

    def _while_asleep(self, text, now):
        """True if ``text``, heard while asleep, is to be answered as usual (it woke the modem)."""
        raise NotImplementedError(f"{type(self).__name__} does not say what a line heard asleep does")

    def _wakes(self, now):
        """A line heard asleep woke the modem."""
        self.woken += 1
        self._woke(now)

    def _say(self, *lines, delay=0.0):
        if delay:
            time.sleep(delay)
        try:
            os.write(self.master, "".join(f"{line}\r\n" for line in lines).encode())
        except OSError:
            pass

    def _answer(self, text):
        raise NotImplementedError(f"{type(self).__name__} answers no command")

    def _fault(self, op):
        with self._lock:
            return self.faults[op].pop(0) if self.faults[op] else None


    def _join(self):
        """(ok, fault) of a join attempt."""
        fault = self._fault("join")
        if self.down.is_set() and fault is None:
            fault = "fail"  # no join accept comes back
        if fault is None:
            self.joined, self.fcnt = True, 0
            self.joins += 1
        return fault is None, fault

    def _uplink(self, fport, hexdata):
        """(outcome, downlink): outcome "sent", "silent" or a refusal name."""
        fault = self._fault("send")
        try:
            data = bytes.fromhex(hexdata)
        except ValueError:
            return "param", None
        if not self.joined:
            return "unjoined", None
        if self.down.is_set() and fault is None:
            fault = "unjoined"  # the session is lost: the device must rejoin
        if fault is None and len(data) > self.max_payload:
            fault = "length"
        if fault == "unjoined":  # the network forgot the session: a real rejoin follows
            self.joined = False
        if fault in ("busy", "no_channel", "duty_cycle", "unjoined", "length", "mac_err"):
            return fault, None
        self.uplinks.append((fport, self.fcnt, data))
        self.on_uplink(self, fport, self.fcnt, data)
        self.fcnt += 1
        with self._lock:
            down = self.pending.pop(0) if self.pending else None
        timereq = lorawan.DEVICE_TIME_REQ_BYTES if self._timereq else 0  # the request rides in FOpts
        self._radio(len(data) + lorawan.OVERHEAD_BYTES + timereq,
                    None if down is None else len(down[1]) // 2 + lorawan.OVERHEAD_BYTES)
        return ("silent" if fault == "silent" else "sent"), down



class ModemPool(threading.Thread):
    """Serves many :class:`ModemEmulator` objects (not started themselves) from
    one thread: a fleet of hundreds of modems would otherwise be hundreds of
    threads waking to poll.  It waits with epoll (``selectors``), so the
    modems' descriptors may lie above select()'s FD_SETSIZE."""

    def __init__(self, modems):
        super().__init__(name="modem-pool", daemon=True)
        self.modems = list(modems)
        self._halt = threading.Event()
        self._selector = selectors.DefaultSelector()
        for m in self.modems:
            self._selector.register(m.master, selectors.EVENT_READ, m)

    def run(self):
        while not self._halt.is_set():
            events = self._selector.select(0.1)
            for key, _ in events:
                try:
                    data = os.read(key.fd, 1024)
                except OSError:  # the device closed its end; it may open it again
                    continue
                key.data.feed(data)
            if not events:
                for m in self.modems:
                    m.poll()

    def stop(self):
        self._halt.set()
        if self.ident is not None:
            self.join(2)
        self._selector.close()
        for m in self.modems:
            m.close()
