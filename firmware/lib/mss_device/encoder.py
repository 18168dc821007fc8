"""Wire encoding of one MSS report (SPEC.md section 4).

A report is ``header || body`` (the header: :mod:`mss_device.frame`);
the body is the integer (j << rank_bits_j) | rank(Z) written in
  ceil((jbits + rank_bits_j) / 8) bytes, most significant bit first, with
  zero padding in the lowest bits.  jbits = ceil(log2 l) and
  rank_bits_j = ceil(log2 C(m_j, omega_j)).

rank(Z) is the colex rank of the combinatorial number system,
sum_i C(c_i, i) for Z = {c_1 < ... < c_omega}, in [0, C(m, omega)).  It is
far above 2**30, so it is kept as little-endian limbs of RB bits in
preallocated lists: with RB = 15 (moduli up to 2**15) or 7 (up to 2**23)
every limb product and remainder stays below 2**30, so the device never
creates a big integer and a report allocates only its output bytes.
"""
from mss_device.frame import HEADER, start
from mss_device.randomiser import is_set


def _mul(a, n, s, rb, mask):
    """a *= s (s < 2**rb); return the new limb count."""
    carry = 0
    for i in range(n):
        t = a[i] * s + carry
        a[i] = t & mask
        carry = t >> rb
    while carry:
        a[n] = carry & mask
        carry >>= rb
        n += 1
    return n


def _div(a, n, d, rb):
    """a //= d (d <= 2**rb, exact here); return the new limb count."""
    r = 0
    for i in range(n - 1, -1, -1):
        t = (r << rb) | a[i]
        a[i] = t // d
        r = t - a[i] * d
    while n and a[n - 1] == 0:
        n -= 1
    return n


def _add(a, na, b, nb, rb, mask):
    """a += b; return the new limb count of a."""
    carry = 0
    top = na if na > nb else nb
    for i in range(top):
        t = (a[i] if i < na else 0) + (b[i] if i < nb else 0) + carry
        a[i] = t & mask
        carry = t >> rb
    if carry:
        a[top] = carry
        top += 1
    return top


class Encoder:
    """Reusable encoder for one parameter set (``moduli``, ``omegas``,
    ``rank_bits``, ``jbits``, ``config_id``); buffers sized once."""

    def __init__(self, params):
        self.p = params
        self.rb = 15 if max(params.moduli) <= 1 << 15 else 7
        self.mask = (1 << self.rb) - 1
        # room for C(m, omega) plus one factor (< 2**24) before each division
        limbs = (max(params.rank_bits) + 24) // self.rb + 2
        self.total = [0] * limbs
        self.b = [0] * limbs

    def rank(self, mark, m, omega):
        """Colex rank of the omega-subset of [0, m) set in ``mark``, as limbs.

        One pass over c = 0, 1, ...: b holds C(c, i) for the next element
        index i, updated by exact ratios.  Returns the limb count of total.
        """
        rb, mask, total, b = self.rb, self.mask, self.total, self.b
        nt = nb = 0  # limb counts; zero limbs mean the value 0
        i = 1
        for c in range(m):
            if is_set(mark, c):
                nt = _add(total, nt, b, nb, rb, mask)
                if i == omega:
                    return nt
                nb = _div(b, _mul(b, nb, c + 1, rb, mask), i + 1, rb)  # C(c + 1, i + 1)
                i += 1
            elif nb:
                nb = _div(b, _mul(b, nb, c + 1, rb, mask), c + 1 - i, rb)  # C(c + 1, i)
            elif c + 1 == i:
                b[0], nb = 1, 1  # C(i, i)
        raise ValueError("mark holds fewer than omega elements")

    def encode(self, j, mark, epoch, seq):
        """Bytes of the report (j, Z) at (epoch, seq)."""
        p = self.p
        nt = self.rank(mark, p.moduli[j], p.omegas[j])
        rbits = p.rank_bits[j]
        nbits = p.jbits + rbits
        out = start(p, nbits, epoch, seq)
        off = HEADER[p.frame] << 3
        # body bit k (0 = most significant): j's bits, then the rank's, MSB first
        for k in range(nbits):
            if k < p.jbits:
                bit = (j >> (p.jbits - 1 - k)) & 1
            else:
                pos = rbits - 1 - (k - p.jbits)  # bit position in the rank
                limb = pos // self.rb
                bit = (self.total[limb] >> (pos - limb * self.rb)) & 1 if limb < nt else 0
            if bit:
                out[(off + k) >> 3] |= 0x80 >> ((off + k) & 7)
        return bytes(out)


def encode(params, j, mark, epoch, seq):
    """One-off encoding (sizes its buffers each call); devices keep an Encoder."""
    return Encoder(params).encode(j, mark, epoch, seq)
