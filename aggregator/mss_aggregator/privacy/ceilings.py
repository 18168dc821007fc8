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


# When is an attacker's success "weak" privacy?  Judged against what the prior alone
# gives (no_information = max pi): the attacker is right more often than wrong
# (success >= WEAK_SUCCESS), or it has gained at least half the room left above
# the prior (success - no_information >= WEAK_SHARE (1 - no_information)): weak.
# A gain of MODERATE_GAIN (ten percentage points) or more over the prior: moderate.
# Otherwise: strong.  The demo's defaults (k = 16, epsilon 3, zipf:1.1: no
# information 0.32, best attacker 0.51) are weak.
WEAK_SUCCESS = 0.5
WEAK_SHARE = 0.5
MODERATE_GAIN = 0.1


def strength(success, no_info):
    """"weak", "moderate" or "strong" for an attacker's ``success`` given
    ``no_info`` (the prior's mode), by the rule above; None without a success."""
    if success is None:
        return None
    gain = success - no_info
    if success >= WEAK_SUCCESS or gain >= WEAK_SHARE * (1.0 - no_info):
        return "weak"
    return "moderate" if gain >= MODERATE_GAIN else "strong"


def bounds(prior, epsilon):
    """All ceilings as a dict (the audit's ``bounds``)."""
    k = len(prior)
    return {"random_guess": 1.0 / k, "no_information": no_information(prior),
            "ldp_uniform": ldp_uniform(k, epsilon), "ldp_prior": ldp_prior(prior, epsilon),
            "rero": rero(prior, epsilon)}
