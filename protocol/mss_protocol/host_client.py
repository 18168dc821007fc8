"""Vectorised host (CPython) clients that read the device's random bytes.

The device clients (``mss_device``) draw one coin or one uniform at a time;
run as plain Python on CPython that costs ~1 us a draw, i.e. milliseconds a
report at k = 1024.  The helpers here make the same decisions from the same
bytes of a :class:`~mss_device.rng.ByteRng`, in NumPy, so the host client of
a protocol returns bit for bit the device's report and leaves the stream at
the same byte (``rng.consumed``), for any byte source (``os.urandom``, a
replayed stream).  A source whose bytes depend on how many are asked at a
time (``random.Random.randbytes`` with a length not a multiple of 4) gives
other bytes, in the same law: the helpers ask for all the bytes a report
needs at once, the device for its 64-byte chunks.

* :func:`unary_body`: ``chance(t_v)`` for v = 0 .. k-1 in order (SPEC.md section 3:
  4 bytes each, the top 2 bits dropped, u < t_v), packed;
* :func:`floyd`: Floyd's sampling of s fillers of [0, m) without r, the
  draws ``below(t + 1)`` (1-3 bytes each, rejection sampling) decoded in bulk,
  or for few of them in one loop over the pool (``_draw_each``: ByteRng.below's rule
  inlined, 1.2-1.5x faster than calling the device's ``take`` per draw, measured);
* :func:`colex_rank`: sum_i C(c_i, i) in Python integers, exactly the
  device's limb kernel's number (``mss_device.limbs.rank``); :func:`ranker`
  the same from a table of the binomials (a gather and a sum) when it fits.
"""
import bisect
import functools
import itertools
import math
import struct

import numpy as np

from mss_device.rng import ByteRng

COIN_MASK = (1 << 30) - 1


HOST_CHUNK = 4096  # bytes a host's ByteRng reads from os.urandom at a time (a device's: 64, for its RAM)


def host_rng():
    """A ByteRng on ``os.urandom`` for clients run on a host: 4 KB a read, one system call
    per ~60 reports of 64 random bytes where 64-byte reads would make one a report.
    The reports are the device's for any read size (ByteRng reads the stream in order)."""
    return ByteRng(chunk=HOST_CHUNK)


def _peek(rng, n):
    """The next n bytes of ``rng``'s stream (uint8), not consumed, and the stream's position
    array (``at[0]``: its next byte; the caller adds what it consumes)."""
    pool, at = rng.pooled(n)
    return np.frombuffer(pool, dtype=np.uint8, count=n, offset=at[0]), at


UNARY_LOOP_MAX = 32  # more items: NumPy's compare and packbits beat a loop over the words


def unary_body(rng, x, tp, tq, k):
    """The k-bit body of a unary report (OUE/SUE): bit v, most significant first, is
    ``rng.chance(tp if v == x else tq)`` for v = 0, 1, ..., k - 1, drawn in that order.

    Coin v is the big-endian 32-bit word at bytes 4v .. 4v + 3 with its top
    two bits dropped, u_v uniform on [0, 2**30), and is u_v < t_v."""
    pool, at = rng.pooled(4 * k)
    first = at[0]
    at[0] = first + 4 * k
    if k <= UNARY_LOOP_MAX:
        words = struct.unpack_from(f">{k}I", pool, first)
        bits = 0
        for u in words:
            bits = bits << 1 | ((u & COIN_MASK) < tq)
        mine = 1 << (k - 1 - x)
        bits = bits & ~mine | (mine if (words[x] & COIN_MASK) < tp else 0)
        return (bits << (-k % 8)).to_bytes((k + 7) // 8, "big")
    u = np.frombuffer(pool, dtype=">u4", count=k, offset=first) & COIN_MASK
    bits = u < tq
    bits[x] = u[x] < tp
    return np.packbits(bits).tobytes()


@functools.lru_cache(maxsize=64)
def _floyd_steps(m, s):
    """Floyd's steps on [0, m - 1) for s fillers: t (int64, increasing), runs (b, n, lim, low)
    of steps drawing ``below(n = t + 1)`` from b bytes each (b = 0 for n = 1, else the fewest
    with 256**b >= n: non-decreasing in t), accepting x < lim = 256**b - 256**b % n
    (a word below low = min(lim) is accepted at any step of its run), and the same per
    step as a list of (n, b, lim)."""
    t = np.arange(m - 1 - s, m - 1, dtype=np.int64)
    n = t + 1
    size = np.select([n == 1, n <= 256, n <= 65536], [0, 1, 2], 3)
    runs = []
    for b in np.unique(size).tolist():
        n_b = n[size == b]
        lim = (1 << (8 * b)) - (1 << (8 * b)) % n_b
        runs.append((b, n_b, lim, int(lim.min())))
    lims = np.concatenate([run[2] for run in runs]) if runs else []
    return t, runs, list(zip(n.tolist(), size.tolist(), np.asarray(lims).tolist()))


def _draw_each(rng, steps):
    """[rng.below(n) for each (n, b, lim) of ``steps``] (:func:`_floyd_steps`), read from
    the pool in one loop: ByteRng.below's b-byte big-endian words, redrawn while x >= lim."""
    pool, at = rng.pooled(0)
    pos, end, out = at[0], at[1], []
    for i, (n, b, lim) in enumerate(steps):
        if b == 0:  # below(1) reads nothing
            out.append(0)
            continue
        while True:
            if end - pos < b:  # the pool ran out: pool what the draws left need, and a few more
                at[0] = pos
                pool, at = rng.pooled(b * (len(steps) - i) + 8)
                pos, end = at[0], at[1]
            x = pool[pos] if b == 1 else int.from_bytes(pool[pos:pos + b], "big")
            pos += b
            if x < lim:
                break
        out.append(x % n)
    at[0] = pos
    return out


def _words(buf, b):
    """buf (uint8) as big-endian b-byte words (int64)."""
    if b == 1:
        return buf.astype(np.int64)
    if b == 2:
        return buf.view(">u2").astype(np.int64)
    w = buf.reshape(-1, 3).astype(np.int64)
    return (w[:, 0] << 16) | (w[:, 1] << 8) | w[:, 2]


def _belows(rng, b, n, lim, low):
    """(len(n),) int64: ``rng.below(n_i)`` for each n_i in order, all drawn from b bytes
    (ByteRng.below: a b-byte word x is accepted when x < lim_i, giving x % n_i, else redrawn).

    The words for all the draws left, and a few more, are looked at at once, and as
    many consumed as the draws take.  Only a word >= low can be rejected, and whether
    it is depends on the draw it serves: its index less the words rejected before
    it, so those few are checked in order."""
    if b == 0:
        return np.zeros(len(n), dtype=np.int64)  # below(1) reads nothing
    parts, done, total = [], 0, len(n)
    while done < total:
        buf, at = _peek(rng, b * (total - done + 4 + (total - done) // 16))
        x = _words(buf, b)
        flagged = np.flatnonzero(x >= low)
        rejected = []
        for i, v in zip(flagged.tolist(), x[flagged].tolist()):
            d = done + i - len(rejected)  # the draw this word serves
            if d >= total:
                break
            if v >= lim[d]:
                rejected.append(i)
        used = min(len(x), total - done + len(rejected))  # words consumed
        at[0] += b * used
        x = x[:used]
        if rejected:
            x = np.delete(x, rejected)
        parts.append(x % n[done:done + len(x)])
        done += len(x)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


FLOYD_LOOP_MAX = 140  # fewer fillers: floyd's set loop beats its sort (measured: 17 vs 38 us at s = 18, 84 vs 78 at 150)
# fewer fillers, or one-byte draws (m <= 257: words rejected at ~12%, which the bulk decode
# checks one by one): the draws in one Python loop (_draw_each) beat the bulk decode's NumPy
# calls (floyd, measured: m = 1024, s = 30: 31 vs 44 us, s = 60: 41 vs 53; s = 100: 90 vs 72)
FLOYD_DRAW_LOOP_MAX = 64


def floyd(rng, m, s, r, keep=False):
    """The fillers of mss_device.randomiser from the same bytes: a uniform s-subset of
    [0, m) without r (with r added when ``keep``), sorted (a list below ``FLOYD_LOOP_MAX``
    steps, else an int64 array).

    Floyd's algorithm on [0, m - 1): for t = m - 1 - s, ..., m - 2 draw
    u_t = below(t + 1) and add u_t, or t when u_t is already chosen (a "hit");
    then map v -> v + (v >= r).  From ``FLOYD_DRAW_LOOP_MAX`` steps on (and m > 257) the
    draws are decoded in bulk (:func:`_belows`), and from ``FLOYD_LOOP_MAX`` steps on the hits
    are found without a loop over the steps:
    as u_t <= t < every later step, step t hits exactly when u_t repeats an
    earlier draw (found by a stable sort) or is itself an earlier step that hit
    (u_t >= m - 1 - s: about s/m of the steps, followed to the end of the chains)."""
    t, runs, steps = _floyd_steps(m, s)
    if s < FLOYD_LOOP_MAX:  # the algorithm step by step: cheaper than the NumPy calls below for few steps
        if s < FLOYD_DRAW_LOOP_MAX or m <= 257:
            draws = _draw_each(rng, steps)
        else:
            draws = np.concatenate([_belows(rng, *run) for run in runs]).tolist()
        chosen = set()
        for t_i, u_i in enumerate(draws, m - 1 - s):
            chosen.add(t_i if u_i in chosen else u_i)
        out = [v + (v >= r) for v in sorted(chosen)]
        if keep:
            bisect.insort(out, r)
        return out
    u = np.concatenate([_belows(rng, *run) for run in runs]) if len(runs) > 1 else _belows(rng, *runs[0])
    order = np.argsort(u, kind="stable")
    sorted_u = u[order]
    hit = np.zeros(len(u), dtype=bool)
    hit[order[1:][sorted_u[1:] == sorted_u[:-1]]] = True  # a value's later draws
    steps = np.flatnonzero(u >= t[0])
    at_step = u[steps] - t[0]  # the step each of these draws is (itself included: u_t = t is new)
    earlier = at_step < steps
    while True:  # a hit makes the steps that drew it hits: to the end of the chains
        more = hit[at_step] & earlier & ~hit[steps]
        if not more.any():
            break
        hit[steps[more]] = True
    chosen = np.empty(len(u) + keep, dtype=np.int64)
    picked = chosen[:len(u)]
    np.copyto(picked, u)
    np.copyto(picked, t, where=hit)
    picked += picked >= r
    if keep:
        chosen[-1] = r
    chosen.sort()
    return chosen


COMB_RANK_MAX = 32  # more elements: the binomials one by one cost more than the chain below


def colex_rank(c):
    """sum_i C(c_i, i) for c_1 < ... < c_w (a sorted sequence), SPEC.md section 4.

    Up to ``COMB_RANK_MAX`` elements, each term by ``math.comb``; beyond, exact in
    Python integers with one big multiplication and one exact
    division per element: with p = c_(i-1) and g = c_i - p,
    C(c_i, i) = C(p, i - 1) * c_i! / p! / i / ((c_i - i)! / (p - i + 1)!)
              = C(p, i - 1) * perm(c_i, g) / (i * perm(c_i - i, g - 1)).
    A leading run c_i = i - 1 adds C(i - 1, i) = 0 and starts the chain after it."""
    if len(c) <= COMB_RANK_MAX:
        return sum(map(math.comb, c, range(1, len(c) + 1)))
    c = [int(v) for v in c]
    h = 0
    while h < len(c) and c[h] == h:
        h += 1
    if h == len(c):
        return 0
    b = total = math.comb(c[h], h + 1)
    perm = math.perm
    for i in range(h + 2, len(c) + 1):
        v, p = c[i - 1], c[i - 2]
        b = b * perm(v, v - p) // (i * perm(v - i, v - p - 1))
        total += b
    return total


LIMB_BITS = 48  # a sum of < 2**16 limbs stays below 2**64
TABLE_BYTES = 64 << 20  # the largest binomial table kept (SS at k = 1024, eps = 1: 27 MB)


class RankTable:
    """C(i - 1 + d, i) for i = 1 .. w, d = 0 .. width - 1 in ``LIMB_BITS``-bit limbs:
    the colex rank of c_1 < ... < c_w is then a gather and a column sum,
    sum_i T[i, c_i - i + 1] (c_i >= i - 1, and c_i - i + 1 <= m - w < width).

    Rows by Pascal's rule in the window: T[1, d] = d and
    T[i, d] = T[i, d - 1] + T[i - 1, d] = sum_(e <= d) T[i - 1, e] (T[i, 0] = 0);
    the largest entry is the last, C(w + width - 2, w)."""

    def __init__(self, w, width):
        self.limbs = limbs(w, width)
        size = self.limbs * LIMB_BITS // 8
        row, rows = list(range(width)), []
        for _ in range(w):
            rows.append(b"".join(v.to_bytes(size, "little") for v in row))
            row = [0, *itertools.accumulate(row[1:])]
        raw = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(w, width, self.limbs, LIMB_BITS // 8)
        wide = np.zeros((w, width, self.limbs, 8), dtype=np.uint8)
        wide[..., :LIMB_BITS // 8] = raw
        self.table = wide.view("<u8").reshape(w * width, self.limbs)  # row (i - 1) * width + d
        self.start = np.arange(w) * (width - 1)  # row of c_i is start[i - 1] + c_i
        self.shifts = [LIMB_BITS * j for j in range(self.limbs)]

    def rank(self, c):
        rows = self.start[:len(c)] + c
        sums = self.table.take(rows, axis=0).sum(axis=0).tolist()
        return sum(v << s for v, s in zip(sums, self.shifts))


def limbs(w, width):
    """Limbs of :class:`RankTable`'s largest entry C(w + width - 2, w)."""
    return max(1, -(-math.comb(w + width - 2, w).bit_length() // LIMB_BITS))


@functools.lru_cache(maxsize=8)
def ranker(w, width):
    """The colex rank of subsets of at most w elements with c_i - i + 1 < width:
    :class:`RankTable`'s beyond ``COMB_RANK_MAX`` elements when its table fits
    ``TABLE_BYTES``, else :func:`colex_rank`."""
    if w > COMB_RANK_MAX and w * width * limbs(w, width) * 8 <= TABLE_BYTES:
        return RankTable(w, width).rank
    return colex_rank
