"""ProjectiveGeometryResponse: parameters, the fast (DFT) decoder against the
direct count, the integer client against the exact channel, and MSE against
the analytic variance."""
import math
import random
from collections import Counter

import numpy as np
import pytest
from scipy.stats import chisquare

from mss_device.rng import ByteRng
from mss_protocol.pgr import PGR


@pytest.mark.parametrize("k,eps,q,t,K", [(22000, 0.5, 3, 10, 29524), (22000, 2.0, 11, 6, 177156),
                                         (22000, 4.0, 59, 4, 208920), (22000, 5.0, 151, 3, 22953),
                                         (1024, 1.0, 5, 6, 3906)])
def test_parameters(k, eps, q, t, K):
    o = PGR(k, eps)
    assert (o.field, o.t, o.K) == (q, t, K) and o.eps_effective <= eps
    # the sets are hyperplanes: every S_v has c_set points
    assert o.c_set == (q ** (t - 1) - 1) // (q - 1)


@pytest.mark.parametrize("k,eps", [(30, 1.0), (100, 2.0), (50, 0.5), (200, 4.0), (40, 3.0)])
def test_fast_decoder_equals_direct_count(k, eps):
    o = PGR(k, eps)
    values = np.random.default_rng(k).integers(0, k, size=5000)
    hist = o.sample_counts(values, np.random.default_rng(1))
    assert np.array_equal(o.support(hist), o.support_slow(hist))


def test_client_matches_exact_channel():
    """20,000 reports of the integer client for one value vs P[u | x] = s/c_set
    on S_x and (1-s)/(K-c_set) elsewhere: chi-square, alpha = 0.001."""
    o = PGR(12, 1.0)  # q = 5, t = 3, K = 31
    rng = ByteRng(random.Random(7).randbytes)
    seen = Counter(o.randomise(4, rng) for _ in range(20000))
    inside = (o.coords @ o.coords[4]) % o.field == 0
    probs = np.where(inside, o.p / o.c_set, (1 - o.p) / (o.K - o.c_set))
    assert chisquare([seen.get(u, 0) for u in range(o.K)], probs * 20000).pvalue > 0.001
    ratio = (o.p / o.c_set) / ((1 - o.p) / (o.K - o.c_set))
    assert math.log(ratio) == pytest.approx(o.eps_effective, rel=1e-9)


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_mse_matches_analytic_variance(eps):
    o = PGR(1024, eps)
    rng = np.random.default_rng(3)
    values = rng.integers(0, 1024, size=100_000)
    truth = np.bincount(values, minlength=1024) / values.size
    mse = np.mean([np.mean((o.estimate(o.sample_counts(values, rng), values.size)[0] - truth) ** 2)
                   for _ in range(6)])
    assert mse == pytest.approx(o.variance(values.size), rel=0.15)
