# ``network`` of an emulated board: a station interface that is always connected
# (the host's network) and notes each switch off and on in $MSS_BOARD_LOG (see
# machine.py here).
from machine import note

STA_IF = 0
AP_IF = 1


class WLAN:
    _on = [True]

    def __init__(self, interface=STA_IF):
        pass

    def active(self, on=None):
        if on is None:
            return self._on[0]
        self._on[0] = bool(on)
        note("wifi", int(bool(on)))

    def isconnected(self):
        return self._on[0]

    def connect(self, ssid=None, password=None):
        self._on[0] = True

    def disconnect(self):
        pass

    def ifconfig(self):
        return ("127.0.0.1", "255.0.0.0", "127.0.0.1", "127.0.0.1")
