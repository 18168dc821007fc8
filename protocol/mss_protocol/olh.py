"""Optimised local hashing (OLH; Wang et al. 2017) with a small-int hash and a public seed.

Each report has a seed (a, b), a in [1, P), b in [0, P), P = 32749 (the
largest prime below 2**15, so a*v < 2**30 on a device), and the device
hashes
H(v) = ((a v + b) mod P) mod g with g = floor(E + 1/2) + 1 (E = e^eps to
60 digits, SPEC.md section 1), and reports
y = GRR_g(H(x)).  The seed is not sent: both ends derive it from the
report's config id, epoch and device id (``mss_device.olh.seed``; SPEC.md
section 3), or with the config's ``seed: device`` from the config id and
device id only (``mss_device.olh.device_seed``: one seed per device, so a
memo holds and compact frames need no epoch), so the body is ceil(log2 g) bits.  Here, without a device id
(simulation, the audit), the seed is drawn uniformly, which is the law the
derived seed is analysed under.  (a v + b, a x + b) is uniform over distinct pairs
of Z_P for v != x, so the collision probability
gamma = sum_r c_r (c_r - 1) / (P (P - 1)) (c_r = #{u < P : u mod g = r})
is exact, and a non-holder's report supports v with probability
q = gamma p + (1 - gamma)(1 - p)/(g - 1).

Counts: the support counts (k,), tallied from the reports (a, b, y) in
vectorised chunks (O(n k): the aggregator's cost at a million devices).
"""
import math

import numpy as np

from mss_protocol import privacy
from mss_protocol.channel import MembershipChannel
from mss_protocol.grr import GRR
from mss_protocol.limits import check_draw
from mss_protocol.support import SupportOracle


class OLH(SupportOracle):
    name = "olh"
    P = 32749
    has_seed = True  # the report's (a, b); seed: device keeps one per device (randomise's seed=)

    def __init__(self, k, epsilon):
        if k > self.P:
            raise ValueError(f"OLH here supports k <= {self.P} (small-int hash), got {k}")
        self.k, self.epsilon = k, epsilon
        self.g = g = privacy.round_exp(epsilon) + 1  # E = e^eps to 60 digits, rounded half up; >= 2
        check_draw(g - 1, "g - 1")  # GRR over g draws one of the g - 1 other values
        self.grr = GRR(g, epsilon)
        self.threshold, self.p = self.grr.threshold, self.grr.p
        self.eps_effective = self.grr.eps_effective
        # c_r is a + 1 for the first b residues r and a for the other g - b (P = a g + b), in
        # closed form: g reaches 2**23 at large epsilon, where a histogram of g cells is 64 MB
        a, b = divmod(self.P, g)
        gamma = float(b * (a + 1) * a + (g - b) * a * (a - 1)) / (self.P * (self.P - 1))
        self.q = gamma * self.p + (1 - gamma) * (1 - self.p) / (g - 1)
        self.body_bits = (g - 1).bit_length()

    def device_values(self):
        """(P, g, t), in mss_device.params.FIELDS order."""
        return (self.P, self.g, self.threshold)

    # the counts and the wire: a report stores (a, b, y), its seed derived from the device id
    members_per_report = 3

    def tally_members(self, members):
        """Support counts (k,) of stored (a, b, y) triples (flat): :meth:`tally`."""
        return self.tally(tuple(members.reshape(-1, 3).T))

    def decoded_members(self, code, config, device_id, epoch):
        """(a, b, y = code): the seed from the config id and the device id (``seed: device``),
        and the drawing epoch (``seed: epoch``), as the device derives it (SPEC.md section 3)."""
        from mss_device.olh import device_seed, seed

        a, b = (device_seed(config.config_id, device_id, self.P) if config.seed == "device"
                else seed(config.config_id, epoch, device_id, self.P))
        return (a, b, code)

    # the device cost model (mss_protocol.device_cost): the seed's hash and one GRR draw, a constant
    cost_family = "olh"

    def device_features(self):
        """{base: 1}: the cost does not depend on k or epsilon measurably."""
        return {"base": 1.0}

    def decode_cells(self, n):
        """n k: every report's hash against every item (:meth:`tally`)."""
        return n * self.k

    # the instantaneous layer (support.SupportOracle.with_irr): GRR on the g outputs,
    # given the seed; one output (y = H(x)) supports x
    @property
    def outputs(self):
        return self.g

    support_size = 1

    def point_probs(self):
        """P[y' = u | x, seed] for u = H(x) and u != H(x), exactly."""
        return self.grr.point_probs()

    def support_sizes(self):
        """(0, min(k, ceil(P / g))): the items hashed to one output.  The seed is not on the
        wire but a compromised board may pick its device id, so every seed counts: a v + b
        mod P takes each value of [P) for at most one v, and at most ceil(P / g) of them are
        = y mod g; the seed (g, 0) hashes all v < P / g to 0, so for k <= P / g the bound is
        attained (output 0 supports every item, output 1 none: r / (p - q), every r)."""
        return 0, min(self.k, -(-self.P // self.g))

    def hash(self, a, b, v):
        return ((a * v + b) % self.P) % self.g

    def randomise(self, x, rng, seed=None):
        """(a, b, y) with y = GRR_g(H_{a,b}(x)); ``seed`` (a, b) as the
        device derives it, else drawn uniformly through ``rng``."""
        if seed is None:
            seed = (1 + rng.below(self.P - 1), rng.below(self.P))
        a, b = seed
        return a, b, self._irr(self.grr.randomise(self.hash(a, b, x), rng), rng)

    def tally(self, reports, chunk=1 << 24):
        """Support counts (k,) of reports (a, b, y), in chunks of about ``chunk`` cells.

        In int32, in place: a v + b < P^2 < 2**31 (a, v < P), so nothing overflows.  x mod m is
        x - (x // m) m, exactly: NumPy divides by a constant integer fast (libdivide), its
        remainder does not (measured: the tally 2-2.5x faster at k 1024, n 10^5)."""
        a, b, y = (np.asarray(x, dtype=np.int32) for x in reports)
        counts = np.zeros(self.k, dtype=np.int64)
        v = np.arange(self.k, dtype=np.int32)
        step = max(1, chunk // self.k)
        rows = min(step, a.size)
        h, q = np.empty((rows, self.k), dtype=np.int32), np.empty((rows, self.k), dtype=np.int32)
        hit = np.empty((rows, self.k), dtype=bool)
        for lo in range(0, a.size, step):
            sl = slice(lo, lo + step)
            c = a[sl].size
            hc, qc, hitc = h[:c], q[:c], hit[:c]
            np.multiply(a[sl, None], v, out=hc)
            hc += b[sl, None]
            for m in (self.P, self.g):
                np.floor_divide(hc, m, out=qc)
                qc *= m
                hc -= qc
            np.equal(hc, y[sl, None], out=hitc)
            counts += np.count_nonzero(hitc, axis=0)
        return counts

    def sample_seeds(self, n, rng):
        """n seeds (a (n,), b (n,)) drawn uniformly, as the client draws one."""
        return rng.integers(1, self.P, size=n), rng.integers(0, self.P, size=n)

    def crafted_counts(self, targets, m, rng, tries=1 << 20):
        """Support counts (k,) of ``m`` Maximal Gain Attack reports (:meth:`Protocol.crafted_counts`):
        seeds (a, b) that hash every target to one output y, and that y.  The seed is not on the
        wire but a board may pick its device id, hence its seed (:meth:`support_sizes`); such
        seeds are found among ``tries`` uniform ones (a share about g^-(r-1) of them, r targets)
        and cycled through."""
        targets = np.asarray(targets, dtype=np.int64)
        a, b = self.sample_seeds(tries, rng)
        h = self.hash(a[:, None].astype(np.int64), b[:, None].astype(np.int64), targets[None, :])
        hit = np.resize(np.flatnonzero((h == h[:, :1]).all(axis=1)), m)
        return self.tally((a[hit], b[hit], h[hit, 0]))

    def random_output_counts(self, m, rng):
        """Support counts (k,) of ``m`` reports of a uniform seed and a uniform output."""
        a, b = self.sample_seeds(m, rng)
        return self.tally((a, b, rng.integers(0, self.g, m)))

    def supported_items(self, j, members, sizes):
        """bool (n, k): v with H_ab(v) = y for each stored (a, b, y) (:meth:`Protocol.supported_items`)."""
        a, b, y = np.asarray(members, dtype=np.int64).reshape(-1, 3).T
        return self.hash(a[:, None], b[:, None], np.arange(self.k)[None, :]) == y[:, None]

    def sample_reports(self, values, rng, seeds=None):
        """Reports (a, b, y) for ``values`` (n,), vectorised (same law as the client);
        ``seeds`` (a, b) given (``seed: device``), else drawn."""
        values = np.asarray(values)
        a, b = self.sample_seeds(values.size, rng) if seeds is None else seeds
        return a, b, self._irr_np(self.grr.perturb(self.hash(a, b, values), rng), rng)

    def sample_chunk(self, values, rng):
        """Support counts (k,) of reports for ``values`` (same law as the client)."""
        return self.tally(self.sample_reports(values, rng))

    def channel(self):
        return OLHChannel(self)


class OLHChannel(MembershipChannel):
    """Outputs (a, b, y) indexed as ((a - 1) P + b) g + y; each seed has
    probability 1 / (P (P - 1))."""

    def __init__(self, oracle):
        super().__init__(oracle)
        P, g = oracle.P, oracle.g
        self.n_outputs = (P - 1) * P * g
        seed = 1.0 / (P * (P - 1))
        self.a, self.b = seed * oracle.p, seed * (1 - oracle.p) / (g - 1)
        self.values = np.arange(self.k)

    def index(self, report):
        a, b, y = report
        return ((a - 1) * self.oracle.P + b) * self.oracle.g + y

    def sample_outputs(self, values, rng, seeds=None):
        """Output indices of one report of each of ``values``, drawn by
        :meth:`OLH.sample_reports` (``seeds``: each device's, else fresh)."""
        return self.index(self.oracle.sample_reports(values, rng, seeds))

    def members(self, u):
        P, g = self.oracle.P, self.oracle.g
        seed, y = np.divmod(u, g)
        a, b = np.divmod(seed, P)
        return self.oracle.hash(a[:, None] + 1, b[:, None], self.values[None, :]) == y[:, None]

    def paper_closed_form(self):
        """The author code's approximation 1 / (2 max(k / (e^eps + 1), 1))."""
        return 1.0 / (2 * max(self.k / (math.exp(self.oracle.epsilon) + 1), 1))

    # a report (a, b, y): the seed (a, b) is public, y in [g] the drawn output
    def link_key(self, sent):
        """y: the seed is derived, not sent (SPEC.md section 3)."""
        return sent[2]

    def from_decoded(self, report, data):
        """(a, b, y): the codec derives the seed from the device id and epoch."""
        return tuple(int(v) for v in report.subset)

    def body(self, report):
        return int(report[2])

    def with_body(self, report, y):
        return (report[0], report[1], int(y))

    def prr_rows(self, report, ys):
        """p where H_ab(x) = y, else (1 - p) / (g - 1), under the report's seed (a, b)."""
        o = self.oracle
        h = o.hash(int(report[0]), int(report[1]), np.arange(self.k))
        return np.where(h[None, :] == np.asarray(ys, dtype=np.int64)[:, None], o.p, (1 - o.p) / (o.g - 1))

    def output_marginal(self, prior):
        """m(y) = (1-p)/(g-1) + (p - (1-p)/(g-1)) c_y / P, whatever the prior: over a uniform
        seed P(H(x) = y) = c_y / P, c_y = a + 1 for y < b and a for the rest (P = a g + b)."""
        o = self.oracle
        a, b = divmod(o.P, o.g)
        hashed = np.where(np.arange(o.g) < b, a + 1, a) / o.P
        other = (1 - o.p) / (o.g - 1)
        return other + (o.p - other) * hashed
