"""Shared by the protocols whose report is one integer v in [0, n) (GRR,
OLH, HR, PGR): the body is v in ceil(log2 n) bits (SPEC.md section 4).

With an instantaneous layer (config ``irr``, SPEC.md section 3) the protocol's
draw y' (the permanent randomised response, PRR) is randomised once more per
report: v = grr(y', n, irr_t, rng), RAPPOR's IRR (Erlingsson, Pihur, Korolova,
CCS 2014) as GRR on the n outputs.  A memo keeps y''s body (:meth:`fresh`);
:meth:`replay` re-sends it through a fresh IRR draw.
"""
from mss_device.frame import HEADER, bits_for, get, put, start


def grr(x, k, t, rng):
    """Generalised randomised response on [0, k): x with probability t / 2**30, else a
    uniform other value (``chance(t)``, then ``below(k - 1)`` mapped past x)."""
    if rng.chance(t):
        return x
    v = rng.below(k - 1)
    return v + (v >= x)


class PointClient:
    """Subclasses set ``n`` (the output range) and implement ``draw(x, rng)``
    (which may read ``self.epoch``, the epoch of the report being drawn)."""

    def __init__(self, params, n):
        self.p = params
        self.n = n
        self.nbits = bits_for(n)
        self.irr = params.irr_t  # the IRR's threshold, None without one
        self.epoch = 0

    def encode(self, v, epoch, seq):
        out = start(self.p, self.nbits, epoch, seq)
        put(out, HEADER[self.p.frame] << 3, v, self.nbits)
        return bytes(out)

    def report(self, x, rng, epoch, seq):
        self.epoch = epoch
        v = self.draw(x, rng)
        if self.irr is not None:
            v = grr(v, self.n, self.irr, rng)
        return self.encode(v, epoch, seq)

    def fresh(self, x, rng, epoch, seq):
        """(report bytes, body of the draw y') for ``x``: what a memo keeps.  Without
        an IRR the body is the report's own; the same random bytes as :meth:`report`."""
        self.epoch = epoch
        v = self.draw(x, rng)
        out = self.encode(v, epoch, seq)
        body = out[HEADER[self.p.frame]:]
        if self.irr is not None:
            out = self.encode(grr(v, self.n, self.irr, rng), epoch, seq)
        return out, body

    def replay(self, body, rng, epoch, seq):
        """The report of a memoized body at (epoch, seq): a fresh IRR draw of its y'
        (none without an IRR: the same body, no random byte).  None if ``body`` cannot
        be a body of this config (a tampered memo)."""
        if not self.fits(body):
            return None
        v = get(body, 0, self.nbits)
        if self.irr is not None:
            v = grr(v, self.n, self.irr, rng)
        return self.encode(v, epoch, seq)

    def fits(self, body):
        """The body length, a value below n, zero padding."""
        nb = self.nbits
        return (len(body) == (nb + 7) >> 3 and get(body, 0, nb) < self.n
                and not get(body, nb, (len(body) << 3) - nb))
