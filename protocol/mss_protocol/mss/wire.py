"""Host side of the MSS wire format: encode through the device code, decode strictly.

Layout (SPEC.md section 4): a header (:mod:`mss_protocol.frames`), then the
body (j << rank_bits_j) | rank(Z) in ceil((jbits + rank_bits_j) / 8)
bytes, MSB first, zero-padded.

:func:`WireCodec.decode` accepts only well-formed reports of its config and
raises :class:`WireError` (a ValueError whose ``reason`` is a short code)
for anything else -- never another exception, whatever the bytes.
"""
import math
from bisect import bisect_right
from itertools import accumulate

from mss_device.encoder import Encoder
from mss_device.params import Params
from mss_protocol.frames import Report, WireError, split

# Unranking bisects a table of C(c, i) per block (omega * m big integers) when
# that table is below _TABLE_LIMIT cells and omega is small against m; otherwise
# it walks a running binomial down from m (O(m) exact steps, no memory), which
# measured faster once omega * _WALK_RATIO > m (k = 1024, eps = 1: 4,100 vs
# 3,600 reports/s, and 113 MB of tables less; eps = 4: the table, 92,000 vs 8,800).
_TABLE_LIMIT = 4_000_000
_WALK_RATIO = 16


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
        frame, epoch, seq, body = split(data, self.cfg.config_id, self.body_lengths, self.cfg.frame, epoch)
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
        return Report(cfg.config_id, epoch, seq, j, self.unrank(j, rank), frame)

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
