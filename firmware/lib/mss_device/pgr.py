"""ProjectiveGeometryResponse on the device (mss_protocol.pgr).

Points of PG(d-1, q), K = (q^d - 1)/(q - 1) of them, are indexed by the
position of their leading 1 (first block: lead 0, q^(d-1) points), then by
their remaining coordinates read as a base-q number.  ``chance(t)``
decides whether the report u lies on x's hyperplane (<u, x> = 0 mod q),
then ``below(K)`` is drawn until u is on that side.  Every product is
below q^2 <= 2**30.
"""
from mss_device.check import MAX_N, ONE, at_most, bad, threshold
from mss_device.point import PointClient

MAX_Q = 1 << 15  # coordinates below q: every product below q**2 <= 2**30


def points(q, d):
    """K = 1 + q + ... + q^(d-1), the points of PG(d-1, q); 0 when above 2**23
    (so every term stays a small int whatever q and d a config names)."""
    n, pw = 0, 1
    for i in range(d):
        n += pw
        if n > MAX_N:
            return 0
        if i < d - 1:
            if pw > MAX_N // q:
                return 0
            pw *= q
    return n


class Client(PointClient):
    def __init__(self, params):
        q, d = params.q, params.d
        n, pw = 0, 1
        for _ in range(d):
            n += pw
            pw *= q
        PointClient.__init__(self, params, n)
        self.a = [0] * params.d  # coordinates, reused
        self.b = [0] * params.d

    def coords(self, u, out):
        """Write the coordinates of point u into ``out``."""
        q, d = self.p.q, self.p.d
        lead, size = 0, 1
        for _ in range(d - 1):
            size *= q  # points with lead 0: q^(d-1)
        while u >= size:
            u -= size
            size //= q
            lead += 1
        for i in range(d - 1, lead, -1):
            out[i] = u % q
            u //= q
        out[lead] = 1
        for i in range(lead):
            out[i] = 0

    def draw(self, x, rng):
        inside = rng.chance(self.p.t)
        q, a, b = self.p.q, self.a, self.b
        self.coords(x, a)
        while True:
            u = rng.below(self.n)
            self.coords(u, b)
            s = 0
            for i in range(self.p.d):
                s = (s + a[i] * b[i]) % q
            if (s == 0) == inside:
                return u


def _prime(q):
    f = 2
    while f * f <= q:
        if q % f == 0:
            return False
        f += 1
    return True


def check(p):
    """q a prime (a field: every hyperplane then has c_set points) up to 2**15, d >= 2,
    k <= K <= 2**23."""
    at_most("q", p.q, 2, MAX_Q)
    if not _prime(p.q):
        bad("q", "must be a prime")
    at_most("d", p.d, 2, 24)  # K >= 2**d
    if not p.k <= points(p.q, p.d):
        bad("d", "must give k <= K = (q^d - 1)/(q - 1) <= 2**23")
    threshold("t", p.t)


def outputs(p):
    """The report alphabet's size (the instantaneous layer's n_out)."""
    return points(p.q, p.d)


def ratios(p):
    """On x's hyperplane or off it: (m, omega) = (K, c_set), c_set = (q^(d-1) - 1)/(q - 1)."""
    K, c = points(p.q, p.d), points(p.q, p.d - 1)
    return [(p.t * (K - c), (ONE - p.t) * c)]
