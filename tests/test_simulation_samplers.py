"""The host-side simulation samplers draw from their protocol's exact channel.

These samplers are not device code: they simulate many devices' reports for
the statistical tests, drawing directly what the device reaches by rejection
or by loops.  Each is checked against the closed-form law of one report
with a chi-square goodness-of-fit test at alpha = 0.001 (fixed seeds; a
correct sampler fails one case with probability 0.001, the module's
false-alarm rate is below 1%).
"""
import numpy as np
import pytest
from scipy.stats import chisquare

from mss_protocol.mss.sampler import _fillers
from mss_protocol.olh import OLH
from mss_protocol.pgr import PGR

ALPHA = 0.001


# (k, eps): q = 5, t = 3 / q = 3, t = 4 / q = 11, t = 4 / q = 59, t = 2 and t = 3
@pytest.mark.parametrize("k,eps", [(12, 1.0), (30, 0.5), (200, 2.0), (16, 4.0), (64, 4.0)])
def test_pgr_sample_chunk_matches_channel(k, eps):
    """n reports of item x vs P[u | x] = s / c_set on S_x, (1 - s)/(K - c_set)
    elsewhere; n gives every cell an expected count of at least 25."""
    o = PGR(k, eps)
    x = k - 1  # the last item: a lead position other than the first when t > 2
    p_in, p_out = o.p / o.c_set, (1 - o.p) / (o.K - o.c_set)
    n = int(25 / min(p_in, p_out)) + 1
    hist = o.sample_chunk(np.full(n, x), np.random.default_rng(k))
    inside = (o.coords @ o.coords[x]) % o.field == 0
    assert hist.sum() == n
    assert chisquare(hist, np.where(inside, p_in, p_out) * n).pvalue > ALPHA


@pytest.mark.parametrize("k,eps", [(30, 1.0), (100, 2.0), (50, 0.5), (200, 4.0), (40, 3.0), (1024, 4.0)])
def test_pgr_support_paths_equal_direct_count(k, eps):
    """Both decoders of C_v (each item's c_set points, the DFT) equal the O(k K) count."""
    o = PGR(k, eps)
    hist = np.random.default_rng(k).integers(0, 50, size=o.K)
    want = o.support_slow(hist)
    assert np.array_equal(np.asarray(hist)[o._members].sum(axis=1), want)
    assert np.array_equal(o._support_dft(hist), want)


@pytest.mark.parametrize("s", range(7))
def test_mss_fillers_are_uniform_subsets(s):
    """mss.sampler._fillers: each row is a uniform s-subset of [m] without its
    residue, both by Floyd (s <= 3) and by Floyd's complement (s > 3), m = 8:
    chi-square over the C(7, s) subsets, alpha = 0.001, for residues 0, 3 and 7."""
    from math import comb

    m, n = 8, 7000
    rng = np.random.default_rng(100 + s)
    for r in (0, 3, 7):
        rows = _fillers(np.full(n, r), s, m, rng)
        assert (rows.sum(axis=1) == s).all() and not rows[:, r].any()
        codes = rows @ (1 << np.arange(m))  # each subset as a bitmask
        seen = np.unique(codes, return_counts=True)[1]
        assert seen.size == comb(m - 1, s)  # every subset drawn (expected count >= 200 each)
        if seen.size > 1:
            assert chisquare(seen).pvalue > ALPHA


@pytest.mark.parametrize("k,eps", [(1024, 1.0), (OLH.P, 4.0)])
def test_olh_tally_equals_the_int64_hash(k, eps):
    """OLH.tally (int32, in place) counts exactly what the int64 hash gives, up to
    k = P, where a v + b is largest (a = P - 1 included)."""
    o = OLH(k, eps)
    rng = np.random.default_rng(k)
    a = np.append(rng.integers(1, o.P, size=300), o.P - 1)
    b = np.append(rng.integers(0, o.P, size=300), o.P - 1)
    y = rng.integers(0, o.g, size=a.size)
    v = np.arange(k, dtype=np.int64)
    want = (((a[:, None] * v + b[:, None]) % o.P) % o.g == y[:, None]).sum(axis=0)
    assert np.array_equal(o.tally((a, b, y), chunk=1 << 20), want)
