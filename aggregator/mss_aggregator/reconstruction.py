"""Data-reconstruction attacks (DRA) on one report: channels, attackers, exact success.

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
"""
import math

import numpy as np
from scipy.special import gammaln

from mss_device.encoder import Encoder
from mss_device.randomiser import privatise
from mss_protocol import baselines
from mss_protocol.config import MssConfig
from mss_protocol.pgr import PGR
from mss_protocol.wire import WireCodec

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
    """A protocol seen by the attacker.  Subclasses define :meth:`client`
    (the real integer client), :meth:`support` and the exact values."""

    name = ""

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

    def wire(self, x, rng):
        """The exact output the client sends (what an empirical audit inspects)."""
        return self.client(x, rng)

    def parse(self, data):
        """The report carried by wire output ``data``."""
        return data

    def bayes_exact(self, prior):
        return None

    def paper_exact(self, prior):
        return None

    def paper_closed_form(self):
        """The closed form published with the paper's rule, where there is one."""
        return None


class ResidueChannel(Channel):
    """MSS and SS (one block, m = k): reports (j, Z) from the device randomiser.

    GRR is the same channel with one block of m = k and omega = 1; pass its
    integer client as ``client`` (reports y become (0, [y]))."""

    def __init__(self, name, cfg, client=None):
        self.name, self.cfg, self.k = name, cfg, cfg.k
        self.eps_effective = cfg.eps_effective
        self.log_r = np.log(cfg.p * (np.array(cfg.moduli) - cfg.omegas)
                            / ((1 - cfg.p) * np.array(cfg.omegas)))
        self.residues = [np.arange(cfg.k) % m for m in cfg.moduli]
        self.mark = bytearray((max(cfg.moduli) + 7) // 8)
        self.encoder, self.codec = Encoder(cfg), WireCodec(cfg)
        self._client = client

    def client(self, x, rng):
        if self._client is not None:
            return 0, np.array([self._client(x, rng)])
        j = privatise(self.cfg, x, rng, self.mark)
        bits = np.unpackbits(np.frombuffer(self.mark, dtype=np.uint8), bitorder="little")
        return j, np.flatnonzero(bits[:self.cfg.moduli[j]])

    def wire(self, x, rng):
        if self._client is not None:
            return self._client(x, rng)
        return self.encoder.encode(privatise(self.cfg, x, rng, self.mark), self.mark, 0, 0)

    def parse(self, data):
        if self._client is not None:
            return 0, np.array([data])
        r = self.codec.decode(data)
        return r.j, np.array(r.subset, dtype=np.int64)

    def support(self, report):
        j, z = report
        in_z = np.zeros(self.cfg.moduli[j], dtype=bool)
        in_z[z] = True
        return in_z[self.residues[j]], self.log_r[j]

    def key(self, report):
        return report[0], bytes(np.asarray(report[1], dtype=np.int64))

    def paper_guess(self, report, rng):
        j, z = report
        m = self.cfg.moduli[j]
        r = int(z[rng.integers(len(z))])
        return r + m * int(rng.integers((self.k - 1 - r) // m + 1))

    def _class_sizes(self):
        """|class_j(x)| = #{x' in [k] : x' = x mod m_j}, shape (l, k)."""
        return np.array([(self.k - 1 - res) // m + 1 for m, res in zip(self.cfg.moduli, self.residues)])

    def paper_exact(self, prior):
        """sum_x pi(x) (1/l) sum_j p'_j / (omega_j |class_j(x)|)."""
        per = self.cfg.p[:, None] / (np.array(self.cfg.omegas)[:, None] * self._class_sizes())
        return float(np.dot(prior, per.mean(axis=0)))

    def paper_closed_form(self):
        """MSS paper Eq. 7: (1/l) sum_j p'_j / (omega_j ceil(k / m_j))."""
        cfg = self.cfg
        return float(np.mean([p / (w * -(-cfg.k // m)) for p, w, m in zip(cfg.p, cfg.omegas, cfg.moduli)]))

    def bayes_exact(self, prior):
        """(1/l) sum_j subset_bayes(class maxima of pi in block j)."""
        total = 0.0
        for m, w, p, res in zip(self.cfg.moduli, self.cfg.omegas, self.cfg.p, self.residues):
            top = np.zeros(m)
            np.maximum.at(top, res, prior)
            total += subset_bayes(top, w, p)
        return total / self.cfg.l


class UnaryChannel(Channel):
    """OUE / SUE (basic one-time RAPPOR): k independent bits."""

    def __init__(self, oracle):
        self.oracle, self.name, self.k = oracle, oracle.name, oracle.k
        self.eps_effective = oracle.eps_effective
        p, q = oracle.p, oracle.q
        self.log_r = math.log(p * (1 - q) / (q * (1 - p)))

    def client(self, x, rng):
        return self.oracle.randomise(x, rng)

    def support(self, report):
        bits = np.unpackbits(np.frombuffer(report, dtype=np.uint8), bitorder="little")
        return bits[:self.k].astype(bool), self.log_r

    def paper_exact(self, prior):
        """p (1 - (1-q)^k) / (k q) + (1 - p)(1 - q)^(k-1) / k, whatever the prior:
        x's bit is set (p) and x is drawn among it and Binomial(k-1, q) others,
        or no bit is set and the guess is uniform."""
        p, q, k = self.oracle.p, self.oracle.q, self.k
        return float(p * -math.expm1(k * math.log1p(-q)) / (k * q) + (1 - p) * (1 - q) ** (k - 1) / k)

    def paper_closed_form(self):
        """The author code's formula, which is exact: :meth:`paper_exact`."""
        return self.paper_exact(None)

    def bayes_exact(self, prior):
        """sum_B q^|B| (1-q)^(k-|B|) max(p/q max_B pi, (1-p)/(1-q) max_not-B pi),
        grouped by the first set / unset bit in the sorted prior (O(k log k))."""
        p, q, k = self.oracle.p, self.oracle.q, self.k
        w = np.sort(np.asarray(prior, dtype=float))[::-1]
        r1, r0 = p / q, (1 - p) / (1 - q)
        s = np.arange(1, k)
        lq, l1q = math.log(q), math.log1p(-q)
        top_set = (np.exp(s * lq + l1q) * np.maximum(r1 * w[0], r0 * w[s])).sum() \
            + math.exp(k * lq) * r1 * w[0]
        top_unset = (np.exp(s * l1q + lq) * np.maximum(r1 * w[s], r0 * w[0])).sum() \
            + math.exp(k * l1q) * r0 * w[0]
        return float(top_set + top_unset)


class MembershipChannel(Channel):
    """Channels with an enumerable output set: P[u | x] = a if x in S_u else b.

    Subclasses give ``n_outputs``, ``a``, ``b``, :meth:`members` (bool
    (len(u), k) for output indices u) and :meth:`index` (report -> u)."""

    def support(self, report):
        return self.members(np.array([self.index(report)]))[0], math.log(self.a / self.b)

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


class HadamardChannel(MembershipChannel):
    def __init__(self, oracle):
        self.oracle, self.name, self.k = oracle, oracle.name, oracle.k
        self.eps_effective = oracle.eps_effective
        self.n_outputs = oracle.K
        self.a, self.b = oracle.p / (oracle.K / 2), (1 - oracle.p) / (oracle.K / 2)
        self.rows = np.arange(1, self.k + 1)

    def client(self, x, rng):
        return self.oracle.randomise(x, rng)

    def index(self, report):
        return report

    def members(self, u):
        return baselines._even_parity(self.rows[None, :] & u[:, None])


class PGRChannel(MembershipChannel):
    def __init__(self, oracle):
        self.oracle, self.name, self.k = oracle, oracle.name, oracle.k
        self.eps_effective = oracle.eps_effective
        self.n_outputs = oracle.K
        self.a = oracle.p / oracle.c_set
        self.b = (1 - oracle.p) / (oracle.K - oracle.c_set)
        self.items = oracle.coords[:self.k].T

    def client(self, x, rng):
        return self.oracle.randomise(x, rng)

    def index(self, report):
        return report

    def members(self, u):
        return (self.oracle.coords[u] @ self.items) % self.oracle.field == 0


class OLHChannel(MembershipChannel):
    """Outputs (a, b, y) indexed as ((a - 1) P + b) g + y; each seed has
    probability 1 / (P (P - 1))."""

    def __init__(self, oracle):
        self.oracle, self.name, self.k = oracle, oracle.name, oracle.k
        self.eps_effective = oracle.eps_effective
        P, g = oracle.P, oracle.g
        self.n_outputs = (P - 1) * P * g
        seed = 1.0 / (P * (P - 1))
        self.a, self.b = seed * oracle.p, seed * (1 - oracle.p) / (g - 1)
        self.values = np.arange(self.k)

    def client(self, x, rng):
        return self.oracle.randomise(x, rng)

    def index(self, report):
        a, b, y = report
        return ((a - 1) * self.oracle.P + b) * self.oracle.g + y

    def members(self, u):
        P, g = self.oracle.P, self.oracle.g
        seed, y = np.divmod(u, g)
        a, b = np.divmod(seed, P)
        return self.oracle.hash(a[:, None] + 1, b[:, None], self.values[None, :]) == y[:, None]

    def paper_closed_form(self):
        """The author code's approximation 1 / (2 max(k / (e^eps + 1), 1))."""
        return 1.0 / (2 * max(self.k / (math.exp(self.oracle.epsilon) + 1), 1))


def channel(name, k, epsilon, cfg=None):
    """The attacker's view of protocol ``name`` (as in :mod:`.protocols`);
    ``cfg``: audit this MSS configuration instead of the planner's."""
    from mss_aggregator import protocols

    if name == "mss" and cfg is not None:
        return ResidueChannel("mss", cfg)
    if name == "grr":
        grr = baselines.GRR(k, epsilon)
        cfg = MssConfig(k, epsilon, [k], [1], [grr.threshold])
        return ResidueChannel("grr", cfg, client=grr.randomise)
    proto = protocols.make(name, k, epsilon)
    if name in ("mss", "ss"):
        return ResidueChannel(name, proto.cfg)
    oracle = proto.oracle
    if isinstance(oracle, baselines.UnaryEncoding):
        ch = UnaryChannel(oracle)
        ch.name = name  # "rappor" is OUE
        return ch
    if isinstance(oracle, baselines.HadamardResponse):
        return HadamardChannel(oracle)
    if isinstance(oracle, PGR):
        return PGRChannel(oracle)
    if isinstance(oracle, baselines.OLH):
        return OLHChannel(oracle)
    raise ValueError(f"no attack model for protocol {name!r}")
