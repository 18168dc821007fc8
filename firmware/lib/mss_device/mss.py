"""MSS and SubsetSelection on the device: :mod:`.randomiser` then :mod:`.encoder`."""
from mss_device.encoder import Encoder
from mss_device.frame import get
from mss_device.randomiser import privatise


class Client:
    def __init__(self, params):
        self.p = params
        self.mark = bytearray((max(params.moduli) + 7) >> 3)  # reused: no allocation per report
        self.encoder = Encoder(params)
        self.nbits = params.jbits + max(params.rank_bits)

    def report(self, x, rng, epoch, seq):
        j = privatise(self.p, x, rng, self.mark)
        return self.encoder.encode(j, self.mark, epoch, seq)

    def fits(self, body):
        """Block index in range, that block's body length, zero padding."""
        p = self.p
        if len(body) << 3 < p.jbits:
            return False
        j = get(body, 0, p.jbits)
        if j >= len(p.moduli):
            return False
        pad = (len(body) << 3) - p.jbits - p.rank_bits[j]
        return 0 <= pad < 8 and not body[-1] & ((1 << pad) - 1)
