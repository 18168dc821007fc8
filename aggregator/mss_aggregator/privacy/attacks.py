"""Empirical reconstruction attacks run against the real integer clients.

Values are drawn from the prior, each is randomised by the protocol's own
client code (``Channel.client``, the device randomiser for MSS/SS) on a
seeded device byte stream, and the attackers of :mod:`mss_protocol.channel`
guess it back.  Success rates come with 95% Clopper-Pearson intervals.

Longitudinal: one device holds a fixed value and sends T reports; the
Bayes-optimal attacker adds their log-likelihoods (posterior product).
With ``memoize`` the device re-sends its first randomised report (the
firmware's memoize mode), and the attacker, knowing that, uses each
distinct report once.
"""
import random

import numpy as np

from mss_aggregator.privacy.empirical import clopper_pearson
from mss_device.rng import ByteRng


def rate(hits, n):
    """(success rate, [low, high] 95% Clopper-Pearson interval)."""
    low, high = clopper_pearson(int(hits), int(n), 0.05)
    return hits / n, [low, high]


def _log_prior(prior):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(prior, dtype=float))


def single_report(ch, prior, trials, seed=0):
    """Hits of the Bayes-optimal and the paper's attacker over ``trials`` devices:
    {"bayes": hits, "paper": hits, "trials": trials}."""
    rng = np.random.default_rng(seed)
    device = ByteRng(random.Random(seed).randbytes)
    log_prior = _log_prior(prior)
    bayes = paper = 0
    for x in rng.choice(ch.k, size=trials, p=prior):
        report = ch.client(int(x), device)
        bayes += int(np.argmax(log_prior + ch.loglik(report))) == x
        paper += ch.paper_guess(report, rng) == x
    return {"bayes": bayes, "paper": paper, "trials": trials}


def longitudinal(ch, prior, horizons, trials, seed=0, memoize=False):
    """Bayes-optimal hits after T reports, for each distinct T in ``horizons``
    (ascending): array of len(set(horizons)), over ``trials`` devices."""
    rng = np.random.default_rng(seed)
    device = ByteRng(random.Random(seed).randbytes)
    log_prior = _log_prior(prior)
    horizons = sorted(set(horizons))
    hits = np.zeros(len(horizons), dtype=np.int64)
    for x in rng.choice(ch.k, size=trials, p=prior):
        post = log_prior.copy()
        first = ch.client(int(x), device)
        post += ch.loglik(first)
        h = 0
        for t in range(1, horizons[-1] + 1):
            if t > 1 and not memoize:  # a memoized report repeats `first`: nothing new
                post += ch.loglik(ch.client(int(x), device))
            if t == horizons[h]:
                hits[h] += int(np.argmax(post)) == x
                h += 1
    return hits
