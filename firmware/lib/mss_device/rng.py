"""Unbiased integer randomness from a byte source (``os.urandom`` on a board).

Every random decision of the device goes through one of two primitives,
both integer-only with every intermediate below 2**30 (a small int on
32-bit ports):

* ``below(n)``: uniform on [0, n) by rejection sampling on whole bytes;
* ``chance(t)``: True with probability exactly t / 2**30.

The byte source is injectable (``read(nbytes) -> bytes``) so tests and the
shared test vectors can replay a fixed stream.  Bytes are taken from it in
chunks into a pool and consumed one at a time, so the stream is read in
exactly the order SPEC.md section 3 fixes, and a report drawn from a
reserved pool allocates nothing.
"""
import os

try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x

COIN_BITS = const(30)
_MAX_BELOW = const(1 << 23)


class ByteRng:
    """Integer draws from ``read(nbytes)``; defaults to ``os.urandom``.

    ``consumed`` counts the bytes used so far (modulo 2**30).  ``read`` may return fewer
    bytes than asked (end of a fixed stream); an empty read raises EOFError.
    """

    def __init__(self, read=None, chunk=64):
        self._read = read or os.urandom
        self._chunk = chunk
        self._pool = b""
        self._pos = 0
        self.consumed = 0

    def reserve(self, n):
        """Make sure n bytes are pooled, so the next n bytes need no allocation."""
        left = self._pool[self._pos:]
        while len(left) < n:
            more = self._read(n - len(left))
            if not more:
                raise EOFError("random byte source exhausted")
            left += more
        self._pool, self._pos = left, 0

    def _byte(self):
        if self._pos >= len(self._pool):
            self._pool = self._read(self._chunk)
            self._pos = 0
            if not self._pool:
                raise EOFError("random byte source exhausted")
        b = self._pool[self._pos]
        self._pos += 1
        self.consumed = (self.consumed + 1) & 0x3FFFFFFF  # stays a small int
        return b

    def below(self, n):
        """Uniform integer in [0, n), 1 <= n <= 2**23.

        Draws b = 1, 2 or 3 bytes (the fewest with 256**b >= n) as a
        big-endian x and rejects x >= lim = 256**b - 256**b % n, so that
        x % n is exactly uniform.  n == 1 consumes no bytes.
        """
        if n == 1:
            return 0
        if n < 1 or n > _MAX_BELOW:
            raise ValueError("below(n) needs 1 <= n <= 2**23")
        nbytes = 1 if n <= 256 else (2 if n <= 65536 else 3)
        span = 1 << (8 * nbytes)
        lim = span - span % n
        while True:
            x = 0
            for _ in range(nbytes):
                x = (x << 8) | self._byte()
            if x < lim:
                return x % n

    def chance(self, t):
        """True with probability t / 2**30 (0 <= t <= 2**30).

        Reads 4 bytes and drops the top 2 bits of the first one, giving u
        uniform on [0, 2**30); returns u < t.
        """
        u = self._byte() & 0x3F
        for _ in range(3):
            u = (u << 8) | self._byte()
        return u < t
