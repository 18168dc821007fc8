"""Generalised randomised response on the device (mss_protocol.grr).

Report x with probability t / 2**30, else a uniform other value:
``chance(t)``, then ``below(k - 1)`` mapped through v -> v + (v >= x).
"""
from mss_device.check import MAX_N, ONE, at_most, threshold
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


def check(p):
    at_most("k", p.k, 2, MAX_N + 1)  # below(k - 1)
    threshold("t", p.t)


def ratios(p):
    """Keep x or report one of the k - 1 others: (m, omega) = (k, 1)."""
    return [(p.t * (p.k - 1), ONE - p.t)]
