"""The support-count estimator shared by GRR, the unary encodings, OLH, HR and PGR.

Each of these reports something that *supports* a set of values; the
support count c_v of value v over n reports has E[c_v / n] = q + (p - q) f_v,
so fhat_v = (c_v / n - q) / (p - q), with variance

    q(1-q)/(n (p-q)^2) + f_v (1-p-q)/(n (p-q))

(Wang et al. 2017, "Locally differentially private protocols for frequency
estimation", Eq. 3 generalised).  Keep-probabilities are integer thresholds
T / 2**30 rounded towards more privacy; ``eps_effective`` is the exact
worst-case log ratio of those integers (mss-protocol-notes.md section 8).
"""
import numpy as np

from mss_protocol.base import Protocol
from mss_protocol.limits import DEVICE_DRAW, check_draw  # noqa: F401  (the protocols' import)


class SupportOracle(Protocol):
    """Shared estimator of the support-count protocols; subclasses set p, q,
    ``body_bits`` and the client, sampler and channel."""

    @property
    def bits(self):
        return {"max": self.body_bits, "mean": float(self.body_bits)}

    def sample_counts(self, values, rng):
        """Counts of reports for ``values``: an array, or an iterable of arrays
        (chunks, to bound memory), each through ``sample_chunk``."""
        if isinstance(values, np.ndarray):
            return self.sample_chunk(values, rng)
        return sum(self.sample_chunk(np.asarray(chunk), rng) for chunk in values)

    def support(self, counts):
        """Support counts (k,) from the protocol's counts (identity by default)."""
        return counts

    def estimate(self, counts, n):
        """(fhat, stderr), shape (k,) each, from the counts of n reports."""
        p, q = self.p, self.q
        fhat = (np.asarray(self.support(counts)) / n - q) / (p - q)
        f = np.clip(fhat, 0, 1)
        var = q * (1 - q) / (n * (p - q) ** 2) + f * (1 - p - q) / (n * (p - q))
        return fhat, np.sqrt(var)

    def variance(self, n, prior=None):
        """Per-item MSE of the unbiased estimate averaged over [k]: the same for
        every distribution (the f term averages to 1/k), so ``prior`` is unused."""
        p, q = self.p, self.q
        return q * (1 - q) / (n * (p - q) ** 2) + (1 - p - q) / (self.k * n * (p - q))
