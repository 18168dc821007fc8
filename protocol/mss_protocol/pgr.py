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
import math
from fractions import Fraction
from functools import cached_property

import numpy as np

from mss_protocol import privacy
from mss_protocol.channel import PointChannel
from mss_protocol.limits import check_draw, check_field
from mss_protocol.privacy import ONE
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


def canonical_points(q, t):
    """The (q^t - 1)/(q - 1) canonical points of PG(t-1, q) (first nonzero coordinate 1),
    shape (., t), in index order: by the position of the leading 1, then base q."""
    blocks = []
    for lead in range(t):
        free = t - 1 - lead
        idx = np.arange(q ** free)
        block = np.zeros((idx.size, t), dtype=np.int64)
        block[:, lead] = 1
        block[:, lead + 1:] = (idx[:, None] // q ** np.arange(free - 1, -1, -1)) % q
        blocks.append(block)
    return np.concatenate(blocks)


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
        return canonical_points(self.field, self.t)

    def device_values(self):
        """(q, d, t), in mss_device.params.FIELDS order (d: the dimension, here self.t)."""
        return (self.field, self.t, self.threshold)

    @property
    def counts_size(self):
        """The K-point histogram: :meth:`support` transforms it."""
        return self.K

    # the device cost model (mss_protocol.device_cost): rejection rounds and their coordinates
    cost_family = "pgr"

    def device_features(self):
        """{base: 1, rounds: R, coords: R t}: rejection until the point is on the drawn side
        of x's hyperplane, R = p / s + (1 - p) / (1 - s) expected rounds, s = c_set / K the
        share of points on it; each round a dot product of t coordinates."""
        side = self.c_set / self.K
        rounds = self.p / side + (1 - self.p) / (1 - side)
        return {"base": 1.0, "rounds": rounds, "coords": rounds * self.t}

    def decode_cells(self, n):
        """q^t (t log2 q + k / q^(t-1) + q): the transform of the K-point histogram to the
        support counts (``n`` unused)."""
        q, t = self.field, self.t
        return q ** t * (t * math.log2(q) + self.k / max(1, q ** (t - 1)) + q)

    # -- the instantaneous layer (support.SupportOracle.with_irr): GRR on the K points;
    # the c_set points of x's hyperplane support x
    @property
    def outputs(self):
        return self.K

    @property
    def support_size(self):
        return self.c_set

    def support_sizes(self):
        """(max(0, c_set - (K - k)), min(k, c_set)): a point's hyperplane holds c_set of the K
        canonical points, of which the k items are the first (all of them when k = K)."""
        return max(0, self.c_set - (self.K - self.k)), min(self.k, self.c_set)

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
        """Histogram (K,) of reports for ``values``: :meth:`sample_outputs`' counts."""
        return np.bincount(self.sample_outputs(values, rng), minlength=self.K)

    def sample_outputs(self, values, rng):
        """Reports (point indices in [K]) for ``values``: the client's law, drawn directly.

        A report is inside S_v with probability s (the client's coin); inside, it is
        uniform on S_v (:meth:`_uniform_on_hyperplane`); outside, uniform on the other
        K - c_set points, by rejection from [K] (accepted with probability
        1 - c_set / K >= 1 - 1/q, so a few rounds)."""
        values = np.asarray(values)
        inside = rng.integers(0, ONE, size=values.size) < self.threshold
        out = np.empty(values.size, dtype=np.int64)
        out[inside] = self._uniform_on_hyperplane(values[inside], rng)
        todo = np.flatnonzero(~inside)
        while todo.size:
            u = rng.integers(0, self.K, size=todo.size)
            ok = (self.coords[u] * self.coords[values[todo]]).sum(axis=1) % self.field != 0
            out[todo[ok]] = u[ok]
            todo = todo[~ok]
        return self._irr_np(out, rng)

    def _uniform_on_hyperplane(self, values, rng):
        """For each item v, a uniform point index of S_v: :meth:`_hyperplane_points` of a
        uniform nonzero c (an integer uniform in [1, q^(t-1)), written in base q).  Each
        projective point of S_v has exactly q - 1 nonzero representatives w, so it is
        drawn with probability (q - 1)/(q^(t-1) - 1) = 1/c_set: the law of the client's
        rejection loop, without its q-fold rejections."""
        q, t = self.field, self.t
        code = rng.integers(1, q ** (t - 1), size=values.size)
        return self._hyperplane_points(values, (code[:, None] // q ** np.arange(t - 2, -1, -1)) % q)

    def _hyperplane_points(self, values, c):
        """Point indices of w(v, c) for items ``values`` (n,) and nonzero c (n, t - 1).

        v is canonical: v_l = 1 at its lead position l.  The linear map
        c -> w with w_j = c_j (j != l) and w_l = -sum_{j != l} c_j v_j (mod q) is a
        bijection from F_q^(t-1) onto the hyperplane v^perp, so it maps the nonzero c
        onto the nonzero points of S_v and projective points onto projective points.
        w is returned as the index of its canonical form (first nonzero coordinate 1)."""
        q, t = self.field, self.t
        v = self.coords[values]
        rows = np.arange(values.size)
        lead = np.argmax(v != 0, axis=1)
        w = np.zeros_like(v)
        w[np.arange(t)[None, :] != lead[:, None]] = c.ravel()  # row-major: each row's free positions in order
        w[rows, lead] = -(w * v).sum(axis=1) % q  # w_l is still 0 here, and v_l = 1
        first = np.argmax(w != 0, axis=1)
        w = w * self._inverse[w[rows, first]][:, None] % q
        # a canonical point's index: the points with an earlier lead, then its digits after the lead
        place = q ** np.arange(t - 1, -1, -1)
        before = np.concatenate(([0], np.cumsum(place)))[:t]
        return before[first] + w @ place - place[first]

    @cached_property
    def _inverse(self):
        """Multiplicative inverses mod q, indexed by residue (entry 0 unused)."""
        return np.array([0] + [pow(a, -1, self.field) for a in range(1, self.field)], dtype=np.int64)

    # -- crafted reports (Protocol.crafted_counts) ----------------------------
    def crafted_counts(self, targets, m, rng):
        """Histogram (K,) of ``m`` Maximal Gain Attack reports (:meth:`Protocol.crafted_counts`).

        A point u supports the items v with <u, v> = 0, so a crafted report is a point on the
        hyperplanes of as many targets as any point is: every target when they span fewer than
        t dimensions (a nonzero u orthogonal to all exists), else t - 1 of them (t = 2: one, the
        projective line's hyperplanes are single points).  The K points are searched (O(K t) per
        target) and the reports are uniform among the best."""
        targets = np.asarray(targets)
        held = ((self.coords @ self.coords[targets].T) % self.field == 0).sum(axis=1)
        best = np.flatnonzero(held == held.max())
        return np.bincount(rng.choice(best, m), minlength=self.K)

    def random_output_counts(self, m, rng):
        """Histogram (K,) of ``m`` uniform points of [K]."""
        return np.bincount(rng.integers(0, self.K, m), minlength=self.K)

    # -- decoder ------------------------------------------------------------
    def support(self, hist):
        """C_v = sum_{u in S_v} hist[u] for the k items: summed over each item's c_set
        points (:attr:`_members`) when k c_set <= q^t, the DFT's cell count, else by the
        DFT (:meth:`_support_dft`)."""
        if self.k * self.c_set <= self.field ** self.t:
            return np.asarray(hist)[self._members].sum(axis=1)
        return self._support_dft(hist)

    @cached_property
    def _members(self):
        """(k, c_set) point indices of each item's S_v: :meth:`_hyperplane_points` of
        the canonical points c of PG(t-2, q), one per projective point of S_v."""
        c = canonical_points(self.field, self.t - 1)
        items = np.repeat(np.arange(self.k), c.shape[0])
        return self._hyperplane_points(items, np.tile(c, (self.k, 1))).reshape(self.k, -1)

    def _support_dft(self, hist):
        """C_v for the k items by the DFT over F_q^t (module docstring)."""
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
