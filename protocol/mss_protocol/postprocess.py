"""Post-processing of frequency estimates (mss-protocol-notes.md section 6).

From the unbiased estimate v alone (``CHOICES``, :func:`apply`):

``none``
    v, unbiased.
``clip``
    negatives set to 0, then rescaled to sum 1.  This is Norm-Mul of Wang
    et al. (2020), "Locally differentially private frequency estimation
    with consistency", NDSS, section IV.
``simplex``
    the Euclidean projection onto the probability simplex (Duchi et al.
    2008, Fig. 1): argmin_{p >= 0, sum p = 1} ||p - v||_2, by sorting in
    O(k log k).  It is also Norm-Sub of Wang et al. (2020): the output
    max(v_i + delta, 0) with delta chosen so the sum is 1 is exactly the
    projection's form max(v_i - theta, 0) (tests/test_postprocess.py checks
    the two against Wang's iterative algorithm).  The simplex is convex and
    holds the true frequencies, so the projection is never farther from
    them than v: its error is at most v's in every run, not only on average.

``DEFAULT_VIEW`` is the estimator the dashboard shows by default, chosen by
tools/bench_estimators.py against the maximum-likelihood estimate from the
counts (IBU's limit) and parametric-bootstrap intervals (tools/estimators.py;
docs/benchmarks.md, "Consistent estimators at small n").
"""
import numpy as np

CHOICES = ("none", "clip", "simplex")
# Lowest MSE at n <= 10,000 of the estimators whose intervals keep their coverage
# (docs/benchmarks.md, "Consistent estimators at small n")
DEFAULT_VIEW = "simplex"


def clip(v):
    v = np.clip(v, 0.0, None)
    s = v.sum()
    return v / s if s > 0 else np.full(v.size, 1.0 / v.size)


def simplex(v):
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    idx = np.arange(1, v.size + 1)
    rho = np.nonzero(u - css / idx > 0)[0][-1]
    return np.maximum(v - css[rho] / (rho + 1), 0.0)


def apply(v, post):
    if post == "none":
        return v
    if post == "clip":
        return clip(v)
    if post == "simplex":
        return simplex(v)
    raise ValueError(f"post-processing must be one of {', '.join(CHOICES)}, got {post!r}")
