"""Hadamard response with blocks on the device (mss_protocol.hr).

Item x is row r = x mod (b - 1) + 1 of block j = x // (b - 1) (b = the
config's ``block``, a power of two); output j b + c is in x's support set
S_x when popcount(r & c) is even, b/2 of the K = B b outputs.
``chance(t)`` decides inside or outside S_x.  Inside: c = below(b), and
where popcount(r & c) is odd, c XOR (lowest set bit of r), which flips that
parity: a two-to-one map onto the even columns, so c is uniform on them.
Outside: ``below(K)`` until the output is not in S_x (at least half of
[0, K) is not: 2 draws expected at most).  Every value is below K <= 2**23.
"""
from mss_device.check import MAX_N, ONE, bad, threshold
from mss_device.point import PointClient


def odd(x):
    """popcount(x) is odd (1) or even (0)."""
    bit = 0
    while x:
        bit ^= x & 1
        x >>= 1
    return bit


class Client(PointClient):
    def __init__(self, params):
        PointClient.__init__(self, params, params.K)

    def draw(self, x, rng):
        b = self.p.block
        j = x // (b - 1)
        r = x - j * (b - 1) + 1
        if rng.chance(self.p.t):
            c = rng.below(b)
            if odd(r & c):
                c ^= r & -r
            return j * b + c
        while True:
            y = rng.below(self.n)
            if y // b != j or odd(r & (y & (b - 1))):
                return y


def check(p):
    """``block`` a power of two >= 2 and K = block * ceil(k / (block - 1)) <= 2**23: the
    blocks hold [0, k), and every row r in [1, block) splits its block in halves."""
    b, K = p.block, p.K
    if type(b) is not int or not 2 <= b <= MAX_N or b & (b - 1):
        bad("block", "must be a power of two in [2, 2**23]")
    if type(K) is not int or K != b * ((p.k + b - 2) // (b - 1)) or K > MAX_N:
        bad("K", "must be block * ceil(k / (block - 1)), at most 2**23")
    threshold("t", p.t)


def outputs(p):
    """The report alphabet's size (the instantaneous layer's n_out)."""
    return p.K


def ratios(p):
    """Inside S_x (b/2 outputs) or outside ((2B - 1) b/2, B = K / block blocks):
    (m, omega) = (2B, 1)."""
    return [(p.t * (2 * (p.K // p.block) - 1), ONE - p.t)]
