"""One privatised report per epoch: randomiser + encoder with reused buffers.

With ``device.memoize`` the node keeps a fresh report's body, the wire form
of the draw (j, Z) (SPEC.md section 4: its smallest exact form), and
``replay`` sends that body again under a new header, drawing nothing.
"""
from mss_device.encoder import HEADER_BYTES, Encoder
from mss_device.randomiser import privatise
from mss_device.rng import ByteRng


class Reporter:
    def __init__(self, params, rng=None):
        self.params = params
        self.rng = rng or ByteRng()
        self.mark = bytearray((max(params.moduli) + 7) >> 3)
        self.encoder = Encoder(params)

    def valid(self, value):
        return type(value) is int and 0 <= value < self.params.k

    def report(self, value, epoch, seq):
        """Report bytes for ``value``; the value itself never leaves this call."""
        j = privatise(self.params, value, self.rng, self.mark)
        return self.encoder.encode(j, self.mark, epoch, seq)

    def replay(self, body, epoch, seq):
        """The report of a memoized ``body`` at (epoch, seq): the header the
        encoder writes, the same body bytes, no random draw.  None if ``body``
        cannot be a body of this config (a tampered memo)."""
        if not self._fits(body):
            return None
        out = self.encoder.header(HEADER_BYTES + len(body), epoch, seq)
        out[HEADER_BYTES:] = body
        return bytes(out)

    def _fits(self, body):
        """Block index in range, the block's body length, zero padding."""
        p = self.params
        if len(body) << 3 < p.jbits:
            return False
        j = 0
        for i in range(p.jbits):
            j = (j << 1) | ((body[i >> 3] >> (7 - (i & 7))) & 1)
        if j >= len(p.moduli):
            return False
        nbits = p.jbits + p.rank_bits[j]
        pad = (len(body) << 3) - nbits
        return 0 <= pad < 8 and not body[-1] & ((1 << pad) - 1)
