"""A socat pty pair: the device writes one end, a gateway reads the other."""
import os
import shutil
import subprocess
import time

import pytest


@pytest.fixture
def pty_pair(tmp_path):
    exe = shutil.which("socat")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("socat is missing under CI")
        pytest.skip("socat not installed")
    dev, host = tmp_path / "ttyDEV", tmp_path / "ttyHOST"
    proc = subprocess.Popen([exe, f"pty,raw,echo=0,link={dev}", f"pty,raw,echo=0,link={host}"],
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 5
    while not (dev.exists() and host.exists()) and time.time() < deadline:
        time.sleep(0.05)
    yield dev, host
    proc.terminate()
    proc.wait(5)
