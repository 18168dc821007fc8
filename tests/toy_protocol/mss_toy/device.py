"""The toy protocol on the device (host side: :mod:`mss_toy.protocol`).

Keep x with ``chance(t)``, else ``below(k)``: a uniform value of all k.
"""
from mss_device.check import MAX_N, ONE, at_most, threshold
from mss_device.point import PointClient


class Client(PointClient):
    def __init__(self, params):
        PointClient.__init__(self, params, params.k)

    def draw(self, x, rng):
        return x if rng.chance(self.p.t) else rng.below(self.p.k)


def check(p):
    at_most("k", p.k, 2, MAX_N)  # below(k)
    threshold("t", p.t)


def outputs(p):
    """The report alphabet's size."""
    return p.k


def ratios(p):
    """P[y = x] / P[y = v], v != x: (t k + 2**30 - t) / (2**30 - t)."""
    return [(p.t * p.k + ONE - p.t, ONE - p.t)]
