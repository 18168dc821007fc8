"""The privacy accountant of the shuffle model: central (eps, delta) of a shuffled batch of eps0-LDP reports.

A shuffler that strips identities and permutes a batch of ``n`` reports, one a device, each from an
eps0-LDP randomiser, releases a multiset that is (eps, delta)-DP in the central sense with eps far
below eps0 once n is in the thousands (amplification by shuffling: Erlingsson et al., SODA 2019;
Balle, Bell, Gascon, Nissim, CRYPTO 2019; Feldman, McMillan, Talwar, FOCS 2021).

Bounds implemented (:func:`central_epsilon` returns the smallest that applies, cached; one call with a
protocol took a median 0.05 s and at most 1 s on the 70-cell grid of tools/bench_shuffle_bounds.py,
at a load average of 10-13 on two cores):

``feldman-closed-form``
    Feldman, McMillan, Talwar, "Hiding among the clones: a simple and nearly optimal analysis of
    privacy amplification by shuffling", FOCS 2021 (arXiv 2012.12803), Theorem 3.1: for any
    eps0-LDP randomisers and eps0 <= ln(n / (16 ln(2/delta))),

        eps <= ln(1 + (e^eps0 - 1)/(e^eps0 + 1) * (8 sqrt(e^eps0 ln(4/delta)) / sqrt(n) + 8 e^eps0 / n)).

``feldman-numerical``
    The same paper, Theorem 3.2 (the reduction behind Theorem 3.1): the shuffled output is
    (eps, delta)-DP if the pair P, Q on {0..n}^2 is, where with p = e^-eps0, C ~ Bin(n - 1, p),
    A ~ Bin(C, 1/2) and Delta ~ Bern(alpha), alpha = e^eps0 / (e^eps0 + 1),

        P = (A + Delta, C - A + 1 - Delta),    Q = (A + 1 - Delta, C - A + Delta).

    We compute the hockey-stick divergence D_{e^eps}(P || Q) = sum max(0, P - e^eps Q) exactly
    (:func:`clones_delta`) and search the smallest eps with D <= delta (the procedure of the
    authors' code, apple/ml-shuffling-amplification, which sums the same divergence over C in
    coarse steps; ours sums every c exactly, vectorised).  Valid for every eps0-LDP randomiser.

``grr-blanket`` (``protocol="grr"`` with ``k``)
    Balle, Bell, Gascon, Nissim, "The privacy blanket of the shuffle model", CRYPTO 2019,
    Section 4: k-ary randomised response with keep probability p = e^eps0 / (e^eps0 + k - 1) is a
    mixture: with probability gamma = k / (e^eps0 + k - 1) a uniform "blanket" value, else the
    true one.  For neighbours differing in the last user's value x vs x', only the blanket values
    that land on x or x' matter: each other user contributes one with probability
    2 gamma / k = 2 / (e^eps0 + k - 1), equally likely x or x'.  Revealing to the adversary which
    reports are blanket reports on {x, x'} (more information: an upper bound) and whether the last
    user's report is in {x, x'} (equally likely, p + q, under both inputs), the view is the
    mixture (1 - p - q) * (common part) + (p + q) * (P, Q) with the pair P, Q above for
    C ~ Bin(n - 1, 2 / (e^eps0 + k - 1)) and the same alpha = p / (p + q).  Hence
    delta(eps) = (p + q) * D_{e^eps}(P || Q), computed exactly as for feldman-numerical.
    This is the blanket decomposition, which Su, Cheng, Wang ("Decomposition-based optimal
    bounds for privacy amplification via shuffling", arXiv 2504.07414) show to be the optimal
    decomposition, evaluated on the two values that differ; it is our derivation (not a theorem
    printed in Balle et al., whose Theorem 3.1 is a looser closed form), tighter than the
    generic bound for small k (k = 2: 2 e^eps0 / (e^eps0 + 1) times the clones) and looser for
    k >> e^eps0, where the generic bound is returned.

``grr-stronger-clone`` (``protocol="grr"`` with ``k``)
    The pair P, Q above with C ~ Bin(n - 1, 2 / (e^eps0 + 1)), weight 1: the clone probability
    of the "stronger clone" of Feldman, McMillan, Talwar, "Stronger privacy amplification by
    shuffling for Renyi and approximate differential privacy", SODA 2023 (arXiv 2208.04591).  We
    rely on our derivation, not on their statement (whose class of randomisers was restricted in
    an erratum; "generic randomisers" below): for k-RR it follows from the argument of
    Theorem 3.2 of the 2021 paper with another decomposition.  Write R0, R1 for the laws of the
    report under the two values x0, x1 of the device that differs, and
    Q0 = (e^eps0 R0 - R1)/(e^eps0 - 1), Q1 = (e^eps0 R1 - R0)/(e^eps0 - 1): distributions
    (non-negative by eps0-LDP, mass 1) with R0 = (e^eps0 Q0 + Q1)/(e^eps0 + 1),
    R1 = (Q0 + e^eps0 Q1)/(e^eps0 + 1).  If every other user's law satisfies
    R(x) >= beta (Q0 + Q1) = beta (R0 + R1) pointwise, it is beta Q0 + beta Q1 + (1 - 2 beta) LO_x,
    each other user a clone with probability 2 beta, and the 2021 proof gives the pair for
    C ~ Bin(n - 1, 2 beta).  For k-RR with p = e^eps0 q, q = 1/(e^eps0 + k - 1), the worst point is
    x outside {x0, x1} at the output x0: q >= beta (p + q), so beta = 1/(e^eps0 + 1) (everywhere
    else R(x) >= 2 q beta holds with room).  Both GRR bounds are the ends of one family
    (a part of the common outputs kept out of Q0, Q1 as a revealed mixture, as in grr-blanket);
    we evaluate the two ends.  At k = 2 they coincide (the blanket is then named).

Generic randomisers.  The 2021 decomposition (beta = e^-eps0 / 2) is the one we can prove for every
eps0-LDP randomiser.  The decomposition above, with Q0, Q1 the normalised positive parts of R0 - R1
and the common part revealed, gives for every randomiser beta = TV(R0, R1)/(e^eps0 - 1) and weight
s = TV (e^eps0 + 1)/(e^eps0 - 1) in (0, 1], i.e. delta <= s D(pair, C ~ Bin(n - 1, 2 s/(e^eps0 + 1))):
at s = 1 (binary RR) this is the SODA 2023 pair, but at the eps where s = 1 meets delta its
supremum over s (near s = 0.03) exceeds delta in 64 of the 70 cells of tools/bench_shuffle_bounds.py,
up to 1.5 million times (the other 6: cells where the s = 1 pair itself gives no amplification), so
it proves nothing better than the 2021 pair for an unknown randomiser.  We know of no published
bound for all eps0-LDP randomisers tighter than the 2021 numerical one whose statement and
conditions we could check here, and implement none.

Per-protocol blanket (``ss-``, ``oue-``, ``sue-``, ``hr-blanket``; ``protocol`` with ``k``, and
``size``: the subset size w for "ss", the block size b for "hr"); :func:`clone_pairs` gives the pairs.
Balle, Bell, Gascon, Nissim (CRYPTO 2019), Section 3: if every user's law satisfies
R_x(y) >= gamma omega(y) for one law omega (the blanket: gamma omega(y) = min_x R_x(y) is the
largest, and Su, Cheng, Wang, arXiv 2504.07414, show this decomposition optimal in their general
clone paradigm; any smaller omega is also valid), each other user's report is a blanket draw with
probability gamma, and revealing which users are not blanket users and their reports (their law
does not depend on the device's value) can only raise the divergence.  We reveal more, as for
grr-blanket: for the pair x0, x1 split the outputs into D0, D1 (where R_x0 != R_x1) and the rest
(where R_x0 = R_x1, identical under both values: revealed, including whether the device's own
report lies there, which has the same probability R_x0(D) = R_x1(D) under both).  The reduction
to the clones pair is exact for what is left when (i) R_x0 = e^eps0 R_x1 on D0 and the reverse on
D1, (ii) R_x0, R_x1 and omega are each constant multiples of one law on D0 (and on D1), and (iii)
omega(D0) = omega(D1): then the view is the number of D0 reports among the device's report and
the C ~ Bin(n - 1, gamma omega(D)) blanket draws in D, and
delta(eps) <= R_x0(D) * D_{e^eps}(P || Q) for the pair P, Q above with alpha = e^eps0/(e^eps0 + 1).
The three protocols meet (i)-(iii) (our derivation; every one checked by brute force over every
data set at n <= 8 in tests/test_shuffle_blanket.py):

* subset selection of w out of k (w = 1 is k-RR: the grr pairs): Z = C(k-1, w-1) e^eps0 + C(k-1, w),
  omega uniform (gamma omega = 1/Z), D0 the C(k-2, w-1) subsets with x0 but not x1:
  p_clone = 2 w (k - w) / ((k - 1)(w e^eps0 + k - w)), weight = (e^eps0 + 1) p_clone / 2;
* unary encoding, bit x one with p, the others with q (OUE p = 1/2, q = 1/(e^eps0 + 1); SUE
  p = e^(eps0/2)/(e^(eps0/2) + 1) = 1 - q): gamma omega(y) = base(y) (1 - p)/(1 - q) (base the
  all-q law; the minimum over x wherever y has a zero), D0 the vectors with bit x0 one and bit x1
  zero: p_clone = 2 q (1 - p), weight = p (1 - q) + q (1 - p);
* Hadamard response with blocks of b (mss_protocol.hr's layout, K = B b outputs, b/2 supported
  per item at e^eps0 the weight of the others, lo = 1/(e^eps0 b/2 + K - b/2)): omega uniform;
  x0, x1 in one block share b/4 supported outputs, D0 b/4 of them; in two blocks D0 is b/2:
  p_clone = 2 |D0| lo, weight = |D0| (e^eps0 + 1) lo, the bound the larger eps of the two kinds.

The stronger clone (beta = min over x, y of R_x(y)/(R_x0(y) + R_x1(y))) gives these protocols
nothing: wherever R_x0 and R_x1 share a favoured output (SS with w >= 2, unary, HR in one block)
beta = 1/(2 e^eps0), the 2021 pair; it is listed only where they share none (w = 1, i.e. k-RR).
Revealing which blanket draws land on the shared outputs loses their dilution of the likelihood
ratio, which is why these pairs gain little for OUE, HR and SS at large k; the blanket divergence
below keeps it.  Not covered: PGR, MSS, OLH (refused by the shuffler) and any report with an
instantaneous layer; they keep the generic bound.

Blanket divergence (``grr-``, ``ss-``, ``oue-``, ``sue-``, ``hr-blanket-divergence``; the same
arguments; :func:`blanket_kinds` gives each protocol's numbers, :class:`_Blanket` computes it).
Balle, Bell, Gascon, Nissim (CRYPTO 2019), Section 3: if R_x(y) >= gamma omega(y) for every value x,
each other user's report is a draw from omega with probability gamma, else from a law that does not
depend on the device's value; revealing those users and their reports, the view is the multiset of
the device's report and M ~ Bin(n - 1, gamma) draws from omega.  Its density under value x with
respect to omega^(M + 1) is (1/(M + 1)) sum_j l_x(z_j), l_x = R_x / omega (the device's report is at
a uniform place), so the release is (eps, delta(eps))-DP for the pair x, x' with

    delta(eps) = E_M[delta_M],   delta_M = E[(sum_{j <= M + 1} (l_x(Z_j) - e^eps l_x'(Z_j)))_+] / (M + 1),

Z_j iid omega: the blanket divergence (Balle et al. write it (1/(gamma n)) E[(sum_{i <= M'} L_i)_+],
M' ~ Bin(n, gamma), the same number).  Su, Cheng, Wang (arXiv 2504.07414) prove that the blanket
gamma omega = min_x R_x gives the smallest such bound over every decomposition of their general clone
paradigm (the clones pairs above are others).  All five protocols are two-level:
l_x(z) = gamma e^(eps0 I_x(z)), I_x(z) = 1 iff output z favours x:

* GRR: omega uniform on the k values, gamma = k/(e^eps0 + k - 1), z favours z;
* SS (w of k): omega uniform on the subsets, gamma = k/(w e^eps0 + k - w), z favours its w members;
* OUE, SUE: omega the law with every bit one with q, gamma = (1 - p)/(1 - q) = (e^eps0 + 1)/(2 e^eps0)
  for OUE, q/p = e^(-eps0/2) for SUE; z favours its one-bits (a blanket below min_x R_x at the
  all-ones vector only: smaller, still valid);
* HR (blocks of b, K outputs): omega uniform, gamma omega = lo = 1/(e^eps0 b/2 + K - b/2); z favours
  the items of its block whose half holds it (below min_x R_x only at the outputs every item favours,
  in one block: smaller, still valid).

With e = e^eps, l_x - e l_x' = gamma ((1 - e) + (e^eps0 - 1)(I_x - e I_x')), so with N1, N2, Nb the
draws among the M + 1 that favour x only, x' only and both,

    delta_M = gamma (e^eps0 - 1) E[(N1 - e N2 - (e - 1) Nb - t_M)_+] / (M + 1),   t_M = (e - 1)(M + 1)/(e^eps0 - 1).

Per draw, P(x only) = P(x' only) = p_only, P(both) = p_both: GRR 1/k, 0; SS w(k - w)/(k(k - 1)),
w(w - 1)/(k(k - 1)); unary q(1 - q), q^2; HR x, x' in one block b/(4K), b/(4K), in two b/(2K), 0 (the
bound is the larger eps of the kinds).  What is computed is an upper bound on delta(eps), each step
raising it: (a) Nb is at least nb_M, its Bin(M + 1, p_both) quantile at TAIL delta, but with
probability P(Nb < nb_M), where the integrand is at most M + 1: t_M rises by (e - 1) nb_M and
gamma (e^eps0 - 1) P(Nb < nb_M) is added (nothing for p_both = 0); (b) (N1, N2) is trinomial, given
N2 = b N1 ~ Bin(M + 1 - b, r), r = p_only/(1 - p_only), and E[(X - c)_+] for X ~ Bin(s, r) is
s r P[Bin(s - 1, r) >= floor(c)] - c P[Bin(s, r) > floor(c)]; this is non-increasing in b, so b is
summed in buckets of width max(1, BLANKET_BSTEP sd(N2)) at their lowest b, the last bucket running
to M + 1, and the b below the TAIL quantile at b = 0; (c) the exact delta_M is at most 1 and
non-increasing in M (one more independent omega draw in the multiset is post-processing), so M is
summed in buckets [M_i, M_i+1) of width max(1, BLANKET_STEP M_i) at the bound at M_i (kept
non-increasing by a running minimum), the M below the TAIL quantile of Bin(n - 1, gamma) at 1;
(d) the smallest eps with the bound at most delta (non-increasing in eps), by Brent to BLANKET_RTOL
and nudged up until it meets delta.  Where every draw favours x or x' (GRR and SS with k = 2) it is
the blanket clones pair and is not listed; there it measures the buckets' cost, 0.4% of eps at most
on the 70-cell grid (tests/test_shuffle_blanket_exact.py).  Checked by brute force over every data
set at n <= 8 beside the pairs (tests/test_shuffle_blanket.py, tests/test_shuffle_bounds.py).
It has no clones pair: the :class:`Central` it gives carries the pair of the smallest clones-pair
bound (the batch is dominated by it alone), which :func:`compose` composes, so a composition is
proven but does not gain what the divergence gains for one batch.

Over epochs, :func:`compose` composes the batch's clones pair through its privacy-loss
distribution (:func:`compose_pld`) beside the closed-form theorems, and returns the smallest.

Lower bound: :func:`binary_rr_lower_bound`, the exact central eps of shuffled binary randomised
response with every other user holding the same value.  It is one eps0-LDP randomiser and one
data set, so every bound valid for all eps0-LDP randomisers is at least it (tests check ours are).

The release is always eps0-DP with delta 0 (post-processing of n eps0-LDP reports of which one
is the device's), so no result exceeds eps0; when no bound is below it, eps0 is returned with a
``method`` saying so.
"""
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

DEFAULT_DELTA = 1e-6  # the central delta a shuffled epoch is stated at unless given (mss plan --delta)
EPS0_MAX = 10.0  # largest_eps0 searches eps0 in (0, EPS0_MAX]: e^-10 < 5e-5 clones, no amplification left below n ~ 1e6
TAIL = 1e-4  # the mass of C left out of the exact sum, as a fraction of delta (added to delta: still an upper bound)
SEARCH_RTOL = 1e-11  # Brent's tolerance on eps, relative to the bracket (eps0 or the closed form)
# The ideal mechanisms of the amplification literature this module bounds (None: any eps0-LDP
# randomiser). Their names are switched on below (clone_pairs, blanket_kinds, _check): this module is
# the one home of each mechanism's shuffle math, and registry protocols reach it only by asking
# Protocol.shuffle_channel() (config_bound), never by their names.
PROTOCOLS = (None, "grr", "ss", "oue", "sue", "hr")
SIZED = {"ss": "the subset size w, an integer in [1, k - 1]", "hr": "the block size b, a power of two >= 2"}
BLANKET_BSTEP = 0.02  # width of a bucket of N2 in the blanket divergence, relative to its standard deviation (at least 1)
BLANKET_RTOL = 1e-7  # Brent's tolerance for the blanket divergence (each evaluation costs more)
BLANKET_STEP = 0.003  # width of a bucket of M in the blanket divergence, relative to M (at least 1)
USEFUL = 1e-6  # a bound within this fraction of eps0 is reported as no amplification ("none: ...")


@dataclass(frozen=True)
class Central:
    """A central (eps, delta)-DP guarantee of one shuffled batch of ``n`` eps0-LDP reports.

    ``method``: the bound that gave ``eps`` (module docstring), or ``"none: ..."`` when no bound
    is below eps0 (then ``eps == eps0`` and the guarantee holds with delta 0).  ``pair``: the
    (p_clone, weight) of the clones pair that dominates the batch for that method (the 2021 pair
    for the closed form too; for a blanket divergence, which has none, the pair of the smallest
    clones-pair bound), which :func:`compose` composes; None for "none".  ``bounds``: every
    bound computed, (method, eps) in the order tried; one is left out when it is not below the
    smaller of eps0 and the bounds before it (not compared: two guarantees are equal on the five
    fields above)."""

    eps: float
    delta: float
    n: int
    eps0: float
    method: str
    bounds: tuple = field(default=(), compare=False)
    pair: tuple = field(default=None, compare=False)  # (p_clone, weight) of the clones pair behind eps, or None


@dataclass(frozen=True)
class Composed:
    """The guarantee over ``epochs`` shuffled releases, one report of the device in each.

    ``eps``, ``delta``: the total; ``method``: ``"basic"``, ``"kairouz-oh-viswanath"`` or ``"pld"``
    (:func:`compose`); ``central``: the per-epoch guarantee composed."""

    eps: float
    delta: float
    epochs: int
    method: str
    central: Central


def _check(eps0, n, delta, protocol, k, size=None):
    if not (isinstance(eps0, (int, float)) and 0 < eps0 < math.inf):
        raise ValueError(f"eps0 must be a positive finite number, got {eps0!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n (reports in the shuffled batch) must be an integer >= 1, got {n!r}")
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be None (any eps0-LDP randomiser) or one of {PROTOCOLS[1:]}, got {protocol!r}")
    if protocol is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2):
        raise ValueError(f"protocol {protocol!r} needs the domain size k, an integer >= 2, got {k!r}")
    if protocol in SIZED:
        bad = isinstance(size, bool) or not isinstance(size, (int, np.integer))
        if bad or (protocol == "ss" and not 1 <= size < k) or (protocol == "hr" and (size < 2 or size & (size - 1))):
            raise ValueError(f"protocol {protocol!r} needs size, {SIZED[protocol]}, got {size!r}")


def closed_form(eps0, n, delta):
    """Feldman, McMillan, Talwar (FOCS 2021) Theorem 3.1, or None outside its condition
    eps0 <= ln(n / (16 ln(2/delta)))."""
    if n <= 16 * math.log(2 / delta) or eps0 > math.log(n / (16 * math.log(2 / delta))):
        return None
    e = math.exp(eps0)
    return math.log1p((e - 1) / (e + 1) * (8 * math.sqrt(e * math.log(4 / delta) / n) + 8 * e / n))


class _Clones:
    """The pair P, Q of Feldman et al. Theorem 3.2 for C ~ Bin(n - 1, p_clone), weighted by ``weight``
    (1 for the generic bound, p + q for GRR's blanket: module docstring).

    C is summed exactly over [lo, hi], where all but TAIL * delta of its mass lies; the mass left out
    is added to delta (the divergence given any c is at most 1)."""

    def __init__(self, eps0, n, delta, p_clone, weight=1.0):
        self.eps0, self.weight = eps0, weight
        self.alpha = 1 / (1 + math.exp(-eps0))  # e^eps0 / (e^eps0 + 1), written not to overflow
        from scipy.stats import binom  # here: scipy.stats costs ~1 s of every CLI start (mss estimate imports this module)

        self.binom = binom
        cut = TAIL * delta / 2
        lo, hi = (int(x) for x in binom.ppf([cut, 1 - cut], n - 1, p_clone))
        lo = max(lo - 1, 0)
        self.c = np.arange(lo, hi + 1, dtype=np.int64)
        self.w = binom.pmf(self.c, n - 1, p_clone)
        self.left_out = max(0.0, 1.0 - float(self.w.sum()))

    def delta(self, eps):
        """D_{e^eps}(P || Q), times ``weight``, plus the left-out mass of C.

        Given C = c the pair is one-dimensional (the second coordinate is c + 1 minus the first):
        P_c(x) = alpha b(x - 1) + (1 - alpha) b(x), Q_c(x) = alpha b(x) + (1 - alpha) b(x - 1),
        b the Bin(c, 1/2) pmf.  With r = b(x - 1)/b(x) = x/(c + 1 - x), increasing in x,
        P_c/Q_c = (alpha r + 1 - alpha)/(alpha + (1 - alpha) r) increases with r, so
        P_c > e^eps Q_c exactly when r > r* = ((e^eps + 1) alpha - 1)/((e^eps + 1) alpha - e^eps),
        i.e. x > (c + 1) r*/(1 + r*); the sum over those x is two binomial tails.  (P and Q are
        mirror images, x -> c + 1 - x, so D(P||Q) = D(Q||P).)"""
        a, t = self.alpha, math.exp(eps)
        den = (t + 1) * a - t
        if den <= 0:  # e^eps >= e^eps0: the likelihood ratio never exceeds e^eps
            return self.left_out
        beta = ((t + 1) * a - 1) / ((t + 1) * a - 1 + den)  # r*/(1 + r*)
        x = np.floor((self.c + 1) * beta)  # P_c > e^eps Q_c for x >= x* + 1
        sf1 = self.binom.sf(x, self.c, 0.5)  # P[Bin(c, 1/2) > x*]: sum of b(y), y >= x* + 1
        sf0 = sf1 + self.binom.pmf(x, self.c, 0.5)  # sum of b(y - 1) over the same x: P[Bin > x* - 1]
        d = a * sf0 + (1 - a) * sf1 - t * (a * sf1 + (1 - a) * sf0)
        return self.weight * float(np.dot(self.w, np.maximum(d, 0.0))) + self.left_out

    def epsilon(self, delta, upper, rtol=SEARCH_RTOL):
        """The smallest eps in [0, upper] with self.delta(eps) <= delta, or None if upper does not meet it.

        self.delta is continuous and non-increasing in eps (a hockey-stick divergence), so Brent's
        method finds the crossing in about ten evaluations; the result is then checked and nudged up
        by the tolerance until it meets delta, so it is always a valid bound."""
        if self.delta(upper) > delta:
            return None
        if self.delta(0.0) <= delta:
            return 0.0
        from scipy import optimize

        tol = rtol * upper
        eps = optimize.brentq(lambda e: self.delta(e) - delta, 0.0, upper, xtol=tol, rtol=rtol)
        while eps < upper and self.delta(eps) > delta:
            eps = min(eps + tol, upper)
        return eps


class _Blanket:
    """The privacy-blanket divergence of a two-level randomiser (module docstring, "blanket divergence").

    Every other user's report is a blanket draw with probability ``gamma`` (M ~ Bin(n - 1, gamma) of
    them); each of the M + 1 draws (the device's own, after the change of measure, included) favours
    x only with probability ``p_only``, x' only with the same, both with ``p_both``.  :meth:`delta`
    is an upper bound on delta(eps) = E_M[delta_M]: M summed in buckets [M_i, M_i+1) at delta_{M_i}
    (delta_M of the exact divergence is non-increasing in M), each delta_M bounded by the relaxation
    that counts the "both" draws as "neither" but for the nb_i that all but TAIL delta of the mass
    holds, the only-x' count N2 summed where all but TAIL delta of its mass lies, its tails at the
    integrand's bound there; the mass of M below the lowest bucket at 1."""

    def __init__(self, eps0, n, delta, gamma, p_only, p_both):
        from scipy.stats import binom

        self.binom, self.gamma, self.e0m1 = binom, gamma, math.expm1(eps0)
        self.r = p_only / (1 - p_only)  # N1 given N2 = b: Bin(M + 1 - b, r)
        cut = TAIL * delta / 4
        lo, hi = (int(x) for x in binom.ppf([cut, 1 - cut], n - 1, gamma))
        lo = max(lo - 1, 0)
        self.below = float(binom.cdf(lo - 1, n - 1, gamma)) if lo > 0 else 0.0
        edges = [lo]
        while edges[-1] < min(hi, n - 1):
            edges.append(edges[-1] + max(1, int(edges[-1] * BLANKET_STEP)))
        M = np.array([m for m in edges if m <= n - 1], dtype=np.int64)
        self.mass = np.diff(np.append(binom.cdf(M - 1, n - 1, gamma), 1.0))  # bucket i: M_i <= M < M_i+1 (the last: n - 1)
        m1 = M + 1
        self.m1 = m1.astype(float)
        both_cut = cut / (gamma * self.e0m1)  # the integrand is at most gamma (e^eps0 - 1) where fewer "both" draws
        if p_both > 0:
            self.nb = np.maximum(binom.ppf(both_cut, m1, p_both) - 1, 0.0)
            self.nb_miss = binom.cdf(self.nb - 1, m1, p_both)
        else:
            self.nb, self.nb_miss = np.zeros(len(M)), np.zeros(len(M))
        only_cut = cut / (gamma * self.e0m1 * (1 + self.r))  # the b = 0 integrand is at most gamma (e^eps0 - 1) (1 + r)
        blo = np.maximum(binom.ppf(only_cut, m1, p_only) - 1, 0).astype(np.int64)
        bhi = binom.ppf(1 - cut, m1, p_only).astype(np.int64)
        width = np.maximum(1, (BLANKET_BSTEP * np.sqrt(m1 * p_only * (1 - p_only))).astype(np.int64))
        sizes = (bhi - blo) // width + 1  # buckets [blo + j width, blo + (j + 1) width) of b, the last to M + 1
        row = np.repeat(np.arange(len(M)), sizes)
        b = blo[row] + width[row] * (np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes))
        last = np.cumsum(sizes) - 1
        upto = binom.cdf(b + width[row] - 1, m1[row], p_only)
        upto[last] = 1.0
        w = upto - binom.cdf(b - 1, m1[row], p_only)  # each bucket at the integrand of its lowest b (non-increasing in b)
        low = np.flatnonzero(blo > 0)  # b < blo at the integrand of b = 0
        self.row = np.concatenate([row, low])
        self.b = np.concatenate([b, np.zeros(len(low), dtype=np.int64)]).astype(float)
        self.w = np.concatenate([w, binom.cdf(blo[low] - 1, m1[low], p_only)])
        self.s = self.m1[self.row] - self.b
        self.rows = len(M)

    def delta(self, eps):
        """An upper bound on the blanket divergence at ``eps`` (class docstring), plus the mass left out."""
        e, em1 = math.exp(eps), math.expm1(eps)
        t = em1 * (self.m1 / self.e0m1 + self.nb)  # t_M, raised by e^eps - 1 for each sure "both" draw
        c = t[self.row] + e * self.b
        ok = c < self.s  # elsewhere N1 <= s <= c: no term
        s, c, f = self.s[ok], c[ok], np.floor(c[ok])
        g = s * self.r * self.binom.sf(f - 1, s - 1, self.r) - c * self.binom.sf(f, s, self.r)  # E[(N1 - c)+]
        total = np.bincount(self.row[ok], weights=self.w[ok] * np.maximum(g, 0.0), minlength=self.rows)
        scale = self.gamma * self.e0m1
        d = np.minimum(scale * (total / self.m1 + self.nb_miss), 1.0)
        d = np.minimum.accumulate(d)  # delta_M is non-increasing: a bound at a smaller M holds at every larger one
        return float(np.dot(self.mass, d)) + self.below

    def epsilon(self, delta, upper, rtol=BLANKET_RTOL):
        """The smallest eps in [0, upper] with self.delta(eps) <= delta, or None if upper does not meet it.

        As :meth:`_Clones.epsilon`, on log self.delta (about quadratic in eps: fewer evaluations,
        each costing more here); the result is checked and nudged up until it meets delta."""
        from scipy import optimize

        at = lru_cache(maxsize=None)(self.delta)
        if at(float(upper)) > delta:
            return None
        if at(0.0) <= delta:
            return 0.0
        tol = rtol * upper
        eps = optimize.brentq(lambda e: math.log(max(at(e), 1e-300) / delta), 0.0, float(upper), xtol=tol, rtol=rtol)
        while eps < upper and at(eps) > delta:
            eps = min(eps + tol, upper)
        return eps


def clones_delta(eps, eps0, n, delta, p_clone=None, weight=1.0):
    """delta(eps) of the clones pair (Feldman et al. Theorem 3.2; ``p_clone`` default e^-eps0),
    exposed for tests: the mass of C outside the exact sum is sized from ``delta``."""
    p_clone = math.exp(-eps0) if p_clone is None else p_clone
    return _Clones(eps0=eps0, n=n, delta=delta, p_clone=p_clone, weight=weight).delta(eps)


def clones_epsilon(eps0, n, delta, p_clone, weight=1.0):
    """The smallest eps (to Brent's tolerance, rounded up) with ``weight`` times the clones pair's
    divergence for C ~ Bin(n - 1, p_clone) at most delta, or None if not even eps0 meets it."""
    return _Clones(eps0=eps0, n=n, delta=delta, p_clone=p_clone, weight=weight).epsilon(delta, eps0)


def blanket_epsilon(eps0, n, delta, protocol, k, size=None):
    """The smallest eps (to Brent's tolerance, rounded up) at which the blanket divergence of ``protocol``
    (module docstring) meets delta, the largest over the kinds of neighbours, or None if not even eps0
    does; exposed for tests (:func:`central_epsilon` takes it where it is the smallest)."""
    _check(eps0=eps0, n=n, delta=delta, protocol=protocol, k=k, size=size)
    worst = 0.0
    for kind in blanket_kinds(protocol, float(eps0), k, size):
        eps = _Blanket(float(eps0), n, float(delta), *kind).epsilon(float(delta), float(eps0), BLANKET_RTOL)
        if eps is None:
            return None
        worst = max(worst, eps)
    return worst

def binary_rr_lower_bound(eps0, n, delta):
    """A lower bound on any central eps valid for all eps0-LDP randomisers: shuffled binary RR, exactly.

    Binary randomised response (report the bit with probability e^eps0/(e^eps0 + 1)) is eps0-LDP;
    shuffled, the release is the number N of ones.  With the n - 1 others all holding 0 it is
    S + B, S ~ Bin(n - 1, q), q = 1/(e^eps0 + 1), B the device's report: under its 0,
    P(j) = q s(j - 1) + (1 - q) s(j), under its 1, Q(j) = (1 - q) s(j - 1) + q s(j).  The eps
    returned is the largest (to 1e-9 eps0) with max(D_{e^eps}(P||Q), D_{e^eps}(Q||P)) > delta, so the
    release is not (eps, delta)-DP for any smaller eps: every generic upper bound must be at least it.
    (Other data sets, e.g. half the others at 1, give smaller values at the cells we tried; S is
    summed over the binomial's support but for 1e-3 delta of its tails, which can only lower the
    divergence, so the result stays a lower bound.)  Returns 0.0 if even eps = 0 meets delta."""
    from scipy.stats import binom

    q = 1 / (1 + math.exp(eps0))
    cut = 1e-3 * delta / 2
    lo, hi = (int(x) for x in binom.ppf([cut, 1 - cut], n - 1, q))
    j = np.arange(max(lo - 1, 0), hi + 2)
    s = binom.pmf(j, n - 1, q)
    s_prev = binom.pmf(j - 1, n - 1, q)
    P, Q = q * s_prev + (1 - q) * s, (1 - q) * s_prev + q * s

    def divergence(eps):
        t = math.exp(eps)
        return max(np.maximum(P - t * Q, 0).sum(), np.maximum(Q - t * P, 0).sum())

    if divergence(0.0) <= delta:
        return 0.0
    low, high = 0.0, float(eps0)
    while high - low > 1e-9 * eps0:
        mid = (low + high) / 2
        low, high = (mid, high) if divergence(mid) > delta else (low, mid)
    return low


def _set_pairs(e, d0_lo, both):
    """The blanket and stronger-clone pairs of a support-set randomiser for one pair x0, x1.

    Item x has a support S_x; the report is each output of S_x with probability hi, each other one
    with lo = hi / e (e = e^eps0).  ``d0_lo`` is |S_x0 minus S_x1| lo, ``both`` whether
    S_x0 and S_x1 intersect.  Blanket: (2 d0 lo, d0 lo (e + 1)); stronger clone: beta =
    1/(2e) if they intersect (a common output, at most lo under some x, against 2 hi), else
    1/(e + 1); the pair (2 beta, 1), left out when they intersect (beta = 1/(2e) is the 2021
    generic pair, feldman-numerical).  Module docstring, "per-protocol blanket"."""
    pairs = {"blanket": (2 * d0_lo, d0_lo * (e + 1))}
    if not both:
        pairs["stronger-clone"] = (2 / (e + 1), 1.0)
    return pairs


def clone_pairs(protocol, eps0, k, size=None):
    """Every (p_clone, weight) pair proven for ``protocol`` (module docstring, "per-protocol blanket").

    Returns {method: ((p_clone, weight), ...)}: one pair per kind of neighbouring values x0, x1
    (several only for HR with more than one block: x0, x1 in one block or in two); the bound of a
    method is the largest eps over its pairs."""
    e = math.exp(eps0)
    if protocol == "grr":
        kinds = [_set_pairs(e, 1 / (e + k - 1), False)]
    elif protocol == "ss":
        w = size  # d0 = C(k - 2, w - 1) subsets, lo = 1/Z, Z = C(k - 1, w - 1) e + C(k - 1, w)
        kinds = [_set_pairs(e, w * (k - w) / ((k - 1) * (w * e + k - w)), w >= 2)]
    elif protocol == "hr":
        b, blocks = size, -(-k // (size - 1))
        lo = 1 / (e * b / 2 + blocks * b - b / 2)  # K = blocks b outputs, b/2 supported by x
        kinds = ([_set_pairs(e, b / 4 * lo, True)] if b >= 4 else []) + \
                ([_set_pairs(e, b / 2 * lo, False)] if blocks >= 2 else [])
    else:  # unary: each bit 1 with p at the item, q elsewhere
        half = math.exp(eps0 / 2)
        p, q = (0.5, 1 / (e + 1)) if protocol == "oue" else (half / (half + 1), 1 / (half + 1))
        kinds = [{"blanket": (2 * q * (1 - p), p * (1 - q) + q * (1 - p))}]  # stronger clone: 1/(2e), the generic
    return {f"{protocol}-{name}": tuple(kind[name] for kind in kinds) for name in kinds[0]
            if all(name in kind for kind in kinds)}


def blanket_kinds(protocol, eps0, k, size=None):
    """The blanket of ``protocol`` for each kind of neighbouring values x, x' (module docstring, "blanket divergence").

    Returns ((gamma, p_only, p_both), ...): the blanket probability gamma (R_x >= gamma omega for
    every x) and, for one draw from omega, the probability that it favours x only (equally, x' only)
    and that it favours both; one kind but for HR over several blocks (x, x' in one block, in two)."""
    e = math.exp(eps0)
    if protocol in ("grr", "ss"):
        w = 1 if protocol == "grr" else size  # omega uniform on the w-subsets; x in a subset with probability w/k
        return ((k / (w * e + k - w), w * (k - w) / (k * (k - 1)), w * (w - 1) / (k * (k - 1))),)
    if protocol == "hr":
        b, blocks = size, -(-k // (size - 1))
        K = blocks * b  # omega uniform on the K outputs, gamma omega = lo
        gamma = K / (e * b / 2 + K - b / 2)
        return (((gamma, b / 4 / K, b / 4 / K),) if b >= 4 else ()) + (((gamma, b / 2 / K, 0.0),) if blocks >= 2 else ())
    half = math.exp(eps0 / 2)  # unary: omega the all-q law; OUE gamma = (1 - p)/(1 - q), SUE q/p
    gamma, q = ((e + 1) / (2 * e), 1 / (e + 1)) if protocol == "oue" else (1 / half, 1 / (half + 1))
    return ((gamma, q * (1 - q), q * q),)


@lru_cache(maxsize=4096)
def bound_args(mechanism, k, irr=False, size=None):
    """The (protocol, k, size) to pass :func:`central_epsilon` for reports of the ideal ``mechanism``
    ("grr", "ss", "oue", "sue", "hr": :func:`config_bound`) on ``k`` items: its own bounds, or the
    generic bound (None, None, None) for no mechanism (any other randomiser), for an instantaneous
    layer ``irr``, and for ss or hr without ``size``."""
    if irr or mechanism is None:
        return None, None, None
    if mechanism in SIZED:
        return (mechanism, k, int(size)) if size is not None else (None, None, None)
    return mechanism, k, None


def config_bound(cfg):
    """(mechanism, k, irr, size) of a loaded device config for :func:`bound_args`: the protocol's
    ``shuffle_channel()`` (the ideal mechanism its device channel is, and its size; mechanism None
    for any other: the generic bound), and whether an instantaneous layer is on."""
    from mss_protocol import registry  # here: registry loads the protocols' modules on first use

    protocol = registry.from_config(cfg)
    mechanism, size = protocol.shuffle_channel() or (None, None)
    return mechanism, cfg.k, protocol.irr is not None, size


def central_epsilon(eps0, n, delta, protocol=None, k=None, size=None):
    """The smallest central eps of the bounds that apply to a shuffled batch of ``n`` eps0-LDP reports.

    Parameters
    ----------
    eps0 : float
        The local budget of every report (eps0-LDP).
    n : int
        Reports in the shuffled batch, one a device.
    delta : float
        The central delta, in (0, 1).
    protocol : None, "grr", "ss", "oue", "sue" or "hr"
        None: any eps0-LDP randomiser (Feldman et al. bounds).  Otherwise the randomiser in use,
        exactly at eps0 (the ideal channel, no quantised threshold), which also gets its own
        bounds (module docstring: grr-blanket, grr-stronger-clone, per-protocol blanket).  A device
        config's integer channel is the ideal one at its eps_effective where its protocol's
        ``shuffle_channel()`` names a mechanism: :func:`bound_args` of :func:`config_bound` gives
        the arguments.
    k : int
        The domain size, for every ``protocol``.
    size : int
        The subset size w (1 <= w < k) for "ss", the block size b (a power of two) for "hr".

    Returns
    -------
    Central
        ``eps`` the smallest of: Feldman et al. Theorem 3.1 (where its condition holds), their
        Theorem 3.2 computed numerically, the protocol's own bounds (its blanket divergence
        included) and eps0 itself; ``pair`` the clones pair of the smallest clones-pair bound,
        None for HR over several blocks (no one pair dominates both kinds of neighbours).  Non-increasing in n and non-decreasing in eps0 (the bounds are).

    Raises
    ------
    ValueError
        For an eps0, n, delta, protocol, k or size out of range, naming it.
    """
    _check(eps0=eps0, n=n, delta=delta, protocol=protocol, k=k, size=size)
    k = None if protocol is None else int(k)
    size = int(size) if protocol in SIZED else None  # (ignored by the other protocols)
    return _central_epsilon(eps0=float(eps0), n=int(n), delta=float(delta), protocol=protocol, k=k, size=size)


@lru_cache(maxsize=4096)
def _central_epsilon(eps0, n, delta, protocol, k, size):
    """:func:`central_epsilon`, cached: ``mss plan`` and :func:`largest_eps0` ask again for one batch."""
    found = {}
    closed = closed_form(eps0, n, delta)
    if closed is not None:
        found["feldman-closed-form"] = closed
    upper = min(eps0, closed if closed is not None else eps0)
    numerical = _Clones(eps0, n, delta, math.exp(-eps0)).epsilon(delta, upper)
    if numerical is not None:
        found["feldman-numerical"] = numerical
    pairs = clone_pairs(protocol, eps0, k, size) if protocol is not None else {}
    for name, kinds in pairs.items():
        if name == "grr-stronger-clone" and k == 2:
            continue  # the same pair as the blanket's at k = 2
        worst = 0.0
        for p_clone, weight in kinds:  # the largest eps over the kinds of neighbours
            clones = _Clones(eps0=eps0, n=n, delta=delta, p_clone=p_clone, weight=weight)
            eps = clones.epsilon(delta, min(found.values(), default=eps0))
            if eps is None:
                break
            worst = max(worst, eps)
        else:
            found[name] = worst
    kinds = blanket_kinds(protocol, eps0, k, size) if protocol is not None else ()
    if any(2 * p_only + p_both < 1 for _, p_only, p_both in kinds):  # else every draw favours x or x': the blanket pair
        worst = 0.0
        for kind in kinds:
            eps = _Blanket(eps0, n, delta, *kind).epsilon(delta, min(found.values(), default=eps0), BLANKET_RTOL)
            if eps is None:
                break
            worst = max(worst, eps)
        else:
            found[f"{protocol}-blanket-divergence"] = worst
    method = min(found, key=found.get, default=None)
    bounds = tuple(found.items())
    if method is None or found[method] >= eps0 * (1 - USEFUL):
        return Central(eps=eps0, delta=delta, n=int(n), eps0=eps0,
                       method=f"none: no bound below eps0 at n={n} (the release is eps0-DP, delta 0)", bounds=bounds)
    paired = {name: eps for name, eps in found.items() if not name.endswith("-blanket-divergence")}
    kinds = pairs.get(min(paired, key=paired.get, default=None), ((math.exp(-eps0), 1.0),))  # the best clones pair
    pair = kinds[0] if len(kinds) == 1 else None  # HR over several blocks: no one pair dominates
    return Central(eps=found[method], delta=delta, n=int(n), eps0=eps0, method=method, bounds=bounds, pair=pair)


PLD_BINS = 1 << 20  # bins of the composed privacy-loss distribution (its grid step follows from this)


def _loss_distribution(eps0, n, delta, pair, step):
    """The privacy-loss distribution of the clones ``pair`` (p_clone, weight) on a grid of ``step``, rounded up.

    Returns (masses, lo, infinite): masses[i] is the P-probability of a loss in
    ((lo + i - 1) step, (lo + i) step], ``infinite`` the mass put at +infinity: the mass of C and of
    Bin(c, 1/2) left out of the sums (at most TAIL delta each; putting it at +infinity can only
    raise every hockey-stick divergence).  Given C = c the pair is P_c, Q_c of :class:`_Clones`;
    the common branch of a weighted pair (probability 1 - weight, the same law under both values)
    has loss 0.  P and Q are mirror images, so this is also the loss distribution of (Q, P)."""
    from scipy.stats import binom

    p_clone, weight = pair
    clones = _Clones(eps0=eps0, n=n, delta=delta, p_clone=p_clone, weight=weight)
    a = clones.alpha
    m = int(math.ceil(eps0 / step)) + 1
    cut = TAIL * delta / 2
    idx, mass = [], []
    los, his = binom.ppf(cut, clones.c, 0.5), binom.ppf(1 - cut, clones.c, 0.5)
    for c, wc, lo, hi in zip(clones.c, clones.w, los, his):
        lo, hi = (int(lo), int(hi)) if c > 0 else (0, 0)
        x = np.arange(max(lo, 0), min(hi + 1, c + 1) + 1)
        b, b_prev = binom.pmf(x, c, 0.5), binom.pmf(x - 1, c, 0.5)
        P, Q = a * b_prev + (1 - a) * b, a * b + (1 - a) * b_prev
        ok = (P > 0) & (Q > 0)  # both positive for every x in 0..c + 1; underflow left out (to +infinity)
        idx.append(np.ceil(np.log(P[ok] / Q[ok]) / step).astype(np.int64) + m)
        mass.append(weight * wc * P[ok])
    mass = np.concatenate(mass)
    masses = np.bincount(np.concatenate(idx), weights=mass, minlength=2 * m + 1)
    kept = float(mass.sum())
    masses[m] += 1 - weight
    infinite = max(0.0, 1.0 - kept - (1 - weight))
    return masses, -m, infinite


def compose_pld(central, epochs, delta_total):
    """The eps at which ``epochs`` adaptively composed releases, each dominated by ``central``'s pair, are
    (eps, delta_total)-DP, by privacy-loss distributions; None without a pair or when none meets delta_total.

    Koskela, Jalko, Honkela, "Computing tight differential privacy guarantees using FFT", AISTATS
    2020 (and Koskela, Heikkila, Honkela, arXiv 2106.00477, for the shuffle model): the loss of a
    composition is the sum of the losses, so its distribution is the epochs-fold convolution (FFT)
    of one release's.  The adaptive composition is dominated by the product of the dominating pairs
    (Zhu, Dong, Wang, "Optimal accounting of differential privacy via characteristic function",
    AISTATS 2022, Theorem 10).  Losses are rounded up to the grid (the pessimistic estimate: every
    hockey-stick divergence can only grow), mass left out of the sums is put at +infinity, and
    delta(eps) = 1 - (1 - inf)^T + sum over losses L > eps of mass (1 - e^(eps - L)).  The grid
    step is 2 eps0 T / PLD_BINS, so the eps returned is at most about T step above the exact
    composition of the pair (and never below it)."""
    if central.pair is None:
        return None
    return _composed_pld(eps0=central.eps0, n=central.n, delta=central.delta, pair=central.pair, t=int(epochs),
                         delta_total=float(delta_total))


@lru_cache(maxsize=256)
def _composed_pld(eps0, n, delta, pair, t, delta_total):
    """:func:`compose_pld`, cached (a batch of 10^6 at eps0 0.5 takes about 8 s; the dashboard asks again)."""
    step = 2 * eps0 * t / PLD_BINS
    masses, lo, infinite = _loss_distribution(eps0=eps0, n=n, delta=delta, pair=pair, step=step)
    size = t * (len(masses) - 1) + 1
    spectrum = np.fft.rfft(masses, 1 << int(math.ceil(math.log2(size))))
    composed = np.maximum(np.fft.irfft(spectrum ** t)[:size], 0.0)
    losses = (t * lo + np.arange(size)) * step
    base = 1 - (1 - infinite) ** t

    def delta_at(eps):
        above = int(np.searchsorted(losses, eps, side="right"))  # losses ascend: those > eps are a tail
        return base + float(np.dot(composed[above:].copy(), -np.expm1(eps - losses[above:])))

    upper = t * eps0
    if delta_at(upper) > delta_total:
        return None
    low, high = 0.0, upper
    if delta_at(0.0) <= delta_total:
        return 0.0
    while high - low > 1e-6 * upper:
        mid = (low + high) / 2
        low, high = (low, mid) if delta_at(mid) <= delta_total else (mid, high)
    return high


def compose(central, epochs, delta_total=None):
    """The guarantee over ``epochs`` shuffled releases in each of which the device has one report.

    Each epoch's release is (eps, delta)-DP for the device (``central``); the releases compose
    adaptively.  Three bounds, the one with the smaller eps at ``delta_total`` is returned:

    * basic composition: (epochs * eps, epochs * delta);
    * Kairouz, Oh, Viswanath, "The composition theorem for differential privacy", ICML 2015
      (IEEE Trans. Inf. Theory 63(6), 2017): their closed-form corollary of the optimal
      composition theorem, tighter than Dwork, Rothblum, Vadhan (FOCS 2010): for any delta' in
      (0, 1], T-fold adaptive composition is
      (eps_T, 1 - (1 - delta)^T (1 - delta'))-DP with eps_T the least of T eps,
      T eps (e^eps - 1)/(e^eps + 1) + eps sqrt(2 T ln(e + sqrt(T eps^2)/delta')) and
      T eps (e^eps - 1)/(e^eps + 1) + eps sqrt(2 T ln(1/delta')).
    * ``"pld"``: when ``central`` carries its clones pair (:func:`central_epsilon` sets it), the
      pair composed numerically through its privacy-loss distribution (:func:`compose_pld`), at
      ``delta_total`` itself.

    Parameters
    ----------
    central : Central
    epochs : int
        Epochs (releases) the device reports in, >= 1.
    delta_total : float, optional
        The total delta to state the guarantee at; default (epochs + 1) * delta (basic's
        epochs * delta and delta' = delta for the advanced theorem).  delta' is then
        1 - (1 - delta_total) / (1 - delta)^epochs.

    Returns
    -------
    Composed
        ``method`` "basic", "kairouz-oh-viswanath" or "pld".

    Raises
    ------
    ValueError
        epochs < 1, or a delta_total below epochs * delta (basic composition's).
    """
    if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise ValueError(f"epochs must be an integer >= 1, got {epochs!r}")
    t, eps, delta = int(epochs), central.eps, central.delta
    if delta_total is None:
        delta_total = (t + 1) * delta
    if not (t * delta <= delta_total < 1):
        raise ValueError(f"delta_total must be in [epochs * delta, 1) = [{t * delta:g}, 1), got {delta_total!r}")
    best, method = t * eps, "basic"
    d_prime = 1 - (1 - delta_total) / (1 - delta) ** t
    if d_prime > 0 and t > 1:
        drift = t * eps * math.expm1(eps) / (math.exp(eps) + 1)
        kov = drift + eps * math.sqrt(2 * t * min(math.log(math.e + math.sqrt(t) * eps / d_prime),
                                                  math.log(1 / d_prime)))
        if kov < best:
            best, method = kov, "kairouz-oh-viswanath"
    if t > 1:
        pld = compose_pld(central, t, delta_total)
        if pld is not None and pld < best:
            best, method = pld, "pld"
    return Composed(eps=best, delta=float(delta_total), epochs=t, method=method, central=central)


def largest_eps0(eps_c, n, delta, protocol=None, k=None, eps0_max=EPS0_MAX, size=None):
    """The largest eps0 in (0, eps0_max] whose :func:`central_epsilon` is at most ``eps_c``.

    Bisection on eps0 (central_epsilon is non-decreasing in eps0 and at most eps0, so the answer
    is at least min(eps_c, eps0_max)); the bracket's lower end is returned, to 1e-4, so the
    result always meets eps_c.  ``eps0_max`` (default EPS0_MAX = 10) is returned when even it
    meets eps_c.

    Raises
    ------
    ValueError
        For eps_c not positive and finite, and as :func:`central_epsilon`.
    """
    if not (isinstance(eps_c, (int, float)) and 0 < eps_c < math.inf):
        raise ValueError(f"eps_c must be a positive finite number, got {eps_c!r}")
    lo = min(float(eps_c), eps0_max)
    if central_epsilon(eps0=eps0_max, n=n, delta=delta, protocol=protocol, k=k, size=size).eps <= eps_c:
        return float(eps0_max)
    hi = eps0_max
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2
        at_mid = central_epsilon(eps0=mid, n=n, delta=delta, protocol=protocol, k=k, size=size)
        lo, hi = (mid, hi) if at_mid.eps <= eps_c else (lo, mid)
    return lo
