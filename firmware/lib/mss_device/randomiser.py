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
reused across reports so the hot path does not allocate.
"""


def is_set(mark, v):
    return mark[v >> 3] & (1 << (v & 7))


def _set(mark, v):
    mark[v >> 3] |= 1 << (v & 7)


def privatise(params, x, rng, mark):
    """Randomise x; return the block index j and leave Z as set bits in mark."""
    moduli = params.moduli
    j = rng.below(len(moduli))
    m = moduli[j]
    r = x % m
    for i in range((m + 7) >> 3):
        mark[i] = 0
    omega = params.omegas[j]
    keep = rng.chance(params.thresholds[j])
    s = omega - 1 if keep else omega
    top = m - 1
    # Floyd's algorithm: after the step for t, the chosen set is a uniform
    # (t - top + s + 1)-subset of [0, t].  Stored shifted past r.
    for t in range(top - s, top):
        v = rng.below(t + 1)
        v += v >= r
        if is_set(mark, v):
            v = t + (t >= r)
        _set(mark, v)
    if keep:
        _set(mark, r)
    return j
