"""Unbiased integer randomness from a byte source (``os.urandom`` on a board).

Every random decision of the device goes through one of two primitives,
both integer-only with every intermediate below 2**30 (a small int on
32-bit ports):

* ``below(n)``: uniform on [0, n) by rejection sampling on whole bytes;
* ``chance(t)``: True with probability exactly t / 2**30.

The byte source is injectable (``read(nbytes) -> bytes``) so tests and the
shared test vectors can replay a fixed stream.  SPEC.md section 3 fixes the
exact byte consumption.
"""
import os

try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x

COIN_BITS = const(30)
_MAX_BELOW = const(1 << 24)


class ByteRng:
    """Integer draws from ``read(nbytes)``; defaults to ``os.urandom``."""

    def __init__(self, read=None):
        self._read = read or os.urandom

    def below(self, n):
        """Uniform integer in [0, n), 1 <= n <= 2**24.

        Draws b = 1, 2 or 3 bytes (the fewest with 256**b >= n) as a
        big-endian x and rejects x >= lim = 256**b - 256**b % n, so that
        x % n is exactly uniform.  n == 1 consumes no bytes.
        """
        if n == 1:
            return 0
        if n < 1 or n > _MAX_BELOW:
            raise ValueError("below(n) needs 1 <= n <= 2**24")
        nbytes = 1 if n <= 256 else (2 if n <= 65536 else 3)
        span = 1 << (8 * nbytes)
        lim = span - span % n
        while True:
            x = 0
            for byte in self._read(nbytes):
                x = (x << 8) | byte
            if x < lim:
                return x % n

    def chance(self, t):
        """True with probability t / 2**30 (0 <= t <= 2**30).

        Reads 4 bytes and drops the top 2 bits of the first one, giving u
        uniform on [0, 2**30); returns u < t.
        """
        b = self._read(4)
        u = ((b[0] & 0x3F) << 24) | (b[1] << 16) | (b[2] << 8) | b[3]
        return u < t
