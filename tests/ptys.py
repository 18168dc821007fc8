"""socat pty pairs: the device writes one end, a gateway reads the other."""
import os
import shutil
import subprocess
import time

import pytest


def socat_pair(folder, dev="ttyDEV", host="ttyHOST"):
    """(socat process, device-side path, host-side path) of a new pty pair in
    ``folder``; the caller terminates the process.  Skips (fails under CI)
    without socat."""
    exe = shutil.which("socat")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("socat is missing under CI")
        pytest.skip("socat not installed")
    dev, host = folder / dev, folder / host
    proc = subprocess.Popen([exe, f"pty,raw,echo=0,link={dev}", f"pty,raw,echo=0,link={host}"],
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 5
    while not (dev.exists() and host.exists()) and time.time() < deadline:
        time.sleep(0.05)
    return proc, dev, host


def board_links(mqtt_port, dev_tty):
    """The device.mqtt / device.serial sections of a board on each of the two links a test
    runs side by side: {"mqtt": {...}, "serial": {...}} (broker on loopback, the pty's device end)."""
    return {"mqtt": {"transport": "mqtt", "mqtt": {"port": mqtt_port, "timeout_s": 2}},
            "serial": {"transport": "serial", "serial": {"path": str(dev_tty)}}}


@pytest.fixture
def pty_pair(tmp_path):
    proc, dev, host = socat_pair(tmp_path)
    yield dev, host
    proc.terminate()
    proc.wait(5)
