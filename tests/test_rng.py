"""The device's two randomness primitives are exactly uniform / exactly T/2**30."""
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mss_device.rng import ByteRng


def _chunks(*parts):
    """A byte source returning ``parts`` one per read."""
    it = iter(parts)
    return lambda n: next(it)


def _accepted(n):
    """Map every possible first draw of below(n) to its result (None = rejected)."""
    nbytes = 1 if n <= 256 else 2
    out = []
    for x in range(256 ** nbytes):
        first = x.to_bytes(nbytes, "big")
        # the first draw is x; a rejected draw reads again (zeros, accepted)
        rng = ByteRng(_chunks(first, bytes(nbytes)), chunk=nbytes)
        value = rng.below(n)
        out.append(value if rng.consumed == nbytes else None)
    return out


@pytest.mark.parametrize("n", [2, 3, 5, 7, 100, 255, 256, 257, 1000, 1023, 22000, 65536])
def test_below_is_exactly_uniform(n):
    results = _accepted(n)
    counts = Counter(v for v in results if v is not None)
    assert set(counts) == set(range(n))
    assert len(set(counts.values())) == 1  # every value equally many accepted draws
    assert sum(counts.values()) >= len(results) / 2  # acceptance >= 1/2


def test_below_one_reads_nothing():
    assert ByteRng(lambda k: pytest.fail("read called")).below(1) == 0


def test_reserve_and_exhaustion():
    rng = ByteRng(_chunks(b"\x01\x02", b"\x03", b""))
    rng.reserve(3)
    assert [rng.below(256) for _ in range(3)] == [1, 2, 3] and rng.consumed == 3
    with pytest.raises(EOFError):
        rng.below(256)


@pytest.mark.parametrize("n", [0, (1 << 23) + 1])
def test_below_rejects_out_of_range(n):
    with pytest.raises(ValueError):
        ByteRng().below(n)


def test_chance_is_exactly_t_over_2_30():
    # u depends on b0 & 0x3F and b1..b3; each of the 2**30 values of u comes
    # from exactly 4 byte strings, so P[u < T] = T / 2**30 exactly.  Check the
    # map on all first bytes with the low bytes at their extremes.
    for b0 in range(256):
        lo = ByteRng(lambda k, b0=b0: bytes([b0, 0, 0, 0]))
        hi = ByteRng(lambda k, b0=b0: bytes([b0, 255, 255, 255]))
        base = (b0 & 0x3F) << 24
        assert lo.chance(base + 1) and not lo.chance(base)
        assert hi.chance(base + (1 << 24)) and not hi.chance(base + (1 << 24) - 1)


@given(st.integers(1, 1 << 23), st.binary(min_size=64, max_size=64))
def test_below_in_range(n, data):
    stream = iter(data * 64)
    value = ByteRng(lambda k: bytes(next(stream) for _ in range(k))).below(n)
    assert 0 <= value < n


def test_floyd_draw_from_one_value_reads_nothing():
    """SS at k = 2 (m = 2, omega = 1): when x is not kept, Floyd's only step draws below(1),
    which reads no byte, so a report reads exactly its 4-byte coin."""
    from mss_device.params import Params
    from mss_protocol.mss.config import MssConfig

    client = Params(MssConfig.subset_selection(2, 1.0).to_dict()).client()
    for first in (0x00, 0x3F):  # coin u = 0 (kept) and u = 2**30 - 1 (not kept)
        rng = ByteRng(_chunks(bytes([first, 0xFF, 0xFF, 0xFF]), b""))
        client.report(1, rng, 0, 0)
        assert rng.consumed == 4
