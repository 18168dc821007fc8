"""Microchip RN2483 (EU868/433) and RN2903 (US915), 57600 8N1.

Source: RN2483 LoRa Technology Module Command Reference; the answers as
handled by jpmeijers/RN2483-Arduino-Library.  ``mac tx uncnf <port>
<hex>`` answers ``ok`` or a refusal at once (``not_joined``, ``no_free_ch``,
``silent``, ``busy``, ``mac_paused``, ``invalid_data_len``,
``frame_counter_err_rejoin_needed``), then after the receive windows one
of ``mac_tx_ok``, ``mac_rx <port> <hex>`` (a downlink), ``mac_err`` (not
sent), ``invalid_data_len`` (too long after a data-rate fall back).
``sys sleep <ms>`` (100 to 2**32 ms) answers ``ok`` only when the module
wakes; a break then 0x55 (auto-baud) wakes it early, answering that ``ok``
(command reference, ``sys sleep``; TheThingsNetwork/arduino-device-lib
``wake()``).  After either, ``sys get ver`` checks that it listens.
No network time: the command set (firmware 1.0.5 included) has no
DeviceTimeReq (added in LoRaWAN 1.0.3), so a board on it without NTP stays
clockless and paces its compact reports (mss_node.app).
"""
from mss_node.modem import RETRY, SENT, UNJOINED, hex_eui

_REJOIN = ("not_joined", "frame_counter_err_rejoin_needed")


class Modem:
    def __init__(self, port):
        self.port = port

    def _ask(self, cmd, timeout_ms=3000):
        self.port.command(cmd)
        return self.port.line(timeout_ms)

    def dev_eui(self):
        line = self._ask("mac get deveui")
        return hex_eui(line) if line else None

    def join(self, timeout_ms):
        first = self._ask("mac join otaa")
        if first != "ok":
            return False, "join refused: %s" % (first or "no answer")
        line = self.port.line(timeout_ms)
        if line == "accepted":
            return True, "joined"
        return False, line or "no join answer"

    def sleep(self, ms):
        if ms < 100:
            return False
        return self._ask("sys sleep %d" % ms, 50) is None  # a line now is a refusal

    def wake(self):
        s = self.port.stream
        for _ in range(3):
            if hasattr(s, "sendbreak"):  # a UART: a real break
                s.sendbreak()
            else:
                s.write(b"\x00")  # a pty: a NUL stands for it
            s.write(b"\x55\r\n")
            self.port.command("sys get ver")
            if self.port.until(500, "RN")[1]:
                return True
        return False

    def send(self, fport, hexdata, timeout_ms):
        first = self._ask("mac tx uncnf %d %s" % (fport, hexdata))
        if first != "ok":
            return (UNJOINED if first in _REJOIN else RETRY), first or "no answer", None
        line = self.port.line(timeout_ms)
        if line is None:  # accepted, no final answer: on air, as far as can be known
            return SENT, "no mac_tx_ok", None
        if line == "mac_tx_ok":
            return SENT, "sent", None
        if line.startswith("mac_rx "):
            return SENT, "sent", _downlink(line[7:])
        return RETRY, line, None  # mac_err, invalid_data_len: not sent


def _downlink(text):
    port, _, data = text.partition(" ")
    try:
        return int(port), bytes.fromhex(data)
    except ValueError:
        return (int(port) if port.isdigit() else -1), None
