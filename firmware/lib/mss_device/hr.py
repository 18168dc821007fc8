"""Hadamard response on the device (mss_protocol.hr).

K is a power of two above k; item x owns C_x = {j : popcount((x+1) & j)
even}.  ``chance(t)`` decides inside or outside C_x, then ``below(K)`` is
drawn until j lands on that side (half of [0, K) does: 2 draws expected).
"""
from mss_device.check import MAX_N, ONE, bad, threshold
from mss_device.point import PointClient


def even(x):
    """popcount(x) is even."""
    odd = 0
    while x:
        odd ^= x & 1
        x >>= 1
    return not odd


class Client(PointClient):
    def __init__(self, params):
        PointClient.__init__(self, params, params.K)

    def draw(self, x, rng):
        inside = rng.chance(self.p.t)
        row = x + 1
        while True:
            j = rng.below(self.n)
            if even(row & j) == inside:
                return j


def check(p):
    """K a power of two above k: then every row x + 1 in [1, K) splits [0, K) in halves."""
    K = p.K
    if type(K) is not int or not p.k < K <= MAX_N or K & (K - 1):
        bad("K", "must be a power of two above k, at most 2**23")
    threshold("t", p.t)


def outputs(p):
    """The report alphabet's size (the instantaneous layer's n_out)."""
    return p.K


def ratios(p):
    """Inside or outside C_x, K / 2 outputs each: (m, omega) = (2, 1)."""
    return [(p.t, ONE - p.t)]
