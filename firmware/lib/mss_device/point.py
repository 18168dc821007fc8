"""Shared by the protocols whose report is one integer v in [0, n) (GRR,
OLH, HR, PGR): the body is v in ceil(log2 n) bits (SPEC.md section 4)."""
from mss_device.frame import HEADER, bits_for, get, put, start


class PointClient:
    """Subclasses set ``n`` (the output range) and implement ``draw(x, rng)``."""

    def __init__(self, params, n):
        self.p = params
        self.n = n
        self.nbits = bits_for(n)

    def report(self, x, rng, epoch, seq):
        v = self.draw(x, rng)
        out = start(self.p, self.nbits, epoch, seq)
        put(out, HEADER[self.p.frame] << 3, v, self.nbits)
        return bytes(out)

    def fits(self, body):
        """The body length, a value below n, zero padding."""
        nb = self.nbits
        return (len(body) == (nb + 7) >> 3 and get(body, 0, nb) < self.n
                and not get(body, nb, (len(body) << 3) - nb))
