"""Hadamard response, the basic one-block form (Acharya, Sun & Zhang 2019).

K is the smallest power of two above k; item x owns the set
C_x = {j in [K] : H[x+1, j] = +1} of the Sylvester-Hadamard matrix,
H[i, j] = (-1)^popcount(i & j).  The report is a uniform j in C_x with
probability s = T / 2**30, else a uniform j outside it.  Rows are
orthogonal, so a non-holder's report lies in C_v with probability 1/2,
and the support counts of all items are (n + (H hist)[v + 1]) / 2: one
fast Walsh-Hadamard transform, O(K log K).  (The multi-block HR for
large epsilon is not implemented; this form is the one that loses
accuracy as epsilon grows, as the PGR paper shows.)

Counts: the histogram of reports over [K].
"""
from fractions import Fraction

import numpy as np

from mss_protocol import privacy
from mss_protocol.channel import PointChannel
from mss_protocol.limits import check_draw
from mss_protocol.privacy import ONE
from mss_protocol.support import SupportOracle


def even_parity(x):
    """popcount(x) is even, elementwise, for int arrays below 2**32."""
    x = x ^ (x >> 16)
    x ^= x >> 8
    x ^= x >> 4
    x ^= x >> 2
    x ^= x >> 1
    return (x & 1) == 0


class HadamardResponse(SupportOracle):
    name = "hr"

    def __init__(self, k, epsilon):
        self.k, self.epsilon = k, epsilon
        self.K = 1 << k.bit_length()  # > k, so rows 1..k exist
        check_draw(self.K, "K")
        # in C_x or not: the keep-one-of-two channel (C_x and its complement have K/2 points)
        self.threshold = t = privacy.threshold(2, 1, epsilon)
        self.p, self.q = t / ONE, 0.5
        self.eps_effective = privacy.eps_effective([2], [1], [t])
        self.body_bits = (self.K - 1).bit_length()

    def device_values(self):
        """(K, t), in mss_device.params.FIELDS order."""
        return (self.K, self.threshold)

    # the instantaneous layer (support.SupportOracle.with_irr): GRR on the K outputs;
    # the K / 2 outputs of C_x support x
    @property
    def outputs(self):
        return self.K

    @property
    def support_size(self):
        return self.K // 2

    def point_probs(self):
        """P[y' = j | x] for j in C_x and j outside it, exactly."""
        t, half = self.threshold, self.K // 2
        return Fraction(t, ONE * half), Fraction(ONE - t, ONE * half)

    @staticmethod
    def _sign(i, j):
        """+1 (True) where H[i, j] = +1: popcount(i & j) is even (small ints only)."""
        x, odd = i & j, 0
        while x:
            odd ^= x & 1
            x >>= 1
        return odd == 0

    def randomise(self, x, rng):
        inside = rng.chance(self.threshold)
        while True:  # rejection: half of [K] is in C_x
            j = rng.below(self.K)
            if self._sign(x + 1, j) == inside:
                return self._irr(j, rng)

    def sample_chunk(self, values, rng):
        """Histogram (K,) of reports for ``values`` (vectorised rejection)."""
        rows = np.asarray(values) + 1
        inside = rng.integers(0, ONE, size=rows.size) < self.threshold
        out = np.empty(rows.size, dtype=np.int64)
        todo = np.arange(rows.size)
        while todo.size:
            j = rng.integers(0, self.K, size=todo.size)
            ok = even_parity(rows[todo] & j) == inside[todo]
            out[todo[ok]] = j[ok]
            todo = todo[~ok]
        return np.bincount(self._irr_np(out, rng), minlength=self.K)

    def support(self, hist):
        h = np.asarray(hist, dtype=float).copy()
        step = 1
        while step < self.K:  # in-place fast Walsh-Hadamard transform
            h = h.reshape(-1, 2, step)
            h = np.stack([h[:, 0] + h[:, 1], h[:, 0] - h[:, 1]], axis=1).reshape(-1)
            step *= 2
        return np.rint((np.sum(hist) + h[1:self.k + 1]) / 2)

    def channel(self):
        return HadamardChannel(self)


class HadamardChannel(PointChannel):
    """Outputs j in [K]; S(j) = {v : H[v + 1, j] = +1}, K/2 points each."""

    def __init__(self, oracle):
        super().__init__(oracle, oracle.K // 2)
        self.rows = np.arange(1, self.k + 1)

    def members(self, u):
        return even_parity(self.rows[None, :] & u[:, None])
