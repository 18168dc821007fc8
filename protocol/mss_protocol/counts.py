"""The sufficient statistic of reports: per-block report and inclusion counts.

For block j the aggregator keeps n_j (reports with J = j) and c_j[r]
(those whose subset contains r), as in google/rappor's ``sum-bits``: the
counts are additive, so accumulators merge by addition, and they are saved
together with the config that defines them.  The one-output protocols
(:mod:`mss_protocol.oracle_config`) use the same shape with one block: their
support counts or report histogram, so this type lives outside any one
protocol's package.
"""
import json
import os

import numpy as np

from mss_protocol.config_file import ConfigError, read_json
from mss_protocol.configs import load_dict

FORMAT = "mss-counts"
FORMAT_VERSION = 1


class Counts:
    """Mergeable counts for one configuration (of any protocol).

    Attributes
    ----------
    n : ndarray of int64, shape (l,)
        Reports per block.
    c : ndarray of int64, shape (sum(moduli),)
        Inclusion counts, block j at ``cfg.offsets[j]:cfg.offsets[j+1]``.
    """

    def __init__(self, cfg, n=None, c=None):
        self.cfg = cfg
        self.n = np.zeros(cfg.l, dtype=np.int64) if n is None else np.asarray(n, dtype=np.int64)
        self.c = np.zeros(cfg.offsets[-1], dtype=np.int64) if c is None else np.asarray(c, dtype=np.int64)
        if self.n.shape != (cfg.l,) or self.c.shape != (cfg.offsets[-1],):
            raise ValueError("count arrays do not match the config's block sizes")

    @property
    def total(self):
        return int(self.n.sum())

    def block(self, j):
        return self.c[self.cfg.offsets[j]:self.cfg.offsets[j + 1]]

    def add(self, reports):
        """Add decoded reports (objects with ``j`` and ``subset``)."""
        reports = list(reports)
        j = np.fromiter((r.j for r in reports), dtype=np.int64, count=len(reports))
        sizes = np.fromiter((len(r.subset) for r in reports), dtype=np.int64, count=len(reports))
        members = np.fromiter((v for r in reports for v in r.subset), dtype=np.int64, count=int(sizes.sum()))
        return self.add_tally(j, members, sizes)

    def add_tally(self, j, members, sizes):
        """Vectorised tally: ``j`` (reports,) block indices, ``members`` their
        subsets concatenated in report order, ``sizes`` (reports,) their lengths;
        the config tallies them into count cells (``cfg.tally``)."""
        if j.size == 0:
            return self
        self.n += np.bincount(j, minlength=self.cfg.l)
        self.c += self.cfg.tally(j, members, sizes)
        return self

    def add_counts(self, n, c):
        """Add raw count arrays (e.g. from the simulator)."""
        self.n += n
        self.c += c
        return self

    def merge(self, other):
        """Return self + other; both must share the configuration."""
        if self.cfg.config_id != other.cfg.config_id:
            raise ConfigError(f"cannot merge counts of config {other.cfg.config_id_hex} "
                              f"into {self.cfg.config_id_hex}")
        return Counts(self.cfg, self.n + other.n, self.c + other.c)

    def to_dict(self):
        return {"format": FORMAT, "version": FORMAT_VERSION, "config": self.cfg.to_dict(),
                "n": self.n.tolist(),
                "counts": [self.block(j).tolist() for j in range(self.cfg.l)]}

    @classmethod
    def from_dict(cls, d, source="counts"):
        if not isinstance(d, dict) or d.get("format") != FORMAT or d.get("version") != FORMAT_VERSION:
            raise ConfigError(f"{source}: not an {FORMAT} v{FORMAT_VERSION} file")
        cfg = load_dict(d.get("config"), source=f"{source}: config")
        try:
            n = np.asarray(d["n"], dtype=np.int64)
            c = np.concatenate([np.asarray(b, dtype=np.int64) for b in d["counts"]])
            counts = cls(cfg, n, c)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: bad count arrays: {exc}") from None
        if (counts.n < 0).any() or (counts.c < 0).any():
            raise ConfigError(f"{source}: negative counts")
        if any((counts.block(j) > counts.n[j]).any() for j in range(cfg.l)):
            raise ConfigError(f"{source}: an inclusion count exceeds its block's report count")
        return counts

    def save(self, path):
        """Write atomically (temp file + rename)."""
        tmp = f"{path}.tmp"
        with open(tmp, "w") as fh:
            json.dump(self.to_dict(), fh)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path):
        return cls.from_dict(read_json(path, "counts"), source=str(path))
