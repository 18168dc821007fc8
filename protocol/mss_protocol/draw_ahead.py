"""Draw-ahead for the host client of a one-block SS/MSS configuration.

An SS report's randomness, the keep coin and Floyd's fillers on [0, m - 1), does not
depend on the value: only where r = x mod m lands among the fillers does
(:func:`.host_client.floyd`: v -> v + (v >= r), and r added when kept).  So when one
rng feeds one client report after report, the next ``AHEAD_MAX`` reports' draws are
decoded at once from the bytes already pooled (the source is read no further than
without draw-ahead, but for an endless one), each report starting where the last one's draws ended, exactly
as the device reads them; a call then only places its r and ranks, and moves the
stream on by that report's bytes (``rng.consumed`` is the device's after every
report).  If anything else drew from the rng in between, the draws ahead are dropped
and the call takes the one-report path.

Ranking without sorting r in: with the fillers f_1 < ... < f_S (0-based d = i - 1),
q of them below r, the report's colex rank is (SPEC.md section 4)

    sum_(d < q) C(f_d, d + 1) + keep C(r, q + 1) + sum_(d >= q) C(f_d + 1, d + 1 + keep),

the sum of :class:`.host_client.RankTable` rows base_d = d (width - 1) + f_d below q,
base_d + (width if keep else 1) from q on, and q (width - 1) + r when kept.  Laid out
per report as the shifted rows then the base rows, those are the s rows from q on: one
slice, gathered and summed at once.
"""
import threading
import weakref
from bisect import bisect_left

import numpy as np

from mss_protocol.host_client import COIN_MASK, FLOYD_DENSE, RankTable, floyd_hits, floyd_steps

AHEAD_MAX = 64  # reports decoded at once (about 36 KB of bytes at m = 1024, s = 275)
AHEAD_AFTER = 2  # calls in a row on one rng before drawing ahead: a fresh rng a report never does


class _Follow:
    """Which rng a thread follows: its calls in a row, the draws ahead, the next of them,
    and its position after the last call (a plain object: cheaper than threading.local's
    attributes, read ~8 times a call)."""

    __slots__ = ("rng", "calls", "batch", "i", "next")

    def __init__(self):
        self.rng, self.calls, self.batch, self.i, self.next = None, 0, None, 0, None


class DrawAhead:
    """``ahead(rng, r, one)``: the colex rank of the next report's subset for residue r,
    from draws decoded ahead, or ``one(rng, r)``'s (the one-report path) when the rng
    was not followed report after report.  For a block whose Floyd draws all take
    2-byte words (so that the 4-byte coin is two of them and the stream is a sequence
    of words) and whose rank is a :class:`.host_client.RankTable`'s (:meth:`make`)."""

    def __init__(self, m, s, threshold, table):
        self.m, self.s, self.threshold, self.table = m, s, threshold, table
        _, ((_, _, lim, low, _),), _ = floyd_steps(m, s)
        self.lim, self.low = lim.tolist(), low
        self.width, self.start = table.width, table.start.astype(np.int32)
        # words a report takes at most, rejections expected included (each word is
        # rejected with chance at most 1 - low / 2**16)
        self.words = 2 + int(s * 65536 / low) + 8
        self.follow = threading.local()  # .state: a thread's _Follow

    @classmethod
    def make(cls, m, s, threshold, rank):
        """A DrawAhead for the block, or None where it does not apply."""
        table = getattr(rank, "__self__", None)
        if not isinstance(table, RankTable) or s < 2:
            return None
        _, runs, _ = floyd_steps(m, s)
        if len(runs) != 1 or runs[0][0] != 2:  # then keep's s - 1 steps (the last s - 1) too
            return None
        return cls(m, s, threshold, table)

    def __call__(self, rng, r, one):
        st = getattr(self.follow, "state", None)
        if st is None:
            st = self.follow.state = _Follow()
        if st.next != rng.consumed or st.rng() is not rng:  # another rng, or it drew meanwhile
            st.rng, st.calls, st.batch, st.i = weakref.ref(rng), 0, None, 0
        st.calls += 1
        batch, i = st.batch, st.i
        if (batch is None or i == len(batch[0])) and st.calls > AHEAD_AFTER:
            batch, i = st.batch, st.i = self._draw(rng), 0
        if batch is None:
            rank = one(rng, r)
        else:
            st.i = i + 1
            rank = self._place(batch, i, rng, r)
        st.next = rng.consumed
        return rank

    def _place(self, batch, i, rng, r):
        """The rank of report i of the batch for residue r; the stream moves past it."""
        size, keep, chosen, window = batch
        _, at = rng.pooled(size[i])
        at[0] += size[i]
        s = self.s
        q = bisect_left(chosen, r, i * s, i * s + s) - i * s  # report i's fillers below r
        lo = 2 * s * i  # report i's window
        if keep[i]:  # r's row in the pad, the last of the shifted rows: always in the window
            window[lo + s - 1] = q * (self.width - 1) + r
        return self.table.rank_rows(window[lo + q:lo + q + s])

    def _draw(self, rng):
        """Up to AHEAD_MAX reports from the bytes pooled, in stream order: (bytes of each,
        keep of each, the fillers (report i's in row i, sorted, s a report: a kept report's
        last is a pad, m - 1), each report's window of table rows), or None
        if not one report fitted (the one-report path then reads more; a host rng reads 64 KB
        at a time, ~115 reports here, and is read before that happens).

        Every report is laid out as s draws: a kept report, one filler short, has its
        second coin word stand in as a first draw (d = 0, step m - 1 - s, not one of its
        steps) whose value is set to m - 1, which no draw takes (they are below m - 1): no
        draw repeats it, no draw's value is its step, and it sorts last.  Then the draws
        are an (n, s) array, draw d of every report is step m - 1 - s + d, and the rows
        need no scatter."""
        m, s, lim = self.m, self.s, self.lim
        # only bytes already pooled, so that a stream is read no further than without draw-ahead;
        # an endless one (host_client.HostRng) is first topped up to two reports' worth: at a
        # pool's end, the read the one-report path would make, made here
        pool, at = rng.pooled(2 * self.words if getattr(rng, "endless", False) else 0)
        count = min(AHEAD_MAX * self.words, (at[1] - at[0]) // 2)
        if count < self.words:  # not a report's worth (an rng reading 64 B at a time, as a board's)
            return None
        x = np.frombuffer(pool, dtype=">u2", count=count, offset=at[0]).astype(np.int32)
        # the words a draw may reject (x >= lim of its draw, lim >= low): ~1.5% at m = 1024;
        # a report's draws are its words after the coin but those
        at_b = np.flatnonzero(x >= self.low)
        x_b, at_b = x[at_b].tolist(), at_b.tolist()
        xs, top = memoryview(x), len(x) - 1  # Python ints off x, fast
        starts, keeps, rejected, p, n_b = [], [], [], 0, len(at_b)
        while len(starts) < AHEAD_MAX and p + 2 <= top:
            keep = ((xs[p] << 16 | xs[p + 1]) & COIN_MASK) < self.threshold  # ByteRng.chance
            first = p + 2 - keep  # where draw 0 would be: a kept report's draws are 1 ... s - 1
            end, b, mine = first + s - 1, bisect_left(at_b, p + 2), []  # its last draw's word, none rejected
            while b < n_b and at_b[b] <= end:
                if x_b[b] >= lim[at_b[b] - first]:  # the limit of the draw it serves
                    mine.append(at_b[b])
                    first += 1
                    end += 1
                b += 1
            if end > top:
                break  # the report runs past the words looked at: the next batch starts there
            starts.append(p)
            keeps.append(keep)
            rejected += mine
            p = end + 1
        if not starts:
            return None
        starts, keeps = np.array(starts + [p]), np.array(keeps, dtype=bool)
        n_rep = len(keeps)
        taken = np.ones(p, dtype=bool)
        taken[rejected] = False
        taken[starts[:-1]] = False  # the first coin word; the second too unless kept (the pad draw)
        taken[starts[:-1][~keeps] + 1] = False
        t = np.arange(m - 1 - s, m - 1, dtype=np.int32)  # draw d's step: below(t + 1)
        u = x[:p][taken].reshape(n_rep, s) % (t + 1)  # int32: half the memory
        u[keeps, 0] = m - 1
        rep_m = np.arange(0, n_rep * m, m, dtype=np.int32)[:, None]  # m times the report
        hit = floyd_hits(u=u.reshape(-1), t0=m - 1 - s, d=np.tile(np.arange(s, dtype=np.int32), n_rep),
                         key=(u + rep_m).reshape(-1), span=n_rep * m, dense=m <= FLOYD_DENSE * s).reshape(n_rep, s)
        np.copyto(u, t, where=hit)  # the draws chosen, distinct within a report
        u.sort(axis=1)  # rows of 275 int32: 26 us for 64, a mark over [0, 64 m) and its nonzeros 100
        # report i's row of the window: its s shifted rows then its s base rows, a kept
        # report's pad (its last) the table's zero row in both
        window = np.empty((n_rep, 2 * s), dtype=np.int32)
        base = np.add(self.start[:s], u, out=window[:, s:])
        np.add(base, np.where(keeps, self.width, 1)[:, None], out=window[:, :s])
        window[keeps, s - 1] = window[keeps, 2 * s - 1] = self.table.zero
        # flat, the fillers through a memoryview: a call bisects and slices them as Python sequences
        return (2 * np.diff(starts)).tolist(), keeps.tolist(), memoryview(u.reshape(-1)), window.reshape(-1)
