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
from array import array

try:
    import micropython
    from micropython import const
except ImportError:  # CPython: the viper kernels run as plain Python
    class micropython:
        viper = staticmethod(lambda f: f)

    def const(x):
        return x

ptr8 = ptr32 = None  # viper's pointer types: CPython evaluates annotations (viper kernels import these)

COIN_BITS = const(30)
_MAX_BELOW = const(1 << 23)


@micropython.viper
def take(pool: ptr8, at: ptr32, n: int) -> int:
    """below(n) from the pooled bytes pool[at[0]:at[1]]: the draw, or minus
    the bytes a draw takes when the pool ran out first (the rejected draws
    stay consumed, a partial one is not).  1 <= n <= 2**23; n = 1 reads nothing."""
    if n == 1:
        return 0
    size = 1 if n <= 256 else (2 if n <= 65536 else 3)
    span = 1 << (size << 3)
    lim = span - span % n
    pos = at[0]
    while pos + size <= at[1]:
        x = pool[pos]
        if size > 1:
            x = (x << 8) | pool[pos + 1]
        if size > 2:
            x = (x << 8) | pool[pos + 2]
        pos += size
        if x < lim:
            at[0] = pos
            return x % n
    at[0] = pos
    return -size


@micropython.viper
def coin(pool: ptr8, at: ptr32, t: int) -> int:
    """chance(t) from the pooled bytes: 1 or 0, or -4 when fewer than 4 are left."""
    pos = at[0]
    if pos + 4 > at[1]:
        return -4
    at[0] = pos + 4
    u = ((pool[pos] & 0x3F) << 24) | (pool[pos + 1] << 16) | (pool[pos + 2] << 8) | pool[pos + 3]
    return 1 if u < t else 0


class ByteRng:
    """Integer draws from ``read(nbytes)``; defaults to ``os.urandom``.

    ``consumed`` counts the bytes used so far (modulo 2**30).  ``read`` may return fewer
    bytes than asked (end of a fixed stream); an empty read raises EOFError.
    Draws take whole bytes from a pool (``take``, ``coin``: viper kernels
    that a protocol's own kernel may call too, see :meth:`drive`).
    """

    def __init__(self, read=None, chunk=64):
        self._read = read or os.urandom
        self._chunk = chunk
        self._pool = b""
        self._at = array("I", [0, 0])  # next byte, end of the pool
        self._done = 0  # bytes consumed from earlier pools

    @property
    def consumed(self):
        return (self._done + self._at[0]) & 0x3FFFFFFF  # stays a small int

    def reserve(self, n):
        """Make sure n bytes are pooled, so the next n bytes need no allocation."""
        at = self._at
        left = self._pool[at[0]:]
        while len(left) < n:
            more = self._read(max(n - len(left), self._chunk))
            if not more:
                raise EOFError("random byte source exhausted")
            left += more
        # only now: a MemoryError above leaves the pool and the count as they were
        self._done = (self._done + at[0]) & 0x3FFFFFFF
        self._pool = left
        at[0], at[1] = 0, len(left)

    def pooled(self, n):
        """(pool, at) with n bytes pooled at ``pool[at[0]:]``: for code that reads them
        in bulk (the host clients) and adds what it consumed to ``at[0]``."""
        if self._at[1] - self._at[0] < n:
            self.reserve(n)
        return self._pool, self._at

    def drive(self, kernel, a, b):
        """Run ``kernel(a, pool, at, b)``, which draws with ``take``/``coin``
        and, when the pool runs out, returns minus the bytes its next draw
        takes (keeping its progress in ``b``), until it returns >= 0."""
        while True:
            x = kernel(a, self._pool, self._at, b)
            if x >= 0:
                return x
            self.reserve(-x)

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
        while True:
            x = take(self._pool, self._at, n)
            if x >= 0:
                return x
            self.reserve(-x)

    def chance(self, t):
        """True with probability t / 2**30 (0 <= t <= 2**30).

        Reads 4 bytes and drops the top 2 bits of the first one, giving u
        uniform on [0, 2**30); returns u < t.
        """
        while True:
            x = coin(self._pool, self._at, t)
            if x >= 0:
                return x == 1
            self.reserve(-x)
