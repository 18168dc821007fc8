# The main.py of an emulated field board (mss demo --epochs, mss_aggregator.devices.field):
#   field_board CONFIG STATE VALUE
# runs the firmware's loop (mss_node.app.run) until the process is killed or the
# board resets, its sensor reading VALUE.  With $MSS_BOARD_REALTIME=1 (see
# machine.py here) its sleeps take real time.
#
# $MSS_BOARD_NO_CLOCK=1: the board's wall clock reads 2000-01-01 00:00:00 at every
# boot and runs on in real time (no NTP, no battery-backed RTC: a Pico at a site
# without Wi-Fi); else it is the host's, as NTP set it.
# $MSS_BOARD_RESET_AT (unix time): at its first wait or light sleep that would end
# after that moment the board waits until then and calls machine.reset() (logged
# "reset 0 T"; the process ends with status 0), as main.py does after a fatal error.
import os
import sys
import time

import machine
from mss_node import app

BOOT = time.time()
VALUE = int(sys.argv[3])
RESET_AT = float(os.getenv("MSS_BOARD_RESET_AT") or 0)
machine.note("boot", 0)


def unset_clock():
    return 946684800 + (time.time() - BOOT)  # 2000-01-01 (unix time) at the boot


def _due(s):
    if RESET_AT and time.time() + s >= RESET_AT:
        left = RESET_AT - time.time()
        if left > 0:
            time.sleep(left)
        machine.reset()


def sleep(s):
    _due(s)
    time.sleep(s)


_light = machine.lightsleep


def lightsleep(ms=None):
    if ms is not None:
        _due(ms / 1000)
    _light(ms)


machine.lightsleep = lightsleep
app.run(sys.argv[1], sys.argv[2], sensor=lambda: VALUE,
        clock=unset_clock if os.getenv("MSS_BOARD_NO_CLOCK") == "1" else time.time, sleep=sleep)
