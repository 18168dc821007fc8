"""Generalised randomised response (GRR, k-ary RR; Kairouz et al. 2016).

The device reports its value x with probability p = T / 2**30, else a
uniform other value; T is the keep-one-of-k threshold of
:func:`mss_protocol.privacy.threshold` (SubsetSelection with omega = 1).
Counts: the histogram of reports (k,), which are the support counts.
"""
from fractions import Fraction

import numpy as np

from mss_protocol import privacy
from mss_protocol.channel import Channel, DrawnOutput, subset_bayes
from mss_protocol.limits import check_draw
from mss_protocol.privacy import ONE
from mss_protocol.support import SupportOracle


class GRR(SupportOracle):
    """k-ary randomised response: report x with probability p, else a uniform other value."""

    name = "grr"

    def __init__(self, k, epsilon):
        check_draw(k - 1, "k - 1")  # the device draws one of the k - 1 other values
        self.k, self.epsilon = k, epsilon
        self.threshold = t = privacy.threshold(k, 1, epsilon)
        self.p = t / ONE
        self.q = (1 - self.p) / (k - 1)
        self.eps_effective = privacy.eps_effective([k], [1], [t])
        self.body_bits = (k - 1).bit_length()

    def device_values(self):
        """The config integers, in mss_device.params.FIELDS order: (t,)."""
        return (self.threshold,)

    # the device cost model (mss_protocol.device_cost): a constant plus the width of below(k - 1)
    cost_family = "grr"

    def device_features(self):
        """{base: 1, bits: the bits of k}: ``below(k - 1)`` draws ~log2 k bits."""
        return {"base": 1.0, "bits": self.k.bit_length()}

    def simulated_report_us(self):
        """3 + 0.001 k us: the posterior update touches one item."""
        return 3 + 0.001 * self.k

    # the instantaneous layer (support.SupportOracle.with_irr): GRR on the k outputs
    @property
    def outputs(self):
        return self.k

    support_size = 1

    def support_sizes(self):
        """(1, 1): every report supports its one item (:meth:`SupportOracle.shift_per_report`)."""
        return 1, 1

    def supported_items(self, j, members, sizes):
        """bool (n, k): each report supports its one point (:meth:`Protocol.supported_items`)."""
        members = np.asarray(members, dtype=np.int64)
        out = np.zeros((members.size, self.k), dtype=bool)
        out[np.arange(members.size), members] = True
        return out

    def sample_supports(self, values, rng):
        """bool (n, k): the one-hot points of honest reports (:meth:`perturb`)."""
        return self.supported_items(None, self.perturb(values, rng), None)

    def support_rate(self, r):
        """p for one item (x reported with probability p, any other with q < p); 0 for two:
        a report supports one item (:meth:`Protocol.support_rate`)."""
        if r not in (1, 2):
            raise ValueError(f"support_rate: r must be 1 or 2, got {r}")
        return max(self.p, self.q) if r == 1 else 0.0

    def point_probs(self):
        """P[y' = u | x] for u = x and u != x, exactly."""
        t = self.threshold
        return Fraction(t, ONE), Fraction(ONE - t, ONE * (self.k - 1))

    def randomise(self, x, rng):
        if rng.chance(self.threshold):
            y = x
        else:
            v = rng.below(self.k - 1)
            y = v + (v >= x)
        return self._irr(y, rng)

    def perturb(self, values, rng):
        """Reports for ``values``, vectorised (the same law as :meth:`randomise`)."""
        values = np.asarray(values)
        keep = rng.integers(0, ONE, size=values.size) < self.threshold
        other = rng.integers(0, self.k - 1, size=values.size)
        return self._irr_np(np.where(keep, values, other + (other >= values)), rng)

    def sample_chunk(self, values, rng):
        """Support counts (k,) of reports for ``values``."""
        return np.bincount(self.perturb(values, rng), minlength=self.k)

    def crafted_counts(self, targets, m, rng):
        """Counts (k,) of ``m`` Maximal Gain Attack reports (:meth:`Protocol.crafted_counts`): a
        report is one point and supports one item, so each is a target's, round robin."""
        targets = np.asarray(targets)
        return np.bincount(targets[np.arange(m) % targets.size], minlength=self.k)

    def random_output_counts(self, m, rng):
        """Counts (k,) of ``m`` uniformly random points."""
        return np.bincount(rng.integers(0, self.k, m), minlength=self.k)

    def shuffle_channel(self):
        """k-ary randomised response itself (:meth:`Protocol.shuffle_channel`)."""
        return "grr", None

    def channel(self):
        return GRRChannel(self)


class GRRChannel(DrawnOutput, Channel):
    """S(y) = {y}: SubsetSelection on [k] with omega = 1, so the Bayes success
    is :func:`~mss_protocol.channel.subset_bayes` of the prior and the paper's
    rule (guess the report) succeeds with probability p whatever the prior."""

    def __init__(self, oracle):
        super().__init__(oracle)
        self.log_r = np.log(oracle.p * (oracle.k - 1) / (1 - oracle.p))

    def support(self, report):
        mask = np.zeros(self.k, dtype=bool)
        mask[report] = True
        return mask, self.log_r

    def bayes_exact(self, prior):
        return subset_bayes(prior, 1, self.oracle.p)

    def paper_exact(self, prior):
        return float(self.oracle.p * np.sum(prior))

    def paper_closed_form(self):
        return float(self.oracle.p)

    def prr_rows(self, report, ys):
        """p where x = y, else q."""
        ys = np.asarray(ys, dtype=np.int64)
        rows = np.full((ys.size, self.k), self.oracle.q)
        rows[np.arange(ys.size), ys] = self.oracle.p
        return rows

    def output_marginal(self, prior):
        """m(y) = q + (p - q) pi(y)."""
        o = self.oracle
        return o.q + (o.p - o.q) * np.asarray(prior, dtype=float)
