"""Frequency estimates with standard errors and 95% confidence intervals.

Every decoder returns an :class:`Estimate`: the unbiased (or ridge) estimate
``raw``, its post-processed form (:mod:`.postprocess`), standard errors and
Wald intervals raw +- z_{0.975} SE (clipped to [0, 1] when post-processed).
"""
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from mss_protocol import postprocess

# scipy.stats.norm.ppf(0.975) is this same ndtri(0.975); importing scipy.stats for it took
# 0.3 s of every CLI start (a third of it)
Z95 = float(ndtri(0.975))


@dataclass
class Estimate:
    """Per-item frequency estimates; arrays of shape (k,)."""

    estimate: np.ndarray  # after post-processing
    raw: np.ndarray  # unbiased (damp = 0) or ridge estimate before post-processing
    stderr: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    n: int
    post: str
    stderr_method: str  # "exact", "approx" or "singular"
    iterations: int
    seconds: float

    @classmethod
    def build(cls, raw, stderr, n, post, stderr_method, iterations, seconds):
        """Post-process ``raw`` and attach 95% intervals."""
        est = postprocess.apply(raw, post)
        lo, hi = raw - Z95 * stderr, raw + Z95 * stderr
        if post != "none":
            lo, hi = np.clip(lo, 0, 1), np.clip(hi, 0, 1)
        return cls(est, raw, stderr, lo, hi, int(n), post, stderr_method, iterations, seconds)

    def rows(self):
        return [{"item": i, "estimate": float(e), "stderr": float(s),
                 "ci_low": float(lo), "ci_high": float(hi)}
                for i, (e, s, lo, hi) in enumerate(zip(self.estimate, self.stderr,
                                                       self.ci_low, self.ci_high))]
