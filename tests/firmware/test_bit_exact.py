"""The firmware under real MicroPython reproduces every protocol's shared test vectors bit for bit."""
import json
import sys

import pytest

from micropython_runner import FIRMWARE, run
from mss_protocol import vectors

VECTORS = vectors.files()

SCRIPT = r"""
import json, sys
from mss_device.params import Params
from mss_device.rng import ByteRng

d = json.load(open(sys.argv[1]))
client = Params(d["config"]).client()
for v in d["vectors"]:
    data = bytes.fromhex(v["random_hex"])
    pos = [0]
    def read(n):
        out = data[pos[0]:pos[0] + n]
        pos[0] += len(out)
        return out
    rng = ByteRng(read)
    client.device_id = v["device_id"]
    print(json.dumps([client.report(v["value"], rng, v["epoch"], v["seq"]).hex(), rng.consumed]))
"""


@pytest.mark.parametrize("path", VECTORS, ids=[f"{p.parent.name}-{p.stem}" for p in VECTORS])
def test_vectors_under_micropython(path):
    out = run(SCRIPT, args=[str(path)])
    assert out.returncode == 0, out.stderr
    got = [json.loads(line) for line in out.stdout.splitlines()]
    want = [[v["report_hex"], v["bytes_consumed"]] for v in json.loads(path.read_text())["vectors"]]
    assert got == want


# every MSS / SS vector (the rank kernel) and one of each other protocol (the rng kernels)
PLAIN = [p for p in VECTORS if p.parent.name in ("mss", "ss")] + \
    [min(p for p in VECTORS if p.parent.name == name) for name in ("grr", "hr", "olh", "pgr", "rappor", "sue")]


@pytest.fixture(scope="module")
def plain_lib(tmp_path_factory):
    """The firmware as tools/deploy.py stages it for a port without the native emitter."""
    sys.path.insert(0, str(FIRMWARE.parent / "tools"))
    import deploy

    lib = tmp_path_factory.mktemp("plain") / "lib"
    for src in (FIRMWARE / "lib").rglob("*.py"):
        dest = lib / src.relative_to(FIRMWARE / "lib")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(deploy.plain(src.read_text()))
    return lib


@pytest.mark.parametrize("path", PLAIN, ids=[f"{p.parent.name}-{p.stem}" for p in PLAIN])
def test_vectors_without_the_native_emitter(path, plain_lib):
    """The viper kernels are plain Python too: the same bytes."""
    assert "@micropython.viper" not in (plain_lib / "mss_device" / "limbs.py").read_text().split()
    out = run(SCRIPT, args=[str(path)], micropythonpath=[plain_lib])
    assert out.returncode == 0, out.stderr
    got = [json.loads(line) for line in out.stdout.splitlines()]
    want = [[v["report_hex"], v["bytes_consumed"]] for v in json.loads(path.read_text())["vectors"]]
    assert got == want
