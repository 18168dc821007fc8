"""ProjectiveGeometryResponse (PGR; Feldman, Nelson, Nguyen & Talwar, ICML 2022).

Parameters (mss-protocol-notes.md section 9): q is the smallest prime
>= e^eps + 1, t the smallest t >= 2 with K = (q^t - 1)/(q - 1) >= k, and
item v is the v-th canonical point of PG(t-1, q) (first nonzero coordinate
1; points ordered by the position of that 1, then base-q).  The report is
a point u: uniform in S_v = {u : <u, v> = 0} (c_set = (q^(t-1) - 1)/(q - 1)
points) with probability s = T / 2**30, else uniform outside S_v.  Two
distinct S_v share c_int = (q^(t-2) - 1)/(q - 1) points, so a user holding
v' != v lands in S_v with probability

    r = s c_int / c_set + (1 - s) (c_set - c_int) / (K - c_set),

and fhat_v = (C_v / n - r)/(s - r) with C_v = sum_{u in S_v} hist[u]
(the support estimator of :mod:`.baselines`).  The histogram over [K] is
the additive sufficient statistic.

Decoding: for t <= 3 each S_v is a projective line (or point), whose
q + 1 points are gathered for all items at once (O(k q t)); for t >= 4
every C_v comes from the DFT over F_q^t: 1{<u, v> = 0} =
(1/q) sum_{c in F_q} w^{c <u, v>}, so C_v = (1/q) sum_c hhat(c v) with
hhat the t-dimensional DFT of the histogram placed on F_q^t --
O(q^t t log q) = O(K q t log q) with numpy's FFT, in place of the paper's
dynamic program of the same order up to the log.
"""
import math
from decimal import ROUND_FLOOR
from fractions import Fraction

import numpy as np

from mss_protocol.baselines import SupportOracle, _exp, _ln
from mss_protocol.privacy import ONE


def _is_prime(n):
    return n >= 2 and all(n % d for d in range(2, int(n ** 0.5) + 1))


class PGR(SupportOracle):
    name = "pgr"

    def __init__(self, k, epsilon):
        self.k, self.epsilon = k, epsilon
        q = max(2, math.ceil(math.exp(epsilon) + 1))
        while not _is_prime(q):
            q += 1
        t = 2
        while (q ** t - 1) // (q - 1) < k:
            t += 1
        self.field, self.t = q, t  # field size q (self.q is the estimator's r below)
        self.K = (q ** t - 1) // (q - 1)
        self.c_set = (q ** (t - 1) - 1) // (q - 1)
        self.c_int = (q ** (t - 2) - 1) // (q - 1)
        e = _exp(epsilon)
        # s = e^eps c_set / ((e^eps - 1) c_set + K), rounded down (towards privacy)
        thr = int((ONE * e * self.c_set / ((e - 1) * self.c_set + self.K)).to_integral_value(ROUND_FLOOR))
        out = self.K - self.c_set
        while Fraction(thr * out, (ONE - thr) * self.c_set) > Fraction(e):
            thr -= 1
        self.threshold = thr
        self.eps_effective = _ln(Fraction(thr * out, (ONE - thr) * self.c_set))
        self.p = thr / ONE  # s
        # the support estimator's q is r, the chance a non-holder lands in S_v
        self.q = (self.p * self.c_int / self.c_set + (1 - self.p) * (self.c_set - self.c_int) / out)
        self.bits = (self.K - 1).bit_length()
        self.coords = self._points()

    def _points(self):
        """Coordinates of the K canonical points, shape (K, t), in index order."""
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

    # -- client -------------------------------------------------------------
    def randomise(self, x, rng):
        """A point index in [K]: rejection sampling of uniform points (integer only)."""
        inside = rng.chance(self.threshold)
        v = self.coords[x]
        while True:
            u = rng.below(self.K)
            if (int(np.dot(self.coords[u], v)) % self.field == 0) == inside:
                return u

    def sample_counts(self, values, rng):
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
        return np.bincount(out, minlength=self.K)

    # -- decoder ------------------------------------------------------------
    def support(self, hist):
        """C_v = sum_{u in S_v} hist[u] for the k items: direct for t <= 3, else by DFT."""
        return self._support_direct(hist) if self.t <= 3 else self._support_dft(hist)

    def _index(self, vec):
        """Point index of nonzero vectors (..., t): scale to canonical, then rank."""
        q, t = self.field, self.t
        lead = np.argmax(vec != 0, axis=-1)
        inv = np.array([0] + [pow(a, q - 2, q) for a in range(1, q)])  # Fermat inverses
        canon = (vec * inv[np.take_along_axis(vec, lead[..., None], -1)]) % q
        starts = np.concatenate([[0], np.cumsum([q ** (t - 1 - i) for i in range(t)])])
        weights = q ** np.arange(t - 1, -1, -1)
        # digits after the leading 1, read in base q, plus the block offset
        rank = (canon * weights).sum(-1) - weights[lead]
        return starts[lead] + rank

    def _support_direct(self, hist):
        """t <= 3: S_v is a line of q + 1 points spanned by two vectors of v^perp;
        gather them for every item at once, O(k q t)."""
        q = self.field
        v = self.coords[:self.k]
        if self.t == 2:  # S_v is the single point v^perp = (-v1, v0)
            return np.asarray(hist)[self._index(np.stack([-v[:, 1] % q, v[:, 0]], -1))]
        # v x e_0, v x e_1, v x e_2 span v^perp (a plane); take an independent pair
        # (over F_q v may be self-orthogonal, so v x (v x e) is no safe choice)
        c = np.cross(v[:, None, :], np.eye(3, dtype=np.int64)[None]) % q
        pairs = [(0, 1), (0, 2), (1, 2)]
        ok = np.stack([(np.cross(c[:, a], c[:, b]) % q).any(axis=1) for a, b in pairs], axis=1)
        first = np.argmax(ok, axis=1)
        rows = np.arange(self.k)
        b1 = c[rows, np.array([a for a, _ in pairs])[first]]
        b2 = c[rows, np.array([b for _, b in pairs])[first]]
        # the q + 1 points of the line: b1 + a b2 (a in F_q) and b2
        a = np.arange(q)
        pts = (b1[:, None, :] + a[None, :, None] * b2[:, None, :]) % q
        pts = np.concatenate([pts, b2[:, None, :]], axis=1)
        return np.asarray(hist)[self._index(pts)].sum(axis=1)

    def _support_dft(self, hist):
        q, t = self.field, self.t
        flat = np.zeros(q ** t)
        flat[self.coords @ (q ** np.arange(t - 1, -1, -1))] = hist
        exact32 = np.sum(hist) < 1 << 20  # single precision still rounds to the exact counts
        hhat = np.fft.fftn(flat.reshape((q,) * t).astype(np.complex64 if exact32 else np.complex128)).ravel()
        weights = q ** np.arange(t - 1, -1, -1)
        items = self.coords[:self.k]
        total = np.zeros(self.k)
        for c in range(q):  # hhat at c v; numpy's w = exp(-2 pi i / q) gives the same indicator sum
            total += hhat[((c * items) % q) @ weights].real
        return np.rint(total / q)

    def estimate(self, hist, n):
        return super().estimate(self.support(hist), n)

    def support_slow(self, hist):
        """Direct O(k K) reference of :meth:`support`, for tests."""
        dots = (self.coords[:self.k] @ self.coords.T) % self.field
        return (dots == 0).astype(np.int64) @ np.asarray(hist)
