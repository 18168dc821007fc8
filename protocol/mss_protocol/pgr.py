"""ProjectiveGeometryResponse (PGR; Feldman, Nelson, Nguyen & Talwar, ICML 2022).

Parameters (mss-protocol-notes.md section 9; SPEC.md section 1): q is the
smallest prime >= E + 1 (E = e^eps to 60 digits), at most 2**15 (the
device's products), t the smallest t >= 2 with K = (q^t - 1)/(q - 1) >= k, and
item v is the v-th canonical point of PG(t-1, q) (first nonzero coordinate
1; points ordered by the position of that 1, then base-q).  The report is
a point u: uniform in S_v = {u : <u, v> = 0} (c_set = (q^(t-1) - 1)/(q - 1)
points) with probability s = T / 2**30, else uniform outside S_v.  Two
distinct S_v share c_int = (q^(t-2) - 1)/(q - 1) points, so a user holding
v' != v lands in S_v with probability

    r = s c_int / c_set + (1 - s) (c_set - c_int) / (K - c_set),

and fhat_v = (C_v / n - r)/(s - r) with C_v = sum_{u in S_v} hist[u]
(the support estimator of :mod:`.support`).  Counts: the histogram of
reports over [K].

Decoding computes every C_v at once with the DFT over F_q^t:
1{<u, v> = 0} = (1/q) sum_{c in F_q} w^{c <u, v>}, so
C_v = (1/q) sum_c Re hhat(c v) with hhat the t-dimensional DFT of the
histogram placed on F_q^t (a real FFT: half the spectrum suffices) --
O(q^t t log q) = O(K q t log q), in place of the paper's dynamic program
of the same order up to the log (measured against it: docs/benchmarks.md).
"""
from fractions import Fraction
from functools import cached_property

import numpy as np

from mss_protocol import privacy
from mss_protocol.channel import PointChannel
from mss_protocol.privacy import ONE
from mss_protocol.limits import check_draw, check_field
from mss_protocol.support import SupportOracle


def _is_prime(n):
    return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))


def field_and_dimension(k, epsilon):
    """(q, t): the smallest prime q >= E + 1 and the smallest t >= 2 with
    (q^t - 1)/(q - 1) >= k, E = e^eps to 60 digits (SPEC.md section 1: q >= E + 1
    is q >= ceil(E) + 1, exactly, whatever the double exp(eps) would round to).
    The decoder's DFT has q^t cells."""
    q = privacy.ceil_exp(epsilon) + 1
    while not _is_prime(q):
        q += 1
    t = 2
    while (q ** t - 1) // (q - 1) < k:
        t += 1
    return q, t


class PGR(SupportOracle):
    name = "pgr"

    def __init__(self, k, epsilon):
        self.k, self.epsilon = k, epsilon
        self.field, self.t = q, t = field_and_dimension(k, epsilon)  # field size q (self.q is the estimator's r below)
        self.K = (q ** t - 1) // (q - 1)
        check_draw(self.K, "K")
        check_field(q)  # after K: at q > 2**23 both fail, and the draw is the first reason
        self.c_set = (q ** (t - 1) - 1) // (q - 1)
        self.c_int = (q ** (t - 2) - 1) // (q - 1)
        # s = e^eps c_set / ((e^eps - 1) c_set + K): the channel "c_set of K outcomes
        # weighted by e^eps" of privacy.threshold, rounded down (towards privacy)
        self.threshold = thr = privacy.threshold(self.K, self.c_set, epsilon)
        self.eps_effective = privacy.eps_effective([self.K], [self.c_set], [thr])
        self.p = thr / ONE  # s
        out = self.K - self.c_set
        # the support estimator's q is r, the chance a non-holder lands in S_v
        self.q = (self.p * self.c_int / self.c_set + (1 - self.p) * (self.c_set - self.c_int) / out)
        self.body_bits = (self.K - 1).bit_length()

    @cached_property
    def coords(self):
        """Coordinates of the K canonical points, shape (K, t), in index order (built
        when first used: the planner only needs K, and K > 2**23 at large epsilon)."""
        blocks = []
        for lead in range(self.t):
            free = self.t - 1 - lead
            idx = np.arange(self.field ** free)
            digits = (idx[:, None] // self.field ** np.arange(free - 1, -1, -1)) % self.field if free \
                else np.zeros((1, 0), dtype=np.int64)
            block = np.zeros((idx.size, self.t), dtype=np.int64)
            block[:, lead] = 1
            block[:, lead + 1:] = digits
            blocks.append(block)
        return np.concatenate(blocks)

    def device_values(self):
        """(q, d, t), in mss_device.params.FIELDS order (d: the dimension, here self.t)."""
        return (self.field, self.t, self.threshold)

    # -- the instantaneous layer (support.SupportOracle.with_irr): GRR on the K points;
    # the c_set points of x's hyperplane support x
    @property
    def outputs(self):
        return self.K

    @property
    def support_size(self):
        return self.c_set

    def point_probs(self):
        """P[y' = u | x] for u on x's hyperplane and off it, exactly."""
        t = self.threshold
        return Fraction(t, ONE * self.c_set), Fraction(ONE - t, ONE * (self.K - self.c_set))

    # -- client -------------------------------------------------------------
    def randomise(self, x, rng):
        """A point index in [K]: rejection sampling of uniform points (integer only)."""
        inside = rng.chance(self.threshold)
        v = self.coords[x]
        while True:
            u = rng.below(self.K)
            if (int(np.dot(self.coords[u], v)) % self.field == 0) == inside:
                return self._irr(u, rng)

    def sample_chunk(self, values, rng):
        """Histogram (K,) of reports for ``values``: same law, vectorised rejection."""
        values = np.asarray(values)
        inside = rng.integers(0, ONE, size=values.size) < self.threshold
        out = np.empty(values.size, dtype=np.int64)
        todo = np.arange(values.size)
        while todo.size:
            u = rng.integers(0, self.K, size=todo.size)
            dot = (self.coords[u] * self.coords[values[todo]]).sum(axis=1) % self.field
            ok = (dot == 0) == inside[todo]
            out[todo[ok]] = u[ok]
            todo = todo[~ok]
        return np.bincount(self._irr_np(out, rng), minlength=self.K)

    # -- decoder ------------------------------------------------------------
    def support(self, hist):
        """C_v = sum_{u in S_v} hist[u] for the k items, by the DFT over F_q^t."""
        q, t = self.field, self.t
        flat = np.zeros(q ** t, dtype=np.float32 if np.sum(hist) < 1 << 20 else np.float64)
        flat[self.coords @ (q ** np.arange(t - 1, -1, -1))] = hist  # float32 still rounds exactly
        # Real input: the half spectrum suffices, since Re hhat(-w) = Re hhat(w).
        half = np.fft.rfftn(flat.reshape((q,) * t)).real.ravel()
        dims = (q,) * (t - 1) + (q // 2 + 1,)
        weights = np.array([int(np.prod(dims[i + 1:])) for i in range(t)])
        items = self.coords[:self.k]
        total = np.zeros(self.k)
        for c in range(q):  # sum over c of Re hhat(c v); numpy's w = exp(-2 pi i / q)
            w = (c * items) % q
            w = np.where(w[:, -1:] > q // 2, (-w) % q, w)
            total += half[w @ weights]
        return np.rint(total / q)

    def support_slow(self, hist):
        """Direct O(k K) reference of :meth:`support`, for tests."""
        dots = (self.coords[:self.k] @ self.coords.T) % self.field
        return (dots == 0).astype(np.int64) @ np.asarray(hist)

    def channel(self):
        return PGRChannel(self)


class PGRChannel(PointChannel):
    """Outputs u in [K]; S(u) = {v : <u, v> = 0 in F_q}, c_set points each."""

    def __init__(self, oracle):
        super().__init__(oracle, oracle.c_set)
        self.items = oracle.coords[:self.k].T

    def members(self, u):
        return (self.oracle.coords[u] @ self.items) % self.oracle.field == 0
