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

from mss_protocol.frames import Report, WireError

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

    def parse(self, frames, parse):
        """Run ``parse(n, frame)`` -> (frame kind, epoch, seq, *rest) over ``frames``: keep
        the header of each good frame, the WireError of each bad one; return the rests."""
        rests = []
        for n, data in enumerate(frames):
            try:
                kind, epoch, seq, *rest = parse(n, data)
            except WireError as exc:
                self.errors[n] = exc
                continue
            self.positions.append(n)
            self.epochs.append(epoch)
            self.seqs.append(seq)
            self.frames.append(kind)
            rests.append(rest)
        return rests

    def subset(self, r):
        """Report r's subset as ``decode`` gives it (a tuple of ints)."""
        if self.bits is not None:
            return tuple(np.flatnonzero(np.unpackbits(self.bits[r], count=self.nbits)).tolist())
        start = int(self.sizes[:r].sum())
        return tuple(self.members[start:start + int(self.sizes[r])].tolist())

    def report(self, r):
        """Report r as ``codec.decode`` of its frame returns it."""
        return Report(config_id=self.cfg.config_id, epoch=self.epochs[r], seq=self.seqs[r], j=int(self.j[r]),
                      subset=self.subset(r), frame=self.frames[r])

    def reports(self):
        """``[self.report(r) for r in range(len(self))]``, the subsets split from the arrays
        at once: ``members`` cut at the running sums of ``sizes``, or the set bits of the
        unpacked unary ``bits`` (CHUNK rows at a time) -- not one NumPy call per report."""
        if self.bits is not None:
            subsets = []
            for start in range(0, len(self.bits), CHUNK):
                bodies = self.bits[start:start + CHUNK]
                rows, cols = np.nonzero(np.unpackbits(bodies, axis=1, count=self.nbits))
                ends, cols = np.cumsum(np.bincount(rows, minlength=len(bodies))).tolist(), cols.tolist()
                subsets += [tuple(cols[a:b]) for a, b in zip([0] + ends[:-1], ends)]
        else:
            members, ends = self.members.tolist(), np.cumsum(self.sizes).tolist()
            subsets = [tuple(members[a:b]) for a, b in zip([0] + ends[:-1], ends)]
        return [Report(config_id=self.cfg.config_id, epoch=epoch, seq=seq, j=j, subset=subset,
                       frame=frame) for epoch, seq, j, subset, frame
                in zip(self.epochs, self.seqs, self.j.tolist(), subsets, self.frames)]

    def counts(self):
        """The :class:`~mss_protocol.counts.Counts` of the batch's reports (vectorised tally;
        unary bodies summed bit by bit, CHUNK reports at a time)."""
        from mss_protocol.counts import Counts

        counts = Counts(self.cfg)
        if self.bits is None:
            return counts.add_tally(self.j, self.members, self.sizes)
        c = np.zeros(self.nbits, dtype=np.int64)
        for start in range(0, len(self.bits), CHUNK):
            c += np.unpackbits(self.bits[start:start + CHUNK], axis=1, count=self.nbits).sum(axis=0, dtype=np.int64)
        return counts.add_counts(np.array([len(self)], dtype=np.int64), c)
