"""Unary encoding (OUE = ``rappor``, SUE) on the device (mss_protocol.unary).

k independent bits: bit v is set when ``chance(tp)`` (v = x) or
``chance(tq)`` (v != x) holds, drawn in order v = 0, 1, ..., k - 1.  The
body is the k bits, item v at body bit v (most significant first).
"""
from mss_device.check import ONE, threshold
from mss_device.frame import HEADER, get, start


class Client:
    def __init__(self, params):
        self.p = params
        self.nbits = params.k

    def report(self, x, rng, epoch, seq):
        p = self.p
        out = start(p, p.k, epoch, seq)
        off = HEADER[p.frame] << 3
        for v in range(p.k):
            if rng.chance(p.tp if v == x else p.tq):
                b = off + v
                out[b >> 3] |= 0x80 >> (b & 7)
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
