"""The estimators of mss_protocol.postprocess and tools/estimators.py: their defining properties.

* clip, simplex and mle return points of the probability simplex;
* simplex is Norm-Sub (Wang et al. 2020), checked against Wang's iterative
  algorithm written out here, and is never farther from a point of the
  simplex than its input (projection onto a convex set);
* mle on the exact expected counts of a known f returns f (the fixed point
  of IBU), for the support-count protocols, SS and MSS (several blocks);
* on GRR's exact channel, the textbook IBU iteration written out here
  converges to mle;
* mle is consistent: its mean over trials lies within 4.5 standard errors
  of the truth for every item (false-alarm rate stated at the test).
"""
import numpy as np
import pytest

import estimators
from mss_protocol import postprocess, registry
from mss_protocol.counts import Counts

RNG_SEED = 20260


def norm_sub(v):
    """Wang et al. (2020), Norm-Sub: zero the negatives, spread the missing mass
    evenly over the positives, repeat until none turns negative."""
    f = np.asarray(v, dtype=float).copy()
    pos = np.ones(f.size, dtype=bool)
    while True:
        f[pos] += (1.0 - f[pos].sum()) / pos.sum()
        if (f[pos] >= 0).all():
            return np.where(pos, f, 0.0)
        pos &= f > 0
        f[~pos] = 0.0


def on_simplex(f):
    return np.all(f >= 0) and abs(f.sum() - 1) < 1e-9


@pytest.mark.parametrize("k", [1, 2, 7, 300])
def test_clip_and_simplex_land_on_the_simplex(k):
    rng = np.random.default_rng([RNG_SEED, k])
    for scale in (0.01, 1.0, 30.0):
        v = rng.normal(1 / k, scale, size=k)
        assert on_simplex(postprocess.clip(v)) and on_simplex(postprocess.simplex(v))


@pytest.mark.parametrize("k", [2, 5, 64, 1000])
def test_simplex_is_norm_sub_and_nonexpansive(k):
    rng = np.random.default_rng([RNG_SEED, 1, k])
    for _ in range(20):
        v = rng.normal(1 / k, 3 / k, size=k) * rng.choice([1, 10])
        p = postprocess.simplex(v)
        np.testing.assert_allclose(p, norm_sub(v), atol=1e-12)
        f = rng.dirichlet(np.full(k, 0.3))  # any point of the simplex (a true distribution)
        assert np.linalg.norm(p - f) <= np.linalg.norm(v - f) + 1e-12


def expected_support_counts(proto, f, n):
    """c_v = n (q + (p - q) f_v): the support counts' expectation (float)."""
    return n * (proto.q + (proto.p - proto.q) * f)


@pytest.mark.parametrize("name", ["grr", "rappor", "sue", "olh"])
@pytest.mark.parametrize("k", [3, 40])
def test_mle_fixed_point_support_protocols(name, k):
    f = np.random.default_rng([RNG_SEED, 2, k]).dirichlet(np.ones(k))
    f[0] = 0.0  # a boundary point too
    f /= f.sum()
    proto = registry.make(name, k, 1.5)
    np.testing.assert_allclose(estimators.mle(proto, expected_support_counts(proto, f, 1000), 1000),
                               f, atol=1e-9)


@pytest.mark.parametrize("name,k", [("ss", 12), ("mss", 30)])
def test_mle_fixed_point_residue_counts(name, k):
    """Expected per-block class counts of a known f at n_j = 10^10 (rounding to
    integers moves each rate by < 1e-10): mle returns f."""
    proto = registry.make(name, k, 2.0)
    cfg = proto.cfg
    f = np.random.default_rng([RNG_SEED, 3, k]).dirichlet(np.ones(k))
    n_j = np.full(cfg.l, 10 ** 10)
    rep = cfg.moduli
    rate = np.repeat(cfg.q, rep) + np.repeat(cfg.p - cfg.q, rep) * (proto.decoder.A @ f)
    counts = Counts(cfg, n_j, np.rint(np.repeat(n_j, rep) * rate))
    if name == "mss":
        assert cfg.l > 1  # the projected-gradient path
    np.testing.assert_allclose(estimators.mle(proto, counts, None), f, atol=2e-6)


def test_mle_is_ibu_limit_on_grr():
    """The textbook IBU on GRR's channel matrix P[y | x] (p on the diagonal, q
    off it), f <- f * P^T (c/n / (P f)), converges to mle."""
    k, n = 6, 3000
    proto = registry.make("grr", k, 2.0)
    rng = np.random.default_rng([RNG_SEED, 4])
    values = rng.choice(k, size=n, p=[0.4, 0.3, 0.2, 0.06, 0.04, 0.0])
    counts = proto.sample_counts(values, rng)
    P = np.full((k, k), proto.q) + (proto.p - proto.q) * np.eye(k)
    f = np.full(k, 1 / k)
    for _ in range(20000):
        f = f * (P.T @ (counts / n / (P @ f)))
    # IBU reaches a zero of the MLE only asymptotically (f_x shrinks geometrically)
    np.testing.assert_allclose(estimators.mle(proto, counts, n), f, atol=1e-4)


@pytest.mark.parametrize("name", ["grr", "rappor", "ss", "hr"])
def test_mle_lands_on_simplex_from_samples(name):
    k, n = 50, 400
    proto = registry.make(name, k, 1.0)
    rng = np.random.default_rng([RNG_SEED, 5])
    counts = proto.sample_counts(rng.choice(k, size=n), rng)
    assert on_simplex(estimators.mle(proto, counts, n))


def test_mle_is_consistent():
    """GRR, k = 8, every f_v >= 0.06 and n = 20,000: the clipping bound is ~9
    standard errors away, so the MLE is the unbiased estimate rescaled and its
    mean over T = 20 trials is within 4.5 SE of the truth (SE from the spread of
    the trials).  False-alarm rate: 8 items x P(|t_19| > 4.5) = 8 x 2.4e-4 < 0.2%."""
    k, n, trials = 8, 20_000, 20
    proto = registry.make("grr", k, 2.0)
    rng = np.random.default_rng([RNG_SEED, 6])
    p = np.array([0.3, 0.2, 0.12, 0.1, 0.08, 0.07, 0.07, 0.06])
    values = np.repeat(np.arange(k), np.rint(p * n).astype(int))
    truth = np.bincount(values, minlength=k) / values.size
    est = np.array([estimators.mle(proto, proto.sample_counts(values, rng), values.size)
                    for _ in range(trials)])
    se = est.std(axis=0, ddof=1) / np.sqrt(trials)
    assert np.all(np.abs(est.mean(axis=0) - truth) <= 4.5 * se)


def test_apportion_and_bootstrap_shape():
    f = np.array([0.5, 0.25, 0.125, 0.125 - 1e-9, 1e-9])
    split = estimators.apportion(f, 37)
    assert split.sum() == 37 and np.all(np.abs(split - 37 * f) < 1)
    proto = registry.make("grr", 5, 1.0)
    rng = np.random.default_rng([RNG_SEED, 7])
    counts = proto.sample_counts(rng.choice(5, size=200), rng)
    iv = estimators.bootstrap(proto, counts, 200, "simplex", draws=30, rng=rng)
    for lo, hi in iv:
        assert lo.shape == (5,) and np.all(lo <= hi) and np.all((lo >= 0) & (hi <= 1))


def test_apply_refuses_count_choices():
    with pytest.raises(ValueError):
        postprocess.apply(np.ones(3) / 3, "mle")
    assert postprocess.DEFAULT_VIEW in postprocess.CHOICES  # a view applies to the unbiased estimate alone
