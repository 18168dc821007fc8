"""GRR's stronger-clone bound, the binary-RR lower bound and composition by privacy-loss
distributions (issue 45, item 4): every bound the accountant lists holds against a brute force of
small shuffled k-RR batches over every data set of the other users, every bound is above the exact
shuffled binary RR curve, and the composed pair is its exact composition, from above."""
import itertools
import math

import numpy as np
import pytest

from mss_protocol.shuffling import Central, binary_rr_lower_bound, central_epsilon, compose, compose_pld


def _histogram_law(k, e0, values):
    """The law of the shuffled histogram of k-RR reports of ``values``: an array indexed by the
    counts of outputs 0..k-2 (output k-1's count is implied)."""
    p = math.exp(e0) / (math.exp(e0) + k - 1)
    q = (1 - p) / (k - 1)
    n = len(values)
    h = np.zeros((n + 1,) * (k - 1))
    h[(0,) * (k - 1)] = 1.0
    for x in values:
        nxt = (p if x == k - 1 else q) * h
        for y in range(k - 1):
            nxt += (p if x == y else q) * np.roll(h, 1, axis=y)  # no wrap: counts stay below n + 1
        h = nxt
    return h


def _worst_divergence(k, e0, n, eps):
    """max over every multiset of the n - 1 others' values of D_{e^eps} between the last user's 0 and 1."""
    t, worst = math.exp(eps), 0.0
    for others in itertools.combinations_with_replacement(range(k), n - 1):
        P, Q = _histogram_law(k, e0, others + (0,)), _histogram_law(k, e0, others + (1,))
        worst = max(worst, np.maximum(P - t * Q, 0).sum(), np.maximum(Q - t * P, 0).sum())
    return worst


@pytest.mark.parametrize("k,e0,delta,expect", [
    (2, 1.0, 0.05, {"grr-blanket"}),
    (3, 1.0, 0.05, {"grr-blanket", "grr-stronger-clone"}),
    (4, 1.0, 0.05, {"grr-blanket", "grr-stronger-clone"}),
    (4, 2.0, 0.2, {"grr-blanket"}),
])
def test_every_grr_bound_holds_for_every_data_set(k, e0, delta, expect):
    # n = 8: all C(n - 1 + k - 1, k - 1) data sets of the others, the histogram's law exactly
    n = 8
    c = central_epsilon(e0, n, delta, "grr", k)
    names = {name for name, _ in c.bounds}
    assert expect <= names and "feldman-numerical" in names
    for name, eps in c.bounds:
        assert _worst_divergence(k, e0, n, eps) <= delta * (1 + 1e-9), name


def test_binary_rr_lower_bound_is_the_brute_force_curve():
    # the all-zeros data set of the brute force, at n = 8: delta(eps) just above and below the returned eps
    e0, n, delta = 2.0, 8, 0.05
    lb = binary_rr_lower_bound(e0, n, delta)
    P, Q = _histogram_law(2, e0, (0,) * n), _histogram_law(2, e0, (0,) * (n - 1) + (1,))

    def d(eps):
        return max(np.maximum(P - math.exp(eps) * Q, 0).sum(), np.maximum(Q - math.exp(eps) * P, 0).sum())

    assert d(lb) > delta >= d(lb + 1e-8)
    assert lb <= central_epsilon(e0, n, delta, "grr", 2).eps


# the issue's measurements of the exact shuffled 2-RR curve (delta 1e-6), which it compared the old bound with
@pytest.mark.parametrize("e0,n,expected", [(2.0, 1000, 0.323), (3.0, 10_000, 0.169), (4.0, 1000, 1.69),
                                           (6.0, 10_000, 1.31), (8.0, 100_000, 1.01)])
def test_binary_rr_lower_bound_reproduces_the_issue(e0, n, expected):
    assert binary_rr_lower_bound(e0, n, 1e-6) == pytest.approx(expected, abs=0.006)


@pytest.mark.parametrize("e0", [0.5, 2.0, 4.0, 8.0])
@pytest.mark.parametrize("n", [100, 1000, 100_000])
@pytest.mark.parametrize("delta", [1e-6, 1e-8])
def test_every_bound_is_above_the_binary_rr_curve(e0, n, delta):
    lb = binary_rr_lower_bound(e0, n, delta)
    for protocol, k in ((None, None), ("grr", 2), ("grr", 256)):
        c = central_epsilon(e0, n, delta, protocol, k)
        for name, eps in c.bounds:
            if protocol is None or k == 2:  # generic bounds, and 2-RR's own: all must be above it
                assert eps >= lb - 1e-9, (protocol, k, name)


def test_stronger_clone_closes_the_gap_at_large_eps0():
    # the issue's worst cells: the old accountant gave 3.99 and 5.72 for GRR on 256 items (the generic
    # bound); GRR's stronger clone is within 1.13 of the 2-RR curve there (figures of this accountant), and
    # the blanket divergence, which keeps the draws on the other 254 values, is below it (GRR on 256 items
    # is not binary RR: the curve does not bound it; the divergence is checked by brute force at k = 3, 4)
    for e0, n, old, clone, expected in ((4.0, 1000, 3.99, 1.852911, 0.52527), (6.0, 10_000, 5.72, 1.472448, 0.95245)):
        c = central_epsilon(e0, n, 1e-6, "grr", 256)
        assert dict(c.bounds)["grr-stronger-clone"] == pytest.approx(clone, abs=1e-5)
        assert c.method == "grr-blanket-divergence" and c.eps == pytest.approx(expected, abs=1e-4)
        assert central_epsilon(e0, n, 1e-6).eps == pytest.approx(old, abs=0.01)  # the generic bound is unchanged
        assert clone <= 1.13 * binary_rr_lower_bound(e0, n, 1e-6)


def _pair_atoms(e0, n, p_clone, weight):
    """Every (loss, P-mass) of the clones pair for C ~ Bin(n - 1, p_clone), weighted, and its common branch."""
    from scipy import stats

    a = 1 / (1 + math.exp(-e0))
    losses, masses = [0.0], [1 - weight]
    for c in range(n):
        x = np.arange(c + 2)
        b, b_prev = stats.binom.pmf(x, c, 0.5), stats.binom.pmf(x - 1, c, 0.5)
        P, Q = a * b_prev + (1 - a) * b, a * b + (1 - a) * b_prev
        losses += list(np.log(P / Q))
        masses += list(weight * stats.binom.pmf(c, n - 1, p_clone) * P)
    return np.array(losses), np.array(masses)


def _composed_delta(losses, masses, epochs, eps):
    """The exact hockey-stick of the epochs-fold product pair at eps: losses add, every combination."""
    l, m = losses, masses
    for _ in range(epochs - 1):
        l, inv = np.unique(np.round((l[:, None] + losses[None, :]).ravel(), 12), return_inverse=True)
        m = np.bincount(inv, weights=(m[:, None] * masses[None, :]).ravel())
    above = l > eps
    return float(np.dot(m[above], -np.expm1(eps - l[above])))


@pytest.mark.parametrize("e0,n,epochs,bound", [(1.0, 20, 3, (None, None)), (2.0, 16, 3, ("grr", 5)),
                                               (1.0, 20, 3, ("grr", 2))])
def test_pld_is_the_exact_composition_of_the_pair(e0, n, epochs, bound):
    # n = 16-20: every atom of the pair, composed by brute force; the PLD's eps meets delta there and is
    # within 1e-4 of the exact composition's (measured 1-2.3e-5: the grid step times the epochs)
    delta_total = 0.05
    c = central_epsilon(e0, n, delta_total / 4, *bound)
    eps = compose_pld(c, epochs, delta_total)
    losses, masses = _pair_atoms(e0, n, *c.pair)
    assert _composed_delta(losses, masses, epochs, eps) <= delta_total
    assert _composed_delta(losses, masses, epochs, eps - 1e-4) > delta_total


def test_compose_takes_the_pld_where_it_is_smaller():
    # eps0 = 2, n = 10,000 (generic 0.155 an epoch), 10 epochs at delta 11e-6: basic gave 1.55
    c = central_epsilon(2.0, 10_000, 1e-6)
    out = compose(c, 10)
    assert out.method == "pld" and out.eps == pytest.approx(0.4541, abs=1e-3) and out.delta == pytest.approx(11e-6)
    closed = compose(Central(c.eps, c.delta, c.n, c.eps0, c.method), 10)  # no pair: the closed forms only
    assert closed.method == "basic" and closed.eps == pytest.approx(10 * c.eps)
    assert compose(c, 1).eps == c.eps  # one epoch: the batch's own guarantee
