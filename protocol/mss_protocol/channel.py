"""The attacker's view of a protocol: what one report says about its value.

Every protocol here has a two-level likelihood.  A report y singles out the
set S(y) of values it *supports*, and

    P[y | x] = c(y) R(y)   if x in S(y),        P[y | x] = c(y)   otherwise,

so an attacker needs only (S(y), R(y)) (mss-protocol-notes.md section 11):

=========  ========================  ==========================================
protocol   S(y)                      R(y)
=========  ========================  ==========================================
MSS, SS    {x : x mod m_j in Z}      p'_j (m_j - omega_j) / ((1 - p'_j) omega_j)
GRR        {y}                       p' (k - 1) / (1 - p')  (SS with omega = 1)
OUE, SUE   the set bits              p (1 - q) / (q (1 - p))
OLH        {v : H_ab(v) = y}         p (g - 1) / (1 - p)
HR         {v : H[v + 1, j] = +1}    s / (1 - s)
PGR        {v : <u, v> = 0}          s (K - c_set) / ((1 - s) c_set)
=========  ========================  ==========================================

Attackers, given a prior pi over [k]:

* Bayes-optimal (maximum a posteriori): argmax_x log pi(x) + [x in S(y)] log R(y);
  over several reports of one value the terms add (posterior product).
  Its success is sum_y max_x pi(x) P[y | x].
* The paper's rule (Arcolezi & Gambs; MSS paper Eq. 7): a uniform element of
  S(y) (uniform over [k] if S(y) is empty); for MSS a uniform residue r of Z,
  then a uniform preimage x = r (mod m_j) in [k].

Exact success is computed from the channel, never sampled: MSS/SS/GRR and
the unary encodings in closed form over the sorted prior (O(k log k), any
k), HR, PGR and OLH by enumerating every output when (#outputs x k) is at
most ``EXACT_CELLS``.  OLH's outputs include the hash seed (P (P - 1) g of
them, about 10^9 g), so it is exact only for a toy hash prime.

With an instantaneous layer (``irr`` in a grr, olh, hr or pgr config;
:mod:`.irr`) the channel of ``cfg.protocol.channel()`` is the composed one of
ONE report: still two-level, with the composed p (so R(y), ``a``, ``b`` and the
exact attacks above are the composed channel's) and ``eps_effective`` the
composed report's; ``protocol.prr.channel()`` is the permanent draw's alone and
``protocol.irr`` (:class:`mss_protocol.irr.IRR`: ``n``, ``threshold``, ``p1``,
``q1``, ``apply``) the layer, for attacks over several reports of one draw.

Each protocol's module defines its channel (``Protocol.channel()``) on the
base classes here; the attacks that use them, the ceilings and the audit
live in the aggregator (``mss_aggregator.privacy``).
"""
import math

import numpy as np
from scipy.special import gammaln

EXACT_CELLS = 1 << 30  # outputs x items enumerated for an exact value (a few seconds)


def _lcomb(n, r):
    """log C(n, r), elementwise; -inf where r < 0 or r > n."""
    n, r = np.broadcast_arrays(np.asarray(n, dtype=float), np.asarray(r, dtype=float))
    ok = (r >= 0) & (r <= n)
    nn, rr = np.where(ok, n, 0), np.where(ok, r, 0)
    return np.where(ok, gammaln(nn + 1) - gammaln(rr + 1) - gammaln(nn - rr + 1), -np.inf)


def subset_bayes(w, omega, p):
    """sum over omega-subsets Z of [m] of max(a max_{Z} w, b max_{not Z} w),
    a = p / C(m-1, omega-1), b = (1-p) / C(m-1, omega): the Bayes success of
    SubsetSelection on [m] with class weights w (m,).

    With w sorted in decreasing order, either Z holds w_0 and its first gap
    is s (C(m-1-s, omega-s) subsets), or Z misses w_0 and starts at s
    (C(m-1-s, omega-1) subsets): O(m log m) instead of C(m, omega) terms.
    """
    w = np.sort(np.asarray(w, dtype=float))[::-1]
    m = w.size
    la = math.log(p) - _lcomb(m - 1, omega - 1)
    lb = math.log1p(-p) - _lcomb(m - 1, omega)
    s = np.arange(1, omega + 1)
    n = _lcomb(m - 1 - s, omega - s)
    holds_top = np.maximum(np.exp(la + n) * w[0], np.exp(lb + n) * w[s]).sum()
    s = np.arange(1, m - omega + 1)
    n = _lcomb(m - 1 - s, omega - 1)
    misses_top = np.maximum(np.exp(la + n) * w[s], np.exp(lb + n) * w[0]).sum()
    return float(holds_top + misses_top)


class Channel:
    """A protocol seen by the attacker.  Subclasses define :meth:`support`
    and, where they are computable, the exact values."""

    def __init__(self, protocol):
        self.oracle = protocol
        # of one report: with an instantaneous layer (mss_protocol.irr) the composed channel's
        self.name, self.k = protocol.name, protocol.k
        self.eps_effective = protocol.report_eps_effective

    def client(self, x, rng):
        """A report of value x from the protocol's real integer client."""
        return self.oracle.randomise(x, rng)

    def support(self, report):
        """(S(y) as a bool mask (k,), log R(y))."""
        raise NotImplementedError

    def loglik(self, report):
        """log P[report | x] up to a constant, shape (k,)."""
        mask, log_r = self.support(report)
        return np.where(mask, log_r, 0.0)

    def paper_guess(self, report, rng):
        """A uniform element of S(y), or of [k] when S(y) is empty."""
        items = np.flatnonzero(self.support(report)[0])
        return int(items[rng.integers(items.size)]) if items.size else int(rng.integers(self.k))

    def key(self, report):
        """A hashable form of the report (identical reports, identical keys)."""
        return report

    def link_key(self, sent):
        """What a link attacker compares of two sent reports: the whole report (a
        channel whose report carries a public seed compares its body only)."""
        return sent

    # -- one-output protocols (an instantaneous layer applies: mss_protocol.irr) ------------
    # The permanent draw y' in [n_out) of a report, and its law; the attacks over several
    # reports of one draw (mss_aggregator.privacy.attacks) ask these of the channel.
    def body(self, report):
        """The drawn output y' of a report, an int in [0, n_out)."""
        raise self.oracle.missing("channel().body(report) (a one-output report's drawn output)")

    def with_body(self, report, y):
        """``report`` with its drawn output replaced by ``y``."""
        raise self.oracle.missing("channel().with_body(report, y)")

    def prr_rows(self, report, ys):
        """P_prr(y' | x) of the permanent draw for the outputs ``ys`` (rows) and every x
        (columns), under ``report``'s public seed if it has one: shape (len(ys), k)."""
        raise self.oracle.missing("channel().prr_rows(report, ys)")

    def output_marginal(self, prior):
        """m(y) = sum_x pi(x) P_prr(y | x), the law of one report's drawn output when values
        follow ``prior`` (a public seed averaged over), shape (n_out,)."""
        raise self.oracle.missing("channel().output_marginal(prior)")

    def wire(self, x, rng):
        """The exact output the client sends (what an empirical audit inspects)."""
        return self.client(x, rng)

    def parse(self, data, epoch=None):
        """The report carried by wire output ``data``; ``epoch``: the link's epoch, which a
        compact frame needs (SPEC.md section 4; read by channels whose wire output is bytes)."""
        return data

    def from_decoded(self, report, data):
        """The report this channel reads from a frame ``data`` the aggregator's codec decoded
        into ``report`` (:class:`~mss_protocol.frames.Report`): what :meth:`client` returns."""
        raise self.oracle.missing("channel().from_decoded(report, data)")

    def bayes_exact(self, prior):
        return None

    def paper_exact(self, prior):
        return None

    def paper_closed_form(self):
        """The closed form published with the paper's rule, where there is one."""
        return None


class MembershipChannel(Channel):
    """Channels with an enumerable output set: P[u | x] = a if x in S_u else b.

    Subclasses give ``n_outputs``, ``a``, ``b``, :meth:`members` (bool
    (len(u), k) for output indices u) and, unless a report is its own output
    index, :meth:`index` (report -> u)."""

    def index(self, report):
        return report

    def support(self, report):
        return self.members(np.array([self.index(report)]))[0], math.log(self.a / self.b)

    def sample_logliks(self, values, rng, **kw):
        """:meth:`loglik` of one fresh report of each of ``values`` (n,), shape (n, k), the
        reports drawn by the subclass's ``sample_outputs(values, rng, **kw)`` (output
        indices; the client's law, vectorised)."""
        return self.members(self.sample_outputs(values, rng, **kw)) * math.log(self.a / self.b)

    def _over_outputs(self, term):
        """sum over every output u of term(members(u)) (chunks of outputs, bool
        (c, k) each), or None when there are more than EXACT_CELLS cells."""
        if self.n_outputs * self.k > EXACT_CELLS:
            return None
        step = max(1, (1 << 22) // self.k)
        return float(sum(term(self.members(np.arange(lo, min(lo + step, self.n_outputs)))).sum()
                         for lo in range(0, self.n_outputs, step)))

    def bayes_exact(self, prior):
        """sum_u max(a max_{x in S_u} pi, b max_{x not in S_u} pi)."""
        return self._over_outputs(lambda m: np.maximum(self.a * np.where(m, prior, 0).max(axis=1),
                                                       self.b * np.where(m, 0, prior).max(axis=1)))

    def paper_exact(self, prior):
        """sum_u a pi(S_u) / |S_u|, or b / k where S_u is empty."""
        def term(m):
            size = m.sum(axis=1)
            return np.where(size > 0, self.a * (m @ prior) / np.maximum(size, 1), self.b / self.k)
        return self._over_outputs(term)


class DrawnOutput:
    """The report of a one-output protocol whose wire output is the drawn output itself (an int:
    GRR's value, HR's and PGR's point): a :class:`Channel` mixin for the one-output methods."""

    def from_decoded(self, report, data):
        return int(report.subset[0])

    def body(self, report):
        return int(report)

    def with_body(self, report, y):
        return int(y)


class PointChannel(DrawnOutput, MembershipChannel):
    """A report is one of K points, uniform inside the value's set of
    ``set_size`` points with probability p, else uniform outside it (HR, PGR)."""

    def __init__(self, oracle, set_size):
        super().__init__(oracle)
        self.n_outputs = oracle.K
        self.a = oracle.p / set_size
        self.b = (1 - oracle.p) / (oracle.K - set_size)

    def sample_outputs(self, values, rng):
        """Output indices of one report of each of ``values``: the oracle's vectorised draw."""
        return self.oracle.sample_outputs(np.asarray(values), rng)

    def prr_rows(self, report, ys):
        """a where x is in S_y, else b (:meth:`members`)."""
        return np.where(self.members(np.asarray(ys, dtype=np.int64)), self.a, self.b)

    def output_marginal(self, prior):
        """m(u) = b + (a - b) pi(S_u), over the K points in chunks of about 2**22 cells."""
        prior = np.asarray(prior, dtype=float)
        m = np.zeros(self.n_outputs)
        step = max(1, (1 << 22) // self.k)
        for lo in range(0, self.n_outputs, step):
            u = np.arange(lo, min(lo + step, self.n_outputs))
            m[u] = self.b + (self.a - self.b) * (self.members(u) @ prior)
        return m
