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
"""
from mss_node.modem import RETRY, SENT, UNJOINED, hex_eui

_WHY = {"AT_NO_NETWORK_JOINED": "not joined", "AT_BUSY_ERROR": "busy",
        "AT_PARAM_ERROR": "parameter error (payload too long for the data rate?)"}
_DONE = ("+EVT:TX_DONE", "+EVT:SEND CONFIRMED", "+EVT:SEND_CONFIRMED")


class Modem:
    def __init__(self, port):
        self.port = port

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
            down = _downlink(event) or down


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
