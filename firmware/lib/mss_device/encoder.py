"""Wire encoding of one MSS report (SPEC.md section 4).

A report is ``header || body`` (the header: :mod:`mss_device.frame`);
the body is the integer (j << rank_bits_j) | rank(Z) written in
  ceil((jbits + rank_bits_j) / 8) bytes, most significant bit first, with
  zero padding in the lowest bits.  jbits = ceil(log2 l) and
  rank_bits_j = ceil(log2 C(m_j, omega_j)).

rank(Z), the colex rank sum_i C(c_i, i) for Z = {c_1 < ... < c_omega} in
[0, C(m, omega)), is computed in limbs by :mod:`mss_device.limbs` into
buffers sized once, so a report allocates only its output bytes.
"""
from array import array

from mss_device.frame import HEADER, start
from mss_device.limbs import put, rank


class Encoder:
    """Reusable encoder for one parameter set (``moduli``, ``omegas``,
    ``rank_bits``, ``jbits``, ``config_id``); buffers sized once."""

    def __init__(self, params):
        self.p = params
        rb = 15 if max(params.moduli) <= 1 << 15 else 7
        # room for C(m, omega) plus one factor (< 2**24) before each division
        limbs = (max(params.rank_bits) + 24) // rb + 2
        self.total = array("I", bytes(4 * limbs))
        self.b = array("I", bytes(4 * limbs))
        self.arg = array("I", [0, 0, rb, limbs])  # m, omega, then put's offset, bits

    def encode(self, j, mark, epoch, seq):
        """Bytes of the report (j, Z) at (epoch, seq)."""
        p, arg = self.p, self.arg
        arg[0], arg[1] = p.moduli[j], p.omegas[j]
        nt = rank(self.b, self.total, mark, arg)
        out = start(p, p.jbits + p.rank_bits[j], epoch, seq)
        off = HEADER[p.frame] << 3
        for k in range(p.jbits):  # j's bits, most significant first, then the rank's
            if (j >> (p.jbits - 1 - k)) & 1:
                out[(off + k) >> 3] |= 0x80 >> ((off + k) & 7)
        arg[0], arg[1] = off + p.jbits, p.rank_bits[j]
        put(out, self.total, nt, arg)
        return bytes(out)


def encode(params, j, mark, epoch, seq):
    """One-off encoding (sizes its buffers each call); devices keep an Encoder."""
    return Encoder(params).encode(j, mark, epoch, seq)
