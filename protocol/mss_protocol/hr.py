"""Hadamard response with blocks (Acharya, Sun & Zhang, AISTATS 2019, section 4).

Layout.  The block size b is a power of two >= 2; the items are cut into
B = ceil(k / (b - 1)) blocks of b - 1: item x is row r = x mod (b - 1) + 1
of block j = floor(x / (b - 1)) (row 0 of the Sylvester-Hadamard matrix
H_b[r, c] = (-1)^popcount(r & c) is skipped).  The outputs are the K = B b
pairs (j, c), c in [b), numbered j b + c.  Item x supports
S_x = {(j, c) : H_b[r, c] = +1}, b/2 outputs.

Channel.  The report is a uniform output of S_x with probability s = T / 2**30,
else a uniform one of the K - b/2 others.  Per output the ratio is
s (K - b/2) / ((1 - s) b/2) = s (2B - 1) / (1 - s): the "1 of m = 2B outcomes
weighted by e^eps" channel of :func:`mss_protocol.privacy.threshold`, so
T = threshold(2B, 1, eps) and eps_effective is exact.  B = 1 (b the power
of two above k) is the one-block form (the paper's high-privacy variant).

Estimator (derived here; the paper's Theorem 4 uses the same two stages).
Rows of one H_b are orthogonal, so for the indicator Y_v = [y in S_v] and
the block indicator Z_j = [y in block j]:

    P[Y_v | x = v] = p = s
    P[Y_v | x != v in v's block] = q = (p + q_o) / 2
    P[Y_v | x in another block] = q_o = (1 - s) / (2B - 1)   (b/2 of the K - b/2)
    P[Z_j | x in block j] = p + q_o,   P[Z_j | x elsewhere] = 2 q_o.

Hence E[2 Y_v - Z_j] = (p - q_o) f_v exactly: the block's total F_j (the
first stage, E[Z_j] = 2 q_o + (p - q_o) F_j) cancels, and

    fhat_v = (2 C_v - N_j) / (n (p - q_o)) = (H_b h_j)[r] / (2 n (p - q)),

C_v the reports in S_v, N_j those in block j, h_j block j's histogram: one
fast Walsh-Hadamard transform per block, O(K log b).  2 Y_v - Z_j is +1 on
S_v, -1 on the rest of block j, 0 elsewhere, so with n f_x devices holding x

    n Var(fhat_v) = (2 q_o + (p - q_o) F_j) / (p - q_o)^2 - f_v
                  = (2q - p + (p - q) F_j) / (2 (p - q)^2) - f_v.

For B = 1 (F_j = 1, q = 1/2) this is the support estimator's
q(1-q)/(p-q)^2 + f_v (1-p-q)/(p-q).  ``p`` and ``q`` are the support
estimator's (:mod:`.support`): an instantaneous layer composes both (it is
affine in P[y' in S], so the relations above hold for the composed channel).

Choice of b.  Every power of two b from 2 to the one above k is a valid
layout with the same privacy; ``block_size`` takes the one whose average
variance over [k] (uniform prior; exact rationals) is smallest.  Small
epsilon gets B = 1; as e^eps grows, B ~ e^eps / 2 blocks win, as in the paper
(which fixes B = 2^floor(log2 e^eps) and K = B b with empty blocks when
B (b - 1) > k: never better than ceil(k / (b - 1)) blocks, which this
search also covers).

Counts: the histogram of reports over [K].
"""
from fractions import Fraction

import numpy as np

from mss_protocol import privacy
from mss_protocol.channel import PointChannel
from mss_protocol.limits import DEVICE_DRAW, check_draw
from mss_protocol.privacy import ONE
from mss_protocol.support import SupportOracle


def odd_parity(x):
    """popcount(x) is odd, elementwise, for int arrays below 2**32."""
    x = x ^ (x >> 16)
    x ^= x >> 8
    x ^= x >> 4
    x ^= x >> 2
    x ^= x >> 1
    return (x & 1) == 1


def layout(k, b):
    """(B, K) of block size b: B = ceil(k / (b - 1)) blocks, K = B b outputs."""
    blocks = -(-k // (b - 1))
    return blocks, blocks * b


def unit_variance(k, b, p, q):
    """n x the average over [k] of Var(fhat_v) at the uniform prior (module
    docstring): F_j = n_j / k, n_j the items of block j.  Exact for Fractions."""
    blocks, _ = layout(k, b)
    last = k - (blocks - 1) * (b - 1)
    mean_f_block = Fraction((blocks - 1) * (b - 1) ** 2 + last ** 2, k * k)
    return (2 * q - p + (p - q) * mean_f_block) / (2 * (p - q) ** 2) - Fraction(1, k)


def block_size(k, epsilon):
    """The power-of-two block size b of least :func:`unit_variance` (ties: the
    larger b), among those whose K fits a device draw (K <= 2**23) and whose
    p != q.  p = q (t = 2**30 / (2B) exactly, which the threshold rule gives
    only for an epsilon so small that E (2B - 1) rounds to 2B - 1 in t) is a
    channel that says nothing about x: its variance is undefined (a division
    by zero), so that b is no candidate (SPEC.md section 1).
    Raises ValueError when no b is a candidate."""
    best, fits = None, False
    b = 1 << k.bit_length()  # B = 1: the one-block form
    while b >= 2:
        blocks, K = layout(k, b)
        if K <= DEVICE_DRAW:
            fits = True
            p = Fraction(privacy.threshold(2 * blocks, 1, epsilon), ONE)
            q = (p + (1 - p) / (2 * blocks - 1)) / 2
            if p != q:
                v = unit_variance(k, b, p, q)
                if best is None or v < best[0]:
                    best = (v, b)
        b >>= 1
    if best is None:
        if not fits:
            check_draw(1 << k.bit_length(), "K")
        raise ValueError(f"hr: at k = {k}, epsilon = {epsilon!r} every block size gives p = q "
                         "(a channel that says nothing about the value)")
    return best[1]


class HadamardResponse(SupportOracle):
    name = "hr"

    def __init__(self, k, epsilon):
        self.k, self.epsilon = k, epsilon
        self.b = b = block_size(k, epsilon)
        self.blocks, self.K = layout(k, b)
        # in S_x or not: the "1 of 2B outcomes" channel (b/2 outputs in, (2B - 1) b/2 out)
        m = 2 * self.blocks
        self.threshold = t = privacy.threshold(m, 1, epsilon)
        self.eps_effective = privacy.eps_effective([m], [1], [t])
        self.p = t / ONE
        self.q = (self.p + (1 - self.p) / (m - 1)) / 2
        self.body_bits = (self.K - 1).bit_length()
        block, row = np.divmod(np.arange(k), b - 1)
        self.item_block, self.item_row = block, row + 1

    def device_values(self):
        """(K, block, t), in mss_device.params.FIELDS order (block: b)."""
        return (self.K, self.b, self.threshold)

    @property
    def counts_size(self):
        """The K-point histogram: :meth:`support` transforms it."""
        return self.K

    # the device cost model (mss_protocol.device_cost): the parity of a draw in [K]
    cost_family = "hr"

    def device_features(self):
        """{base: 1, bits: the bits of K}: ``below(K)`` and the parity of r & c."""
        return {"base": 1.0, "bits": self.K.bit_length()}

    def decode_cells(self, n):
        """K log2 K: the fast Walsh-Hadamard transform of the K-cell histogram (``n`` unused)."""
        return self.K * max(1, self.K.bit_length())

    # the instantaneous layer (support.SupportOracle.with_irr): GRR on the K outputs;
    # the b / 2 outputs of S_x support x
    @property
    def outputs(self):
        return self.K

    @property
    def support_size(self):
        return self.b // 2

    def point_probs(self):
        """P[y' = u | x] for u in S_x and u outside it, exactly."""
        t, half = self.threshold, self.b // 2
        return Fraction(t, ONE * half), Fraction(ONE - t, ONE * (self.K - half))

    # -- client -------------------------------------------------------------
    def randomise(self, x, rng):
        """One output in [K] with the device's integer draws (mss_device.hr)."""
        b = self.b
        j, r = divmod(x, b - 1)
        r += 1
        if rng.chance(self.threshold):
            c = rng.below(b)
            if odd_parity(r & c):  # c -> c XOR (lowest bit of r): odd and even halves swap
                c ^= r & -r
            return self._irr(j * b + c, rng)
        while True:  # uniform outside S_x: reject the b/2 outputs of S_x (at most half of [K])
            y = rng.below(self.K)
            if y // b != j or odd_parity(r & (y % b)):
                return self._irr(y, rng)

    def sample_chunk(self, values, rng):
        """Histogram (K,) of reports for ``values``: the law of :meth:`randomise`, vectorised."""
        return np.bincount(self.sample_outputs(values, rng), minlength=self.K)

    def sample_outputs(self, values, rng):
        """Reports (outputs in [K]) for ``values``: the law of :meth:`randomise`, vectorised."""
        b = self.b
        j, r = self.item_block[values], self.item_row[values]
        inside = rng.integers(0, ONE, size=j.size) < self.threshold
        c = rng.integers(0, b, size=j.size)
        out = j * b + np.where(odd_parity(r & c), c ^ (r & -r), c)
        todo = np.flatnonzero(~inside)
        while todo.size:
            y = rng.integers(0, self.K, size=todo.size)
            ok = (y // b != j[todo]) | odd_parity(r[todo] & (y % b))
            out[todo[ok]] = y[ok]
            todo = todo[~ok]
        return self._irr_np(out, rng)

    # -- decoder ------------------------------------------------------------
    def transform(self, hist):
        """(H_b h_j)[r] for every item (k,): the Walsh-Hadamard transform of each
        block's histogram (an in-place butterfly over all blocks at once), read
        at the item's row.  Also (H_b h_j)[0] = N_j, the block's total."""
        h = np.asarray(hist, dtype=float).reshape(self.blocks, self.b)
        step = 1
        while step < self.b:
            h = h.reshape(self.blocks, -1, 2, step)
            h = np.stack([h[:, :, 0] + h[:, :, 1], h[:, :, 0] - h[:, :, 1]], axis=2)
            step *= 2
        h = h.reshape(self.blocks, self.b)
        return h[self.item_block, self.item_row], h[:, 0]

    def support(self, hist):
        """C_v, the reports in S_v: (N_j + (H_b h_j)[r]) / 2."""
        t, totals = self.transform(hist)
        return np.rint((totals[self.item_block] + t) / 2)

    def estimate(self, counts, n):
        """(fhat, stderr): fhat_v = (H_b h_j)[r] / (2 n (p - q)) (module docstring).

        The standard error is :meth:`_unit_variance` at f_v = 0 and the first stage's
        block totals Fhat_j = (N_j / n - 2 q_o) / (p - q_o), q_o = 2q - p, clipped to [0, 1]
        (summing clipped item estimates instead would add up the positive noise of b - 1
        items).  At f_v = 0 it is exact for a null item, so a detection's false-alarm rate
        is the stated one, and an upper bound otherwise (by f_v / n): evaluated at the
        item's own estimate it would shrink exactly when the estimate is high (at k = 1024,
        eps = 2: 5.2% false detections at a nominal 5%, tests/test_resolution.py)."""
        t, totals = self.transform(counts)
        p, q = self.p, self.q
        fhat = t / (2 * n * (p - q))
        block_total = np.clip((totals / n - 2 * (2 * q - p)) / (2 * (p - q)), 0, 1)
        return fhat, np.sqrt(self._unit_variance(block_total[self.item_block], 0.0) / n)

    def _unit_variance(self, block_total, f):
        """n Var(fhat_v) = (2q - p + (p - q) F_j) / (2 (p - q)^2) - f_v, from each
        item's block total F_j and frequency f_v (module docstring)."""
        p, q = self.p, self.q
        return (2 * q - p + (p - q) * block_total) / (2 * (p - q) ** 2) - f

    def unit_item_variance(self, f):
        """(k,) n Var(fhat_v) at frequencies f (:meth:`_unit_variance` with F_j the total
        frequency of v's block): affine in f."""
        f = np.asarray(f, float)
        block_total = np.bincount(self.item_block, weights=f, minlength=self.blocks)
        return self._unit_variance(block_total[self.item_block], f)

    def report_floor(self):
        """(k,) zeros (:meth:`mss_protocol.base.Protocol.report_floor`): an output (j, c) adds
        H_b[r_v, c] / (2 (p - q)) to the items v of block j and nothing elsewhere, so nothing to
        an item of another block, and nothing on average over the columns of v's own block
        (each row r_v != 0 of H_b sums to 0 over the columns)."""
        return np.zeros(self.k)

    def shift_per_report(self, r=1):
        """The largest change one report can make to the sum over any r items of n fhat_v
        (:meth:`mss_protocol.base.Protocol.shift_per_report`), in units of frequency times n.

        Notes
        -----
        n fhat_v = (H_b h_j)[r_v] / (2 (p - q)) is linear in the histogram, so an output u = (j, c)
        adds H_b[r_v, c] / (2 (p - q)) to every item v of block j and nothing elsewhere.  Over a
        set R with r_j of its items in block j that is g(u) = r_j - 2 |R & N_c| (times
        1 / (2 (p - q))), N_c the items of block j with H_b[r_v, c] = -1: at most
        nb = min(b/2, n_max) of them (column c != 0 has b/2 minus rows; n_max = min(k, b - 1)
        items a block), none for c = 0.  A crafted u against an honest u' in the same block
        changes the sum by at most 2 min(r, nb); in different blocks (B >= 2) by at most
        r_A + min(r_B, nb) <= min(r, n_max + nb).  So

            shift(r) = max(2 min(r, nb), [B >= 2] min(r, n_max + nb)) / (2 (p - q)),

        1 / (p - q) at r = 1, as for every support protocol, and b / (2 (p - q)) at r = k = b - 1
        (B = 1: column 0 supports all, another column opposes b/2).  An upper bound, attained
        in the cases tests/test_manipulation.py enumerates.
        """
        if not 1 <= r <= self.k:
            raise ValueError(f"shift_per_report: r must be in 1..{self.k}, got {r}")
        n_max = min(self.k, self.b - 1)
        nb = min(self.b // 2, n_max)
        units = max(2 * min(r, nb), min(r, n_max + nb) if self.blocks >= 2 else 0)
        return units / (2 * (self.p - self.q))

    def crafted_counts(self, targets, m, rng):
        """Histogram (K,) of ``m`` Maximal Gain Attack reports (:meth:`Protocol.crafted_counts`).

        An output (j, c) supports the items of block j whose row has H_b[r, c] = +1 and no item
        elsewhere; column c = 0 (H_b[r, 0] = +1 for every r) supports every item of its block,
        the most any output does.  So each report is (j, 0) for a block j holding the most
        targets, round robin over those blocks (one target a block: over the targets' blocks)."""
        blocks, held = np.unique(self.item_block[np.asarray(targets)], return_counts=True)
        best = blocks[held == held.max()]
        return np.bincount(best[np.arange(m) % best.size] * self.b, minlength=self.K)

    def random_output_counts(self, m, rng):
        """Histogram (K,) of ``m`` uniform outputs of [K]."""
        return np.bincount(rng.integers(0, self.K, m), minlength=self.K)

    def variance(self, n, prior=None):
        """Per-item MSE of the unbiased estimate averaged over [k], at values distributed
        as ``prior`` (uniform by default): the block totals enter (module docstring)."""
        f = np.full(self.k, 1.0 / self.k) if prior is None else np.asarray(prior, float)
        return float(np.mean(self.unit_item_variance(f))) / n

    def shuffle_channel(self):
        """Hadamard response in blocks of ``b`` (:meth:`Protocol.shuffle_channel`)."""
        return "hr", self.b

    def channel(self):
        return HadamardChannel(self)


class HadamardChannel(PointChannel):
    """Outputs u = j b + c in [K]; S(u) = {v in block j : H_b[row(v), c] = +1}, b/2 points each."""

    def __init__(self, oracle):
        super().__init__(oracle, oracle.b // 2)

    def members(self, u):
        o = self.oracle
        j, c = np.divmod(u, o.b)
        return (o.item_block[None, :] == j[:, None]) & ~odd_parity(o.item_row[None, :] & c[:, None])
