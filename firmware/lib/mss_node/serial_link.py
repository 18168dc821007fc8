"""Reports as lines ``$MSS2,<device id>,<report hex>,<crc>`` (mss_device.framing)
on a UART, the USB console, or (tests) a pty path; ``status("no-clock")`` (the
node calls it once a minute while it has no clock) writes the line
``$MSS2,<device id>,!no-clock,<crc>``, ``status("skipped-<epoch>")`` (device.budget
spent, no memo: that epoch has no report) ``$MSS2,<device id>,!skipped-<epoch>,<crc>``."""
import sys

from mss_device.framing import frame, status_line

# device.serial: a UART (uart id, pins), a tty path (tests, emulators), or the USB console
DEFAULTS = {"uart": None, "baud": 115200, "tx": None, "rx": None, "path": None}


def check(s):
    return s  # any pins and baud rate: the UART itself refuses what it cannot do


def make(node):
    """The link of the node (mss_node.app.Node)."""
    return SerialLink(node.s)


class SerialLink:
    def __init__(self, settings):
        self._id = settings.device_id  # on every line: OLH's seed and several boards on one port
        s = settings.device["serial"]
        if s["path"]:
            fh = open(s["path"], "w")

            def write(text):
                fh.write(text)
                try:
                    fh.flush()
                except OSError:  # MicroPython files are unbuffered; flush fails on a tty
                    pass

            self._write = write
        elif s["uart"] is not None:
            from machine import UART

            kw = {"baudrate": s["baud"]}
            if s["tx"] is not None:
                kw["tx"], kw["rx"] = s["tx"], s["rx"]
            self._write = UART(s["uart"], **kw).write
        else:
            self._write = sys.stdout.write

    def send(self, report):
        try:
            self._write(frame(self._id, report))
            return True
        except OSError:
            return False

    def status(self, word):
        if word != "online":  # a report says that
            try:
                self._write(status_line(self._id, word))
            except OSError:
                pass

    def poll(self):
        pass
