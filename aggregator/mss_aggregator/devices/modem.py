"""Emulated LoRaWAN modems on real ptys, and a network server in ChirpStack's shape.

:class:`ModemEmulator` owns the master side of a pty whose slave path the
firmware opens as its modem UART.  It answers the command dialects of the
RAK3172 (RUI3, in the old and the colon-separated event forms), the Seeed
LoRa-E5 / Wio-E5 and the Microchip RN2483/RN2903 as their manuals give them
(see ``firmware/lib/mss_node/modem/`` for the sources), and can be told to
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

:class:`ChirpStackEmulator` publishes those uplinks as ChirpStack v4's
MQTT integration does, ``event/up`` events made with ChirpStack's own
protobuf messages (``chirpstack-api``) through either of its marshalers
(JSON or binary protobuf), and feeds ``command/down`` documents back to the
devices' modems; :class:`TheThingsStackEmulator` does the same in The
Things Stack v3's documented shape (``v3/<app>@<tenant>/devices/<id>/up``
at QoS 0, ``.../down/push``).  Tests and ``mss demo --lorawan chirpstack`` use them.
"""
import base64
import json
import os
import pty
import select
import selectors
import threading
import time
import tty
import uuid
from datetime import datetime, timezone

from mss_protocol import energy, lorawan

DIALECTS = ("rak3172", "rak3172-old", "wio-e5", "rn2483")
GPS_UNIX_OFFSET = 315964800  # unix time of the GPS epoch, 1980-01-06 (LoRaMac-node UNIX_GPS_EPOCH_OFFSET)
LEAP_SECONDS = 18  # GPS - UTC since 2017-01-01 (RUI3 and ST's AT firmware hard-code it)
RN_VERSION = "RN2483 1.0.5 Oct 31 2018 15:06:52"  # as field modules print it (sys get ver)
SLEEP_COMMANDS = {"rak3172": "AT+SLEEP=", "rak3172-old": "AT+SLEEP=", "wio-e5": "AT+LOWPOWER=",
                  "rn2483": "sys sleep "}
_JOIN_REQUEST, _JOIN_ACCEPT = 23, 17  # PHYPayload bytes (LoRaWAN 1.0.x, no CFList)


class ModemEmulator(threading.Thread):
    def __init__(self, dialect, dev_eui, on_uplink=None, faults=None, max_payload=51,
                 join_delay_s=0.05, tx_delay_s=0.05, clock=None, link="lorawan:us915:0"):
        super().__init__(name=f"modem-{dev_eui}", daemon=True)
        if dialect not in DIALECTS:
            raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}, got {dialect!r}")
        self.dialect, self.dev_eui = dialect, dev_eui.lower()
        self.on_uplink = on_uplink or (lambda *a: None)
        self.faults = {"join": [], "send": []}
        self.faults.update(faults or {})
        self.max_payload = max_payload
        self.join_delay_s, self.tx_delay_s = join_delay_s, tx_delay_s
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

    # -- control -------------------------------------------------------------
    def power_off(self):
        """A power cycle of the modem: it forgets its session, its time and a pending time request."""
        with self._lock:
            self.joined, self.fcnt, self.fport = False, 0, 1
            self._timereq, self._synced, self._booted = False, None, self.net_clock()

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

    def stats(self):
        """Times (s, on ``clock``) since the first command: ``awake_s``, ``asleep_s`` (a sleep
        still running counts to its end), ``tx_s``, ``rx_s`` (radio on, within the awake time),
        with ``sleeps`` commands taken and ``uplinks`` on air."""
        with self._lock:
            now, asleep = self.clock(), self._asleep_s
            end = now
            if self._asleep is not None:
                since, until = self._asleep
                end = max(now, until) if until != float("inf") else now
                asleep += end - since
            span = 0.0 if self._first is None else end - self._first
            return {"awake_s": max(0.0, span - asleep), "asleep_s": asleep, "tx_s": self._tx_s,
                    "rx_s": self._rx_s, "sleeps": len(self.sleeps), "uplinks": len(self.uplinks)}

    def poll(self):
        """End a timed sleep that is over (an RN2483 then says ``ok``); the serving loops call it."""
        self._wake_due(self.clock())

    def _sleep(self, ms):
        now = self.clock()
        with self._lock:
            self.sleeps.append((now, ms))
            self._asleep = (now, now + ms / 1000 if ms is not None else float("inf"))

    def _woke(self, at):
        with self._lock:
            since, _ = self._asleep
            self._asleep_s += max(0.0, at - since)
            self._asleep = None

    def _wake_due(self, now):
        if self._asleep is not None and now >= self._asleep[1]:
            self._woke(self._asleep[1])
            if self.dialect == "rn2483":
                self._say("ok")  # the answer to sys sleep

    def _join_radio(self, accepted):
        """A join request on air, then a join-accept in RX1 or two empty windows."""
        self._radio(_JOIN_REQUEST, _JOIN_ACCEPT if accepted else None)

    def _air(self, phy_bytes, sf, bw_khz):
        return lorawan.airtime_ms(phy_bytes - lorawan.OVERHEAD_BYTES, sf, bw_khz) / 1000

    def _radio(self, up_bytes, down_bytes):
        """An uplink of ``up_bytes`` (PHYPayload) on air, then RX1 and RX2 empty or RX1 with a
        downlink of ``down_bytes``."""
        link, rx = self.link, energy.DOWNLINK_DRS[self.link.region]
        with self._lock:
            self._tx_s += self._air(up_bytes, link.sf, link.bw_khz)
            if down_bytes is None:
                self._rx_s += sum(energy.rx_windows_s(link))
            else:
                self._rx_s += self._air(down_bytes, *rx[energy.RX1_DR[link.region][link.dr]])

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
                now = self.clock()
                if self._first is None:
                    self._first = now
                self._wake_due(now)
                if self._asleep is None or self._while_asleep(text, now):
                    self._answer(text)

    def _while_asleep(self, text, now):
        """True if ``text``, heard while asleep, is to be answered as usual (it woke the modem)."""
        if self.dialect == "rn2483" and not (text.startswith("\x00") and text.lstrip("\x00").startswith("U")):
            self.lost += 1  # asleep, an RN2483 hears nothing but a break
            return False
        self.woken += 1
        self._woke(now)
        if self.dialect == "wio-e5":
            self._say("+LOWPOWER: WAKEUP")  # the line that woke it is not run
            return False
        if self.dialect == "rn2483":
            self._say("ok")  # the answer to sys sleep
        return True  # RAK3172 in Stop1: the UART wakes it and the command runs

    def _say(self, *lines, delay=0.0):
        if delay:
            time.sleep(delay)
        try:
            os.write(self.master, "".join(f"{line}\r\n" for line in lines).encode())
        except OSError:
            pass

    def _fault(self, op):
        with self._lock:
            return self.faults[op].pop(0) if self.faults[op] else None

    def _answer(self, text):
        if self.dialect.startswith("rak3172"):
            self._rak(text, old=self.dialect.endswith("-old"))
        elif self.dialect == "wio-e5":
            self._e5(text)
        else:
            self._rn(text)

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
        self._radio(len(data) + lorawan.OVERHEAD_BYTES,
                    None if down is None else len(down[1]) // 2 + lorawan.OVERHEAD_BYTES)
        return ("silent" if fault == "silent" else "sent"), down

    # -- RAK3172, RUI3 -------------------------------------------------------
    def _rak(self, text, old):
        if text == "AT":
            self._say("OK")
        elif text == "AT+SLEEP" or text.startswith("AT+SLEEP="):
            ms = text[9:]
            if text != "AT+SLEEP" and not (ms.isdigit() and 1 <= int(ms) < 2 ** 32):
                self._say("AT_PARAM_ERROR")
                return
            self._sleep(int(ms) if ms else None)  # from now: the board may sleep on the answer
            self._say("OK")
        elif text == "AT+DEVEUI=?":
            self._say(self.dev_eui.upper() if old else f"AT+DEVEUI={self.dev_eui.upper()}", "OK")
        elif text == "AT+NJS=?":
            self._say(str(int(self.joined)) if old else f"AT+NJS={int(self.joined)}", "OK")
        elif text.startswith("AT+TIMEREQ="):
            arg = text[11:]
            if arg == "?":
                self._say(str(int(self._timereq)) if old else f"AT+TIMEREQ={int(self._timereq)}", "OK")
            elif arg not in ("0", "1"):
                self._say("AT_PARAM_ERROR")
            elif not self.joined:
                self._say("AT_NO_NETWORK_JOINED")
            else:
                self._timereq = arg == "1"
                self._say("OK")
        elif text == "AT+LTIME=?":
            d = self._rtc(0)
            if self.time_reply == "garbage":
                self._say("LTIME: 25h61m??s on 13/45/20x3", "OK")
            elif old:
                self._say(f"LTIME: {d:%H}h{d:%M}m{d:%S}s {d:%Y-%m-%d}", "OK")
            else:
                self._say(f"LTIME: {d:%H}h{d:%M}m{d:%S}s on {d:%m/%d/%Y}", "OK")
        elif text.startswith("AT+JOIN="):
            ok, fault = self._join()
            if fault == "busy":
                self._say("AT_BUSY_ERROR")
                return
            self._join_radio(ok)
            self._say("OK")
            self._say("+EVT:JOINED" if ok else ("+EVT:JOIN FAILED" if old else "+EVT:JOIN_FAILED_RX_TIMEOUT"),
                      delay=self.join_delay_s)
        elif text.startswith("AT+SEND="):
            port, _, hexdata = text[8:].partition(":")
            outcome, down = self._uplink(int(port) if port.isdigit() else 0, hexdata)
            refusal = {"unjoined": "AT_NO_NETWORK_JOINED", "busy": "AT_BUSY_ERROR",
                       "no_channel": "AT_BUSY_ERROR", "duty_cycle": "AT_BUSY_ERROR",
                       "length": "AT_PARAM_ERROR", "param": "AT_PARAM_ERROR", "mac_err": "AT_ERROR"}
            if outcome in refusal:
                self._say(refusal[outcome])
                return
            self._say("OK")
            lines = []
            if down:
                lines = (["+EVT:RX_1, RSSI -52, SNR 9", "+EVT:UNICAST", f"+EVT:{down[0]}:{down[1]}"] if old
                         else [f"+EVT:RX_1:-52:9:UNICAST:{down[0]}:{down[1]}"])
            timereq = None
            if self._timereq:
                timereq = "+EVT:TIMEREQ_OK" if self._device_time() else "+EVT:TIMEREQ_FAILED"
                if not self.timereq_after_done:
                    lines.append(timereq)
            if outcome == "sent":
                lines.append("+EVT:TX_DONE")
            if timereq and self.timereq_after_done:
                lines.append(timereq)
            if lines:
                self._say(*lines, delay=self.tx_delay_s)
        else:
            self._say("AT_ERROR")

    # -- Seeed LoRa-E5 / Wio-E5 ---------------------------------------------
    def _e5(self, text):
        if text == "AT":
            self._say("+AT: OK")
        elif text == "AT+LOWPOWER" or text.startswith("AT+LOWPOWER="):
            ms = text[12:]
            if text != "AT+LOWPOWER" and not ms.isdigit():
                self._say("+LOWPOWER: ERROR(-1)")
                return
            self._sleep(int(ms) if ms else None)
            self._say("+LOWPOWER: SLEEP")
        elif text == "AT+ID=DevEui":
            eui = ":".join(self.dev_eui[i:i + 2].upper() for i in range(0, 16, 2))
            self._say(f"+ID: DevEui, {eui}")
        elif text.startswith("AT+PORT="):
            self.fport = int(text[8:]) if text[8:].isdigit() else self.fport
            self._say(f"+PORT: {self.fport}")
        elif text == "AT+LW=DTR":
            self._timereq = True
            self._say("+LW: DTR")
        elif text == "AT+RTC=UTCMS":
            d = self._rtc(1577836800)  # the module's RTC starts at 2020-01-01 at power-up
            if self.time_reply == "garbage":
                self._say(f"+RTC: {d:%Y/%m/%dT%H:%M:%SZ}")
            else:
                self._say(f"+RTC: {d:%Y-%m-%d %H:%M:%S}.{d.microsecond // 1000:03d}")
        elif text == "AT+JOIN":
            if self.joined:
                self._say("+JOIN: Joined already")
                return
            ok, fault = self._join()
            if fault == "busy":
                self._say("+JOIN: LoRaWAN modem is busy")
                return
            self._join_radio(ok)
            self._say("+JOIN: Start", "+JOIN: NORMAL")
            if ok:
                self._say("+JOIN: Network joined", "+JOIN: NetID 000013 DevAddr 26:01:1B:2C", "+JOIN: Done",
                          delay=self.join_delay_s)
            else:
                self._say("+JOIN: Join failed", "+JOIN: Done", delay=self.join_delay_s)
        elif text.startswith("AT+MSGHEX="):
            outcome, down = self._uplink(self.fport, text[10:].strip('"'))
            refusal = {"unjoined": "Please join network first", "busy": "LoRaWAN modem is busy",
                       "no_channel": "No free channel", "duty_cycle": "No band in 2340ms",
                       "length": f"Length error {min(self.max_payload, 11)}", "param": "Parameter error",
                       "mac_err": "No free channel"}
            if outcome in refusal:
                self._say(f"+MSGHEX: {refusal[outcome]}")
                return
            self._say("+MSGHEX: Start")
            if self._timereq:
                self._device_time()
            lines = []
            if down:
                lines = ["+MSGHEX: FPENDING", f'+MSGHEX: PORT: {down[0]}; RX: "{down[1]}"',
                         "+MSGHEX: RXWIN1, RSSI -70, SNR 5.5"]
            if outcome == "sent":
                lines.append("+MSGHEX: Done")
            if lines:
                self._say(*lines, delay=self.tx_delay_s)
        else:
            self._say("+AT: ERROR(-1)")

    # -- Microchip RN2483 / RN2903 ------------------------------------------
    def _rn(self, text):
        if text.startswith("\x00"):  # a break (a NUL on the pty) then 0x55: auto-baud, not a command
            text = text.lstrip("\x00")
            text = text[1:] if text.startswith("U") else text
            if not text:
                return
        if text == "mac get deveui":
            self._say(self.dev_eui.upper())
        elif text == "sys get ver":
            self._say(RN_VERSION)
        elif text.startswith("sys sleep "):
            ms = text[10:]
            if not (ms.isdigit() and 100 <= int(ms) <= 2 ** 32):
                self._say("invalid_param")
                return
            self._sleep(int(ms))  # "ok" when it wakes
        elif text == "mac join otaa":
            ok, fault = self._join()
            if fault == "busy":
                self._say("busy")
                return
            self._join_radio(ok)
            self._say("ok")
            self._say("accepted" if ok else "denied", delay=self.join_delay_s)
        elif text.startswith("mac tx uncnf "):
            port, _, hexdata = text[13:].partition(" ")
            outcome, down = self._uplink(int(port) if port.isdigit() else 0, hexdata)
            immediate = {"unjoined": "not_joined", "busy": "busy", "no_channel": "no_free_ch",
                         "duty_cycle": "no_free_ch", "param": "invalid_param"}
            if outcome in immediate:
                self._say(immediate[outcome])
                return
            self._say("ok")
            if outcome in ("length", "mac_err"):  # after ok: not sent
                self._say("invalid_data_len" if outcome == "length" else "mac_err", delay=self.tx_delay_s)
            elif outcome == "sent":
                self._say(f"mac_rx {down[0]} {down[1]}" if down else "mac_tx_ok", delay=self.tx_delay_s)
        else:
            self._say("invalid_param")


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


def rfc3339(t):
    """As both servers print times: UTC, nanoseconds, Z."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f") + "417Z"


def omit_empty(value):
    """What The Things Stack does to its JSON ("Empty fields are omitted from payloads"):
    drop 0, false, "", null and empty fields, at every depth."""
    if isinstance(value, dict):
        value = {k: omit_empty(v) for k, v in value.items()}
        return {k: v for k, v in value.items() if not (v in (0, "", None) or v == [] or v == {})}
    if isinstance(value, list):
        return [omit_empty(v) for v in value]
    return value


MARSHALERS = ("json", "protobuf")  # ChirpStack's [integration.mqtt] json = true / false


def chirpstack_event(app, dev_eui, fport, fcnt, data, t, gateway=0):
    """(topic, ``integration.UplinkEvent``) of an uplink as ChirpStack v4 publishes it, built
    with ChirpStack's own protobuf messages (the ``chirpstack-api`` package); ``t`` None leaves
    the time unset, ``gateway`` numbers the receiver."""
    from chirpstack_api import common, gw, integration

    event = integration.UplinkEvent(
        deduplication_id=f"{fcnt:08x}-6f6a-4a1f-9a1b-{dev_eui[4:]}",
        device_info=integration.DeviceInfo(
            tenant_id="52f14cd4-c6f1-4fbd-8f87-4025e1d49242", tenant_name="ChirpStack", application_id=app,
            application_name="mss", device_profile_id="0b1a8f2e-0d9c-4a52-9b7e-2f5f3c6a1d10",
            device_profile_name="US915 class A", device_name=f"node-{dev_eui[-4:]}", dev_eui=dev_eui,
            device_class_enabled=common.DeviceClass.CLASS_A),
        dev_addr=dev_eui[-8:], adr=True, dr=0, f_cnt=fcnt, f_port=fport, confirmed=False, data=data,
        rx_info=[gw.UplinkRxInfo(gateway_id=f"0080000000a0{gateway:04x}", uplink_id=4242 + gateway,
                                 rssi=-70 - 9 * gateway, snr=9.5 - 4 * gateway, channel=gateway,
                                 context=bytes([gateway, 7, 7, 7]),
                                 metadata={"region_config_id": "us915_0", "region_common_name": "US915"},
                                 crc_status=gw.CRCStatus.CRC_OK)],
        tx_info=gw.UplinkTxInfo(frequency=902300000, modulation=gw.Modulation(lora=gw.LoraModulationInfo(
            bandwidth=125000, spreading_factor=10, code_rate=gw.CodeRate.CR_4_5))),
        region_config_id="us915_0")
    if t is not None:
        event.time.FromNanoseconds(int(round(t * 1e6)) * 1000)
    return f"application/{app}/device/{dev_eui}/event/up", event


def chirpstack_json(event):
    """The document ChirpStack's JSON marshaler makes of ``event``: the proto3 JSON mapping
    (camelCase names, bytes in base64, enums by name), with the zero fields, as its
    serde code is built with pbjson's emit_fields (api/rust/build.rs)."""
    from google.protobuf import json_format

    doc = json_format.MessageToDict(event, always_print_fields_with_no_presence=True)
    for rx in doc.get("rxInfo", ()):  # a map's order is arbitrary (a HashMap in ChirpStack): sorted, to be stable
        rx["metadata"] = dict(sorted(rx.get("metadata", {}).items()))
    return doc


def marshal(event, marshaler):
    """``event`` as ChirpStack publishes it with ``marshaler`` (:data:`MARSHALERS`): compact JSON
    (serde_json::to_vec) or the binary protobuf encoding (prost's encode_to_vec)."""
    if marshaler == "json":
        return json.dumps(chirpstack_json(event), separators=(",", ":")).encode()
    if marshaler == "protobuf":
        return event.SerializeToString(deterministic=True)  # map entries sorted, as for the JSON
    raise ValueError(f"marshaler must be one of {', '.join(MARSHALERS)}, got {marshaler!r}")


def chirpstack_uplink(app, dev_eui, fport, fcnt, data, t, gateway=0):
    """(topic, JSON document as a dict) of :func:`chirpstack_event`: what tests edit into bad events."""
    topic, event = chirpstack_event(app, dev_eui, fport, fcnt, data, t, gateway)
    return topic, chirpstack_json(event)


def tts_device_id(dev_eui):
    """The end-device id The Things Stack's console proposes for a DevEUI."""
    return f"eui-{dev_eui.lower()}"


# The Things Stack v3's uplink message as its documentation gives it (field paths, a list's items
# under the list's name): thethingsindustries.com/docs/integrations/data-formats, "Uplink Messages"
# (lorawan-stack-docs doc/content/integrations/data-formats/_index.md), published on the MQTT
# server's v3/{application id}@{tenant id}/devices/{device id}/up.  Tests hold tts_uplink to it.
TTS_UPLINK_FIELDS = frozenset(tuple(p.split(".")) for p in """
    end_device_ids end_device_ids.device_id end_device_ids.application_ids
    end_device_ids.application_ids.application_id end_device_ids.dev_eui end_device_ids.join_eui
    end_device_ids.dev_addr correlation_ids received_at simulated
    uplink_message uplink_message.session_key_id uplink_message.f_cnt uplink_message.f_port
    uplink_message.frm_payload uplink_message.decoded_payload uplink_message.rx_metadata
    uplink_message.rx_metadata.gateway_ids uplink_message.rx_metadata.gateway_ids.gateway_id
    uplink_message.rx_metadata.gateway_ids.eui uplink_message.rx_metadata.time
    uplink_message.rx_metadata.timestamp uplink_message.rx_metadata.rssi uplink_message.rx_metadata.channel_rssi
    uplink_message.rx_metadata.snr uplink_message.rx_metadata.uplink_token uplink_message.rx_metadata.channel_index
    uplink_message.settings uplink_message.settings.data_rate uplink_message.settings.data_rate.lora
    uplink_message.settings.data_rate.lora.bandwidth uplink_message.settings.data_rate.lora.spreading_factor
    uplink_message.settings.data_rate_index uplink_message.settings.coding_rate uplink_message.settings.frequency
    uplink_message.settings.timestamp uplink_message.settings.time uplink_message.received_at
    uplink_message.consumed_airtime uplink_message.locations""".split())


def tts_uplink(app, tenant, dev_eui, fport, fcnt, data, t, gateway=0):
    """(topic, document) of an uplink as The Things Stack v3 publishes it on its MQTT
    server, in the documented shape (:data:`TTS_UPLINK_FIELDS`; empty fields omitted, the
    DevEUI in capitals, as TTS writes it); ``t`` None omits the times, ``gateway`` numbers
    the receiver."""
    device, at = tts_device_id(dev_eui), t and rfc3339(t)
    doc = {"end_device_ids": {"device_id": device, "application_ids": {"application_id": app},
                              "dev_eui": dev_eui.upper(), "join_eui": "0000000000000000",
                              "dev_addr": dev_eui[-8:].upper()},
           "correlation_ids": [f"gs:uplink:01HQ{fcnt:012d}{gateway:010d}"], "received_at": at,
           "uplink_message": {"session_key_id": "AYbC3xYt0p8l2lq7a1cGqw==", "f_cnt": fcnt, "f_port": fport,
                              "frm_payload": base64.b64encode(data).decode(),
                              "rx_metadata": [{"gateway_ids": {"gateway_id": f"gw-{gateway}",
                                                               "eui": f"B827EBFFFE{gateway:06X}"},
                                               "time": at, "timestamp": 1804523 + gateway,
                                               "rssi": -70 - 9 * gateway, "channel_rssi": -70 - 9 * gateway,
                                               "snr": 9.5 - 4 * gateway,
                                               "uplink_token": f"ChcKFQoJZ3ctMBIIuCfr//4{gateway}",
                                               "channel_index": gateway}],
                              "settings": {"data_rate": {"lora": {"bandwidth": 125000, "spreading_factor": 10}},
                                           "data_rate_index": 0, "coding_rate": "4/5", "frequency": "902300000",
                                           "timestamp": 1804523, "time": at},
                              "received_at": at, "consumed_airtime": "0.370688s"}}
    return f"v3/{app}@{tenant}/devices/{device}/up", omit_empty(doc)


class NetworkServerEmulator:
    """Publishes emulated modems' uplinks as a network server's MQTT
    integration does and routes downlink documents back to the modems.
    Subclasses give the shape: ``qos`` of the uplinks, the downlink topic
    filter, ``event(dev_eui, fport, fcnt, data, t)`` -> (topic, bytes published)
    and ``addressed(topic, document)`` -> (DevEUI, fport, payload bytes)."""

    qos = 1

    def __init__(self, host, port, down_filter, user=None, password=None):
        import paho.mqtt.client as mqtt

        self.modems = {}
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"ns-emulator-{uuid.uuid4().hex[:8]}")
        if user:
            c.username_pw_set(user, password)
        c.on_connect = lambda cl, *a: cl.subscribe(down_filter, qos=1)
        c.on_message = self._down
        c.connect(host, port)
        c.loop_start()
        self.client = c

    def attach(self, modem):
        self.modems[modem.dev_eui] = modem
        modem.on_uplink = self.uplink

    def uplink(self, modem, fport, fcnt, data):
        topic, document = self.event(modem.dev_eui, fport, fcnt, data, time.time())
        self.client.publish(topic, document, qos=self.qos)

    def _down(self, client, userdata, msg):
        try:
            eui, fport, data = self.addressed(msg.topic, json.loads(msg.payload))
            self.modems[eui].downlink(fport, data)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, StopIteration):
            pass  # not for an emulated device: a real network server would log it

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


class ChirpStackEmulator(NetworkServerEmulator):
    """ChirpStack v4: ``event/up`` at QoS 1 with the ``marshaler`` chosen (:data:`MARSHALERS`);
    ``command/down`` (JSON) names the DevEUI."""

    def __init__(self, host, port, app, user=None, password=None, marshaler="json"):
        if marshaler not in MARSHALERS:
            raise ValueError(f"marshaler must be one of {', '.join(MARSHALERS)}, got {marshaler!r}")
        try:  # here, not at the first uplink in a modem's thread
            import chirpstack_api  # noqa: F401
        except ImportError:
            raise RuntimeError("the ChirpStack emulator builds its events with ChirpStack's own messages: "
                               "pip install chirpstack-api") from None
        self.app, self.marshaler = app, marshaler
        super().__init__(host, port, f"application/{app}/device/+/command/down", user, password)

    def event(self, dev_eui, fport, fcnt, data, t):
        topic, event = chirpstack_event(self.app, dev_eui, fport, fcnt, data, t)
        return topic, marshal(event, self.marshaler)

    def addressed(self, topic, doc):
        return doc["devEui"].lower(), int(doc["fPort"]), base64.b64decode(doc["data"])


class TheThingsStackEmulator(NetworkServerEmulator):
    """The Things Stack v3: uplinks at QoS 0 (its MQTT server offers no more),
    devices named by end-device id (:func:`tts_device_id`) in the topics."""

    qos = 0

    def __init__(self, host, port, app, tenant, user=None, password=None):
        self.app, self.tenant = app, tenant
        super().__init__(host, port, f"v3/{app}@{tenant}/devices/+/down/push", user, password)

    def event(self, dev_eui, fport, fcnt, data, t):
        topic, doc = tts_uplink(self.app, self.tenant, dev_eui, fport, fcnt, data, t)
        return topic, json.dumps(doc).encode()

    def addressed(self, topic, doc):
        device = topic.split("/")[3]
        eui = next(e for e in self.modems if tts_device_id(e) == device)
        down = doc["downlinks"][0]
        return eui, int(down.get("f_port", 0)), base64.b64decode(down.get("frm_payload", ""))
