"""The batch decoders (codec.decode_many, :mod:`mss_protocol.batch`) against the
one-report ``decode``: the same reports, the same WireError reasons, the same counts.

Everything here is exact (no tolerance): the multi-limb unranking must give
the subsets of :meth:`WireCodec.unrank` for random ranks (fixed seeds) and for
the boundary ranks (0, the largest, and ranks at and next to a binomial, where
the float search is checked exactly)."""
import math
import random

import numpy as np
import pytest

from mss_device.frame import HEADER, start
from mss_device.params import Params
from mss_device.rng import ByteRng
from mss_protocol.codec import codec as codec_of
from mss_protocol.counts import Counts
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.wire import WireCodec, less, limbs, log2, subtract, unrank_rows
from mss_protocol.oracle_config import OracleConfig

BLOCKS = [(16, 6), (16, 1), (16, 15), (64, 32), (255, 5), (1019, 18), (1024, 275), (1024, 387), (4096, 600)]


def boundary_ranks(m, omega):
    """0, the largest rank, and C(c, omega) - 1, C(c, omega), C(c, omega) + 1 plus the
    same near sums of two binomials: ranks whose float log2 ties a binomial's."""
    top = math.comb(m, omega)
    out = {0, 1, top - 1, top - 2}
    for c in (omega, omega + 1, (m + omega) // 2, m - 1):
        b = math.comb(c, omega)
        out |= {b - 1, b, b + 1, b + math.comb(c // 2, omega - 1) if omega > 1 else b}
    return sorted(r for r in out if 0 <= r < top)


def colex_unrank(m, omega, rank):
    """The definition, slowly: c_i = max {c : C(c, i) <= rank}, i = omega..1, rank -= C(c_i, i).
    Python integers, exact: C(c, i) from math.comb once an i, then C(c - 1, i) = C(c, i) (c - i) / c
    while c steps down (a new math.comb at every step took 3 s at m = 4096)."""
    out, c = [], m
    for i in range(omega, 0, -1):
        c -= 1
        b = math.comb(c, i)
        while b > rank:
            b = b * (c - i) // c
            c -= 1
        rank -= b
        out.append(c)
    return tuple(reversed(out))


@pytest.mark.parametrize("m,omega", BLOCKS)
def test_unrank_rows_is_unrank(m, omega):
    rnd = random.Random(m * 1000 + omega)
    top = math.comb(m, omega)
    ranks = boundary_ranks(m, omega) + [rnd.randrange(top) for _ in range(300 if m < 1000 else 30 if m < 4000 else 6)]
    width = max(1, (math.comb(m + omega - 1, omega).bit_length() + 63) // 64)
    first = limbs([math.comb(c, omega) for c in range(m + omega)], width)
    got = unrank_rows(first, m, ranks)
    assert got.shape == (len(ranks), omega)
    assert [tuple(row) for row in got.tolist()] == [colex_unrank(m, omega, r) for r in ranks]


def test_limb_arithmetic_matches_python_ints():
    rnd = random.Random(3)
    width = 4
    pairs = [(1 << 192, 1), ((1 << 256) - 1, (1 << 256) - 1), (1 << 128, (1 << 64) - 1), (5, 5), (7, 0)]
    pairs += [tuple(sorted((rnd.getrandbits(rnd.choice((10, 70, 200, 256))) for _ in range(2)), reverse=True))
              for _ in range(500)]
    a, b = limbs([p[0] for p in pairs], width), limbs([p[1] for p in pairs], width)
    d = subtract(a, b)
    assert [int.from_bytes(col.astype(">u8").tobytes(), "big") for col in d.T] == [x - y for x, y in pairs]
    assert less(b, a).tolist() == [y < x for x, y in pairs]
    assert not less(a, a).any()
    exact = np.array([math.log2(x) if x else -np.inf for x, _ in pairs])
    assert np.allclose(log2(a), exact, rtol=1e-13, atol=0)  # 0 -> -inf on both sides
    assert np.array_equal(np.isinf(log2(a)), np.isinf(exact))


def mss_frames(cfg, n, seed):
    """n frames of cfg with uniform (block, rank), then the boundary ranks of every block."""
    rnd = random.Random(seed)
    p = Params(cfg.to_dict())
    pairs = [(j, r) for j in range(cfg.l) for r in (0, math.comb(cfg.moduli[j], cfg.omegas[j]) - 1)]
    pairs += [(j, rnd.randrange(math.comb(cfg.moduli[j], cfg.omegas[j])))
              for j in (rnd.randrange(cfg.l) for _ in range(n))]
    return [frame(p, j, r, seq) for seq, (j, r) in enumerate(pairs)]


def frame(p, j, rank, seq=0, pad=0):
    nbits = p.jbits + p.rank_bits[j]
    buf = start(p, nbits, 1, seq & 0xFFFF)
    buf[HEADER[p.frame]:] = (((j << p.rank_bits[j]) | rank) << ((-nbits) % 8) | pad).to_bytes((nbits + 7) // 8, "big")
    return bytes(buf)


def assert_same(codec, frames, device_ids=None, epochs=None):
    """decode_many agrees with decode frame by frame: reports, error reasons and texts, counts."""
    batch = codec.decode_many(frames, device_ids, epochs)
    reports = []
    for n, data in enumerate(frames):
        args = (None if device_ids is None else device_ids[n], None if epochs is None else epochs[n])
        try:
            reports.append(codec.decode(data, *args))
        except ValueError as exc:
            assert str(batch.errors.pop(n)) == str(exc) and batch.errors.get(n) is None
    assert not batch.errors
    assert [batch.report(r) for r in range(len(batch))] == reports
    expected = Counts(codec.cfg).add(reports)
    got = batch.counts()
    assert np.array_equal(got.n, expected.n) and np.array_equal(got.c, expected.c)
    return batch


@pytest.mark.parametrize("cfg", [MssConfig.build(16, 1.0, [16]), MssConfig.build(256, 4.0, [251, 253, 254, 255]),
                                 MssConfig.build(1024, 1.0, [1024]),
                                 MssConfig.build(1024, 4.0, [521, 541, 562, 613, 671, 691, 701, 719, 725, 777])],
                         ids=["ss16", "mss256", "ss1024", "mss1024-10m"])
def test_mss_decode_many_is_decode(cfg):
    codec = WireCodec(cfg)
    p = Params(cfg.to_dict())
    frames = mss_frames(cfg, 200, 11)
    good = frames[-1]
    j = cfg.l - 1
    bad = [good[:-1], good + b"\0", b"", b"\x02" + good[1:], good[:1] + bytes(4) + good[5:],
           frame(p, j, math.comb(cfg.moduli[j], cfg.omegas[j]))]  # length, version, config, rank
    if (8 - (p.jbits + p.rank_bits[j]) % 8) % 8:
        bad.append(frame(p, j, 0, pad=1))  # padding
    if cfg.l < (1 << p.jbits):
        bad.append(frame(p, cfg.l, 0) if cfg.l < len(p.rank_bits) else good[:HEADER[p.frame]] + b"\xff" * (len(good) - HEADER[p.frame]))
    batch = assert_same(codec, bad[:3] + frames + bad[3:])
    assert len(batch) == len(frames) and set(batch.errors) == set() and len(batch.positions) == len(frames)


def test_unranking_memory_is_bounded():
    """Rows are held only where they take at most 4 MB; a k = 22000 block unranks one by one."""
    big = WireCodec(MssConfig.build(22000, 1.0, [22000]))
    assert big._rows(0) is None
    small = WireCodec(MssConfig.build(1024, 1.0, [1024]))
    assert small._rows(0).nbytes <= 4_000_000


@pytest.mark.parametrize("name,k,eps,kw", [("rappor", 64, 1.0, {}), ("sue", 100, 2.0, {}), ("grr", 16, 4.0, {}),
                                          ("olh", 256, 1.0, {}), ("olh", 256, 1.0, {"seed": "device"}),
                                          ("hr", 64, 1.0, {}), ("pgr", 256, 0.5, {})])
def test_oracle_decode_many_is_decode(name, k, eps, kw):
    cfg = OracleConfig(name, k, eps, **kw)
    codec = codec_of(cfg)
    client = Params(cfg.to_dict()).client()
    rnd = random.Random(5)
    rng = ByteRng(rnd.randbytes)
    devices = [f"dev{i % 7}" for i in range(120)]
    frames = []
    for i, dev in enumerate(devices):
        client.device_id = dev
        frames.append(client.report(i % k, rng, 3 + i % 2, i))
    good = frames[0]
    bad = [good[:-1], good + b"\0", b"", good[:1] + bytes(4) + good[5:]]
    if codec.nbits % 8:
        bad.append(good[:-1] + bytes([good[-1] | 1]))  # padding
    if not codec.unary and codec.n < (1 << codec.nbits):
        bad.append(codec.encode(codec.n, 3, 0))  # value out of range
    epochs = [None] * len(bad) + [None] * len(frames)
    ids = ["bad dev"] + devices[:len(bad) - 1] + devices  # olh: a bad device id is refused first
    assert_same(codec, bad + frames, ids, epochs)
