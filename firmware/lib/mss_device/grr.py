"""Generalised randomised response on the device (mss_protocol.grr).

Report x with probability t / 2**30, else a uniform other value:
``chance(t)``, then ``below(k - 1)`` mapped through v -> v + (v >= x).
"""
from mss_device.point import PointClient


def grr(x, k, t, rng):
    if rng.chance(t):
        return x
    v = rng.below(k - 1)
    return v + (v >= x)


class Client(PointClient):
    def __init__(self, params):
        PointClient.__init__(self, params, params.k)

    def draw(self, x, rng):
        return grr(x, self.p.k, self.p.t, rng)
