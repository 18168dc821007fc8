"""The instantaneous layer (IRR) over a one-output protocol's draw, and the composed channel.

RAPPOR (Erlingsson, Pihur, Korolova, "RAPPOR: Randomized Aggregatable
Privacy-Preserving Ordinal Response", CCS 2014, section 3) randomises twice:
a *permanent* randomised response (PRR) y' of the value x, memoized by the
device, then at every report an *instantaneous* one (IRR) of y'.  Here the
PRR is the protocol's own draw (grr, olh given its seed, hr, pgr: one output
y' in [0, n_out), n_out = k, g, K, K) and the IRR is GRR on those n_out
outputs with keep-threshold T1 = privacy.threshold(n_out, 1, eps1), on the
device ``mss_device.point.grr(y', n_out, T1, rng)`` (SPEC.md section 3).

**The composed channel is two-level again.**  With p1 = T1 / 2**30 and
q1 = (1 - p1) / (n_out - 1), the IRR reports y' with probability p1 and each
other output with probability q1, so for every output u

    P[y = u | x] = p1 P[y' = u | x] + q1 (1 - P[y' = u | x]) = q1 + (p1 - q1) P[y' = u | x]   (1)

(total probability over y'), an affine map of the PRR's probability of u
(increasing when p1 > q1; the ratios below are exact whatever its sign).
Every one of these PRRs gives an
output one of two probabilities, "in" (u supports x: u = x for grr, u = H(x)
for olh, u in C_x for hr, u on x's hyperplane for pgr) and "out", so the
composed report has the two probabilities f(in), f(out), f the map (1), and
its worst likelihood ratio is max(f(in)/f(out), f(out)/f(in)) (computed
exactly from the integers: :func:`composed_ratio`).

**Support counts.**  A decoder counting reports that support value x (the
s = |S_x| outputs: grr 1, olh 1 given the seed, hr K/2, pgr c_set) sees, by
(1) summed over the s outputs,

    P[y in S_x] = P[y' in S_x] a + P[y' not in S_x] b,
    a = p1 + (1 - p1)(s - 1)/(n_out - 1),   b = (1 - p1) s / (n_out - 1)      (2)

(y' in S_x stays with probability p1 or moves to one of the s - 1 other
supporting outputs; y' outside moves into one of the s).  So the support
estimator's p and q (for holders and non-holders of x) become
p* = a p + b (1 - p), q* = a q + b (1 - q): :meth:`IRR.compose`.  The
reports of different devices stay independent, so the unbiased estimate
(c/n - q*)/(p* - q*), its variance q*(1-q*)/(n(p*-q*)^2) + f(1-p*-q*)/(n(p*-q*))
and the predicted MSE of :mod:`.support` hold with p*, q*.  For hr,
a + b = 1, so q* = 1/2 = q.

**Privacy.**  One report: the ratio above, at most min(e^eps, e^eps1) (a
mixture over y' of laws within e^eps1 of each other, and post-processing of
an eps-LDP y').  Any number of reports of one memoized y': eps (post-processing
of y').  RAPPOR's paper gives the closed form for its Bloom-filter bits
(Theorems 1-2); these are the one-output analogues.
"""
import math
from fractions import Fraction

import numpy as np

from mss_device.params import IRR
from mss_protocol import privacy
from mss_protocol.limits import check_draw
from mss_protocol.privacy import ONE

PROTOCOLS = IRR  # one output y' in [0, n_out): an IRR applies (the device's list)


class IRR:
    """GRR on ``n`` outputs at ``epsilon``: keep-threshold ``threshold``, keep
    probability ``p1``, each other output ``q1``; ``eps_effective`` its exact worst
    log-ratio p1 (n - 1) / (1 - p1), rounded down.  ``w`` = ln(p1 / q1)."""

    def __init__(self, n, epsilon, threshold=None):
        if n < 2:
            raise ValueError(f"an instantaneous layer needs at least 2 outputs, got {n}")
        check_draw(n - 1, "n_out - 1")  # the device draws one of the n - 1 other outputs
        if why := privacy.epsilon_problem(epsilon):
            raise ValueError(f"irr.{why}")
        self.n, self.epsilon = n, float(epsilon)
        self.threshold = privacy.threshold(n, 1, self.epsilon) if threshold is None else threshold
        self.p1 = self.threshold / ONE
        self.q1 = (1 - self.p1) / (n - 1)
        self.w = math.log(self.p1 / self.q1)
        self.ratio = privacy.ratio(n, 1, self.threshold)  # exact p1 (n - 1) / (1 - p1)
        self.eps_effective = privacy.ln_down(privacy.worst(self.ratio))

    # -- the channel --------------------------------------------------------
    def exact(self):
        """(p1, q1) as Fractions."""
        return Fraction(self.threshold, ONE), Fraction(ONE - self.threshold, ONE * (self.n - 1))

    def point(self, prob):
        """P[y = u] from P[y' = u] (equation (1)); exact for Fractions."""
        p1, q1 = self.exact() if isinstance(prob, Fraction) else (self.p1, self.q1)
        return q1 + (p1 - q1) * prob

    def support_map(self, s):
        """(a, b) of equation (2) for a support of ``s`` outputs, as floats."""
        a = self.p1 + (1 - self.p1) * (s - 1) / (self.n - 1)
        return a, (1 - self.p1) * s / (self.n - 1)

    def compose(self, prob, s):
        """P[y in S] from P[y' in S], |S| = s (equation (2))."""
        a, b = self.support_map(s)
        return a * prob + b * (1 - prob)

    # -- the client ---------------------------------------------------------
    def apply(self, y, rng):
        """One IRR draw of y' with the device's integer code (``rng``: below / chance)."""
        if rng.chance(self.threshold):
            return y
        v = rng.below(self.n - 1)
        return v + (v >= y)

    def perturb(self, y, rng):
        """IRR draws of the outputs ``y``, vectorised (NumPy Generator; same law)."""
        y = np.asarray(y)
        keep = rng.integers(0, ONE, size=y.size) < self.threshold
        other = rng.integers(0, self.n - 1, size=y.size)
        return np.where(keep, y, other + (other >= y))

    def to_dict(self):
        return {"epsilon": self.epsilon, "t": self.threshold, "eps_effective": self.eps_effective}

    def __repr__(self):
        return f"IRR(n={self.n}, epsilon={self.epsilon}, t={self.threshold})"


def composed_ratio(prr_in, prr_out, irr):
    """The worst likelihood ratio max(r, 1/r) of one composed report, r = f(in) / f(out),
    exactly (Fractions): ``prr_in``, ``prr_out`` the PRR's two probabilities of one output."""
    return privacy.worst(irr.point(prr_in) / irr.point(prr_out))
