"""The device randomiser and the vectorised NumPy sampler draw from the exact channel.

Each path's reports are tested against the enumerated channel probabilities
with a chi-square goodness-of-fit test at alpha = 0.001 (fixed seeds; six
tests, so a correct implementation fails with probability < 0.6%).
"""
import random
from collections import Counter

import numpy as np
import pytest
from scipy.stats import chisquare

from channel import enumerate_reports
from mss_device.encoder import encode
from mss_device.randomiser import privatise
from mss_device.rng import ByteRng
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.sampler import sample_counts, sample_reports
from mss_protocol.mss.wire import WireCodec

ALPHA = 0.001
N = 20000
CASES = [(8, 1.0, [5, 7], 3), (9, 3.0, [5, 7, 8], 8), (12, 0.5, [7, 11], 10)]


def _exact(cfg, x):
    codec = WireCodec(cfg)
    return {(r.j, r.subset): float(p) for r, p in
            ((codec.decode(b), p) for b, p in enumerate_reports(cfg, x).items())}


def _gof(samples, exact):
    keys = sorted(exact)
    counts = Counter(samples)
    assert set(counts) <= set(keys), "an output the channel never produces"
    observed = [counts.get(k_, 0) for k_ in keys]
    return chisquare(observed, [exact[k_] * len(samples) for k_ in keys]).pvalue


@pytest.mark.parametrize("k,eps,moduli,x", CASES)
def test_device_randomiser_matches_channel(k, eps, moduli, x):
    cfg = MssConfig.build(k, eps, moduli)
    codec = WireCodec(cfg)
    rng = ByteRng(random.Random(1234).randbytes)
    mark = bytearray(2)
    samples = []
    for _ in range(N):
        j = privatise(cfg, x, rng, mark)
        r = codec.decode(encode(cfg, j, mark, 0, 0))
        samples.append((r.j, r.subset))
    assert _gof(samples, _exact(cfg, x)) > ALPHA


@pytest.mark.parametrize("k,eps,moduli,x", CASES)
def test_numpy_sampler_matches_channel(k, eps, moduli, x):
    cfg = MssConfig.build(k, eps, moduli)
    j, subsets = sample_reports(cfg, np.full(N, x), np.random.default_rng(99))
    assert _gof(list(zip(j.tolist(), subsets)), _exact(cfg, x)) > ALPHA


def test_sample_counts_agrees_with_sample_reports():
    """The count path tallies exactly what the report path would (same seed)."""
    cfg = MssConfig.build(64, 2.0, [59, 61, 63])
    values = np.random.default_rng(5).integers(0, 64, size=3000)
    j, subsets = sample_reports(cfg, values, np.random.default_rng(11))
    n_j, c = sample_counts(cfg, values, np.random.default_rng(11))
    assert n_j.tolist() == np.bincount(j, minlength=cfg.l).tolist()
    want = np.zeros_like(c)
    for jj, z in zip(j, subsets):
        want[cfg.offsets[jj] + np.array(z)] += 1
    assert c.tolist() == want.tolist()


def test_moment_sampler_matches_the_exact_sampler_in_distribution(monkeypatch):
    """Large blocks draw their counts by moments (sampler.MOMENTS_ABOVE).  On
    a block where both paths run (m = 61, omega = 7, about 4,000 users, 400 draws
    each): every count's mean agrees (|z| < 4.5 over 61 cells: false alarm
    < 0.05%), each cell's variance ratio lies within the F(399, 399) quantiles at
    0.001 / 122 (Bonferroni over 61 cells, both tails: false alarm 0.1%), the
    total is exact, and the covariance of two cells' counts agrees within 4.5
    of its standard errors."""
    from scipy.stats import f as f_dist
    from mss_protocol.mss import sampler

    cfg = MssConfig.build(64, 2.0, [61, 3])
    values = np.random.default_rng(0).choice(64, size=8000, p=np.arange(64, 0, -1) / 2080)

    def draws(limit, seed):
        monkeypatch.setattr(sampler, "MOMENTS_ABOVE", limit)
        rng = np.random.default_rng(seed)
        return np.array([sampler.sample_counts(cfg, values, rng)[1][:61] for _ in range(400)])

    exact, moments = draws(1 << 60, 1), draws(0, 2)
    assert moments.dtype.kind == "i" and (moments >= 0).all()
    se = np.sqrt((exact.var(axis=0) + moments.var(axis=0)) / 400)
    assert np.all(np.abs(exact.mean(axis=0) - moments.mean(axis=0)) < 4.5 * se)
    ratio = moments.var(axis=0, ddof=1) / exact.var(axis=0, ddof=1)
    lo, hi = f_dist.ppf([0.001 / 122, 1 - 0.001 / 122], 399, 399)
    assert lo < ratio.min() and ratio.max() < hi
    n_block = moments.sum(axis=1) / cfg.omegas[0]  # one block-0 report adds omega counts
    assert np.all(n_block == np.round(n_block))
    cov = [np.cov(d[:, 5], d[:, 40])[0, 1] for d in (exact, moments)]
    sd = np.sqrt(exact[:, 5].var() * exact[:, 40].var() / 400)
    assert abs(cov[0] - cov[1]) < 4.5 * sd * np.sqrt(2)
