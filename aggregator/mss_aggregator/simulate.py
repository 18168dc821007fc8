"""Simulate a fleet: draw values, run the channel, decode, measure the error.

MSE is per item on frequencies, (1/k) sum_x (fhat_x - f_x)^2, with f the
empirical frequencies of the n simulated devices, averaged over trials.
"""
from dataclasses import dataclass

import numpy as np

from mss_aggregator.counts import Counts
from mss_aggregator.decoder import Decoder
from mss_aggregator.distributions import draw
from mss_protocol.sampler import sample_counts


@dataclass
class SimulationResult:
    mse: np.ndarray  # (trials,)
    decode_seconds: np.ndarray  # (trials,)
    truth: np.ndarray  # (k,) frequencies of the last trial
    estimate: object  # Estimate of the last trial


def simulate(cfg, probs, n, trials, seed, post="none", progress=None):
    """Run ``trials`` independent simulations of n devices under ``cfg``."""
    rng = np.random.default_rng(seed)
    decoder = Decoder(cfg)
    mse, secs = [], []
    for _ in range(trials):
        hist = np.zeros(cfg.k, dtype=np.int64)
        counts = Counts(cfg)

        def values():
            for chunk in draw(probs, n, rng):
                hist[:] += np.bincount(chunk, minlength=cfg.k)
                yield chunk

        counts.add_counts(*sample_counts(cfg, values(), rng))
        est = decoder.decode(counts, post=post)
        truth = hist / n
        mse.append(float(np.mean((est.estimate - truth) ** 2)))
        secs.append(est.seconds)
        if progress:
            progress()
    return SimulationResult(np.array(mse), np.array(secs), truth, est)
