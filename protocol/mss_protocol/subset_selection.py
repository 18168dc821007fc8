"""SubsetSelection (SS) on a domain of size m: probabilities and variance.

SS (Wang et al. 2016; Ye & Barg 2018) reports a subset Z of [m] of size
omega that contains the true value with probability

    p = omega e^eps / (omega e^eps + m - omega),

and any other given value with probability

    q = (p (omega - 1) + (1 - p) omega) / (m - 1) = (omega - p) / (m - 1).

The count estimator ghat(v) = (c(v)/n - q) / (p - q) is unbiased with
variance q(1-q)/(n (p-q)^2) + f(v)(1-p-q)/(n (p-q)).  Averaged over the m
values (sum_v f(v) = 1) this is exactly

    V(m, omega, p) = q(1-q)/(n (p-q)^2) + (1-p-q)/(m n (p-q)),

whatever the distribution -- the figure used throughout for SS's MSE.
"""
import math

import numpy as np


def ss_p(m, omega, eps):
    """Real-valued inclusion probability p of the true value."""
    e = math.exp(eps)
    return omega * e / (omega * e + m - omega)


def ss_q(m, omega, p):
    """Inclusion probability of a given non-true value, from p (any p)."""
    return (omega - p) / (m - 1)


def ss_variance(m, omega, p, n=1.0):
    """Per-value variance of the SS estimator averaged over [m] (units: frequency^2)."""
    p = np.asarray(p, dtype=float)
    q = ss_q(m, omega, p)
    return q * (1 - q) / (n * (p - q) ** 2) + (1 - p - q) / (m * n * (p - q))


def optimal_omega(m, eps, max_omega=None):
    """Subset size minimising :func:`ss_variance` over 1 <= omega <= m//2.

    ``max_omega`` caps the search (used to fit a bit budget).  The optimum
    is close to m / (e^eps + 1) (Wang et al. 2016).
    """
    top = max(1, m // 2)
    if max_omega is not None:
        top = max(1, min(top, max_omega))
    omega = np.arange(1, top + 1)
    e = math.exp(eps)
    p = omega * e / (omega * e + m - omega)
    return int(omega[np.argmin(ss_variance(m, omega, p))])


def rank_bits(m, omega):
    """ceil(log2 C(m, omega)): bits of the enumerative subset code.

    From lgamma for m <= 2^24 (absolute error below 1e-7 bits there; it grows
    with m), with the exact big-integer binomial when log2 C is within 1e-6
    of an integer or m is larger (C(2^20, 280000) alone takes 2 s exactly).
    """
    if m <= 1 << 24:
        bits = (math.lgamma(m + 1) - math.lgamma(omega + 1) - math.lgamma(m - omega + 1)) / math.log(2)
        if abs(bits - round(bits)) > 1e-6:
            return math.ceil(bits)
    return (math.comb(m, omega) - 1).bit_length()
