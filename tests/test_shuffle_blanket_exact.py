"""The blanket divergence (issue 45, item 4): where every draw favours one of the two values (binary RR)
it is the blanket clones pair, computed exactly there, so it measures the cost of the buckets and stays
above the exact shuffled binary-RR curve; it is monotone, never above eps0, never above the revealed
blanket, and the guarantee it gives composes through a clones pair that dominates the batch alone.
(Validity against every data set at small n: tests/test_shuffle_blanket.py and test_shuffle_bounds.py.)"""
import pytest

from mss_protocol.shuffling import (binary_rr_lower_bound, blanket_epsilon, central_epsilon, clone_pairs, clones_epsilon,
                                    compose, compose_pld)


@pytest.mark.parametrize("e0,n", [(0.5, 1_000_000), (2.0, 1000), (3.0, 100_000), (4.0, 1_000_000), (8.0, 100_000)])
def test_binary_rr_is_the_blanket_pair_to_the_buckets(e0, n):
    # k = 2: no draw favours neither value, the divergence is the grr-blanket pair's; the buckets of M and
    # N2 may only raise it, measured at most 0.38% on the 70-cell grid (eps0 0.5-1, n = 10^6)
    lb = binary_rr_lower_bound(e0, n, 1e-6)
    pair = dict(central_epsilon(e0, n, 1e-6, "grr", 2).bounds)["grr-blanket"]
    divergence = blanket_epsilon(e0, n, 1e-6, "grr", 2)
    assert lb <= divergence
    assert pair * (1 - 1e-5) <= divergence <= pair * 1.005  # (the pair counts TAIL delta it leaves out)


PROTOCOLS = [("grr", 256, None), ("ss", 16, 4), ("oue", 256, None), ("sue", 256, None), ("hr", 256, 512),
             ("hr", 256, 16)]


@pytest.mark.parametrize("protocol,k,size", PROTOCOLS)
def test_monotone_below_eps0_and_below_the_revealed_blanket(protocol, k, size):
    for e0, n in ((1.0, 1000), (8.0, 100_000)):
        eps = blanket_epsilon(e0, n, 1e-6, protocol, k, size)
        assert eps is not None and eps <= e0
        assert blanket_epsilon(e0, 2 * n, 1e-6, protocol, k, size) <= eps * (1 + 1e-6)
        assert blanket_epsilon(e0 * 1.1, n, 1e-6, protocol, k, size) >= eps * (1 - 1e-6)
        for name, kinds in clone_pairs(protocol, e0, k, size).items():  # revealing the shared draws can only raise it
            revealed = [clones_epsilon(e0, n, 1e-6, *pair) for pair in kinds]
            assert None in revealed or eps <= max(revealed) * (1 + 1e-6), name


def test_composition_takes_the_best_clones_pair():
    # GRR on 256 items, eps0 4, n 1,000: the divergence gives 0.525 for one batch; over 10 batches the
    # stronger clone's pair (1.853 a batch) is composed, which dominates each batch on its own
    c = central_epsilon(4.0, 1000, 1e-6, "grr", 256)
    assert c.method == "grr-blanket-divergence"
    assert c.pair == clone_pairs("grr", 4.0, 256)["grr-stronger-clone"][0]
    out = compose(c, 10)
    assert c.eps < out.eps <= 10 * c.eps and (out.method != "pld" or out.eps == compose_pld(c, 10, out.delta))
    assert compose(c, 1).eps == c.eps
