"""The predicted per-item MSE of every protocol is what a simulation measures.

For each protocol of the registry at k in {4, 16, 64, 1024} and epsilon in
{1, 4}, T trials of a fixed population of n devices are privatised by the
protocol's vectorised sampler (tested against the real clients elsewhere)
and decoded; the mean per-item MSE of the unbiased estimate against the
population's own frequencies must agree with ``variance(n, prior)``.

Tolerance: the mean of T trial MSEs has standard error s / sqrt(T) (s, the
trials' standard deviation); a cell fails when |mean - predicted| exceeds
t_{T-1}(1 - 1e-5 / 2) standard errors, so the 67 cells raise a false alarm
with probability below 7e-4 (T is extended once where the first trials are
too variable for the bound below; the 4 skewed HR cells add 4e-5).  A prediction off by 15% fails: with these T
the tolerance is at most 15% of the MSE in every cell (asserted).
"""
import numpy as np
import pytest
from scipy.stats import t as student_t

from mss_aggregator.distributions import parse
from mss_protocol import registry

N = 5000
CELLS = [(k, eps) for k in (4, 16, 64, 1024) for eps in (1.0, 4.0)]


def _population(probs):
    counts = np.floor(probs * N).astype(int)
    counts[0] += N - counts.sum()
    return np.repeat(np.arange(probs.size), counts)


def _check(proto, values, trials, seed):
    """``trials`` first; where the trials vary more than that allows (errors
    correlated across items, e.g. PGR), as many more as the 15% bound needs."""
    truth = np.bincount(values, minlength=proto.k) / values.size
    rng = np.random.default_rng(seed)
    predicted = proto.variance(values.size, truth)

    def run(t):
        return [np.mean((proto.decode(proto.sample_counts(values, rng), values.size).raw - truth) ** 2)
                for _ in range(t)]

    def tolerance(mse):
        return student_t.ppf(1 - 0.5e-5, len(mse) - 1) * np.std(mse, ddof=1) / np.sqrt(len(mse))

    mse = run(trials)
    more = int(np.ceil(len(mse) * (tolerance(mse) / (0.12 * predicted)) ** 2)) - len(mse)
    mse += run(max(0, min(more, 20 * trials)))
    tol = tolerance(mse)
    assert tol <= 0.15 * predicted, "too few trials to test"
    assert abs(np.mean(mse) - predicted) <= tol, (np.mean(mse) / predicted, tol / predicted)


@pytest.mark.parametrize("k,eps", CELLS)
@pytest.mark.parametrize("name", registry.AVAILABLE)
def test_predicted_mse_matches_simulation(name, k, eps):
    proto = registry.make(name, k, eps)
    _check(proto, _population(parse("uniform", k)), max(30, 4000 // k), seed=k + int(eps))


@pytest.mark.parametrize("k,eps", [(16, 4.0), (64, 4.0), (16, 1.0)])
def test_mss_prediction_holds_for_a_skewed_population(k, eps):
    """The block-assignment term depends on the data: checked at a Zipf population."""
    _check(registry.make("mss", k, eps), _population(parse("zipf:1.1", k)), 4000 // k, seed=k)


@pytest.mark.parametrize("k,eps", [(16, 4.0), (64, 4.0), (1024, 4.0), (64, 2.0)])
def test_hr_prediction_holds_for_a_skewed_population(k, eps):
    """HR's variance depends on the block totals F_j (mss_protocol.hr): checked at a
    Zipf population, with several blocks in every cell."""
    proto = registry.make("hr", k, eps)
    assert proto.blocks > 1
    _check(proto, _population(parse("zipf:1.1", k)), max(30, 4000 // k), seed=k)
