"""Host side of the MSS wire format: encode through the device code, decode strictly.

Layout (SPEC.md section 4): a header (:mod:`mss_protocol.frames`), then the
body (j << rank_bits_j) | rank(Z) in ceil((jbits + rank_bits_j) / 8)
bytes, MSB first, zero-padded.

:func:`WireCodec.decode` accepts only well-formed reports of its config and
raises :class:`WireError` (a ValueError whose ``reason`` is a short code)
for anything else -- never another exception, whatever the bytes.
:func:`WireCodec.decode_many` runs the same checks on a batch and unranks
its subsets together (:func:`unrank_rows`), into a :class:`~mss_protocol.batch.Batch`.
"""
import math
from bisect import bisect_right
from itertools import accumulate

import numpy as np

from mss_device.encoder import Encoder
from mss_device.params import Params
from mss_protocol.batch import Batch
from mss_protocol.frames import Report, WireError, split

# Unranking bisects a table of C(c, i) per block (omega * m big integers) when
# that table is below _TABLE_LIMIT cells and omega is small against m; otherwise
# it walks a running binomial down from m (O(m) exact steps, no memory), which
# measured faster once omega * _WALK_RATIO > m (k = 1024, eps = 1: 4,100 vs
# 3,600 reports/s, and 113 MB of tables less; eps = 4: the table, 92,000 vs 8,800).
_TABLE_LIMIT = 4_000_000
_WALK_RATIO = 16


# Batches unrank with exact multi-limb arithmetic on a block's binomial rows
# (unrank_rows), held per block where they take at most _ROW_BYTES (every
# block of every configuration `mss plan` returns with protocol auto); larger
# blocks (k = 22000, whose ranks have ~20,000 bits) unrank report by report.
_ROW_BYTES = 4_000_000
_NEAR = 1e-6  # log2 distance below which the float search is checked exactly
_TOP = np.uint64(2 ** 64 - 1)
_WINDOW = 4  # limbs read at once for a float log2


def walks(m, omega):
    """Whether unranking in a block (m, omega) walks the binomials rather than bisecting a table."""
    return not (omega * m <= _TABLE_LIMIT and omega * _WALK_RATIO <= m)


class WireCodec:
    """Encoder/decoder of reports for one :class:`~mss_protocol.mss.config.MssConfig`."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.body_bits = [int(b) for b in cfg.body_bits]
        self.body_bytes = [(b + 7) // 8 for b in self.body_bits]
        self.body_lengths = set(self.body_bytes)
        self.encoder = Encoder(Params(cfg.to_dict()))
        self.sizes = [math.comb(m, w) for m, w in zip(cfg.moduli, cfg.omegas)]
        self._tables = {}
        self._binomial_rows = {}

    # -- encoding -----------------------------------------------------------
    def encode(self, j, subset, epoch=0, seq=0):
        """Bytes of report (j, Z); uses the device encoder, so both sides agree."""
        m, omega = self.cfg.moduli[j], self.cfg.omegas[j]
        if len(set(subset)) != omega or len(subset) != omega or not all(0 <= v < m for v in subset):
            raise ValueError(f"block {j} needs {omega} distinct residues in [0, {m})")
        mark = bytearray((m + 7) // 8)
        for v in subset:
            mark[v >> 3] |= 1 << (v & 7)
        return self.encoder.encode(j, mark, epoch, seq)

    # -- decoding -----------------------------------------------------------
    def decode(self, data, device_id=None, epoch=None):
        """Parse and validate one report; raise WireError naming the problem.
        ``epoch``: the link's epoch, needed by compact frames."""
        frame, epoch, seq, j, rank = self._parse(data, epoch)
        return Report(config_id=self.cfg.config_id, epoch=epoch, seq=seq, j=j, subset=self.unrank(j, rank), frame=frame)

    def decode_many(self, frames, device_ids=None, epochs=None):
        """:class:`~mss_protocol.batch.Batch` of ``frames`` (``epochs``: each one's link
        epoch, or None): the checks of :meth:`decode` one frame at a time, then each
        block's ranks unranked together (:func:`unrank_rows`) where its binomial rows
        fit in _ROW_BYTES, else one by one (:meth:`unrank`)."""
        batch = Batch(self.cfg)
        parsed = batch.parse(frames, lambda n, data: self._parse(data, None if epochs is None else epochs[n]))
        blocks, ranks = [j for j, _ in parsed], [rank for _, rank in parsed]
        batch.j = np.array(blocks, dtype=np.int64)
        omegas = np.asarray(self.cfg.omegas, dtype=np.int64)
        batch.sizes = omegas[batch.j]
        starts = np.cumsum(batch.sizes) - batch.sizes
        batch.members = np.empty(int(batch.sizes.sum()), dtype=np.int64)
        for j in np.unique(batch.j).tolist():
            rows = np.flatnonzero(batch.j == j)
            block_ranks = [ranks[r] for r in rows.tolist()]
            rows_table = self._rows(j)
            subsets = (unrank_rows(rows_table, self.cfg.moduli[j], block_ranks) if rows_table is not None
                       else np.array([self.unrank(j, rank) for rank in block_ranks], dtype=np.int64))
            batch.members[starts[rows][:, None] + np.arange(self.cfg.omegas[j])] = subsets
        return batch

    def _parse(self, data, epoch):
        """(frame, epoch, seq, j, rank) of a valid report, else WireError."""
        frame, epoch, seq, body = split(data=data, config_id=self.cfg.config_id, body_lengths=self.body_lengths,
                                        kind=self.cfg.frame, epoch=epoch)
        cfg = self.cfg
        code = int.from_bytes(body, "big")
        j = code >> (8 * len(body) - cfg.jbits)  # j sits in the first jbits bits
        if j >= cfg.l:
            raise WireError("block", f"block index {j} >= {cfg.l}")
        if len(body) != self.body_bytes[j]:
            raise WireError("length", f"block {j} needs a {self.body_bytes[j]}-byte body, "
                                      f"got {len(body)}")
        pad = 8 * len(body) - self.body_bits[j]
        if code & ((1 << pad) - 1):
            raise WireError("padding", "non-zero padding bits")
        rank = (code >> pad) & ((1 << cfg.rank_bits[j]) - 1)
        if rank >= self.sizes[j]:
            raise WireError("rank", f"subset rank out of range for block {j}")
        return frame, epoch, seq, j, rank

    def unrank(self, j, rank):
        """Subset {c_1 < ... < c_omega} with sum_i C(c_i, i) = rank (colex order)."""
        m, omega = self.cfg.moduli[j], self.cfg.omegas[j]
        out = [0] * omega
        top = m
        if not walks(m, omega):
            table = self._table(j)
            for i in range(omega, 0, -1):
                c = bisect_right(table[i], rank, 0, top) - 1
                rank -= table[i][c]
                out[i - 1] = top = c
            return tuple(out)
        c = top - 1
        b = math.comb(c, omega)  # then a running binomial: one exact ratio per step
        for i in range(omega, 0, -1):
            while b > rank:  # C(c - 1, i) = C(c, i) (c - i) / c
                b = b * (c - i) // c
                c -= 1
            rank -= b
            out[i - 1] = c
            if i > 1:  # C(c - 1, i - 1) = C(c, i) i / c
                b = b * i // c
                c -= 1
        return tuple(out)

    def _table(self, j):
        if j not in self._tables:
            m, omega = self.cfg.moduli[j], self.cfg.omegas[j]
            # Pascal's rule as a running sum: C(c, i) = sum_{c' < c} C(c', i - 1).
            rows = [None, list(range(m))]
            for _ in range(2, omega + 1):
                rows.append([0] + list(accumulate(rows[-1][:-1])))
            self._tables[j] = rows
        return self._tables[j]

    def _rows(self, j):
        """Block j's first binomial row for :func:`unrank_rows` (cached), or None
        where it would take over _ROW_BYTES."""
        if j not in self._binomial_rows:
            m, omega = self.cfg.moduli[j], self.cfg.omegas[j]
            width = max(1, (math.comb(m + omega - 1, omega).bit_length() + 63) // 64)
            self._binomial_rows[j] = (limbs([math.comb(c, omega) for c in range(m + omega)], width)
                                      if 8 * width * (m + omega) <= _ROW_BYTES else None)
        return self._binomial_rows[j]


# -- exact unranking of many ranks at once ---------------------------------------
# Numbers are columns of uint64 limbs, most significant limb in row 0: a
# (width, count) array, so that every limb is one contiguous vector and
# dropping leading limbs is a view.

def limbs(values, width):
    """(width, len(values)) uint64 limbs of non-negative ints below 2**(64 width)."""
    raw = b"".join(v.to_bytes(8 * width, "big") for v in values)
    return np.ascontiguousarray(np.frombuffer(raw, dtype=">u8").reshape(len(values), width).T, dtype=np.uint64)


def subtract(a, b):
    """Column-wise a - b of limb columns with a >= b: limb differences (mod 2**64),
    then each borrow taken from the next more significant limb; a limb that was 0
    wraps to 2**64 - 1 and passes the borrow on (rare: checked, then repeated)."""
    d = a - b
    borrow = (a < b)[1:]  # borrow[t]: limb t + 1 took one from limb t
    while borrow.any():
        d[:-1] -= borrow
        if not (d[1:-1] == _TOP).any():  # no limb below the first wrapped (nor is 2**64 - 1)
            break
        wrapped = borrow & (d[:-1] == _TOP)
        borrow = np.zeros_like(borrow)
        borrow[:-1] = wrapped[1:]
    return d


def less(a, b):
    """Column-wise a < b of limb columns: compared at their first differing limb."""
    differ = a != b
    first = np.argmax(differ, axis=0)
    cols = np.arange(a.shape[1])
    return differ[first, cols] & (a[first, cols] < b[first, cols])


def log2(a):
    """Float log2 of limb columns (-inf for 0), from their top _WINDOW limbs as one
    float sum: relative error below _WINDOW * 2**-52 where one of the first
    _WINDOW - 1 limbs is non-zero; the other columns from the limbs under those."""
    width = len(a)
    top = min(width, _WINDOW)
    value = 2.0 ** (-64 * np.arange(top)) @ a[:top].astype(np.float64)
    with np.errstate(divide="ignore"):
        out = np.log2(value) + 64.0 * (width - 1)
    if width > top:
        low = np.flatnonzero(value < 2.0 ** (-64 * (top - 2)))
        if low.size:
            out[low] = log2(a[top - 1:, low])
    return out


def unrank_rows(first, m, ranks):
    """(len(ranks), omega) int64: the subsets {c_1 < ... < c_omega} of [m] with
    sum_i C(c_i, i) = rank (colex order, :meth:`WireCodec.unrank`), every rank below C(m, omega).

    ``first``: the limb columns of C(c, omega) for c < m + omega.  Step i = omega..1
    takes c_i = max {c : C(c, i) <= rank} for every rank at once, then rank -= C(c_i, i)
    (the greedy combinatorial number system; Knuth, TAOCP 7.2.1.3, Theorem L).  The
    search compares float log2 values (np.searchsorted); a rank within _NEAR of a
    binomial's log2 is settled with exact limb comparisons, and the subtraction is
    exact.  The next row comes by Pascal's rule, C(c, i - 1) = C(c + 1, i) - C(c, i),
    one entry shorter (so row i has m + i entries, and C(c, i) with c <= m is there).
    Leading limbs that are zero in the row's largest entry are dropped, and the
    ranks (below C(m, i)) and the entries they meet (c < m) are cut to C(m, i)'s limbs.
    """
    row = first
    omega = first.shape[1] - m
    rank = limbs(ranks, len(row))
    out = np.empty((omega, len(ranks)), dtype=np.int64)
    # log2 C(c, i) = log2 c! - log2 i! - log2 (c - i)! (math.lgamma: ~1e-12 absolute here, far below _NEAR)
    lf = np.array([math.lgamma(c + 1) for c in range(m + 1)]) / math.log(2)
    above = np.arange(m + 1)
    for i in range(omega, 0, -1):
        row = row[int(np.argmax(row[:, -1] != 0)):]
        used = row[int(np.argmax(row[:, m] != 0)):]  # the limbs of C(m, i) and below
        rank = rank[len(rank) - len(used):]
        logs = np.where(above >= i, lf - lf[i] - lf[np.maximum(above - i, 0)], -np.inf)
        rank_log = log2(rank)
        c = np.minimum(np.searchsorted(logs, rank_log, side="right") - 1, m - 1)  # c_i < m, checked below
        with np.errstate(invalid="ignore"):  # -inf - -inf: rank 0 against C(c < i, i) = 0, no doubt
            near = np.flatnonzero((rank_log - logs[c] < _NEAR) | (logs[c + 1] - rank_log < _NEAR))
        while near.size:
            low = less(rank[:, near], used[:, c[near]])
            high = ~less(rank[:, near], used[:, c[near] + 1])
            c[near] += high.astype(np.int64) - low
            near = near[low | high]
        rank = subtract(rank, used[:, c])
        out[i - 1] = c
        if i > 1:
            row = subtract(row[:, 1:], row[:, :-1])
    return out.T
