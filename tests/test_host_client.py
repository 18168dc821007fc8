"""The vectorised host clients (mss_protocol.host_client) are the device clients.

From the same replayed byte stream, ``UnaryEncoding.randomise`` returns the
device unary client's report body and ``MssProtocol.randomise`` (SS and MSS)
the device randomiser + encoder's report, bit for bit, and both leave the
stream at the same byte.  These are equalities on fixed streams: no false
alarms; any difference in a coin, a rejected draw, a Floyd collision or a
rank bit fails them.  The exact law (privacy by enumeration) is tested on the
device code path, which the host clients equal.
"""
import math
import random

import numpy as np
import pytest

from mss_device.frame import HEADER
from mss_device.params import Params
from mss_device.rng import ByteRng
from mss_protocol import draw_ahead, host_client, registry
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.protocol import MssProtocol
from mss_protocol.oracle_config import OracleConfig
from mss_protocol.vectors import stream_reader

STREAM = random.Random(2026).randbytes(1 << 21)


def _pair():
    """Two rngs replaying the same byte stream."""
    return ByteRng(stream_reader(STREAM)), ByteRng(stream_reader(STREAM))


class _DeviceDraws:
    """A ByteRng's draws behind an object that is not a ByteRng: the protocols then
    run the per-draw (device) code path on the same bytes."""

    def __init__(self, rng):
        self.below, self.chance, self.drive = rng.below, rng.chance, rng.drive


@pytest.mark.parametrize("name", ["rappor", "sue"])
@pytest.mark.parametrize("k,eps", [(2, 1.0), (7, 0.5), (16, 4.0), (31, 2.0), (32, 1.0), (1024, 1.0), (1030, 4.0)])
def test_unary_host_client_is_the_device_client(name, k, eps):
    proto = registry.make(name, k, eps)
    device = Params(OracleConfig(name, k, eps).to_dict()).client()
    host_rng, device_rng = _pair()
    for i in range(40):
        x = (7 * i) % k
        assert proto.randomise(x, host_rng) == device.report(x, device_rng, 0, 0)[HEADER[0]:]
        assert host_rng.consumed == device_rng.consumed


@pytest.mark.parametrize("cfg", [
    MssConfig.subset_selection(2, 1.0),  # m = 2: Floyd's below(1) reads nothing
    MssConfig.subset_selection(5, 1.0),
    MssConfig.subset_selection(16, 1.0),
    MssConfig.subset_selection(300, 1.0),  # Floyd's draws cross from 1 to 2 bytes at n = 257
    MssConfig.subset_selection(1024, 1.0),
    MssConfig.subset_selection(1024, 4.0),
    MssConfig.subset_selection(4000, 5.0),  # m > FLOYD_BITS_MAX, 27 fillers: the set loop
    MssConfig.subset_selection(22000, 5.0),  # 147 of 22000: the draws sorted (sparse), 1 in 3 words rejected
    MssConfig.build(16, 1.0, [11, 13, 15]),
    MssProtocol.planned(1024, 1.0).cfg,
], ids=lambda c: f"{c.name}-k{c.k}-m{max(c.moduli)}-w{max(c.omegas)}")
def test_mss_host_client_is_the_device_code(cfg):
    proto = MssProtocol(cfg)
    host_rng, device_rng = _pair()
    for i in range(40):
        x = (7 * i) % cfg.k
        assert proto.randomise(x, host_rng) == proto.randomise(x, _DeviceDraws(device_rng))
        assert host_rng.consumed == device_rng.consumed


@pytest.mark.parametrize("n", [[129] * 60, [40000] * 60, [5_592_406] * 60, [1] * 5, list(range(200, 257)),
                               list(range(65000, 65537))])
def test_bulk_draws_are_byterng_below(n):
    """Rejection-heavy sizes (about half of the 1-, 2- and 3-byte words of 129,
    40000, 5592406 are rejected): the bulk decoder replays ByteRng.below draw for draw."""
    n = np.array(n)
    size = -(-int(n[-1] - 1).bit_length() // 8)  # ByteRng.below's bytes: the fewest b with 256**b >= n
    span = 1 << (8 * size)
    bulk_rng, draw_rng = _pair()
    lim = span - span % n
    got = host_client._belows(bulk_rng, size, n, lim, int(lim.min()), int(lim.max()))
    assert got.tolist() == [draw_rng.below(int(v)) for v in n]
    assert bulk_rng.consumed == draw_rng.consumed


def _floyd_one_step_at_a_time(rng, m, s, r):
    """Floyd's algorithm as the device runs it (SPEC.md section 4), draw by draw."""
    chosen = set()
    for t in range(m - 1 - s, m - 1):
        u = rng.below(t + 1)
        chosen.add(t if u in chosen else u)
    return sorted(v + (v >= r) for v in chosen)


@pytest.mark.parametrize("m,s", [(2, 0), (2, 1), (5, 3), (16, 14), (64, 40), (64, 62), (1024, 30), (70000, 20),
                                 (300, 150), (1024, 100), (1024, 275),
                                 (1024, 1022), (70000, 600)])
def test_floyd_finds_every_collision_and_chain(m, s):
    """s near m: most draws collide, and hits chain (a draw equal to an earlier step that
    hit); the vectorised fillers are the one-step-at-a-time fillers, from the same bytes."""
    bulk_rng, draw_rng = _pair()
    for i in range(30):
        r = (37 * i) % m
        keep = i % 2 == 1
        want = sorted(_floyd_one_step_at_a_time(draw_rng, m, s, r) + [r] * keep)
        assert np.asarray(host_client.floyd(bulk_rng, m, s, r, keep)).tolist() == want
        assert bulk_rng.consumed == draw_rng.consumed


def _rank(c):
    return sum(math.comb(v, i) for i, v in enumerate(c, 1))


@pytest.mark.parametrize("m,w", [(2, 1), (16, 4), (300, 80), (1024, 18), (1024, 275)])
def test_colex_rank_is_the_binomial_sum(m, w):
    """Random subsets and the extremes: {0..w-1} has rank 0, {m-w..m-1} rank C(m, w) - 1;
    a leading run 0, 1, .. then a gap starts the ratio chain late."""
    rnd = random.Random(m * w)
    subsets = [sorted(rnd.sample(range(m), w)) for _ in range(30)]
    subsets += [list(range(w)), list(range(m - w, m)), list(range(w - 1)) + [m - 1]]
    table = host_client.RankTable(w, m - w + 1)
    for c in subsets:
        want = _rank(c)
        assert host_client.colex_rank(c) == want
        assert table.rank(c) == want
    assert table.rank(list(range(m - w, m))) == math.comb(m, w) - 1


def test_rank_table_limbs_cannot_overflow_and_rows_fill_whole_lines():
    """A rank sums at most w rows of limb_bits(w)-bit limbs in uint64: w (2**b - 1) < 2**64
    for every w; SS at k = 1024, eps = 1 (w = 275, width 750) has rows of 16 limbs, two
    64-byte lines, from a line boundary."""
    for w in (1, 2, 33, 255, 256, 275, 511, 512, 5000, 1 << 20):
        assert w * ((1 << host_client.limb_bits(w)) - 1) < 1 << 64, w
    table = host_client.RankTable(275, 750)
    assert table.table.shape[1] == 16 and table.table.ctypes.data % 64 == 0


@pytest.mark.parametrize("cfg,mode", [
    *((MssConfig.subset_selection(k, eps), mode) for k, eps in ((1024, 1.0), (700, 0.3))
      for mode in ("batches", "short-peek")),
    (MssConfig.subset_selection(1024, 1.0), "endless"),
    (MssConfig.subset_selection(4096, 4.0), "batches"),  # m > FLOYD_DENSE s: repeats by a sort (the device's rank: 5 s)
], ids=lambda p: f"k{p.k}-w{p.omegas[0]}" if isinstance(p, MssConfig) else p)
def test_draws_read_ahead_are_the_device_reports(cfg, mode):
    """A one-block client followed report after report reads the next reports' draws
    ahead (draw_ahead.DrawAhead): still the device's report and stream position after
    every report, across batches, when something else draws from the rng in between,
    when two rngs take turns, when the pool ends inside a report (every ~115 reports),
    (``short-peek``: at most omega / 2 words a report looked at, about half of one) when
    the words looked at end inside a report, and (``endless``: a host_client.HostRng, topped
    up before its pool runs short) with no report left to the one-report path at a pool's end."""
    proto = MssProtocol(cfg)
    ahead = proto.blocks[0][0].ahead
    assert ahead is not None
    if mode == "short-peek":
        ahead.words = cfg.omegas[0] // 2
    batches = []
    draw = ahead._draw
    ahead._draw = lambda rng: batches.append(draw(rng)) or batches[-1]
    # draw-ahead decodes only the bytes pooled: a host rng's 64 KB reads (ByteRng's default 64 B: never)
    host = host_client.HostRng if mode == "endless" else ByteRng
    pairs = [[host(stream_reader(STREAM[skip:]), chunk=1 << 16), ByteRng(stream_reader(STREAM[skip:]), chunk=1 << 16)]
             for skip in (0, 1)]
    for i in range(300):
        host_rng, device_rng = pairs[1 if 200 <= i < 240 and i % 3 == 0 else 0]  # turns from 200 to 240
        if i % 37 == 36:  # another draw between two reports
            assert host_rng.below(1000) == device_rng.below(1000)
        x = (7 * i) % cfg.k
        assert proto.randomise(x, host_rng) == proto.randomise(x, _DeviceDraws(device_rng)), i
        assert host_rng.consumed == device_rng.consumed, i
    used = [len(b[0]) for b in batches if b]
    assert sum(used) > 200 and (max(used) == draw_ahead.AHEAD_MAX) == (mode != "short-peek"), used
    if mode == "endless":  # 300 reports of ~580 bytes cross two 64-KB pools' ends
        assert all(batches), [len(b[0]) if b else None for b in batches]
