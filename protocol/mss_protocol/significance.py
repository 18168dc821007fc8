"""Which estimates are signal: one-sided detection and simultaneous intervals.

Every decoder's unbiased estimate is approximately normal, fhat_v ~
N(f_v, se_v^2), with se_v the standard error it reports.  An item is
*detected* (distinguishable from 0) when the one-sided test of H0: f_v = 0
at level ``alpha`` rejects,

    fhat_v > z_{1-alpha} se_v,

so a fleet in which no device holds v flags it with probability at most
alpha, and noise alone flags about k alpha of k items (``expected_false``).
Over all k items together an item is detected when the lower end of its
simultaneous 95% interval is above 0 (the mark agrees with the interval
shown), a one-sided test at 2.5% / k: noise alone flags any item with
probability at most 2.5%.

*Simultaneous* statements over all k items use Bonferroni: the per-item
level alpha / k (one-sided detection) or alpha / (2k) per tail (two-sided
intervals).  Bonferroni holds whatever the correlation between items.  A
max-type bound (the 95% quantile of max_v |fhat_v - f_v| / se_v) would be
smaller where the items' statistics are far from independent normals:
simulated at k = 64, n = 2,000 (1,500 fleets each) it is 3.03 for GRR at
eps = 2 (discrete counts of ~28 reports an output), 3.21 for MSS, 3.32 for
OLH, 3.33 for OUE against Bonferroni's 3.36, whose coverage was 0.99, 0.97,
0.96 and 0.95 there: valid, conservative by up to 10% of the half-width.

Power: with se(f) the standard error at true frequency f (it grows with f),
the test above finds an item of frequency f with probability
Phi(f / se(f) - z_{1-alpha}); it reaches ``POWER`` at the detectable
frequency f* solving f* = (z_{1-alpha} + z_{POWER}) se(f*)
(:func:`detectable`).
"""
import math

import numpy as np
from scipy.special import ndtri

ALPHA = 0.05  # one-sided level of the detection test
LEVEL = 0.95  # two-sided confidence of the intervals
POWER = 0.80  # the detectable frequency is found with this probability
METHOD = "bonferroni"  # the simultaneous method, as the views name it


def z_detect(alpha=ALPHA):
    """The one-sided critical value of one item: z_{1-alpha}."""
    return float(ndtri(1 - alpha))


def z_interval(k=1, level=LEVEL, simultaneous=False):
    """The two-sided interval's half-width in standard errors: z_{1-(1-level)/2},
    or z_{1-(1-level)/(2k)} for intervals covering all k items together."""
    tail = (1 - level) / 2
    return float(ndtri(1 - (tail / k if simultaneous else tail)))


def detected(raw, stderr, alpha=ALPHA, simultaneous=False):
    """Boolean (k,): fhat_v > z se_v with z = z_{1-alpha}, or (``simultaneous``) the
    simultaneous interval's z (module docstring); an infinite SE detects nothing."""
    raw, stderr = np.asarray(raw, float), np.asarray(stderr, float)
    z = z_interval(raw.size, simultaneous=True) if simultaneous else z_detect(alpha)
    with np.errstate(invalid="ignore"):
        return np.isfinite(stderr) & (raw > z * stderr)


def expected_false(k, alpha=ALPHA, simultaneous=False):
    """Items that noise alone flags in a fleet holding none of them: k alpha
    (simultaneous: the chance of any, at most (1 - LEVEL) / 2)."""
    return (1 - LEVEL) / 2 if simultaneous else k * alpha


def _z2(alpha, power):
    return (float(ndtri(1 - alpha)) + float(ndtri(power))) ** 2


def detectable(u0, u1, n, u2=0.0, alpha=ALPHA, power=POWER):
    """The smallest frequency found with probability ``power`` by the level-alpha
    test at n reports, when one report's variance of the item's estimate is
    u(f) = u0 + u1 f + u2 f^2 (n se(f)^2: affine in f for the support-count
    protocols, quadratic for MSS, whose block assignment adds f-squared terms).

    Solves n f^2 = z^2 u(f), z = z_{1-alpha} + z_{power}: with a = n - z^2 u2,
    f = (z^2 u1 + sqrt(z^4 u1^2 + 4 a z^2 u0)) / (2 a); inf when a <= 0 (no
    frequency is detected).  Arrays broadcast.
    """
    z2 = _z2(alpha, power)
    u0, u1, a = np.asarray(u0, float), np.asarray(u1, float), n - z2 * np.asarray(u2, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (z2 * u1 + np.sqrt((z2 * u1) ** 2 + 4 * a * z2 * u0)) / (2 * a)
    return np.where(a > 0, f, np.inf)


def devices_for(f, u0, u1, u2=0.0, alpha=ALPHA, power=POWER):
    """Reports needed to detect frequency f (the inverse of :func:`detectable`):
    n = z^2 u(f) / f^2, rounded up."""
    return math.ceil(_z2(alpha, power) * (u0 + u1 * f + u2 * f * f) / f ** 2)
