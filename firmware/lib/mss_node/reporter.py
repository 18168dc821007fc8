"""One privatised report per epoch: randomiser + encoder with reused buffers."""
from mss_device.encoder import Encoder
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
