# ``machine`` of an emulated board (MicroPython unix port or CPython; first on the
# path, it stands in for the unix port's own, which has neither sleep nor WDT).
#
# Sleeps take no real time: the board's clock, clock(), runs ahead by the total
# slept, so a period of an hour passes in the time the board is awake.  Every
# sleep is appended to the file $MSS_BOARD_LOG (read back at import: the total
# survives a deep sleep) as one line, t the real time:
#   light MS T        machine.lightsleep(MS)
#   deep MS T         machine.deepsleep(MS): the process ends (exit 0); whoever runs
#                     the board starts it again, as the board boots from boot.py
#   watchdog MS T     a sleep of MS would have outlasted the WDT's timeout: the
#                     board resets (the process ends, exit 0)
#   reset 0 T         machine.reset()
#   wifi 0|1 T        network.WLAN(...).active(False|True) (the emulated network.py)
# mss_aggregator.devices.runtime reads it (board_times, BoardClock).
#
# $MSS_BOARD_REALTIME=1 (a field campaign in real time, mss demo --epochs): a
# sleep takes its real time instead, as on a board whose timers run on (the
# sleep's line is written as it starts), and clock() is the real time.
import os
import time

_LOG = os.getenv("MSS_BOARD_LOG")
_REAL = os.getenv("MSS_BOARD_REALTIME") == "1"
_slept = [0]  # ms
_wdt = [0, 0.0]  # timeout ms, board time of the last feed


def _load():
    try:
        with open(_LOG) as fh:
            for line in fh:
                f = line.split()
                if len(f) == 3 and f[0] in ("light", "deep"):
                    _slept[0] += int(f[1])
    except (OSError, TypeError):
        pass


_load()

# reset_cause(): DEEPSLEEP_RESET once after a deep sleep that ran to its end (the file
# $MSS_BOARD_LOG.woke, taken by the next boot), PWRON_RESET otherwise (a kill: a power
# cycle or a watchdog reset, including during a real-time deep sleep)
PWRON_RESET, DEEPSLEEP_RESET = 1, 4
_cause = PWRON_RESET
try:
    os.remove(_LOG + ".woke")
    _cause = DEEPSLEEP_RESET
except (OSError, TypeError):
    pass


def reset_cause():
    return _cause


def note(what, ms):
    if _LOG:
        with open(_LOG, "a") as fh:
            fh.write("%s %d %.6f\n" % (what, ms, time.time()))


def clock():
    """The board's time (s): real time plus all it slept (real time only, with $MSS_BOARD_REALTIME)."""
    return time.time() if _REAL else time.time() + _slept[0] / 1000


def _check(ms):
    if _wdt[0] and (clock() - _wdt[1]) * 1000 + ms > _wdt[0]:
        note("watchdog", ms)
        raise SystemExit(0)


def lightsleep(ms=None):
    if ms is None:
        raise ValueError("an emulated board sleeps for a time, not until an interrupt")
    _check(ms)
    note("light", ms)
    if _REAL:
        time.sleep(ms / 1000)
    else:
        _slept[0] += ms


def deepsleep(ms=None):
    if ms is None:
        raise ValueError("an emulated board sleeps for a time, not until an interrupt")
    note("deep", ms)
    if _REAL:
        time.sleep(ms / 1000)
    if _LOG:
        open(_LOG + ".woke", "w").close()
    raise SystemExit(0)


def reset():
    note("reset", 0)
    raise SystemExit(0)


def idle():
    pass


class WDT:
    def __init__(self, id=0, timeout=5000):
        _wdt[0] = timeout
        self.feed()

    def feed(self):
        _wdt[1] = clock()
