"""One privatised report per epoch, through the configured protocol's client.

With ``device.memoize`` the node keeps a fresh report's body (the wire form
of the draw, SPEC.md section 4) and ``replay`` sends that body again under
a new header, drawing nothing.
"""
from mss_device.frame import HEADER, start
from mss_device.rng import ByteRng


class Reporter:
    def __init__(self, params, rng=None, device_id=None):
        self.params = params
        self.rng = rng or ByteRng()
        self.client = params.client()
        self.client.device_id = device_id  # OLH derives its public hash seed from it
        self.header = HEADER[params.frame]

    def valid(self, value):
        return type(value) is int and 0 <= value < self.params.k

    def report(self, value, epoch, seq):
        """Report bytes for ``value``; the value itself never leaves this call."""
        return self.client.report(value, self.rng, epoch, seq)

    def replay(self, body, epoch, seq):
        """The report of a memoized ``body`` at (epoch, seq): the header the
        client writes, the same body bytes, no random draw.  None if ``body``
        cannot be a body of this config (a tampered memo)."""
        if not self.client.fits(body):
            return None
        out = start(self.params, len(body) << 3, epoch, seq)
        out[self.header:] = body
        return bytes(out)
