"""RAKwireless RAK3172 (RUI3 firmware), 115200 8N1.

Source: RAK3172 AT Command Manual (RAKWireless/rakwireless-docs).  RUI3
v3.2.0 moved event lines to colon-separated fields; both forms are read:

* old: ``+EVT:JOIN FAILED``, a downlink as ``+EVT:RX_1, RSSI -52, SNR 9``,
  ``+EVT:UNICAST``, ``+EVT:3:4321`` (port:hex);
* new: ``+EVT:JOIN_FAILED_RX_TIMEOUT``, ``+EVT:TX_DONE``,
  ``+EVT:RX_1:-52:9:UNICAST:3:4321``.

A command answers ``OK`` or an ``AT_...`` error code.  ``AT+SLEEP=<ms>``
(1 to 2**32 - 1 ms) answers ``OK`` and sleeps; UART traffic wakes it early
(Stop1, RUI3's default low-power level; Stop2, ``AT+LPMLVL=2``, would not
wake on the UART): the wake-up is an ``AT``, answered ``OK`` (RUI3 AT
Command Manual, "Low Power").

Network time (RUI3 AT Command Manual, AT+TIMEREQ and AT+LTIME; the firmware
source RAKWireless/RAK-STM32-RUI ``service_lora.c``): ``AT+TIMEREQ=1``
(refused unless joined) makes the next uplink carry DeviceTimeReq; the modem
then says ``+EVT:TIMEREQ_OK`` (or ``+EVT:TIMEREQ_FAILED``), before or after
the end of send, and clears the request; ``AT+LTIME=?`` answers the time it
keeps, UTC, leap seconds taken off: ``LTIME: 04h36m00s on 11/27/2023``
(MM/DD/YYYY; an older manual shows ``LTIME: 00h37m58s 2018-11-14``, and
``+LTIME:``/``AT+LTIME=`` prefixes are seen in field code: all are read).
"""
from mss_node.modem import RETRY, SENT, UNJOINED, hex_eui, utc

_WHY = {"AT_NO_NETWORK_JOINED": "not joined", "AT_BUSY_ERROR": "busy",
        "AT_PARAM_ERROR": "parameter error (payload too long for the data rate?)"}
_DONE = ("+EVT:TX_DONE", "+EVT:SEND CONFIRMED", "+EVT:SEND_CONFIRMED")


class Modem:
    def __init__(self, port):
        self.port = port
        self.timereq = None  # the +EVT:TIMEREQ_... line seen during the last send

    def _ask(self, cmd, timeout_ms=3000):
        self.port.command(cmd)
        return self.port.until(timeout_ms, "OK", "AT_")

    def dev_eui(self):
        lines, _ = self._ask("AT+DEVEUI=?")
        for line in lines:
            eui = hex_eui(line.split("=")[-1])
            if eui:
                return eui
        return None

    def join(self, timeout_ms):
        lines, end = self._ask("AT+NJS=?")
        if end == "OK" and any(line.split("=")[-1] == "1" for line in lines[:-1]):
            return True, "joined"
        _, end = self._ask("AT+JOIN=1:0:10:1")  # one attempt: the link paces retries
        if end != "OK":
            return False, "join refused: %s" % (end or "no answer")
        _, event = self.port.until(timeout_ms, "+EVT:JOIN")
        if event == "+EVT:JOINED":
            return True, "joined"
        return False, event[5:] if event else "no join answer"

    def sleep(self, ms):
        return self._ask("AT+SLEEP=%d" % ms)[1] == "OK"

    def wake(self):
        for _ in range(3):
            if self._ask("AT", 500)[1] == "OK":
                return True
        return False

    def ask_time(self):
        self.timereq = None
        return self._ask("AT+TIMEREQ=1")[1] == "OK"

    def read_time(self):
        event = self.timereq
        if event is None:  # it may follow the end of send
            event = self.port.until(3000, "+EVT:TIMEREQ")[1]
        self.timereq = None
        if event != "+EVT:TIMEREQ_OK":
            return None, event[5:] if event else "no TIMEREQ event"
        t = self.modem_time()
        return (t, None) if t is not None else (None, "no LTIME answer")

    def modem_time(self):
        """The time the modem keeps (unix seconds; 1970 plus its uptime if never synced), or None."""
        lines, _ = self._ask("AT+LTIME=?")
        for line in lines:
            if "LTIME" in line:
                return ltime(line)
        return None

    def send(self, fport, hexdata, timeout_ms):
        _, end = self._ask("AT+SEND=%d:%s" % (fport, hexdata))
        if end != "OK":
            status = UNJOINED if end == "AT_NO_NETWORK_JOINED" else RETRY
            return status, _WHY.get(end, end or "no answer"), None
        down = None
        while True:
            _, event = self.port.until(timeout_ms, "+EVT:")
            if event is None:  # accepted, no TX_DONE: on air, as far as can be known
                return SENT, "no TX_DONE", down
            if event.startswith(_DONE):
                return SENT, "sent", down
            if event.startswith("+EVT:TIMEREQ"):
                self.timereq = event
                continue
            down = _downlink(event) or down


def ltime(line):
    """Unix seconds of an LTIME answer (the module docstring's forms); ValueError if unreadable."""
    text = line.split("=", 1)[1] if line.startswith("AT+") else line.split(":", 1)[1]
    f = text.strip().replace(" on ", " ").split()
    if len(f) != 2 or len(f[0]) != 9 or f[0][2] != "h" or f[0][5] != "m" or f[0][8] != "s":
        raise ValueError("unreadable LTIME answer %r" % line)
    h, mi, s = int(f[0][:2]), int(f[0][3:5]), int(f[0][6:8])
    if "/" in f[1]:
        mo, d, y = f[1].split("/")
    else:
        y, mo, d = f[1].split("-")
    return utc(int(y), int(mo), int(d), h, mi, s)


def _downlink(event):
    """(port, bytes or None) of a downlink event line, else None."""
    f = event.split(":")
    if len(f) >= 7 and f[1].startswith("RX_"):  # new form
        port, data = f[5], f[6]
    elif len(f) == 3 and f[1].isdigit():  # old form's last line
        port, data = f[1], f[2]
    else:
        return None
    try:
        return int(port), bytes.fromhex(data)
    except ValueError:
        return int(port) if port.isdigit() else -1, None
