"""Host side of the wire format: encode through the device code, decode strictly.

Layout (SPEC.md section 4): version u8 | config id (4 bytes) | epoch u32 BE |
sequence u16 BE | body, where the body holds (j << rank_bits_j) | rank(Z)
in ceil((jbits + rank_bits_j) / 8) bytes, MSB first, zero-padded.

:func:`WireCodec.decode` accepts only well-formed reports of its config and
raises :class:`WireError` (a ValueError whose ``reason`` is a short code)
for anything else -- never another exception, whatever the bytes.
"""
import math
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

from mss_device.encoder import HEADER_BYTES, VERSION, encode

# Unranking keeps a table of C(c, i) per block when omega * m is below this;
# larger blocks walk the binomials instead (slower, no memory).
_TABLE_LIMIT = 4_000_000


class WireError(ValueError):
    """A report that cannot be accepted; ``reason`` is a stable short code."""

    def __init__(self, reason, detail):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class Report:
    config_id: bytes
    epoch: int
    seq: int
    j: int
    subset: tuple  # sorted residues in [0, m_j)


class WireCodec:
    """Encoder/decoder of reports for one :class:`~mss_protocol.mss.config.MssConfig`."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.body_bits = [int(b) for b in cfg.body_bits]
        self.body_bytes = [(b + 7) // 8 for b in self.body_bits]
        self.lengths = {HEADER_BYTES + n for n in self.body_bytes}
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
        return encode(self.cfg, j, mark, epoch, seq)

    # -- decoding -----------------------------------------------------------
    def decode(self, data):
        """Parse and validate one report; raise WireError naming the problem."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise WireError("type", f"expected bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < HEADER_BYTES + 1:
            raise WireError("length", f"{len(data)} bytes is shorter than any report")
        if data[0] != VERSION:
            raise WireError("version", f"unknown format version {data[0]}")
        cid = data[1:5]
        if cid != self.cfg.config_id:
            raise WireError("config", f"config id {cid.hex()} is not {self.cfg.config_id_hex}")
        epoch = int.from_bytes(data[5:9], "big")
        seq = int.from_bytes(data[9:11], "big")
        body = data[HEADER_BYTES:]
        cfg = self.cfg
        if len(data) not in self.lengths:
            raise WireError("length", f"{len(data)} bytes is not a report length of this config")
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
        return Report(cid, epoch, seq, j, self.unrank(j, rank))

    def unrank(self, j, rank):
        """Subset {c_1 < ... < c_omega} with sum_i C(c_i, i) = rank (colex order)."""
        m, omega = self.cfg.moduli[j], self.cfg.omegas[j]
        out = [0] * omega
        top = m
        if omega * m <= _TABLE_LIMIT:
            table = self._table(j)
            for i in range(omega, 0, -1):
                c = bisect_right(table[i], rank, 0, top) - 1
                rank -= table[i][c]
                out[i - 1] = top = c
            return tuple(out)
        for i in range(omega, 0, -1):
            c = top - 1
            b = math.comb(c, i)
            while b > rank:  # C(c - 1, i) = C(c, i) (c - i) / c
                b = b * (c - i) // c
                c -= 1
            rank -= b
            out[i - 1] = top = c
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
