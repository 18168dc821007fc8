"""Print reports for a fixed value, one hex line each (the device emulator).

    micropython -m mss_node.emit CONFIG VALUE COUNT [EPOCH] [--device ID] [--seed] < SEED_HEX

Uses os.urandom, or with ``--seed`` the hex byte stream read from stdin
(stdin, because the unix port crashes on arguments over ~256 characters);
it fails when that stream runs out rather than fall back to other
randomness.
"""
import json
import sys

from mss_device.params import Params
from mss_device.rng import ByteRng
from mss_node.reporter import Reporter


def stream(data):
    pos = [0]

    def read(n):
        out = data[pos[0]:pos[0] + n]
        pos[0] += len(out)
        return out

    return read


def main(argv):
    with open(argv[0]) as fh:
        params = Params(json.load(fh))
    value, count = int(argv[1]), int(argv[2])
    epoch = int(argv[3]) if len(argv) > 3 and argv[3][0] != "-" else 0
    device_id = argv[argv.index("--device") + 1] if "--device" in argv else "sim"
    if "--seed" in argv:
        rng = ByteRng(stream(bytes.fromhex(sys.stdin.read().strip())))
    else:
        rng = ByteRng()
    reporter = Reporter(params, rng, device_id)
    if not reporter.valid(value):
        raise ValueError("value %d is not in [0, %d)" % (value, params.k))
    for i in range(count):
        print(reporter.report(value, epoch, i & 0xFFFF).hex())


if __name__ == "__main__":
    main(sys.argv[1:])
