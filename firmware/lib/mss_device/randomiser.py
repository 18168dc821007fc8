"""ModularSubsetSelection randomiser for one report (MSS, arXiv 2511.11569).

Given the value x in [0, k):

1. draw the block j uniformly from [0, l)                 -- ``rng.below(l)``
2. r = x mod m_j
3. keep r in the subset with probability T_j / 2**30     -- ``rng.chance(T_j)``
4. draw s = omega_j - 1 (kept) or omega_j (not kept) distinct fillers
   uniformly from [0, m_j) without r, by Floyd's algorithm on [0, m_j - 1)
   mapped through v -> v + (v >= r)
5. the report is (j, Z) with Z the set bits of ``mark``, read in increasing
   order by the encoder, so nothing about the sampling order leaks.

``params`` needs ``moduli``, ``omegas`` and ``thresholds`` (lists of ints).
``mark`` is a caller-owned bytearray of at least ceil(max(moduli) / 8) bytes,
reused across reports so the hot path does not allocate.  Step 4's loop is
a viper kernel (:func:`_fill`) drawing straight from the rng's pool.
"""


from array import array

from mss_device.rng import micropython, ptr8, ptr32, take


def is_set(mark, v):
    return mark[v >> 3] & (1 << (v & 7))


@micropython.viper
def _fill(mark: ptr8, pool, at, arg: ptr32) -> int:
    """Floyd's steps t = arg[0] .. arg[1] - 1 with r = arg[2]: after the step
    for t the chosen set is a uniform (t - top + s + 1)-subset of [0, t],
    stored shifted past r (v -> v + (v >= r)).  Returns 0 when done, or
    take's shortfall when the pool ran out (arg[0]: the step to resume at)."""
    t = arg[0]
    top = arg[1]
    r = arg[2]
    while t < top:
        v = int(take(pool, at, t + 1))
        if v < 0:
            arg[0] = t
            return v
        if v >= r:
            v += 1
        if mark[v >> 3] & (1 << (v & 7)):
            v = t + 1 if t >= r else t
        mark[v >> 3] = mark[v >> 3] | (1 << (v & 7))
        t += 1
    return 0


class Randomiser:
    """privatise() with its argument buffer allocated once."""

    def __init__(self, params):
        self.p = params
        self.arg = array("I", [0, 0, 0])

    def privatise(self, x, rng, mark):
        """Randomise x; return the block index j and leave Z as set bits in mark
        (a caller-owned bytearray of at least ceil(max(moduli) / 8) bytes)."""
        p, arg = self.p, self.arg
        j = rng.below(len(p.moduli))
        m = p.moduli[j]
        r = x % m
        for i in range((m + 7) >> 3):
            mark[i] = 0
        omega = p.omegas[j]
        keep = rng.chance(p.thresholds[j])
        s = omega - 1 if keep else omega
        arg[0], arg[1], arg[2] = m - 1 - s, m - 1, r
        rng.drive(_fill, mark, arg)
        if keep:
            mark[r >> 3] |= 1 << (r & 7)
        return j


def privatise(params, x, rng, mark):
    """One-off privatise (allocates its argument buffer); devices keep a Randomiser."""
    return Randomiser(params).privatise(x, rng, mark)
