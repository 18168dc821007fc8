"""The firmware under real MicroPython reproduces every protocol's shared test vectors bit for bit."""
import json

import pytest

from micropython_runner import run
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
