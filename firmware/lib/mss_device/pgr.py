"""ProjectiveGeometryResponse on the device (mss_protocol.pgr).

Points of PG(d-1, q), K = (q^d - 1)/(q - 1) of them, are indexed by the
position of their leading 1 (first block: lead 0, q^(d-1) points), then by
their remaining coordinates read as a base-q number.  ``chance(t)``
decides whether the report u lies on x's hyperplane (<u, x> = 0 mod q),
then ``below(K)`` is drawn until u is on that side.  Every product is
below q^2 < 2**30.
"""
from mss_device.point import PointClient


class Client(PointClient):
    def __init__(self, params):
        q, d = params.q, params.d
        n, pw = 0, 1
        for _ in range(d):
            n += pw
            pw *= q
        PointClient.__init__(self, params, n)
        self.a = [0] * d  # coordinates, reused
        self.b = [0] * d

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
