"""Report frames (SPEC.md section 4): header || body, one fixed length per
config, frame kind and (MSS only) block.

Frame kinds, told apart by the top two bits of byte 0:

* ``full`` (byte 0 = 0x01, the format version): config id (4 bytes),
  epoch u32 and sequence u16 big-endian -- 11 bytes;
* ``compact`` (0b10tttttt): t = the low 6 bits of config id byte 0; for
  links that carry the device id and a counter themselves (LoRaWAN) -- 1 byte;
* ``compact-epoch`` (0b11tttttt), then the epoch's low 16 bits big-endian,
  for links that carry the device id only -- 3 bytes.

A body is one non-negative integer of ``nbits`` bits written most
significant bit first, zero-padded to whole bytes.
"""
try:
    from micropython import const
except ImportError:
    def const(x):
        return x

VERSION = const(1)
HEADER_BYTES = const(11)  # of a full frame
KINDS = ("full", "compact", "compact-epoch")
HEADER = (HEADER_BYTES, 1, 3)  # bytes, by kind index
TAG_MASK = const(0x3F)


def kind_index(name):
    for i in range(len(KINDS)):
        if KINDS[i] == name:
            return i
    raise ValueError("frame must be one of full, compact, compact-epoch")


def start(params, nbits, epoch, seq):
    """A zeroed report buffer with the header of ``params.frame`` written,
    sized for a body of ``nbits`` bits; the body starts at HEADER[kind]."""
    kind = params.frame
    off = HEADER[kind]
    out = bytearray(off + ((nbits + 7) >> 3))
    cid = params.config_id
    if kind == 0:
        out[0] = VERSION
        out[1:5] = cid
        hi = epoch >> 16  # u32 in two halves: every value stays a small int
        # pairs: MicroPython assigns 2 (or 3) targets without building a tuple
        out[5], out[6] = hi >> 8 & 0xFF, hi & 0xFF
        out[7], out[8] = epoch >> 8 & 0xFF, epoch & 0xFF
        out[9], out[10] = seq >> 8 & 0xFF, seq & 0xFF
    else:
        out[0] = (0x80 if kind == 1 else 0xC0) | (cid[0] & TAG_MASK)
        if kind == 2:
            out[1], out[2] = epoch >> 8 & 0xFF, epoch & 0xFF
    return out


def put(out, bit, value, nbits):
    """Write the low ``nbits`` of ``value`` (< 2**30) at bit offset ``bit``
    of ``out``, most significant bit first (``out`` must be zero there)."""
    for i in range(nbits):
        if (value >> (nbits - 1 - i)) & 1:
            b = bit + i
            out[b >> 3] |= 0x80 >> (b & 7)


def get(data, bit, nbits):
    """The ``nbits``-bit integer at bit offset ``bit`` of ``data`` (MSB first)."""
    v = 0
    for i in range(nbits):
        b = bit + i
        v = (v << 1) | ((data[b >> 3] >> (7 - (b & 7))) & 1)
    return v


def bits_for(n):
    """ceil(log2 n): bits of an integer in [0, n) (MicroPython ints lack bit_length())."""
    b = 0
    while (1 << b) < n:
        b += 1
    return b
