"""Simulate a fleet: draw values, run the channel, decode, measure the error.

MSE is per item on frequencies, (1/k) sum_x (fhat_x - f_x)^2, with f the
empirical frequencies of the n simulated devices, averaged over trials.
"""
from dataclasses import dataclass

import numpy as np

from mss_aggregator.distributions import draw


@dataclass
class SimulationResult:
    mse: np.ndarray  # (trials,)
    decode_seconds: np.ndarray  # (trials,)
    truth: np.ndarray  # (k,) frequencies of the last trial
    estimate: object  # Estimate of the last trial


def simulate(protocol, probs, n, trials, seed, post="none", progress=None):
    """Run ``trials`` independent simulations of n devices under ``protocol``
    (:class:`mss_protocol.base.Protocol`; its sampler gets the values in chunks)."""
    rng = np.random.default_rng(seed)
    mse, secs = [], []
    for _ in range(trials):
        hist = np.zeros(protocol.k, dtype=np.int64)

        def values():
            for chunk in draw(probs, n, rng):
                hist[:] += np.bincount(chunk, minlength=protocol.k)
                yield chunk

        est = protocol.decode(protocol.sample_counts(values(), rng), n, post=post)
        truth = hist / n
        mse.append(float(np.mean((est.estimate - truth) ** 2)))
        secs.append(est.seconds)
        if progress:
            progress()
    return SimulationResult(np.array(mse), np.array(secs), truth, est)
