"""The shuffle model's accountant (mss_protocol.shuffling) against published figures, an exact
brute force of small shuffled GRR batches, and its order properties."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mss_protocol.shuffling import (EPS0_MAX, Central, central_epsilon, closed_form, clones_delta, compose,
                                    largest_eps0)

DELTA = 1e-6


@pytest.mark.parametrize("n,expected", [(10_000, 0.82), (100_000, 0.34)])
def test_closed_form_reproduces_feldman_theorem_3_1_example(n, expected):
    # Feldman, McMillan, Talwar (FOCS 2021) Theorem 3.1 at eps0 = 3, delta = 1e-6 (the figures of
    # /work/shared/docs/privacy-over-time-and-shuffling.md, to the two decimals given)
    assert round(closed_form(3.0, n, DELTA), 2) == expected


def test_closed_form_refused_outside_its_condition():
    # eps0 <= ln(n / (16 ln(2/delta))): n = 10,000, delta = 1e-6 allows eps0 <= 3.763
    assert closed_form(3.76, 10_000, DELTA) is not None and closed_form(3.77, 10_000, DELTA) is None


@pytest.mark.parametrize("n,eps0,expected", [(1000, 1.0, 0.182412), (1000, 3.0, 1.264633), (3000, 2.0, 0.296937)])
def test_numerical_matches_the_authors_procedure(n, eps0, expected):
    # The authors' procedure (apple/ml-shuffling-amplification, computeamplification.py): their
    # onestep() divergence given C = c summed over every c (their step = 1), then their 30-step
    # bisection on eps below delta = 1e-6, run locally on these parameters (a transcription of their
    # functions, not kept in this repository): 0.1824123, 1.2646333, 0.2969369.  Their bisection ends
    # within eps0 * 2^-30 of the root; ours adds at most TAIL * delta of left-out mass: 1e-5 apart.
    c = central_epsilon(eps0, n, DELTA)
    assert c.method == "feldman-numerical" and c.eps == pytest.approx(expected, abs=1e-5)


def test_numerical_divergence_is_the_hockey_stick_of_the_pair():
    # a direct O(n^2) sum of max(0, P - e^eps Q) over (c, x) at n = 200
    eps0, n, eps = 2.0, 200, 0.6
    from scipy import stats

    a, p = math.exp(eps0) / (math.exp(eps0) + 1), math.exp(-eps0)
    total = 0.0
    for c in range(n):
        b = np.append(stats.binom.pmf(np.arange(c + 1), c, 0.5), 0.0)
        b_shift = np.concatenate([[0.0], b[:-1]])  # b(x - 1)
        pc, qc = a * b_shift + (1 - a) * b, a * b + (1 - a) * b_shift
        total += stats.binom.pmf(c, n - 1, p) * np.maximum(pc - math.exp(eps) * qc, 0).sum()
    assert clones_delta(eps, eps0, n, DELTA) == pytest.approx(total, rel=1e-9, abs=DELTA * 1e-4)


def _exact_shuffled_grr_eps(k, e0, others, delta):
    """The exact central eps of a shuffled GRR batch over k = 3 values: the histogram's law under
    the last user's value 0 vs 1 (others' values fixed), by convolution, then bisection on eps."""
    p = math.exp(e0) / (math.exp(e0) + k - 1)
    q = (1 - p) / (k - 1)
    n = len(others) + 1

    def law(last):
        h = np.zeros((n + 1, n + 1))  # counts of outputs 0 and 1
        h[0, 0] = 1.0
        for x in list(others) + [last]:
            pr = [p if y == x else q for y in range(k)]
            h = pr[2] * h + pr[0] * np.roll(h, 1, axis=0) + pr[1] * np.roll(h, 1, axis=1)
        return h

    P, Q = law(0), law(1)
    lo, hi = 0.0, e0
    for _ in range(50):
        mid = (lo + hi) / 2
        d = max(np.maximum(P - math.exp(mid) * Q, 0).sum(), np.maximum(Q - math.exp(mid) * P, 0).sum())
        lo, hi = (lo, mid) if d <= delta else (mid, hi)
    return hi


@pytest.mark.parametrize("e0", [1.0, 2.0, 4.0])
@pytest.mark.parametrize("others", ["all-0", "all-2", "mixed"])
def test_grr_bound_is_above_the_exact_shuffled_grr(e0, others):
    # the blanket bound must hold for every value of the other users: brute force at k = 3, n = 60
    n, k, delta = 60, 3, 1e-3
    vals = {"all-0": [0] * (n - 1), "all-2": [2] * (n - 1), "mixed": [0, 1, 2] * ((n - 1) // 3) + [2] * ((n - 1) % 3)}
    exact = _exact_shuffled_grr_eps(k, e0, vals[others], delta)
    bound = central_epsilon(e0, n, delta, "grr", k)
    assert exact <= bound.eps + 1e-9
    assert bound.eps <= central_epsilon(e0, n, delta).eps  # never worse than the generic bound it falls back on


@pytest.mark.parametrize("n", [1000, 10_000, 100_000])
@pytest.mark.parametrize("eps0", [1.0, 3.0, 5.0])
def test_grr_bound_beats_generic_for_binary_rr(n, eps0):
    # k = 2: every other user is a clone with probability 2/(e^eps0 + 1) > e^-eps0 (module docstring)
    g = central_epsilon(eps0, n, DELTA)
    r = central_epsilon(eps0, n, DELTA, "grr", 2)
    assert r.method == "grr-blanket" and r.eps < g.eps


@pytest.mark.parametrize("n", [1000, 10_000, 100_000])
@pytest.mark.parametrize("eps0", [0.5, 2.0, 3.0, 4.0])
def test_numerical_below_closed_form(n, eps0):
    closed = closed_form(eps0, n, DELTA)
    c = central_epsilon(eps0, n, DELTA)
    assert c.eps <= eps0
    if closed is not None:
        assert c.eps <= closed and c.method == "feldman-numerical"


def test_never_above_eps0_and_says_so():
    c = central_epsilon(3.0, 1, DELTA)
    assert c == Central(3.0, DELTA, 1, 3.0, c.method) and c.method.startswith("none:")
    assert central_epsilon(8.0, 100, DELTA).method.startswith("none:")


@settings(max_examples=40, deadline=None)
@given(eps0=st.floats(0.05, 9.0), n=st.integers(1, 200_000), protocol=st.sampled_from([None, "grr"]),
       k=st.sampled_from([2, 3, 16, 256, 1024]))
def test_monotone_in_n_and_eps0(eps0, n, protocol, k):
    k = k if protocol else None
    c = central_epsilon(eps0, n, DELTA, protocol, k).eps
    assert c <= eps0
    # the search ends within 1e-11 of its bracket of the root: a tolerance far below any real change
    tol = 1e-9
    assert central_epsilon(eps0, 2 * n, DELTA, protocol, k).eps <= c + tol
    assert central_epsilon(eps0 * 1.1, n, DELTA, protocol, k).eps >= c - tol


def test_compose_basic_and_advanced():
    # the closed forms alone: a guarantee without its clones pair (compose_pld: tests/test_shuffle_bounds.py)
    full = central_epsilon(3.0, 100_000, DELTA)  # eps about 0.093
    c = Central(full.eps, full.delta, full.n, full.eps0, full.method)
    one = compose(c, 1)
    assert (one.eps, one.method) == (c.eps, "basic")
    few = compose(c, 2, delta_total=2 * DELTA)  # no delta' left: only basic applies
    assert (few.eps, few.delta, few.method) == (2 * c.eps, 2 * DELTA, "basic")
    many = compose(c, 100)
    assert many.method == "kairouz-oh-viswanath" and many.eps < 100 * c.eps
    assert many.delta == pytest.approx(101 * DELTA)
    # Dwork-Rothblum-Vadhan at delta' = delta is never better than what we return
    drv = math.sqrt(2 * 100 * math.log(1 / DELTA)) * c.eps + 100 * c.eps * math.expm1(c.eps)
    assert many.eps <= drv
    big = central_epsilon(8.0, 1000, DELTA)  # eps = 8: advanced composition cannot help at 5 epochs
    assert compose(big, 5).method == "basic"
    with pytest.raises(ValueError, match="epochs"):
        compose(c, 0)
    with pytest.raises(ValueError, match="delta_total"):
        compose(c, 10, delta_total=DELTA)


@pytest.mark.parametrize("eps,epochs", [(0.1, 50), (0.3, 100), (0.05, 1000)])
def test_advanced_composition_holds_for_the_worst_mechanism(eps, epochs):
    # Kairouz et al.: randomised response is the worst eps-DP mechanism under composition, so the
    # exact delta of T composed eps-RRs at the returned eps must not exceed the stated delta:
    # privacy loss (T - 2i) eps, i ~ Bin(T, 1/(1 + e^eps)), delta(e) = E[(1 - e^(e - L))+]
    from scipy import stats

    c = Central(eps, 1e-12, 1000, 1.0, "test")
    out = compose(c, epochs, delta_total=1e-6)
    assert out.method == "kairouz-oh-viswanath"
    i = np.arange(epochs + 1)
    loss = (epochs - 2 * i) * eps
    exact = np.sum(stats.binom.pmf(i, epochs, 1 / (1 + math.exp(eps))) * np.maximum(0, -np.expm1(out.eps - loss)))
    assert exact <= 1e-6


@pytest.mark.parametrize("eps_c", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("n", [1000, 10_000, 100_000])
def test_largest_eps0_is_the_inverse(eps_c, n):
    e0 = largest_eps0(eps_c, n, DELTA)
    assert eps_c <= e0 <= EPS0_MAX
    assert central_epsilon(e0, n, DELTA).eps <= eps_c
    if e0 < EPS0_MAX:
        assert central_epsilon(e0 + 2e-4, n, DELTA).eps > eps_c


def test_largest_eps0_grr_at_least_generic():
    assert largest_eps0(1.0, 10_000, DELTA, "grr", 2) >= largest_eps0(1.0, 10_000, DELTA)


@pytest.mark.parametrize("call,match", [
    (lambda: central_epsilon(0.0, 10, DELTA), "eps0"),
    (lambda: central_epsilon(1.0, 0, DELTA), "n "),
    (lambda: central_epsilon(1.0, 10, 0.0), "delta"),
    (lambda: central_epsilon(1.0, 10, DELTA, "olh"), "protocol"),
    (lambda: central_epsilon(1.0, 10, DELTA, "grr"), "k"),
    (lambda: largest_eps0(-1.0, 10, DELTA), "eps_c"),
])
def test_bad_input_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
