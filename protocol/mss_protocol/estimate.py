"""Frequency estimates with standard errors, confidence intervals and detections.

Every decoder returns an :class:`Estimate`: the unbiased (or ridge) estimate
``raw``, its post-processed form (:mod:`.postprocess`), standard errors and
Wald intervals raw +- z SE (clipped to [0, 1] when post-processed): 95% for
each item alone (``ci_low``, ``ci_high``), or 95% for all k items together
(:meth:`Estimate.intervals` with ``simultaneous``, Bonferroni).  Which items
are distinguishable from 0 is the one-sided test of :mod:`.significance`.
"""
from dataclasses import dataclass

import numpy as np

from mss_protocol import postprocess, significance

# scipy.stats.norm.ppf(0.975) is this same ndtri(0.975); importing scipy.stats for it took
# 0.3 s of every CLI start (a third of it)
Z95 = significance.z_interval()


@dataclass
class Estimate:
    """Per-item frequency estimates; arrays of shape (k,)."""

    estimate: np.ndarray  # after post-processing
    raw: np.ndarray  # unbiased (damp = 0) or ridge estimate before post-processing
    stderr: np.ndarray
    ci_low: np.ndarray  # the marginal 95% interval
    ci_high: np.ndarray
    n: int
    post: str
    stderr_method: str  # "exact", "approx" or "singular"
    iterations: int
    seconds: float

    @classmethod
    def build(cls, raw, stderr, n, post, stderr_method, iterations, seconds):
        """Post-process ``raw`` and attach the marginal 95% intervals."""
        est = cls(estimate=postprocess.apply(raw, post), raw=raw, stderr=stderr, ci_low=None, ci_high=None, n=int(n),
                  post=post, stderr_method=stderr_method, iterations=iterations, seconds=seconds)
        est.ci_low, est.ci_high = est.intervals()
        return est

    def intervals(self, simultaneous=False):
        """(low, high), (k,) each: raw +- z SE at 95% per item, or (``simultaneous``)
        95% that all k intervals cover their items together; clipped to [0, 1]
        when post-processed."""
        z = significance.z_interval(self.raw.size, simultaneous=simultaneous)
        lo, hi = self.raw - z * self.stderr, self.raw + z * self.stderr
        if self.post != "none":
            lo, hi = np.clip(lo, 0, 1), np.clip(hi, 0, 1)
        return lo, hi

    def detected(self, simultaneous=False):
        """Boolean (k,): items distinguishable from 0 (:func:`.significance.detected`)."""
        return significance.detected(self.raw, self.stderr, simultaneous=simultaneous)

    def rows(self, items=None):
        """One dict per item (of ``items`` only, in their order, if given): the
        estimate, its SE, the marginal 95% CI and detection, and the
        simultaneous ones (``sim_low``, ``sim_high``, ``detected_simultaneous``)."""
        items = np.arange(self.raw.size) if items is None else np.asarray(items, dtype=np.int64)
        sim_lo, sim_hi = self.intervals(simultaneous=True)
        cols = (a[items] for a in (self.estimate, self.stderr, self.ci_low, self.ci_high, self.detected(),
                                   sim_lo, sim_hi, self.detected(simultaneous=True)))
        return [{"item": int(i), "estimate": float(e), "stderr": float(s), "ci_low": float(lo),
                 "ci_high": float(hi), "detected": bool(d), "sim_low": float(slo), "sim_high": float(shi),
                 "detected_simultaneous": bool(sd)}
                for i, e, s, lo, hi, d, slo, shi, sd in zip(items, *cols)]

    def post_processed(self, post):
        """This estimate under another post-processing (same raw, SEs, intervals' source)."""
        if post == self.post:
            return self
        return Estimate.build(raw=self.raw, stderr=self.stderr, n=self.n, post=post, stderr_method=self.stderr_method,
                              iterations=self.iterations, seconds=self.seconds)

    def significance(self):
        """What the detections mean: the counts of detected items, marginal and
        simultaneous, beside what noise alone would give."""
        k, sig = self.raw.size, significance
        return {"alpha": sig.ALPHA, "detected": int(self.detected().sum()),
                "expected_false": sig.expected_false(k),
                "detected_simultaneous": int(self.detected(simultaneous=True).sum()),
                "familywise_false": sig.expected_false(k, simultaneous=True),
                "simultaneous_method": sig.METHOD,
                "z_detect": sig.z_detect(), "z_interval_simultaneous": sig.z_interval(k, simultaneous=True)}
