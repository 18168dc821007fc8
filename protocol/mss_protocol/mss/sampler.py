"""Vectorised NumPy sampler of the device channel, for simulation at large n.

It draws from exactly the distribution of :func:`mss_device.randomiser.privatise`
(uniform block, keep-coin with probability T_j / 2**30, uniform fillers
from [m_j] without the residue) but with NumPy's generator instead of the
device byte stream, in chunks with bounded memory.  Fillers use Floyd's
algorithm run for all users of a chunk at once on a (users, m) bitmap.
"""
import numpy as np

from mss_protocol.privacy import ONE

CHUNK_CELLS = 1 << 24  # bitmap cells (bytes) per chunk


def _fillers(r, s, m, rng):
    """For each residue r_i, s distinct uniform values of [0, m) without r_i: (len(r), s)."""
    c = r.size
    out = np.empty((c, s), dtype=np.int64)
    if s == 0:
        return out
    mark = np.zeros((c, m), dtype=bool)
    rows = np.arange(c)
    top = m - 1
    for col, t in enumerate(range(top - s, top)):
        v = rng.integers(0, t + 1, size=c)
        v += v >= r
        tt = t + (t >= r)
        v = np.where(mark[rows, v], tt, v)
        mark[rows, v] = True
        out[:, col] = v
    return out


def _block_subsets(r, m, omega, threshold, rng):
    """Subsets of size omega for residues r in block (m, omega, T): (len(r), omega), unsorted."""
    keep = rng.integers(0, ONE, size=r.size) < threshold
    z = np.empty((r.size, omega), dtype=np.int64)
    z[keep, 0] = r[keep]
    z[keep, 1:] = _fillers(r[keep], omega - 1, m, rng)
    z[~keep] = _fillers(r[~keep], omega, m, rng)
    return z


def _chunks(n, m):
    step = max(1, CHUNK_CELLS // m)
    for lo in range(0, n, step):
        yield slice(lo, min(n, lo + step))


def sample_reports(cfg, values, rng):
    """Reports for ``values`` (shape (n,)): (j (n,), subsets) with subsets[i] sorted.

    Meant for tests and small n; large simulations use :func:`sample_counts`.
    """
    values = np.asarray(values, dtype=np.int64)
    j = rng.integers(0, cfg.l, size=values.size)
    subsets = [None] * values.size
    for b, (m, omega, t) in enumerate(zip(cfg.moduli, cfg.omegas, cfg.thresholds)):
        idx = np.nonzero(j == b)[0]
        for part in _chunks(idx.size, m):
            z = np.sort(_block_subsets(values[idx[part]] % m, m, omega, t, rng), axis=1)
            for i, row in zip(idx[part], z):
                subsets[i] = tuple(int(v) for v in row)
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
            for part in _chunks(r.size, m):
                z = _block_subsets(r[part], m, omega, t, rng)
                counts[cfg.offsets[b]:cfg.offsets[b + 1]] += np.bincount(z.ravel(), minlength=m)
    return n_j, counts
