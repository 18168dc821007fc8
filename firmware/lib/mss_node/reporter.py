"""One privatised report per epoch, through the configured protocol's client.

With ``device.memoize`` the node keeps a fresh report's memo body (the wire
form of the permanent draw, SPEC.md sections 4 and 10: :meth:`Reporter.fresh`)
and :meth:`Reporter.replay` sends that body again under a new header: as it is,
drawing nothing, or, with the config's instantaneous layer (``irr``, SPEC.md
section 3), through a fresh IRR draw of it.
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
        self.irr = getattr(self.client, "irr", None)  # one-output protocols only

    def valid(self, value):
        return type(value) is int and 0 <= value < self.params.k

    def report(self, value, epoch, seq):
        """Report bytes for ``value``; the value itself never leaves this call."""
        return self.client.report(value, self.rng, epoch, seq)

    def fresh(self, value, epoch, seq):
        """(report bytes, memo body) of a fresh draw for ``value``: the memo body is the
        body of the permanent draw y' (the report's own body without an IRR)."""
        if hasattr(self.client, "fresh"):
            return self.client.fresh(value, self.rng, epoch, seq)
        out = self.client.report(value, self.rng, epoch, seq)
        return out, out[self.header:]

    def replay(self, body, epoch, seq):
        """The report of a memoized ``body`` at (epoch, seq): the header the
        client writes, the same body bytes and no random draw, or with an IRR a
        fresh IRR draw of the body's y'.  None if ``body`` cannot be a body of
        this config (a tampered memo)."""
        if self.irr is not None:
            return self.client.replay(body, self.rng, epoch, seq)
        if not self.client.fits(body):
            return None
        out = start(self.params, len(body) << 3, epoch, seq)
        out[self.header:] = body
        return bytes(out)
