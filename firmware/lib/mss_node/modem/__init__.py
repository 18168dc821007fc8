"""LoRaWAN modems driven over a UART with text commands.

A modem's certified firmware runs the LoRaWAN MAC (join, ADR, duty cycle,
MAC commands, frame counters); the board only asks it to join and to send
one unconfirmed uplink.  One module per command dialect, each with a
``Modem(port)`` class of the same shape:

* ``dev_eui()``: the modem's DevEUI, 16 lowercase hex digits (the device
  id the network server reports, so also the one the board reports with);
* ``join(timeout_ms)``: (True, "joined") or (False, why);
* ``send(fport, hexdata, timeout_ms)``: (status, why, downlink) with
  status SENT, RETRY (refused, keep the report) or UNJOINED (rejoin,
  then keep the report), and downlink None or (fport, bytes);
* ``sleep(ms)``: True if the modem went to sleep for ``ms`` with its
  dialect's command; ``wake()``: True once it answers again (called
  before the next command after a sleep, and after a boot);
* where the modem can ask the network for the time (LoRaWAN
  DeviceTimeReq): ``ask_time()``, True once the next uplink will carry the
  request, and ``read_time()`` after that uplink: (unix seconds, None) or
  (None, why).  A dialect without them gives no network time.

:class:`Port` reads and writes lines on a ``machine.UART`` or (tests, the
emulated fleet) a pty path, with deadlines, never blocking past them.
"""
import select
import time

try:
    from time import ticks_diff, ticks_ms
except ImportError:  # CPython
    def ticks_ms():
        return int(time.monotonic() * 1000)

    def ticks_diff(a, b):
        return a - b

SENT = "sent"
RETRY = "retry"
UNJOINED = "unjoined"
DIALECTS = ("rak3172", "wio-e5", "rn2483")
# The module of each dialect (imported on demand: a board holds only its modem's).
MODULES = {"rak3172": "mss_node.modem.rak3172", "wio-e5": "mss_node.modem.wio_e5",
           "rn2483": "mss_node.modem.rn2483"}
BAUD = {"rak3172": 115200, "wio-e5": 9600, "rn2483": 57600}
_MAX_LINE = 600  # longer than any answer these modems give


class Port:
    """Line I/O with deadlines.  ``feed`` is called while waiting (the watchdog)."""

    def __init__(self, stream, feed=None):
        self.stream = stream
        self.poller = select.poll()
        self.poller.register(stream, select.POLLIN)
        self.feed = feed
        self.buf = bytearray()

    def command(self, text):
        self.drain()
        self.stream.write(text.encode() + b"\r\n")

    def drain(self):
        """Drop lines left over from an earlier answer (late events)."""
        while self.line(0) is not None:
            pass

    def line(self, timeout_ms):
        """The next non-empty line (str, without CR LF), or None at the deadline."""
        start = ticks_ms()
        while True:
            if self.feed:
                self.feed()
            left = timeout_ms - ticks_diff(ticks_ms(), start)
            if not self.poller.poll(max(0, min(left, 1000))):
                if left <= 0:
                    return None
                continue
            c = self.stream.read(1)
            if not c:
                continue
            if c == b"\n":
                text = bytes(self.buf).strip()
                self.buf = bytearray()
                if text:
                    try:
                        return text.decode()
                    except UnicodeError:  # MicroPython has no "replace": garbled bytes become "?"
                        return bytes([b if b < 128 else 63 for b in text]).decode()
            elif len(self.buf) < _MAX_LINE:
                self.buf.extend(c)

    def until(self, timeout_ms, *prefixes):
        """Lines up to and including the first that starts with one of
        ``prefixes``; (lines, that line or None at the deadline)."""
        start = ticks_ms()
        lines = []
        while True:
            left = timeout_ms - ticks_diff(ticks_ms(), start)
            got = self.line(max(0, left))
            if got is None:
                return lines, None
            lines.append(got)
            for p in prefixes:
                if got.startswith(p):
                    return lines, got


def open_stream(cfg):
    """The modem's stream from ``device.lorawan``: a pty/tty ``path`` or ``uart``."""
    if cfg["path"]:
        return open(cfg["path"], "r+b", buffering=0)  # unbuffered: poll sees every byte
    from machine import UART

    kw = {"baudrate": cfg["baud"] or BAUD[cfg["modem"]]}
    if cfg["tx"] is not None:
        kw["tx"], kw["rx"] = cfg["tx"], cfg["rx"]
    return UART(cfg["uart"], **kw)


def open_modem(cfg, feed=None):
    """The ``device.lorawan.modem`` dialect's Modem on its stream."""
    modem = __import__(MODULES[cfg["modem"]], None, None, ["Modem"])
    return modem.Modem(Port(open_stream(cfg), feed))


def utc(y, mo, d, h, mi, s):
    """Unix seconds of a UTC date and time (ValueError out of range); days from
    the civil calendar, as in H. Hinnant's ``days_from_civil``."""
    if not (1970 <= y <= 2105 and 1 <= mo <= 12 and 1 <= d <= 31 and 0 <= h < 24 and 0 <= mi < 60
            and 0 <= s < 61):
        raise ValueError("no such date and time")
    y -= mo <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (mo + (-3 if mo > 2 else 9)) + 2) // 5 + d - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    return days * 86400 + h * 3600 + mi * 60 + s


def hex_eui(text):
    """16 lowercase hex digits from an EUI written with or without ``:``/``-``
    separators (``2C:F7:F1:20:24:00:00:01``), or None."""
    digits = text.strip().lower().replace(":", "").replace("-", "").replace(" ", "")
    if len(digits) != 16:
        return None
    for c in digits:
        if c not in "0123456789abcdef":
            return None
    return digits
