"""Generalised randomised response on the device (mss_protocol.grr).

Report x with probability t / 2**30, else a uniform other value:
``chance(t)``, then ``below(k - 1)`` mapped through v -> v + (v >= x)
(``grr``, in mss_device.point: the instantaneous layer of every one-output
protocol is this function too).
"""
from mss_device.check import MAX_N, ONE, at_most, threshold
from mss_device.point import PointClient, grr


class Client(PointClient):
    def __init__(self, params):
        PointClient.__init__(self, params, params.k)

    def draw(self, x, rng):
        return grr(x, self.p.k, self.p.t, rng)


def check(p):
    at_most("k", p.k, 2, MAX_N + 1)  # below(k - 1)
    threshold("t", p.t)


def outputs(p):
    """The report alphabet's size (the instantaneous layer's n_out)."""
    return p.k


def ratios(p):
    """Keep x or report one of the k - 1 others: (m, omega) = (k, 1)."""
    return [(p.t * (p.k - 1), ONE - p.t)]
