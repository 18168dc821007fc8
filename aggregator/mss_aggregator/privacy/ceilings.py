"""Provable ceilings on single-report reconstruction success.

An attacker sees one report of a device whose value x is drawn from a prior
pi over [k] and outputs a guess; success is P[guess = x].  For any
epsilon-LDP randomiser (mss-protocol-notes.md section 11.4):

* no information: max_x pi(x) (1/k for a uniform prior) -- guessing the mode;
* uniform prior: e^eps / (e^eps + k - 1), attained by k-ary randomised
  response with "guess = report";
* general prior, sorted pi_(1) >= pi_(2) >= ...:
  max_s (pi_(1) + ... + pi_(s)) e^eps / (e^eps + s - 1), attained by
  randomised response restricted to the s most likely values (checked
  against the linear program over all channels in the tests);
* reconstruction robustness for pure eps-DP (Hayes, Mahloujifar & Balle,
  NeurIPS 2023, specialised to pure DP): with kappa = max_x pi(x),
  min(1, e^eps kappa, 1 - e^-eps (1 - kappa)).  It only uses the two-point
  trade-off curve, so it is looser than the Bayes ceiling for k > 2.

T reports of one fixed value, each eps-LDP and drawn afresh, form one
(T eps)-LDP release of x (basic composition): the same ceilings at T eps
bound the longitudinal attack.
"""
import math

import numpy as np


def no_information(prior):
    """Success of guessing the prior's mode without a report: max_x pi(x)."""
    return float(np.max(prior))


def ldp_uniform(k, epsilon):
    """e^eps / (e^eps + k - 1): the best eps-LDP success under a uniform prior."""
    return 1.0 / (1.0 + (k - 1) * math.exp(-epsilon))


def ldp_prior(prior, epsilon):
    """max_s (top-s prior mass) e^eps / (e^eps + s - 1): the tight eps-LDP ceiling."""
    top = np.cumsum(np.sort(np.asarray(prior, dtype=float))[::-1])
    s = np.arange(1, top.size + 1)
    return float(np.max(top / (1.0 + (s - 1) * math.exp(-epsilon))))


def rero(prior, epsilon):
    """Reconstruction-robustness bound for pure eps-DP, kappa = max_x pi(x)."""
    kappa = no_information(prior)
    return float(min(1.0, math.exp(epsilon) * kappa, 1.0 - math.exp(-epsilon) * (1.0 - kappa)))


def bounds(prior, epsilon):
    """All ceilings as a dict (the audit's ``bounds``)."""
    k = len(prior)
    return {"random_guess": 1.0 / k, "no_information": no_information(prior),
            "ldp_uniform": ldp_uniform(k, epsilon), "ldp_prior": ldp_prior(prior, epsilon),
            "rero": rero(prior, epsilon)}
