"""Estimators from a protocol's counts that the views were measured against
(tools/bench_estimators.py, docs/benchmarks.md "Consistent estimators at small
n"): the maximum-likelihood frequencies on the simplex (:func:`mle`, the limit
of the iterative Bayesian update) and parametric-bootstrap intervals
(:func:`bootstrap`).  Neither beat the simplex projection enough to be a view
(mss_protocol.postprocess.DEFAULT_VIEW); they live here for the benchmark.
"""
from typing import NamedTuple

import numpy as np
from scipy import sparse
from scipy.optimize import brentq

from mss_protocol.postprocess import CHOICES as VIEW_CHOICES, apply, simplex

COUNT_CHOICES = ("mle",)  # need the counts, not only the unbiased estimate
CHOICES = VIEW_CHOICES + COUNT_CHOICES


class Rows(NamedTuple):
    """The binomial rows of a protocol's counts: row r counts c_r of n_r reports,
    each in it with probability q_r + (p_r - q_r) (A f)_r; ``A`` (rows, k) is
    None when it is the identity."""

    c: np.ndarray
    n: np.ndarray
    p: np.ndarray
    q: np.ndarray
    A: object


def rows(protocol, counts, n):
    """:class:`Rows` of ``counts``: the support counts (k,) of the support-count
    protocols (n reports each), or the per-block residue-class inclusion counts
    of MSS/SS (:mod:`.counts`; block j's rows have n_j reports and A_j maps
    items to classes, the decoder's A; SubsetSelection's one block is the identity).
    Hadamard response with several blocks adds each item's block total to its row."""
    if hasattr(counts, "cfg"):
        cfg, rep = counts.cfg, counts.cfg.moduli
        A = None if cfg.l == 1 else protocol.decoder.A
        return Rows(counts.c.astype(float), *(np.repeat(np.asarray(x, dtype=float), rep)
                                             for x in (counts.n, cfg.p, cfg.q)), A)
    c = np.asarray(protocol.support(counts), dtype=float)
    p, q, A = protocol.p, protocol.q, None
    if getattr(protocol, "blocks", 1) > 1:
        # Hadamard response with blocks (mss_protocol.hr): E[C_v] / n = 2q - p + (p - q)(f_v + F_j),
        # F_j the frequency of v's block j, so D = q' + (p' - q') A f with A = I + [same block],
        # q' = 2q - p and p' - q' = p - q.
        blk = protocol.item_block
        same = sparse.csr_matrix(blk[:, None] == blk[None, :], dtype=float)
        p, q, A = q, 2 * q - p, sparse.identity(c.size, format="csr") + same
    return Rows(c, *(np.full(c.size, float(x)) for x in (n, p, q)), A)


def mle(protocol, counts, n):
    """Maximum-likelihood frequencies on the simplex from a protocol's counts.

    Parameters
    ----------
    protocol : a registry protocol (:mod:`.registry`)
    counts : its counts (``sample_counts`` or a store's)
    n : int
        Reports (implied by MSS/SS :class:`~.counts.Counts`).

    Returns
    -------
    ndarray (k,) on the simplex.

    Notes
    -----
    GRR's report histogram is sufficient and multinomial, c ~ Mult(n, D) with
    D_v = q + (p - q) f_v, so this is the exact MLE, the fixed point of IBU
    on GRR's channel (ElSalamouny & Palamidessi 2020):

        argmax_{f in simplex} sum_v c_v log D_v,
        f_v = max((c_v / (n mu) - q) / (p - q), 0), sum_v f_v = 1.

    Every other protocol's counts are not sufficient (a report's likelihood
    depends on its whole support set), so the likelihood is the composite one
    that treats each row of :func:`rows` as an independent binomial (each
    marginal is exact; the dependence between rows of one report is ignored):

        argmax_{f in simplex} sum_r c_r log D_r + (n_r - c_r) log(1 - D_r),
        D = q + (p - q) A f.

    EM on this likelihood (each row a two-output channel) is the IBU the
    composite likelihood allows, and it converges to this maximum; it does so
    at a rate near 1 - f_x / k per step, hence the direct solutions below.
    Where A is the identity (support-count protocols, SS) the problem is
    separable: the KKT condition d/dD_v = mu (p - q) on the support gives

        r_v / D_v - (1 - r_v) / (1 - D_v) = mu,   r_v = c_v / n,

    a quadratic in D_v, and the one scalar mu with sum f = 1 is found by
    Brent's method.  MSS with several blocks is solved by accelerated
    projected gradient (Beck & Teboulle 2009, FISTA with backtracking and
    restarts) from the simplex projection of the GLS estimate.
    """
    from mss_protocol.grr import GRR

    if hasattr(counts, "cfg"):
        n = counts.total
    if not n:
        return np.full(protocol.k, 1.0 / protocol.k)
    r = rows(protocol, counts, n)
    if r.A is not None:
        return _projected_gradient(r, simplex(protocol.estimate(counts, n)[0]))
    rate, p, q = r.c / r.n, r.p[0], r.q[0]
    if isinstance(protocol, GRR):
        # D_v = r_v / mu; mu between the top item beyond D = p (sum >= 1) and every D <= q (sum 0)
        lo, hi = rate.max() / (2 * p), rate.max() / q
        return _on_simplex(lambda mu: rate / mu, p, q, lo, hi)
    # mu between the top item beyond D = p (sum >= 1) and every D <= q (sum 0)
    top = rate.max()
    lo, hi = top / p - (1 - top) / (1 - p) - 1.0, max(top / q, 1.0)
    return _on_simplex(lambda mu: _binomial_root(rate, mu), p, q, lo, hi)


def _binomial_root(rate, mu):
    """The D in [0, 1] with rate / D - (1 - rate) / (1 - D) = mu: the root of
    mu D^2 - (1 + mu) D + rate = 0 there, in the form that adds terms of one sign."""
    b = 1.0 + mu
    s = np.sqrt(b * b - 4.0 * mu * rate)
    return 2.0 * rate / (b + s) if b > 0 else (b - s) / (2.0 * mu)


def _on_simplex(level, p, q, lo, hi):
    """clip((level(mu) - q) / (p - q), 0, 1) at the mu in [lo, hi] where it sums
    to 1 (the sum decreases in mu: >= 1 at lo, 0 at hi)."""
    def freqs(mu):
        return np.clip((level(mu) - q) / (p - q), 0.0, 1.0)
    f = freqs(brentq(lambda mu: freqs(mu).sum() - 1.0, lo, hi, xtol=1e-14, rtol=1e-14))
    return f / f.sum()


def _projected_gradient(r, x, iters=2000, tol=1e-9):
    """FISTA on the negative composite log-likelihood of :func:`mle` over the simplex.

    The extrapolated point is projected back onto the simplex (so every D stays
    in [q, p]); the momentum restarts whenever the objective rises (O'Donoghue &
    Candes 2015).  Stops when no coordinate moves by more than ``tol``."""
    d = r.p - r.q

    def value(f):
        D = r.q + d * (r.A @ f)
        return -(r.c * np.log(D) + (r.n - r.c) * np.log1p(-D)).sum()

    def grad(f):
        D = r.q + d * (r.A @ f)
        return -(r.A.T @ (d * (r.c / D - (r.n - r.c) / (1 - D))))

    fx = value(x)
    y, fy, t, L = x, fx, 1.0, 1.0
    for _ in range(iters):
        g = grad(y)
        while True:  # backtracking until the quadratic model bounds the objective at the step
            z = simplex(y - g / L)
            fz = value(z)
            if fz <= fy + g @ (z - y) + L / 2 * np.sum((z - y) ** 2) + 1e-13 * abs(fy):
                break
            L *= 2.0
        if fz > fx and t > 1:  # the momentum overshot: restart from x
            y, fy, t = x, fx, 1.0
            continue
        t_next = (1 + np.sqrt(1 + 4 * t * t)) / 2
        step = np.abs(z - x).max()
        y = simplex(z + (t - 1) / t_next * (z - x))
        x, fx, fy, t, L = z, fz, value(y), t_next, L / 1.5
        if step < tol:
            break
    return x


def from_counts(protocol, counts, n, post):
    """The estimate ``post`` (any of ``CHOICES``) from counts."""
    if post == "mle":
        return mle(protocol, counts, n)
    return apply(protocol.estimate(counts, n)[0], post)


class Intervals(NamedTuple):
    """(low, high) arrays (k,) of two bootstrap intervals."""

    percentile: tuple
    basic: tuple


def apportion(f, n):
    """n devices split over the items in proportion to f (largest remainders)."""
    base = np.floor(f * n).astype(np.int64)
    extra = np.argsort(base - f * n, kind="stable")[:n - base.sum()]
    base[extra] += 1
    return base


def bootstrap(protocol, counts, n, post, draws=200, rng=None, level=0.95):
    """Parametric-bootstrap intervals of the estimate ``post``.

    The fitted frequencies (projected onto the simplex when ``post`` is
    none) are apportioned over n devices (:func:`apportion`: the target is the
    population's empirical frequencies, so the devices are held fixed and
    only the randomisation is redrawn), their counts are redrawn ``draws``
    times with the protocol's exact sampler and re-estimated, and with
    alpha = 1 - level the intervals are (Efron & Tibshirani 1993, ch. 13;
    Davison & Hinkley 1997, section 5.2)

        percentile: [Q(alpha/2), Q(1 - alpha/2)] of the re-estimates,
        basic:      [2 fhat - Q(1 - alpha/2), 2 fhat - Q(alpha/2)], clipped to [0, 1];

    the basic interval subtracts the bootstrap's estimate of the bias, which
    matters for shrinking estimators.  Cost: ``draws`` samples and decodes.
    """
    rng = np.random.default_rng() if rng is None else rng
    if hasattr(counts, "cfg"):
        n = counts.total
    est = from_counts(protocol, counts, n, post)
    fit = simplex(est) if post == "none" else est
    values = np.repeat(np.arange(protocol.k), apportion(fit, n))
    reps = np.array([from_counts(protocol, protocol.sample_counts(values, rng), n, post)
                     for _ in range(draws)])
    a = (1 - level) / 2
    lo, hi = np.quantile(reps, [a, 1 - a], axis=0)
    return Intervals((lo, hi), (np.clip(2 * est - hi, 0, 1), np.clip(2 * est - lo, 0, 1)))
