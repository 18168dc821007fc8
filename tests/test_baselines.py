"""GRR and unary encoding (OUE, SUE): exact privacy of their integer clients,
the vectorised samplers against the clients, and MSE against the analytic
variance (within 15% at n = 10^5, k = 1024; with 6 trials the MSE's relative
standard error is below 3%, so the band is a > 5-sigma margin)."""
import math
import random

import numpy as np
import pytest
from scipy.stats import chisquare
from scipy.stats import t as student_t

from channel import enumerate_outputs
from mss_device.rng import ByteRng
from mss_protocol.grr import GRR
from mss_protocol.hr import HadamardResponse
from mss_protocol.olh import OLH
from mss_protocol.unary import UnaryEncoding

ORACLES = [lambda k, e: GRR(k, e), lambda k, e: UnaryEncoding(k, e, "oue"),
           lambda k, e: UnaryEncoding(k, e, "sue")]
IDS = ["grr", "oue", "sue"]
# all support-count oracles, for the MSE test
ALL = ORACLES + [lambda k, e: OLH(k, e), lambda k, e: HadamardResponse(k, e)]
ALL_IDS = IDS + ["olh", "hr"]


@pytest.mark.parametrize("make", ORACLES, ids=IDS)
@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_exact_privacy_of_the_client(make, eps):
    oracle = make(5, eps)
    dists = [enumerate_outputs(lambda rng, x=x: oracle.randomise(x, rng)) for x in range(5)]
    assert all(sum(d.values()) == 1 for d in dists)
    outputs = set().union(*dists)
    worst = max(max(d.get(y, 0) for d in dists) / min(d.get(y, 0) for d in dists) for y in outputs)
    assert math.log(worst) == pytest.approx(oracle.eps_effective, rel=1e-9)
    assert oracle.eps_effective <= eps


@pytest.mark.parametrize("make", ORACLES, ids=IDS)
def test_client_and_sampler_follow_the_channel(make):
    """Support counts of 4,000 reports from the integer client and from the
    vectorised sampler, each against the channel's law: chi-square for GRR
    (alpha 0.001), per-item z-scores of independent binomial sums for unary
    encoding (|z| < 4 on 6 items: false alarm < 0.04%)."""
    oracle = make(6, 1.0)
    rng = ByteRng(random.Random(3).randbytes)
    values = np.random.default_rng(4).integers(0, 6, size=4000)
    reports = [oracle.randomise(int(x), rng) for x in values]
    if oracle.name == "grr":
        client = np.bincount(reports, minlength=6)
    else:
        client = np.array([sum((r[v >> 3] >> (7 - (v & 7))) & 1 for r in reports) for v in range(6)])
    sampled = oracle.sample_counts(values, np.random.default_rng(5))
    n_v = np.bincount(values, minlength=6)
    for counts in (client, sampled):
        if oracle.name == "grr":
            want = n_v * oracle.p + (4000 - n_v) * oracle.q
            assert chisquare(counts, want).pvalue > 0.001
        else:
            mean = n_v * oracle.p + (4000 - n_v) * oracle.q
            sd = np.sqrt(n_v * oracle.p * (1 - oracle.p) + (4000 - n_v) * oracle.q * (1 - oracle.q))
            assert np.max(np.abs(counts - mean) / sd) < 4.0


@pytest.mark.parametrize("make", ALL, ids=ALL_IDS)
@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_mse_matches_analytic_variance(make, eps):
    oracle = make(1024, eps)
    rng = np.random.default_rng(11)
    values = rng.integers(0, 1024, size=100_000)
    truth = np.bincount(values, minlength=1024) / values.size
    mse = np.mean([np.mean((oracle.estimate(oracle.sample_counts(values, rng), values.size)[0]
                            - truth) ** 2) for _ in range(6)])
    assert mse == pytest.approx(oracle.variance(values.size), rel=0.15)



def test_olh_client_supports_with_p_and_q():
    """20,000 integer-client reports for x = 7: the share supporting x is
    Binomial(n, p), the share supporting another item Binomial(n, q)
    (|z| < 4.5 each: false alarm < 1e-5)."""

    o = OLH(64, 2.0)
    rng = ByteRng(random.Random(2).randbytes)
    reports = [o.randomise(7, rng) for _ in range(20000)]
    a, b, y = (np.array(col) for col in zip(*reports))
    for v, prob in ((7, o.p), (30, o.q)):
        hits = int((o.hash(a, b, v) == y).sum())
        assert abs(hits - 20000 * prob) / math.sqrt(20000 * prob * (1 - prob)) < 4.5



@pytest.mark.parametrize("k,eps", [(20, 1.0), (20, 4.0), (64, 2.0)])
def test_hr_client_and_fast_transform(k, eps):
    """The integer client lands in S_x with probability s (z-test, |z| < 4.5:
    false alarm < 1e-5 per cell), and the block Walsh-Hadamard support equals
    the direct count over the channel's support sets (one block at eps 1,
    several at 2 and 4)."""
    o = HadamardResponse(k, eps)
    assert (o.blocks == 1) == (eps == 1.0)
    from scipy.linalg import hadamard

    members = o.channel().members(np.arange(o.K))  # (K, k): output u supports item v
    block, row = np.divmod(np.arange(k), o.b - 1)  # item v: row v mod (b-1) + 1 of block v // (b-1)
    direct = np.kron(np.eye(o.blocks, dtype=int), hadamard(o.b).T) == 1  # (K, B b): +1 entries per block
    assert np.array_equal(members, direct[:, block * o.b + row + 1])
    rng = ByteRng(random.Random(4).randbytes)
    hits = sum(members[o.randomise(5, rng), 5] for _ in range(20000))
    assert abs(hits - 20000 * o.p) / math.sqrt(20000 * o.p * (1 - o.p)) < 4.5
    hist = o.sample_counts(np.random.default_rng(0).integers(0, k, size=3000), np.random.default_rng(1))
    assert np.array_equal(o.support(hist), members.T.astype(int) @ hist)


HR_N = 2000


@pytest.mark.parametrize("k", [2, 4, 16, 64, 1024])
@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0, 8.0])
def test_hr_unbiased_with_the_predicted_variance(k, eps):
    """HR (one block at eps <= 1, several above) on a fixed Zipf(1.1) population of
    2,000 devices, T = max(200, 4000 / k) trials of the vectorised sampler (the device's
    law: tests/test_device_protocols.py):

    * unbiased: every item's mean estimate is within 5 predicted standard errors
      sqrt(unit_item_variance / (n T)) of the truth (a normal tail of 5.7e-7 per item;
      4,440 items over the 20 cells: false alarm < 3e-3);
    * the variance formula: the mean per-trial MSE is within t_{T-1}(1 - 0.5e-5) of its
      trials' standard errors of ``variance(n, truth)`` (1e-5 per cell), and that
      tolerance is at most 15% of it, so a formula off by 15% fails."""
    o = HadamardResponse(k, eps)
    w = 1.0 / np.arange(1, k + 1) ** 1.1
    values = np.repeat(np.arange(k), np.floor(w / w.sum() * HR_N).astype(int))
    truth = np.bincount(values, minlength=k) / values.size
    trials = max(200, 4000 // k)
    rng = np.random.default_rng([k, int(eps * 2)])
    est = np.array([o.estimate(o.sample_counts(values, rng), values.size)[0] for _ in range(trials)])
    se = np.sqrt(o.unit_item_variance(truth) / (values.size * trials))
    assert np.all(np.abs(est.mean(axis=0) - truth) <= 5 * se)
    mse = np.mean((est - truth) ** 2, axis=1)
    predicted = o.variance(values.size, truth)
    tol = student_t.ppf(1 - 0.5e-5, trials - 1) * mse.std(ddof=1) / np.sqrt(trials)
    assert tol <= 0.15 * predicted, "too few trials to test"
    assert abs(mse.mean() - predicted) <= tol, (mse.mean() / predicted, tol / predicted)
