"""The toy protocol on the host: randomised response with replacement.

The device keeps its value x with probability p = t / 2**30, else reports a
uniform value of all k (x included):

    P[y = x] = p + (1 - p) / k,        P[y = v] = (1 - p) / k  (v != x),

so the worst likelihood ratio is (t k + 2**30 - t) / (2**30 - t), and t is the
largest threshold whose ratio is at most e^epsilon.  Counts: the histogram of
reports (k,), the support counts of :class:`~mss_protocol.support.SupportOracle`
with p_s = p + (1 - p) / k and q_s = (1 - p) / k.  It is GRR's less efficient
cousin; what it tests is the path a new protocol takes: it defines what
:class:`mss_protocol.base.Protocol` asks and nothing else, so a
protocol-specific branch anywhere in the project would miss it.
"""
import math
from fractions import Fraction

import numpy as np

from mss_protocol.channel import Channel
from mss_protocol.privacy import ONE, ln_down
from mss_protocol.support import SupportOracle


def ratio(k, t):
    """The worst likelihood ratio of one report at threshold t (module docstring)."""
    return Fraction(t * k + ONE - t, ONE - t)


def threshold(k, epsilon):
    """The largest t with ln ratio(k, t) <= epsilon."""
    e = math.exp(epsilon)
    t = int(ONE * (e - 1) / (e + k - 1))
    while ln_down(ratio(k, t)) > epsilon:
        t -= 1
    return t


class Toy(SupportOracle):
    """Keep x with probability t / 2**30, else a uniform value of [k]."""

    name = "toy"

    def __init__(self, k, epsilon):
        self.k, self.epsilon = k, epsilon
        self.threshold = t = threshold(k, epsilon)
        keep = t / ONE
        self.p, self.q = keep + (1 - keep) / k, (1 - keep) / k
        self.eps_effective = ln_down(ratio(k, t))
        self.body_bits = (k - 1).bit_length()

    def device_values(self):
        """(t,), in the registered fields' order."""
        return (self.threshold,)

    # the device cost model (mss_protocol.device_cost): GRR's family, a draw of the bits of k
    cost_family = "grr"

    def device_features(self):
        return {"base": 1.0, "bits": self.k.bit_length()}

    def support_sizes(self):
        """(1, 1): a report supports its one value (the manipulation coefficient,
        SupportOracle.shift_per_report)."""
        return 1, 1

    def randomise(self, x, rng):
        return x if rng.chance(self.threshold) else rng.below(self.k)

    def sample_chunk(self, values, rng):
        """Support counts (k,) of reports for ``values`` (the law of :meth:`randomise`)."""
        values = np.asarray(values)
        keep = rng.integers(0, ONE, size=values.size) < self.threshold
        other = rng.integers(0, self.k, size=values.size)
        return np.bincount(np.where(keep, values, other), minlength=self.k)

    def channel(self):
        return ToyChannel(self)


class ToyChannel(Channel):
    """S(y) = {y}, R = p_s / q_s."""

    def __init__(self, oracle):
        super().__init__(oracle)
        self.log_r = math.log(oracle.p / oracle.q)

    def support(self, report):
        mask = np.zeros(self.k, dtype=bool)
        mask[report] = True
        return mask, self.log_r

    def from_decoded(self, report, data):
        """y, the decoded report's one member."""
        return int(report.subset[0])
