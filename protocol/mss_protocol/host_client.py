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

* :func:`unary_client`: ``chance(t_v)`` for v = 0 .. k-1 in order (SPEC.md section 3:
  4 bytes each, the top 2 bits dropped, u < t_v), packed;
* :class:`BlockClient`: a block's keep coin and :func:`floyd`, Floyd's sampling of s
  fillers of [0, m) without r, the draws ``below(t + 1)`` (1-3 bytes each, rejection
  sampling) decoded in bulk, or for few of them in one loop over the pool
  (ByteRng's rules inlined: no call per draw);
* :func:`colex_rank`: sum_i C(c_i, i) in Python integers, exactly the
  device's limb kernel's number (``mss_device.limbs.rank``); :func:`ranker`
  the same from a table of the binomials (a gather and a sum) when it fits.
"""
import functools
import itertools
import math

import numpy as np

from mss_device.rng import ByteRng

COIN_MASK = (1 << 30) - 1


# bytes a host's ByteRng reads from os.urandom at a time (a device's: 64, for its RAM); measured
# on the 2-core AMD EPYC VM: 3.3 us per KB in 4 KB reads, 2.6 in 64 KB (the kernel's generator
# is most of an OUE report's time at k = 1024: 4 KB of coins)
HOST_CHUNK = 65536


class HostRng(ByteRng):
    """A ByteRng whose source never ends (``os.urandom``): a client may pool bytes before it
    needs them (:class:`.draw_ahead.DrawAhead` at a pool's end) without reading past what a
    finite stream holds."""

    endless = True


def host_rng():
    """A :class:`HostRng` on ``os.urandom`` for clients run on a host: 64 KB a read, one system
    call per ~1,000 reports of 64 random bytes where 64-byte reads would make one a report.
    The reports are the device's for any read size (ByteRng reads the stream in order)."""
    return HostRng(chunk=HOST_CHUNK)


def _peek(rng, n):
    """The next n bytes of ``rng``'s stream (uint8), not consumed, and the stream's position
    array (``at[0]``: its next byte; the caller adds what it consumes)."""
    pool, at = rng.pooled(n)
    return np.frombuffer(pool, dtype=np.uint8, count=n, offset=at[0]), at


UNARY_SWAR_MAX = 31  # more items: the lanes' bits no longer gather into a k-bit window (below)


def unary_client(k, tp, tq):
    """``client(rng, x)``: the k-bit body of a unary report (OUE/SUE), whose bit v, most
    significant first, is ``rng.chance(tp if v == x else tq)`` for v = 0, 1, ..., k - 1,
    drawn in that order.

    Coin v is the big-endian 32-bit word at bytes 4v .. 4v + 3 with its top two bits
    dropped, u_v uniform on [0, 2**30), and is u_v < t_v.  Up to ``UNARY_SWAR_MAX``
    items the k words are compared at once in one Python int W (the 4k bytes, big-endian:
    32-bit lane i, counted from the least significant, is item v = k - 1 - i):

    * ``W & DROP`` keeps each lane's low 30 bits, u_v;
    * ``+ ADD`` adds 2**30 - tq to each lane: below 2**31, so nothing carries into the next
      lane, and the lane's bit 30 is set exactly when u_v >= tq;
    * ``>> 30 & LANE`` leaves that bit at the bottom of each lane, 32 i;
    * ``* GATHER >> 31 (k - 1)``, GATHER = sum_j 2**(31 j), moves it to bit i: lane i times
      2**(31 j) lands at 32 i + 31 j, which is 31 (k - 1) + i for j = k - 1 - i; the other
      products land 31 or more bits from that window (k <= 31) and never on one another,
      so nothing carries into it;
    * the complement on k bits is then bit i set when u_v < tq, item v at bit k - 1 - v: the
      report's order.  Item x's own coin (tp) is read from its lane and set alone.

    Measured at k = 16: 1.35 us a report against 2.4 us for a loop over the words (min of
    9 x 50,000; a closure over the constants: 1.49 as a class's __call__); more items go
    through NumPy's compare and packbits."""
    n, size, pad = 4 * k, (k + 7) // 8, -k % 8
    if k > UNARY_SWAR_MAX:
        def client(rng, x):
            pool, at = rng.pooled(n)
            u = np.frombuffer(pool, dtype=">u4", count=k, offset=at[0]) & COIN_MASK
            at[0] += n
            bits = u < tq
            bits[x] = u[x] < tp
            return np.packbits(bits).tobytes()
        return client
    lane = sum(1 << (32 * i) for i in range(k))
    drop, add, gather = lane * COIN_MASK, lane * ((1 << 30) - tq), sum(1 << (31 * j) for j in range(k))
    shift, every = 31 * (k - 1), (1 << k) - 1

    def client(rng, x):
        pool, at = rng.pooled(n)
        first = at[0]
        at[0] = first + n
        u = int.from_bytes(pool[first:first + n], "big") & drop
        bits = ~((((u + add) >> 30 & lane) * gather) >> shift) & every
        mine = 1 << (k - 1 - x)
        bits = bits & ~mine | (mine if (u >> 32 * (k - 1 - x) & COIN_MASK) < tp else 0)
        return (bits << pad).to_bytes(size, "big")
    return client


@functools.lru_cache(maxsize=64)
def floyd_steps(m, s):
    """Floyd's steps on [0, m - 1) for s fillers: t (int64, increasing), runs (b, n, lim, low, high)
    of steps drawing ``below(n = t + 1)`` from b bytes each (b = 0 for n = 1, else the fewest
    with 256**b >= n: non-decreasing in t), accepting x < lim = 256**b - 256**b % n
    (low, high: the least and greatest lim of the run), and the same per step as a list
    of (t, b, n, lim)."""
    t = np.arange(m - 1 - s, m - 1, dtype=np.int64)
    n = t + 1
    size = np.select([n == 1, n <= 256, n <= 65536], [0, 1, 2], 3)
    runs = []
    for b in np.unique(size).tolist():
        n_b = n[size == b]
        lim = (1 << (8 * b)) - (1 << (8 * b)) % n_b
        runs.append((b, n_b, lim, int(lim.min()), int(lim.max())))
    lims = np.concatenate([run[2] for run in runs]) if runs else []
    return t, runs, list(zip(t.tolist(), size.tolist(), n.tolist(), np.asarray(lims).tolist()))


FLOYD_BITS_MAX = 1024  # up to this m the loop keeps the chosen set as an int bitmask, beyond as a set
# (measured, a report of a block (m, s = omega): m = 16, s = 4: 2.0-2.4 vs 2.4-2.5 us; m = 300, s = 80: 37 vs 74-109;
# m = 4096, s = 10: 13.6 vs 9.1; m = 22000, s = 10: 33 vs 11: a shift of an m-bit int costs O(m))


def _floyd_bits(pool, pos, steps, r, keep):
    """Floyd's loop over ``steps`` (:func:`floyd_steps`) on ``pool`` from byte ``pos``:
    (the fillers mapped past r (v -> v + (v >= r)), and r when ``keep``, as the set bits
    of an int; the byte after the last draw).

    Each draw is ByteRng.below's b-byte big-endian word x, redrawn while x >= lim.  A
    draw past the pool's end raises IndexError or reads short (the caller checks the
    position returned against the pool's end)."""
    mask = 0
    for t, b, n, lim in steps:
        x = pool[pos] if b == 1 else int.from_bytes(pool[pos:pos + b], "big")  # b = 0: below(1) = 0
        pos += b
        while x >= lim:
            x = pool[pos] if b == 1 else int.from_bytes(pool[pos:pos + b], "big")
            pos += b
        bit = 1 << x % n
        mask |= 1 << t if mask & bit else bit
    low = mask & ((1 << r) - 1)
    return (mask ^ low) << 1 | low | keep << r, pos


def _floyd_set(pool, pos, steps, r, keep):
    """:func:`_floyd_bits` with the chosen values in a set, returned sorted: for large m,
    where each shift of an m-bit int costs O(m)."""
    chosen = {r} if keep else set()
    for t, b, n, lim in steps:
        while True:
            x = pool[pos] if b == 1 else int.from_bytes(pool[pos:pos + b], "big")
            pos += b
            if x < lim:
                break
        v = x % n
        v += v >= r
        if v in chosen:
            v = t + (t >= r)
        chosen.add(v)
    return sorted(chosen), pos


def _bits_list(mask):
    """The set bits of ``mask``, increasing."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _on_pool(rng, need, run, args):
    """``run(pool, pos, *args)`` -> (out, end) on ``need`` pooled bytes, consuming them up to
    ``end``.  When rejections take more bytes than pooled, run reads past the pool's end;
    then it runs again from the same byte with twice the pool (the draws are the bytes')."""
    while True:
        pool, at = rng.pooled(need)
        try:
            out, end = run(pool, at[0], *args)
        except IndexError:
            end = at[1] + 1
        if end <= at[1]:
            at[0] = end
            return out
        need *= 2


def _loops(m, s):
    """Whether :func:`floyd` of s steps on m runs a loop (:func:`_floyd_bits` up to
    ``FLOYD_BITS_MAX``, else :func:`_floyd_set`) rather than NumPy."""
    return s < FLOYD_LOOP_MAX and (m <= FLOYD_BITS_MAX or s < FLOYD_DRAW_LOOP_MAX)


def _loop_bytes(steps):
    """The bytes Floyd's draws take without a rejection, and a few more."""
    return sum(step[1] for step in steps) + 8


class BlockClient:
    """The colex rank of the device randomiser's subset for one block (m, omega, T_j):
    ``client(rng, r)`` keeps r with ``rng.chance(T_j)``, adds ``floyd``'s omega - keep
    fillers and ranks them (``rank``: :func:`ranker`'s).  Where floyd loops, the coin and
    the draws are read in one pass over the pool, from steps worked out once; with a
    bitmask of few elements the rank is summed off its bits (no sorted list).  Where it
    does not loop, ``ahead`` (a one-block configuration's :class:`.draw_ahead.DrawAhead`)
    may read the next reports' draws at once."""

    def __init__(self, m, omega, threshold, rank, ahead=None):
        self.m, self.omega, self.threshold, self.rank = m, omega, threshold, rank
        self.ahead = ahead
        self.loops = _loops(m, omega)
        self.bits = m <= FLOYD_BITS_MAX
        self.run = _floyd_bits if self.bits else _floyd_set
        self.steps = (floyd_steps(m, omega)[2], floyd_steps(m, omega - 1)[2])  # by keep
        self.need = 4 + _loop_bytes(self.steps[0])
        self.ranks = mask_ranks(m, omega) if self.bits and math.comb(m, omega) <= MASK_RANKS_MAX else None

    def __call__(self, rng, r):
        if not self.loops:
            return self.ahead(rng, r, self._one) if self.ahead else self._one(rng, r)
        need = self.need
        while True:  # _on_pool's loop, inlined with the coin: the hot path of small blocks
            pool, at = rng.pooled(need)
            pos = at[0]
            keep = (int.from_bytes(pool[pos:pos + 4], "big") & COIN_MASK) < self.threshold  # ByteRng.chance
            try:
                out, end = self.run(pool=pool, pos=pos + 4, steps=self.steps[keep], r=r, keep=keep)
            except IndexError:
                end = at[1] + 1
            if end <= at[1]:
                at[0] = end
                break
            need *= 2
        if not self.bits:
            return self.rank(out)
        if self.ranks is not None:
            return self.ranks[out]
        if self.omega > COMB_RANK_MAX:
            return self.rank(_bits_list(out))
        rank = i = 0
        while out:  # the colex rank sum_i C(c_i, i) off the set bits c_1 < c_2 < ...
            low = out & -out
            i += 1
            rank += math.comb(low.bit_length() - 1, i)
            out ^= low
        return rank

    def _one(self, rng, r):
        keep = rng.chance(self.threshold)
        return self.rank(floyd(rng=rng, m=self.m, s=self.omega - keep, r=r, keep=keep))


MASK_RANKS_MAX = 4096  # subsets up to which a block's ranks are looked up by bitmask (at most ~0.5 MB)


@functools.lru_cache(maxsize=16)
def mask_ranks(m, w):
    """{bitmask of c: colex rank of c} for every w-subset c of [0, m): a lookup where the
    rank summed off the bits costs more (SS at k = 16, eps = 1, C(16, 4) = 1820 subsets:
    0.48 us a rank summed, a lookup ~0.05)."""
    return {sum(1 << v for v in c): colex_rank(c) for c in itertools.combinations(range(m), w)}


def _words(buf, b):
    """buf (uint8) as big-endian b-byte words (int64)."""
    if b == 1:
        return buf.astype(np.int64)
    if b == 2:
        return buf.view(">u2").astype(np.int64)
    w = buf.reshape(-1, 3).astype(np.int64)
    return (w[:, 0] << 16) | (w[:, 1] << 8) | w[:, 2]


def _belows(rng, b, n, lim, low, high):
    """(len(n),) int64: ``rng.below(n_i)`` for each n_i in order, all drawn from b bytes
    (ByteRng.below: a b-byte word x is accepted when x < lim_i, giving x % n_i, else
    redrawn); low = min(lim), high = max(lim).

    The words for all the draws left, and enough more for the rejections expected, are
    looked at at once, and as many consumed as the draws take.  A word < low is
    accepted and a word >= high rejected whatever draw it serves (up to half the words,
    for n just above a power of 256); one in between is rejected or not by the draw it
    serves, its index less the words rejected before it, so those few are checked in
    order."""
    if b == 0:
        return np.zeros(len(n), dtype=np.int64)  # below(1) reads nothing
    parts, done, total = [], 0, len(n)
    while done < total:
        buf, at = _peek(rng, b * ((total - done) * (1 << 8 * b) // low + 8))
        x = _words(buf, b)
        rejected = x >= high
        between = np.flatnonzero((x >= low) & ~rejected)
        if len(between):
            before = np.cumsum(rejected)  # at a word not rejected outright: those before it
            more = 0  # words in between rejected so far
            for i in between.tolist():
                d = done + i - int(before[i]) - more  # the draw this word serves
                if d >= total:
                    break
                if x[i] >= lim[d]:
                    rejected[i] = True
                    more += 1
        taken = np.flatnonzero(~rejected)[:total - done]  # the words the draws take
        used = int(taken[-1]) + 1 if len(taken) == total - done else len(x)  # words consumed
        at[0] += b * used
        parts.append(x[taken] % n[done:done + len(taken)])
        done += len(taken)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


FLOYD_LOOP_MAX = 140  # fewer fillers: floyd's loop beats its NumPy form
FLOYD_DRAW_LOOP_MAX = 64  # with m > FLOYD_BITS_MAX, the set loop only below this many fillers


def floyd(rng, m, s, r, keep=False):
    """The fillers of mss_device.randomiser from the same bytes: a uniform s-subset of
    [0, m) without r (with r added when ``keep``), sorted (a list where it loops, else
    an int64 array).

    Floyd's algorithm on [0, m - 1): for t = m - 1 - s, ..., m - 2 draw
    u_t = below(t + 1) and add u_t, or t when u_t is already chosen (a "hit");
    then map v -> v + (v >= r).  Few steps (:func:`_loops`) run step by step
    (:func:`_floyd_bits`, :func:`_floyd_set`); more are decoded in bulk (:func:`_belows`)
    and the hits found by :func:`floyd_hits`.  The chosen set is the drawn values and the
    steps that hit.  Where s is a large part of m (``FLOYD_DENSE``) the repeats and the set
    are read off arrays over [0, m) (no sort), else the draws are sorted."""
    t, runs, steps = floyd_steps(m, s)
    if _loops(m, s):
        if m <= FLOYD_BITS_MAX:
            return _bits_list(_on_pool(rng, _loop_bytes(steps), _floyd_bits, (steps, r, keep)))
        return _on_pool(rng, _loop_bytes(steps), _floyd_set, (steps, r, keep))
    u = np.concatenate([_belows(rng, *run) for run in runs]) if len(runs) > 1 else _belows(rng, *runs[0])
    dense = m <= FLOYD_DENSE * s
    hit = floyd_hits(u=u, t0=t[0], d=None, key=u, span=m, dense=dense)
    if dense:  # the drawn values and the steps that hit, off a mask of [0, m), past r
        mark = np.zeros(m, dtype=bool)
        mark[u] = True
        mark[t[hit]] = True
        mark[r + 1:] = mark[r:m - 1]  # v -> v + (v >= r)
        mark[r] = keep
        return mark.nonzero()[0]
    chosen = np.empty(s + keep, dtype=np.int64)
    picked = chosen[:s]
    np.copyto(picked, u)
    np.copyto(picked, t, where=hit)
    picked += picked >= r
    if keep:
        chosen[-1] = r
    chosen.sort()
    return chosen


# more draws that are steps than this: pointer jumping, else one ordered loop over them (a report
# of 1024, 275 has ~74, of 70000, 5000 ~360: the loop as fast as before it was shared; a draw-ahead
# batch of 64 reports of 1024, 275: ~4,700, 0.1 us each in the loop against ~1.5 us a report jumping)
CHAIN_LOOP_MAX = 512


def floyd_hits(u, t0, d, key, span, dense):
    """(len(u),) bool: which of Floyd's draws hit, for one report or several laid end to end.

    Draw i is its report's step d_i (t_i = t0_i + d_i, u_i = below(t_i + 1); ``d`` None:
    one report, d_i = i); ``key`` is u offset by report so that two reports' values never
    meet, in [0, span).  As
    u_t <= t < every later step, step t hits exactly when u_t repeats an earlier draw of
    its report (:func:`_repeats` over [0, span) when ``dense``, else by a sort) or is an
    earlier step of it that hit (u_i - t0_i = j < d_i: about s/m of the draws): a chain.
    Up to ``CHAIN_LOOP_MAX`` draws that are steps are settled in one ordered loop (an
    earlier step first), more by pointer jumping, each round doubling the steps looked back."""
    hit = _repeats(key, span) if dense else _repeats_sorted(key)
    step = u - t0  # the step index u would be (>= 0 for a step of the report)
    idx = np.flatnonzero(step >= 0)
    to = step[idx] if d is None else idx - d[idx] + step[idx]  # the draw of that step
    if len(idx) <= CHAIN_LOOP_MAX:
        hits = bytearray(hit.tobytes())
        for i, j in zip(idx.tolist(), to.tolist()):
            if j < i and hits[j]:
                hits[i] = 1
        return np.frombuffer(hits, dtype=bool)
    earlier = to < idx
    idx, to = idx[earlier], to[earlier]
    link = np.full(len(u), -1, dtype=idx.dtype)
    link[idx] = to
    while len(idx):
        up = link[idx]
        hit[idx] |= hit[up]
        link[idx] = link[up]
        idx = idx[link[idx] >= 0]
    return hit


# m <= this many times s: work on arrays over [0, m) (O(m)), else sort the draws (O(s log s));
# measured new/old (old: always sort): m = 22000, s = 2590: 0.67; 8192, 600: 0.80; 2048, 200: 0.91;
# 22000, 600 (36 s): 1.03; 1024, 275: 0.75 (medians of 7, one run)
FLOYD_DENSE = 32


def _repeats(u, m):
    """(len(u),) bool: u_i equals an earlier u_j, from each value's first index over [0, m)."""
    step = np.arange(len(u), dtype=u.dtype)
    first = np.full(m, len(u), dtype=u.dtype)
    np.minimum.at(first, u, step)
    return first[u] < step


def _repeats_sorted(u):
    """:func:`_repeats` by a stable sort of u: a value's later draws follow its first."""
    order = np.argsort(u, kind="stable")
    sorted_u = u[order]
    hit = np.zeros(len(u), dtype=bool)
    hit[order[1:][sorted_u[1:] == sorted_u[:-1]]] = True
    return hit


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


BYTE_LIMB = 48  # the limbs the table is built in (6 bytes each) before it is cut into its own
TABLE_BYTES = 64 << 20  # the largest binomial table kept (SS at k = 1024, eps = 1: 26 MB)


class RankTable:
    """C(i - 1 + d, i) for i = 1 .. w, d = 0 .. width - 1 in :func:`limb_bits` (w)-bit
    limbs: the colex rank of c_1 < ... < c_w is then a gather and a column sum,
    sum_i T[i, c_i - i + 1] (c_i >= i - 1, and c_i - i + 1 <= m - w < width).

    Rows by Pascal's rule in the window: T[1, d] = d and
    T[i, d] = T[i, d - 1] + T[i - 1, d] = sum_(e <= d) T[i - 1, e] (T[i, 0] = 0);
    the largest entry is the last, C(w + width - 2, w).  A row is :func:`limbs` long and
    the table starts on a 64-byte line, so that a row takes as few cache lines as it
    fills: a gather's cost is its cache misses (SS at k = 1024, eps = 1: 275 rows of
    16 limbs, 2 lines each, against 3 for the 18 byte-aligned 48-bit limbs of before:
    7.3-7.6 against 9.5-11.2 us a rank in cache, 10.5-12.0 against 14.8-19.5 us out)."""

    def __init__(self, w, width):
        self.width, self.limbs = width, limbs(w, width)
        top = math.comb(w + width - 2, w).bit_length()
        built = max(1, -(-top // BYTE_LIMB))
        size = built * BYTE_LIMB // 8
        row, rows = list(range(width)), []
        for _ in range(w):
            rows.append(b"".join(v.to_bytes(size, "little") for v in row))
            row = [0, *itertools.accumulate(row[1:])]
        raw = np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(w, width, built, BYTE_LIMB // 8)
        wide = np.zeros((w, width, built, 8), dtype=np.uint8)
        wide[..., :BYTE_LIMB // 8] = raw
        old = wide.view("<u8").reshape(w * width, built)
        bits = limb_bits(w)
        # row (i - 1) * width + d, and a last row of zeros (``zero``) that pads a sum
        self.table, self.zero = _aligned(w * width + 1, self.limbs), w * width
        for k in range(-(-top // bits)):  # limb k: bits [bits k, bits (k + 1)) of the old limbs'
            lo, limb = bits * k, self.table[:-1, k]
            for j in range(lo // BYTE_LIMB, min(built, (lo + bits - 1) // BYTE_LIMB + 1)):
                shift = BYTE_LIMB * j - lo
                limb |= old[:, j] << np.uint64(shift) if shift >= 0 else old[:, j] >> np.uint64(-shift)
            limb &= np.uint64((1 << bits) - 1)
        self.start = np.arange(w) * (width - 1)  # row of c_i is start[i - 1] + c_i
        self.bits, self.ones = bits, np.ones(w, dtype=np.uint64)

    def rank(self, c):
        return self.rank_rows(self.start[:len(c)] + c)

    def rank_rows(self, rows):
        """The sum of the table's ``rows`` (any order, at most w), as one Python int."""
        # a dot with ones: the lightest call that sums the gathered rows (interleaved with
        # other clients, 275 rows: 4.0 us against einsum's 6.9 and .sum(axis=0)'s 7.0)
        sums = self.ones[:len(rows)].dot(self.table.take(rows, axis=0))
        value = 0
        for limb in reversed(sums.tolist()):  # Horner: 1.4 us for 16 limbs, a sum of shifts 1.9
            value = (value << self.bits) + limb
        return value


def limb_bits(w):
    """Bits a limb of :class:`RankTable` holds: a sum of w of them stays below 2**64."""
    return 64 - w.bit_length()


def limbs(w, width):
    """Limbs of a :class:`RankTable` row: its largest entry C(w + width - 2, w) in
    ``limb_bits(w)``-bit limbs, padded to 1, 2, 4 or 8, and beyond 8 to whole 64-byte lines
    where that adds at most one limb in eight."""
    n = max(1, -(-math.comb(w + width - 2, w).bit_length() // limb_bits(w)))
    if n <= 8:
        return 1 << (n - 1).bit_length()
    lines = -(-n // 8) * 8
    return lines if lines <= n + n // 8 else n


def _aligned(rows, cols):
    """A zeroed (rows, cols) uint64 array whose data start on a 64-byte line."""
    buf = np.zeros(rows * cols + 8, dtype=np.uint64)
    skip = (-buf.ctypes.data % 64) // 8
    return buf[skip:skip + rows * cols].reshape(rows, cols)


@functools.lru_cache(maxsize=8)
def ranker(w, width):
    """The colex rank of subsets of at most w elements with c_i - i + 1 < width:
    :class:`RankTable`'s beyond ``COMB_RANK_MAX`` elements when its table fits
    ``TABLE_BYTES``, else :func:`colex_rank`."""
    if w > COMB_RANK_MAX and w * width * limbs(w, width) * 8 <= TABLE_BYTES:
        return RankTable(w, width).rank
    return colex_rank
