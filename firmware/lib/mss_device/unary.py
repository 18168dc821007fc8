"""Unary encoding (OUE = ``rappor``, SUE) on the device (mss_protocol.unary).

k independent bits: bit v is set when ``chance(tp)`` (v = x) or
``chance(tq)`` (v != x) holds, drawn in order v = 0, 1, ..., k - 1.  The
body is the k bits, item v at body bit v (most significant first).  The
loop over the items is a viper kernel drawing straight from the rng's pool.
"""
from array import array

from mss_device.check import ONE, threshold
from mss_device.frame import HEADER, get, start
from mss_device.rng import coin, micropython, ptr8, ptr32


@micropython.viper
def _bits(out: ptr8, pool, at, arg: ptr32) -> int:
    """Items v = arg[0] .. arg[1] - 1, arg = [v, k, x, tp, tq, offset]: body
    bit v set when chance(tp) (v = x) or chance(tq) holds.  Returns 0 when
    done, or coin's shortfall (arg[0]: the item to resume at)."""
    v = arg[0]
    k = arg[1]
    x = arg[2]
    off = arg[5]
    while v < k:
        c = int(coin(pool, at, arg[3] if v == x else arg[4]))
        if c < 0:
            arg[0] = v
            return c
        if c:
            b = off + v
            out[b >> 3] = out[b >> 3] | (0x80 >> (b & 7))
        v += 1
    return 0


class Client:
    def __init__(self, params):
        self.p = params
        self.nbits = params.k
        self.arg = array("I", [0, params.k, 0, params.tp, params.tq, HEADER[params.frame] << 3])

    def report(self, x, rng, epoch, seq):
        p, arg = self.p, self.arg
        out = start(p, p.k, epoch, seq)
        arg[0], arg[2] = 0, x
        rng.drive(_bits, out, arg)
        return bytes(out)

    def fits(self, body):
        k = self.p.k
        return len(body) == (k + 7) >> 3 and not get(body, k, (len(body) << 3) - k)


def check(p):
    threshold("tp", p.tp)
    threshold("tq", p.tq)


def ratios(p):
    """Between values x and x' only their two bits change law: tp (1 - tq) / ((1 - tp) tq)."""
    return [(p.tp * (ONE - p.tq), (ONE - p.tp) * p.tq)]
