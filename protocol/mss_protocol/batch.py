"""Many reports decoded at once, column-wise: what ``codec.decode_many`` returns.

``codec.decode(data)`` checks and decodes one report into a
:class:`~mss_protocol.frames.Report` whose subset is a tuple of Python ints.
That costs one Python object per member, which caps the host's rate where
subsets are long (OUE at k = 22000 lists ~5,900 set bits a report) or slow
to unrank one by one (SubsetSelection's 274-element subsets at k = 1024).
``codec.decode_many(frames, device_ids, epochs)`` runs the same checks on
every frame (the same :class:`~mss_protocol.frames.WireError` for a bad one)
and keeps the decoded subsets as NumPy arrays: ``members`` (the subsets
concatenated in report order, ``sizes`` their lengths) or, for the unary
encodings, ``bits``, their packed bodies.  :meth:`Batch.report` gives the
:class:`Report` that ``decode`` gives; :meth:`Batch.counts` tallies the batch
without a Python object per member.
"""
from dataclasses import dataclass, field

import numpy as np

from mss_protocol.frames import Report

CHUNK = 1024  # unary bodies unpacked this many at a time (k = 22000: 22 MB of bits)


@dataclass
class Batch:
    """The decoded reports of a batch, in input order, and why the others were refused.

    ``positions[r]`` is report r's index in the input; ``errors`` maps the
    index of every refused frame to its WireError.  Subsets: ``members`` with
    ``sizes`` (int64), or for the unary encodings ``bits`` (reports, bytes)
    uint8, the bodies whose first ``nbits`` bits are the encoding.
    """
    cfg: object
    positions: list = field(default_factory=list)
    epochs: list = field(default_factory=list)
    seqs: list = field(default_factory=list)
    frames: list = field(default_factory=list)
    j: np.ndarray = None
    members: np.ndarray = None
    sizes: np.ndarray = None
    bits: np.ndarray = None
    nbits: int = 0
    errors: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.positions)

    def subset(self, r):
        """Report r's subset as ``decode`` gives it (a tuple of ints)."""
        if self.bits is not None:
            return tuple(np.flatnonzero(np.unpackbits(self.bits[r], count=self.nbits)).tolist())
        start = int(self.sizes[:r].sum())
        return tuple(self.members[start:start + int(self.sizes[r])].tolist())

    def report(self, r):
        """Report r as ``codec.decode`` of its frame returns it."""
        return Report(self.cfg.config_id, self.epochs[r], self.seqs[r], int(self.j[r]), self.subset(r),
                      self.frames[r])

    def counts(self):
        """The :class:`~mss_protocol.mss.counts.Counts` of the batch's reports (vectorised tally;
        unary bodies summed bit by bit, CHUNK reports at a time)."""
        from mss_protocol.mss.counts import Counts

        counts = Counts(self.cfg)
        if self.bits is None:
            return counts.add_tally(self.j, self.members, self.sizes)
        c = np.zeros(self.nbits, dtype=np.int64)
        for start in range(0, len(self.bits), CHUNK):
            c += np.unpackbits(self.bits[start:start + CHUNK], axis=1, count=self.nbits).sum(axis=0, dtype=np.int64)
        return counts.add_counts(np.array([len(self)], dtype=np.int64), c)
