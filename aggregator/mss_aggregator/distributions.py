"""Value distributions for simulation: ``zipf:S``, ``spike``, ``uniform``, ``file:PATH``.

``zipf:S`` is P(i) proportional to (i + 1)^-S (item 0 most frequent, as in
the PGR experiments); ``spike`` puts all mass on item 0; ``file:PATH``
reads a CSV of non-negative counts, one per item (a single column, or
``item,count`` rows; a header row is allowed) or, for a ``.json`` file,
the output of ``mss estimate --json`` (its estimates projected onto the
probability simplex, as a prior must be a distribution).
"""
import csv
import json

import numpy as np


class DistributionError(ValueError):
    pass


def parse(spec, k):
    """Probability vector of shape (k,) for a distribution spec."""
    name, _, arg = spec.partition(":")
    if name == "uniform" and not arg:
        return np.full(k, 1.0 / k)
    if name == "spike" and not arg:
        p = np.zeros(k)
        p[0] = 1.0
        return p
    if name == "zipf":
        try:
            s = float(arg)
        except ValueError:
            raise DistributionError(f"zipf needs an exponent, e.g. zipf:1.1 (got {spec!r})") from None
        if not np.isfinite(s):
            raise DistributionError(f"zipf needs a finite exponent, e.g. zipf:1.1 (got {spec!r})")
        # in logs relative to the largest weight (item 0, or k - 1 when s < 0), all <= 0:
        # (i + 1)**-s itself over- or underflows for large |s|
        log_i = np.log(np.arange(1, k + 1, dtype=float))
        with np.errstate(over="ignore"):
            p = np.exp(-s * (log_i - log_i[0 if s >= 0 else -1]))
        return p / p.sum()
    if name == "file" and arg:
        return _from_estimate(arg, k) if arg.endswith(".json") else _from_csv(arg, k)
    raise DistributionError(f"unknown distribution {spec!r}: use zipf:S, spike, uniform or file:PATH")


def _from_csv(path, k):
    counts = np.zeros(k)
    try:
        with open(path, newline="") as fh:
            rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    except OSError as exc:
        raise DistributionError(f"{path}: {exc}") from None
    if rows and not _is_number(rows[0][-1]):
        rows = rows[1:]  # header
    for line, row in enumerate(rows, 1):
        try:
            item, value = (line - 1, float(row[0])) if len(row) == 1 else (int(row[0]), float(row[1]))
        except ValueError:
            raise DistributionError(f"{path}: row {line}: not a number: {row}") from None
        if not 0 <= item < k:
            raise DistributionError(f"{path}: row {line}: item {item} outside [0, {k})")
        if not 0 <= value < np.inf:
            raise DistributionError(f"{path}: row {line}: a count must be a non-negative finite "
                                    f"number, got {row[-1].strip()!r}")
        counts[item] = float(counts[item]) + value  # a Python float: beyond the largest, inf without a warning
        if counts[item] == np.inf:
            raise DistributionError(f"{path}: row {line}: the counts of item {item} add up beyond "
                                    f"the largest float")
    if counts.max() <= 0:
        raise DistributionError(f"{path}: no positive counts")
    counts /= counts.max()  # first: a sum of huge counts would overflow
    return counts / counts.sum()


def _from_estimate(path, k):
    from mss_protocol.postprocess import simplex

    try:
        with open(path) as fh:
            rows = json.load(fh)["estimates"]
        est = np.array([float(r["estimate"]) for r in sorted(rows, key=lambda r: r["item"])])
        items = [r["item"] for r in rows]
    except OSError as exc:
        raise DistributionError(f"{path}: {exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise DistributionError(f"{path}: not an estimates document, the JSON output of `mss estimate` "
                                f"({exc!r})") from None
    if sorted(items) != list(range(k)):
        raise DistributionError(f"{path}: estimates cover {len(items)} items, expected items 0..{k - 1}")
    if not np.all(np.isfinite(est)):
        raise DistributionError(f"{path}: estimates are not finite numbers")
    # The projection is unchanged by a shift, and an entry 1 or more below the largest projects
    # to 0: shifted and clipped so, huge estimates cannot overflow the projection's sums.
    with np.errstate(over="ignore"):
        return simplex(np.maximum(est - est.max(), -1.0))


def _is_number(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def draw(probs, n, rng, chunk=1 << 20):
    """Yield arrays of values drawn iid from ``probs``, in chunks (bounded memory)."""
    for lo in range(0, n, chunk):
        yield rng.choice(probs.size, size=min(chunk, n - lo), p=probs)
