"""Seeed LoRa-E5 / Wio-E5 (AT firmware), 9600 8N1.

Source: "LoRa-E5 AT Command Specification V1.0" (Seeed), CampusIoT
tutorial ``wio-lora-e5/AT.md``.  Answers repeat the command's name:
``+JOIN: Network joined`` ... ``+JOIN: Done``; ``+MSGHEX: Start`` ...
``+MSGHEX: PORT: 1; RX: "0A0B"`` ... ``+MSGHEX: Done``.  Refusals seen in
public firmware: ``Please join network first``, ``Length error N`` (N is
the current maximum, often after a fall back to DR0), ``No free channel``,
``No band in N ms`` (duty cycle), ``LoRaWAN modem is busy``.
``AT+LOWPOWER=<ms>`` answers ``+LOWPOWER: SLEEP`` and sleeps; UART traffic
wakes it early with ``+LOWPOWER: WAKEUP`` (the wake-up ``AT`` itself is not
run; an awake modem answers it ``+AT: OK``).

Network time: ``AT+LW=DTR`` answers ``+LW: DTR`` and buffers a
DeviceTimeReq for the next uplink (LoRa-E5 AT Command Specification, as
quoted by EnviroDIY/LoRa_AT); no event says the answer came, so after the
uplink's ``Done`` the board reads the module's RTC, which DeviceTimeAns
sets: ``AT+RTC=UTCMS`` answers ``+RTC: 2026-04-30 12:30:49.465`` (UTC; the
form is from field code, the specification's text was not available).  The
RTC starts at 2020 at power-up: a time before 2024 means no answer came.
"""
from mss_node.modem import RETRY, SENT, UNJOINED, hex_eui, utc


class Modem:
    def __init__(self, port):
        self.port = port
        self.fport = None

    def dev_eui(self):
        self.port.command("AT+ID=DevEui")
        _, line = self.port.until(3000, "+ID:")
        return hex_eui(line.split(",")[-1]) if line else None

    def join(self, timeout_ms):
        self.port.command("AT+JOIN")
        lines, _ = self.port.until(timeout_ms, "+JOIN: Done", "+JOIN: Joined already",
                                   "+JOIN: LoRaWAN modem is busy")
        why = "no join answer"
        for line in lines:
            if line in ("+JOIN: Network joined", "+JOIN: Joined already"):
                return True, "joined"
            if line != "+JOIN: Done":
                why = line[7:]
        return False, why

    def sleep(self, ms):
        self.port.command("AT+LOWPOWER=%d" % ms)
        return self.port.until(3000, "+LOWPOWER:")[1] == "+LOWPOWER: SLEEP"

    def wake(self):
        for _ in range(3):
            self.port.command("AT")
            if self.port.until(500, "+LOWPOWER: WAKEUP", "+AT: OK")[1]:
                return True
        return False

    def ask_time(self):
        self.port.command("AT+LW=DTR")
        return self.port.until(3000, "+LW:")[1] == "+LW: DTR"

    def read_time(self):
        self.port.command("AT+RTC=UTCMS")
        line = self.port.until(3000, "+RTC:")[1]
        if line is None:
            return None, "no RTC answer"
        f = line[6:].strip().split(" ")
        try:
            y, mo, d = f[0].split("-")
            h, mi, s = f[1].split(":")
            return utc(int(y), int(mo), int(d), int(h), int(mi), int(s.split(".")[0])), None
        except (ValueError, IndexError):
            return None, "unreadable RTC answer %r" % line

    def modem_time(self):
        """The RTC's time (unix seconds; from 2020 if never synced), or None."""
        return self.read_time()[0]

    def send(self, fport, hexdata, timeout_ms):
        if fport != self.fport:
            self.port.command("AT+PORT=%d" % fport)
            _, line = self.port.until(3000, "+PORT:")
            if line != "+PORT: %d" % fport:
                return RETRY, "port not set: %s" % line, None
            self.fport = fport
        self.port.command('AT+MSGHEX="%s"' % hexdata)
        _, line = self.port.until(3000, "+MSGHEX:")
        if line is None:
            return RETRY, "no answer", None
        if line != "+MSGHEX: Start":
            why = line[9:]
            return (UNJOINED if why.startswith("Please join") else RETRY), why, None
        down = None
        while True:
            _, line = self.port.until(timeout_ms, "+MSGHEX:")
            if line is None:  # started, no Done: on air, as far as can be known
                return SENT, "no Done", down
            if line == "+MSGHEX: Done":
                return SENT, "sent", down
            if line.startswith("+MSGHEX: PORT:"):
                down = _downlink(line[15:])


def _downlink(text):
    """(port, bytes or None) of ``1; RX: "0A0B"``."""
    port, _, rest = text.partition(";")
    try:
        port = int(port)
    except ValueError:
        return -1, None
    data = rest.strip()
    if not data.startswith('RX: "') or not data.endswith('"'):
        return port, None
    try:
        return port, bytes.fromhex(data[5:-1])
    except ValueError:
        return port, None
