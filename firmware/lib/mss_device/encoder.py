"""Wire encoding of one MSS report (SPEC.md section 4).

A report is ``header || body``:

* header (11 bytes): version u8, config id (4 bytes), epoch u32 big-endian,
  sequence u16 big-endian;
* body: the integer (j << rank_bits_j) | rank(Z) written in
  ceil((jbits + rank_bits_j) / 8) bytes, most significant bit first, with
  zero padding in the lowest bits.  jbits = ceil(log2 l) and
  rank_bits_j = ceil(log2 C(m_j, omega_j)).

rank(Z) is the colex rank of the combinatorial number system:
sum_i C(c_i, i) for Z = {c_1 < ... < c_omega}, in [0, C(m, omega)).
It is the one big integer the device computes (it exceeds 2**30 as soon as
C(m, omega) does); everything else stays a small int.
"""
from mss_device.randomiser import is_set

VERSION = 1
HEADER_BYTES = 11


def rank(mark, m, omega):
    """Colex rank of the omega-subset of [0, m) marked in ``mark``.

    One pass over c = 0, 1, ...: b holds C(c, i) for the next element index
    i, updated by exact integer ratios, so the cost is O(max Z) products.
    """
    total = 0
    i = 1
    b = 0  # C(c, i); zero while c < i
    for c in range(m):
        if is_set(mark, c):
            total += b
            if i == omega:
                return total
            b = b * (c + 1) // (i + 1)  # C(c + 1, i + 1)
            i += 1
        elif b:
            b = b * (c + 1) // (c + 1 - i)  # C(c + 1, i)
        elif c + 1 == i:
            b = 1  # C(i, i)
    raise ValueError("mark holds fewer than omega elements")


def body_bits(params, j):
    return params.jbits + params.rank_bits[j]


def encode(params, j, mark, epoch, seq):
    """Bytes of the report (j, Z) for ``params`` at (epoch, seq)."""
    nbits = body_bits(params, j)
    nbytes = (nbits + 7) >> 3
    code = (j << params.rank_bits[j]) | rank(mark, params.moduli[j], params.omegas[j])
    code <<= 8 * nbytes - nbits
    head = bytes((VERSION,)) + params.config_id + bytes((
        (epoch >> 24) & 0xFF, (epoch >> 16) & 0xFF, (epoch >> 8) & 0xFF, epoch & 0xFF,
        (seq >> 8) & 0xFF, seq & 0xFF))
    return head + code.to_bytes(nbytes, "big")
