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
    """The firmware as mss deploy stages it for a port without the native emitter."""
    from mss_aggregator.deploy import flash as deploy

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


MEMO = [p for p in VECTORS if "replays" in json.loads(p.read_text())]

MEMO_SCRIPT = r"""
import json, sys
from mss_device.params import Params
from mss_device.rng import ByteRng

d = json.load(open(sys.argv[1]))
client = Params(d["config"]).client()


def rng_of(hexs):
    data = bytes.fromhex(hexs)
    pos = [0]
    def read(n):
        out = data[pos[0]:pos[0] + n]
        pos[0] += len(out)
        return out
    return ByteRng(read)


for v in d["vectors"]:
    rng = rng_of(v["random_hex"])
    client.device_id = v["device_id"]
    report, body = client.fresh(v["value"], rng, v["epoch"], v["seq"])
    print(json.dumps(["fresh", report.hex(), body.hex(), rng.consumed]))
for r in d["replays"]:
    rng = rng_of(r["random_hex"])
    client.device_id = r["device_id"]
    print(json.dumps(["replay", client.replay(bytes.fromhex(r["memo_body_hex"]), rng, r["epoch"], r["seq"]).hex(),
                      rng.consumed]))
"""


def test_memo_vectors_exist():
    """olh with seed device and every protocol with an instantaneous layer pin their memo."""
    names = {(json.loads(p.read_text())["protocol"], "irr" in json.loads(p.read_text())["config"]) for p in MEMO}
    assert {("olh", False), ("grr", True), ("olh", True), ("hr", True), ("pgr", True)} <= names


@pytest.mark.parametrize("path", MEMO, ids=[f"{p.parent.name}-{p.stem}" for p in MEMO])
def test_memo_vectors_under_micropython(path):
    """The memoizing draw (report, memo body of the permanent draw y') and the re-sent memo
    (a fresh instantaneous-layer draw of y', or none) are the host's bytes under MicroPython."""
    out = run(MEMO_SCRIPT, args=[str(path)])
    assert out.returncode == 0, out.stderr
    got = [json.loads(line) for line in out.stdout.splitlines()]
    d = json.loads(path.read_text())
    want = [["fresh", v["report_hex"], v["memo_body_hex"], v["bytes_consumed"]] for v in d["vectors"]]
    want += [["replay", r["report_hex"], r["bytes_consumed"]] for r in d["replays"]]
    assert got == want
