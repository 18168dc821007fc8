"""Vectorised NumPy sampler of the device channel, for simulation at large n.

It draws from exactly the distribution of :func:`mss_device.randomiser.privatise`
(uniform block, keep-coin with probability T_j / 2**30, uniform fillers
from [m_j] without the residue) but with NumPy's generator instead of the
device byte stream, in chunks with bounded memory.  A chunk's subsets are a
(users, m) bitmap: fillers use Floyd's algorithm run for all users of the
chunk at once, on flat indices into the bitmap, and for more than half of
the m - 1 other residues Floyd draws the complement (fewer steps, the same
law: the complement of a uniform subset is uniform).  Counts are the
bitmap's column sums; reports its rows' nonzero positions.

Where that bitmap work (users x omega per block) exceeds ``MOMENTS_ABOVE``
(k = 2^20 at n = 10^5 would take hours), :func:`_block_counts_moments`
draws a block's counts directly: the keep coins exactly (binomial per
residue class), the fillers' counts with their exact means, variances and
total, and the negative correlation of a sum of uniform subsets, as a
rounded Gaussian (each count is a sum of thousands of indicators there).
"""
import numpy as np

from mss_protocol.privacy import ONE

CHUNK_CELLS = 1 << 24  # bitmap cells (bytes) per chunk
MOMENTS_ABOVE = 1 << 26  # filler draws per block above which counts are drawn by moments


def _fillers(r, s, m, rng):
    """Bitmap (len(r), m): row i marks s distinct uniform values of [0, m) without r_i.

    Floyd's algorithm (one step per value, all rows at once), or for s > (m - 1)/2
    Floyd's m - 1 - s values inverted, with r_i cleared."""
    c = r.size
    flip = 2 * s > m - 1
    mark = np.zeros((c, m), dtype=bool)
    flat = mark.ravel()
    base = np.arange(c) * m  # flat index of each row's value 0
    top = m - 1
    for t in range(top - (top - s if flip else s), top):
        v = rng.integers(0, t + 1, size=c)
        v += v >= r
        v += base
        taken = np.flatnonzero(flat.take(v))  # only the rows whose draw was taken (< s/m) are fixed
        v[taken] = base[taken] + (t + (t >= r[taken]))
        flat.put(v, True)
    if flip:
        np.logical_not(mark, out=mark)
        flat[base + r] = False
    return mark


def _block_subsets(r, m, omega, threshold, rng):
    """Subsets of size omega for residues r in block (m, omega, T), as a bitmap (len(r), m)."""
    keep = rng.integers(0, ONE, size=r.size) < threshold
    z = np.empty((r.size, m), dtype=bool)
    z[keep] = _fillers(r[keep], omega - 1, m, rng)
    z[np.flatnonzero(keep), r[keep]] = True
    z[~keep] = _fillers(r[~keep], omega, m, rng)
    return z


def _column_counts(mark):
    """Column sums (m,) of a bool bitmap (rows, m), as int64: summed as uint16 in slabs of
    fewer than 2**16 rows (no overflow), half the time of NumPy's int64 sum of bools."""
    counts = np.zeros(mark.shape[1], dtype=np.int64)
    rows = mark.view(np.uint8)
    for lo in range(0, mark.shape[0], 0xFFFF):
        counts += rows[lo:lo + 0xFFFF].sum(axis=0, dtype=np.uint16)
    return counts


def _block_counts(r, m, omega, threshold, rng):
    """Inclusion counts (m,) of :func:`_block_subsets`'s subsets, from the same draws, without
    assembling their bitmap: the kept residues counted once each, and each half's fillers."""
    keep = rng.integers(0, ONE, size=r.size) < threshold
    counts = _column_counts(_fillers(r[keep], omega - 1, m, rng)) + np.bincount(r[keep], minlength=m)
    return counts + _column_counts(_fillers(r[~keep], omega, m, rng))


def _block_counts_moments(r, m, omega, threshold, rng):
    """Inclusion counts (m,) of a block's reports for residues ``r``, by moments.

    Residue class v (n_v users) keeps its own residue K_v ~ Binomial(n_v, p)
    times (exact).  Each user of class u draws s_u fillers (omega - 1 if it
    kept, else omega) uniformly from the M = m - 1 other residues, so the
    filler count F_v (users of other classes only) has mean
    (S - S_v) / M and variance sum_{u != v} s_u/M (1 - s_u/M) (S_v: the
    fillers of class v), and sum_v F_v = S exactly.  F is drawn as those
    means plus independent normals with the variances scaled by M / (M - 1)
    and centred, which gives a sum of uniform subsets its covariance
    a (M I - 1 1^T) / (M - 1), then rounded to integers summing to S.
    """
    n_v = np.bincount(r, minlength=m)
    kept = rng.binomial(n_v, threshold / ONE)
    fill = kept * (omega - 1) + (n_v - kept) * omega  # S_v
    total = int(fill.sum())
    M = m - 1
    a_kept, a_not = ((omega - 1) / M) * (1 - (omega - 1) / M), (omega / M) * (1 - omega / M)
    var_v = kept * a_kept + (n_v - kept) * a_not
    noise = rng.standard_normal(m) * np.sqrt((var_v.sum() - var_v) * M / (M - 1))
    f = np.maximum((total - fill) / M + noise - noise.mean(), 0)
    counts = np.floor(f).astype(np.int64)
    short = total - int(counts.sum())  # hand out the remainder by the fractional parts
    if short > 0:
        frac = f - counts
        counts += rng.multinomial(short, frac / frac.sum()) if frac.sum() > 0 else 0
    elif short < 0:  # clamping at 0 raised the sum: take the excess from the largest counts
        counts[np.argpartition(counts, short)[short:]] -= 1
    return kept + counts


def _chunks(n, m):
    step = max(1, CHUNK_CELLS // m)
    for lo in range(0, n, step):
        yield slice(lo, min(n, lo + step))


def sample_bitmaps(cfg, values, rng):
    """Reports for ``values`` (shape (n,)) as bitmaps, block by block: (j (n,),
    [(rows, Z) for each block b]), Z (len(rows), m_b) bool with row i the subset of
    the report of values[rows[i]] (whose j is b).  One bitmap per block: callers
    bound n x max(m_j) (:func:`sample_reports` chunks, the attacks' batches)."""
    values = np.asarray(values, dtype=np.int64)
    j = rng.integers(0, cfg.l, size=values.size)
    blocks = []
    for b, (m, omega, t) in enumerate(zip(cfg.moduli, cfg.omegas, cfg.thresholds)):
        rows = np.flatnonzero(j == b)
        blocks.append((rows, _block_subsets(r=values[rows] % m, m=m, omega=omega, threshold=t, rng=rng)))
    return j, blocks


def sample_reports(cfg, values, rng):
    """Reports for ``values`` (shape (n,)): (j (n,), subsets) with subsets[i] sorted.

    Meant for tests and small n; large simulations use :func:`sample_counts`.
    """
    values = np.asarray(values, dtype=np.int64)
    j = np.empty(values.size, dtype=np.int64)
    subsets = [None] * values.size
    for part in _chunks(values.size, max(cfg.moduli)):
        j[part], blocks = sample_bitmaps(cfg, values[part], rng)
        for rows, z in blocks:
            for i, row in zip(rows + part.start, z):
                subsets[i] = tuple(np.flatnonzero(row).tolist())
    return j, subsets


def sample_counts(cfg, values, rng):
    """Sufficient statistic of reports for ``values``: (n_j (l,), c (sum m_j,)).

    c[offsets[j] + r] counts block-j reports whose subset contains r.
    ``values`` may be an iterator of arrays (chunks) to bound memory.
    """
    if isinstance(values, np.ndarray):
        values = [values]
    n_j = np.zeros(cfg.l, dtype=np.int64)
    counts = np.zeros(cfg.offsets[-1], dtype=np.int64)
    for chunk in values:
        chunk = np.asarray(chunk, dtype=np.int64)
        j = rng.integers(0, cfg.l, size=chunk.size)
        n_j += np.bincount(j, minlength=cfg.l)
        for b, (m, omega, t) in enumerate(zip(cfg.moduli, cfg.omegas, cfg.thresholds)):
            r = chunk[j == b] % m
            if r.size * omega > MOMENTS_ABOVE:
                counts[cfg.offsets[b]:cfg.offsets[b + 1]] += _block_counts_moments(
                        r=r, m=m, omega=omega, threshold=t, rng=rng)
                continue
            for part in _chunks(r.size, m):
                counts[cfg.offsets[b]:cfg.offsets[b + 1]] += _block_counts(
                        r=r[part], m=m, omega=omega, threshold=t, rng=rng)
    return n_j, counts
