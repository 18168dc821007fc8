"""Baseline frequency oracles with integer device randomisers: GRR and unary
encoding (RAPPOR's basic one-time form: symmetric SUE and optimised OUE).

Each has the three parts of MSS: a client randomiser drawing only through
``rng.below`` / ``rng.chance`` (the same injectable byte source), a
sufficient statistic (per-item support counts, additive), and an unbiased
decoder with analytic standard errors.  Keep-probabilities are integer
thresholds T / 2**30 rounded towards more privacy; ``eps_effective`` is the
exact worst-case log ratio of those integers (mss-protocol-notes.md section 8).

For both, support count c_v over n reports has E[c_v / n] = q + (p - q) f_v,
so fhat_v = (c_v / n - q) / (p - q), with variance
q(1-q)/(n (p-q)^2) + f_v (1-p-q)/(n (p-q)).
"""
import math
from decimal import ROUND_CEILING, ROUND_FLOOR
from fractions import Fraction

import numpy as np

from mss_protocol import privacy
from mss_protocol.privacy import ONE


class SupportOracle:
    """Shared estimator of the support-count protocols; subclasses set p, q."""

    name = ""

    def estimate(self, counts, n):
        """(fhat, stderr), shape (k,) each, from support counts of n reports."""
        p, q = self.p, self.q
        fhat = (np.asarray(counts) / n - q) / (p - q)
        f = np.clip(fhat, 0, 1)
        var = q * (1 - q) / (n * (p - q) ** 2) + f * (1 - p - q) / (n * (p - q))
        return fhat, np.sqrt(var)

    def variance(self, n):
        """Per-item MSE of the unbiased estimate averaged over [k] (any distribution)."""
        p, q = self.p, self.q
        return q * (1 - q) / (n * (p - q) ** 2) + (1 - p - q) / (self.k * n * (p - q))


class GRR(SupportOracle):
    """k-ary randomised response: report x with probability p, else a uniform other value."""

    name = "grr"

    def __init__(self, k, epsilon):
        self.k, self.epsilon = k, epsilon
        # GRR is the keep-one-of-k channel of privacy.threshold (omega = 1)
        self.threshold = t = privacy.threshold(k, 1, epsilon)
        self.p = t / ONE
        self.q = (1 - self.p) / (k - 1)
        self.eps_effective = privacy.eps_effective([k], [1], [t])
        self.bits = (k - 1).bit_length()

    def randomise(self, x, rng):
        if rng.chance(self.threshold):
            return x
        v = rng.below(self.k - 1)
        return v + (v >= x)

    def perturb(self, values, rng):
        """Reports for ``values``, vectorised (the same law as :meth:`randomise`)."""
        values = np.asarray(values)
        keep = rng.integers(0, ONE, size=values.size) < self.threshold
        other = rng.integers(0, self.k - 1, size=values.size)
        return np.where(keep, values, other + (other >= values))

    def sample_counts(self, values, rng):
        """Support counts (k,) of reports for ``values``."""
        return np.bincount(self.perturb(values, rng), minlength=self.k)


class UnaryEncoding(SupportOracle):
    """Unary encoding (basic one-time RAPPOR): k bits, bit v set with probability
    p if v is the value, else q, independently.  ``variant``: "oue" (p = 1/2,
    q = 1/(e^eps + 1); Wang et al. 2017, the PGR code's RAPPOR) or "sue"
    (p = e^(eps/2)/(e^(eps/2) + 1), q = 1 - p; Erlingsson et al. 2014)."""

    def __init__(self, k, epsilon, variant="oue"):
        self.k, self.epsilon, self.name = k, epsilon, variant
        e = Fraction(privacy.exp_decimal(epsilon))
        if variant == "oue":
            tp = ONE // 2
            tq = int((ONE / (privacy.exp_decimal(epsilon) + 1)).to_integral_value(ROUND_CEILING))  # q up
        elif variant == "sue":
            h = privacy.exp_decimal(epsilon / 2)
            tp = int((ONE * h / (h + 1)).to_integral_value(ROUND_FLOOR))
            tq = ONE - tp
        else:
            raise ValueError(f"unary encoding variant must be oue or sue, got {variant!r}")

        def ratio(tp, tq):  # worst case: the two bits of x and x' change
            return Fraction(tp * (ONE - tq), (ONE - tp) * tq)

        while ratio(tp, tq) > e:  # guard the decimal rounding, towards privacy
            tp, tq = (tp, tq + 1) if variant == "oue" else (tp - 1, ONE - tp + 1)
        eps_ratio = ratio(tp, tq)
        self.tp, self.tq = tp, tq
        self.p, self.q = tp / ONE, tq / ONE
        self.eps_effective = privacy.ln_down(eps_ratio)
        self.bits = k

    def randomise(self, x, rng):
        """The k-bit report as bytes (bit v at byte v // 8, bit v % 8)."""
        out = bytearray((self.k + 7) // 8)
        for v in range(self.k):
            if rng.chance(self.tp if v == x else self.tq):
                out[v >> 3] |= 1 << (v & 7)
        return bytes(out)

    def sample_counts(self, values, rng):
        """Support counts: Binomial(n_v, p) + Binomial(n - n_v, q) per item, exactly."""
        n_v = np.bincount(np.asarray(values), minlength=self.k)
        return rng.binomial(n_v, self.p) + rng.binomial(n_v.sum() - n_v, self.q)


class OLH(SupportOracle):
    """Optimised local hashing (Wang et al. 2017) with a small-int hash.

    The user draws a seed (a, b), a in [1, P), b in [0, P), P = 32749 (the
    largest prime below 2**15, so a*v < 2**30 on a device), hashes
    H(v) = ((a v + b) mod P) mod g with g = round(e^eps) + 1, and reports
    (a, b, GRR_g(H(x))).  (a v + b, a x + b) is uniform over distinct pairs
    of Z_P for v != x, so the collision probability
    gamma = sum_r c_r (c_r - 1) / (P (P - 1)) (c_r = #{u < P : u mod g = r})
    is exact, and a non-holder's report supports v with probability
    q = gamma p + (1 - gamma)(1 - p)/(g - 1).  The server keeps the reports
    and tallies support counts c_v (additive, (k,)) in vectorised chunks;
    that O(n k) tally is part of :meth:`estimate`, as it is of decoding.
    """

    name = "olh"
    P = 32749

    def __init__(self, k, epsilon):
        if k > self.P:
            raise ValueError(f"OLH here supports k <= {self.P} (small-int hash), got {k}")
        self.k, self.epsilon = k, epsilon
        self.g = g = max(2, round(math.exp(epsilon)) + 1)
        self.grr = GRR(g, epsilon)
        self.threshold, self.p = self.grr.threshold, self.grr.p
        self.eps_effective = self.grr.eps_effective
        sizes = np.bincount(np.arange(self.P) % g, minlength=g).astype(float)
        gamma = float((sizes * (sizes - 1)).sum() / (self.P * (self.P - 1)))
        self.q = gamma * self.p + (1 - gamma) * (1 - self.p) / (g - 1)
        self.bits = 2 * (self.P - 1).bit_length() + (g - 1).bit_length()

    def hash(self, a, b, v):
        return ((a * v + b) % self.P) % self.g

    def randomise(self, x, rng):
        """(a, b, y) with y = GRR_g(H_{a,b}(x))."""
        a = 1 + rng.below(self.P - 1)
        b = rng.below(self.P)
        return a, b, self.grr.randomise(self.hash(a, b, x), rng)

    def support(self, a, b, y, chunk=1 << 24):
        """Support counts (k,) of reports (a, b, y), in chunks of about ``chunk`` cells."""
        counts = np.zeros(self.k, dtype=np.int64)
        v = np.arange(self.k)
        step = max(1, chunk // self.k)
        for lo in range(0, a.size, step):
            sl = slice(lo, lo + step)
            h = ((a[sl, None] * v + b[sl, None]) % self.P) % self.g
            counts += (h == y[sl, None]).sum(axis=0)
        return counts

    def estimate(self, reports, n):
        """(fhat, stderr) from reports given as arrays (a, b, y)."""
        return super().estimate(self.support(*reports), n)

    def sample_counts(self, values, rng):
        """Reports (a, b, y) for ``values``, vectorised (same law as the client)."""
        values = np.asarray(values)
        a = rng.integers(1, self.P, size=values.size)
        b = rng.integers(0, self.P, size=values.size)
        return a, b, self.grr.perturb(self.hash(a, b, values), rng)


def _even_parity(x):
    """popcount(x) is even, elementwise, for int arrays below 2**32."""
    x = x ^ (x >> 16)
    x ^= x >> 8
    x ^= x >> 4
    x ^= x >> 2
    x ^= x >> 1
    return (x & 1) == 0


class HadamardResponse(SupportOracle):
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
    """

    name = "hr"

    def __init__(self, k, epsilon):
        self.k, self.epsilon = k, epsilon
        self.K = 1 << k.bit_length()  # > k, so rows 1..k exist
        # in C_x or not: the keep-one-of-two channel (C_x and its complement have K/2 points)
        self.threshold = t = privacy.threshold(2, 1, epsilon)
        self.p, self.q = t / ONE, 0.5
        self.eps_effective = privacy.eps_effective([2], [1], [t])
        self.bits = (self.K - 1).bit_length()

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
                return j

    def sample_counts(self, values, rng):
        """Histogram (K,) of reports for ``values`` (vectorised rejection)."""
        rows = np.asarray(values) + 1
        inside = rng.integers(0, ONE, size=rows.size) < self.threshold
        out = np.empty(rows.size, dtype=np.int64)
        todo = np.arange(rows.size)
        while todo.size:
            j = rng.integers(0, self.K, size=todo.size)
            ok = _even_parity(rows[todo] & j) == inside[todo]
            out[todo[ok]] = j[ok]
            todo = todo[~ok]
        return np.bincount(out, minlength=self.K)

    def support(self, hist):
        h = np.asarray(hist, dtype=float).copy()
        step = 1
        while step < self.K:  # in-place fast Walsh-Hadamard transform
            h = h.reshape(-1, 2, step)
            h = np.stack([h[:, 0] + h[:, 1], h[:, 0] - h[:, 1]], axis=1).reshape(-1)
            step *= 2
        return np.rint((np.sum(hist) + h[1:self.k + 1]) / 2)

    def estimate(self, hist, n):
        return super().estimate(self.support(hist), n)
