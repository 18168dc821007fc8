"""The wire codec of a config of any protocol.

:func:`codec` gives :class:`~mss_protocol.mss.wire.WireCodec` for an MSS or
SS config and :class:`OracleCodec` for a one-output protocol's
(:class:`~mss_protocol.oracle_config.OracleConfig`).  Both decode strictly
(header checks: :mod:`.frames`) into :class:`~mss_protocol.frames.Report`
or, many at a time, a :class:`~mss_protocol.batch.Batch`.
"""
import numpy as np

from mss_device.frame import HEADER, put, start
from mss_device.params import Params
from mss_protocol.batch import Batch
from mss_protocol.frames import Report, WireError, check_device, split
from mss_protocol.mss.wire import WireCodec
from mss_protocol.oracle_config import OracleConfig


class OracleCodec:
    """Strict decoder of one-output protocol reports (header checks: :mod:`.frames`).

    Bodies: the value in ``nbits`` bits (grr, hr, pgr: the point; olh: y),
    or the k bits of a unary encoding.  ``subset`` of a decoded report is
    what the counts tally: the point, the set bits, or olh's (a, b, y) with
    the seed derived from the device id and epoch.
    """

    def __init__(self, cfg):
        self.cfg = cfg
        self.params = Params(cfg.to_dict())
        self.client = self.params.client()
        self.unary = cfg.protocol.unary_body
        self.n = None if self.unary else self.client.n
        self.nbits = self.client.nbits
        self.body_lengths = {(self.nbits + 7) // 8}

    def encode(self, value, epoch=0, seq=0):
        """Bytes of a report whose body is ``value`` (the point, y, or the unary
        bits as one integer, item 0 most significant), with the device's header."""
        out = start(self.params, self.nbits, epoch, seq)
        put(out, HEADER[self.params.frame] << 3, value, self.nbits)  # a host int may exceed 2**30 here
        return bytes(out)

    def decode(self, data, device_id=None, epoch=None):
        frame, epoch, seq, body, subset = self._parse(data, device_id, epoch)
        if self.unary:
            bits = np.unpackbits(np.frombuffer(body, dtype=np.uint8), count=self.nbits)
            subset = tuple(np.flatnonzero(bits).tolist())
        return Report(config_id=self.cfg.config_id, epoch=epoch, seq=seq, j=0, subset=subset, frame=frame)

    def decode_many(self, frames, device_ids=None, epochs=None):
        """:class:`~mss_protocol.batch.Batch` of ``frames`` (``device_ids``, ``epochs``:
        each one's, or None), checked as :meth:`decode` checks each; the unary
        encodings keep their packed bodies (``bits``), the others their subsets
        (``members``: the point, or olh's (a, b, y))."""
        batch = Batch(self.cfg, nbits=self.nbits)
        parts = [body if self.unary else subset for body, subset in batch.parse(
            frames, lambda n, data: self._parse(data, None if device_ids is None else device_ids[n],
                                                None if epochs is None else epochs[n]))]
        batch.j = np.zeros(len(parts), dtype=np.int64)
        if self.unary:
            nbytes = next(iter(self.body_lengths))
            batch.bits = np.frombuffer(b"".join(parts), dtype=np.uint8).reshape(len(parts), nbytes)
        else:
            batch.members = np.array(parts, dtype=np.int64).reshape(-1)
            batch.sizes = np.full(len(parts), self.cfg.protocol.members_per_report, dtype=np.int64)
        return batch

    def _parse(self, data, device_id, epoch):
        """(frame, epoch, seq, body, subset) of a valid report, else WireError; the
        subset of a unary encoding (its set bits) is left to the caller (None)."""
        frame, epoch, seq, body = split(data=data, config_id=self.cfg.config_id, body_lengths=self.body_lengths,
                                        kind=self.cfg.frame, epoch=epoch)
        if self.cfg.protocol.has_seed:  # its seed: checked with the link's data, before the body
            check_device(device_id)
        code = int.from_bytes(body, "big")
        pad = 8 * len(body) - self.nbits
        if code & ((1 << pad) - 1):
            raise WireError("padding", "non-zero padding bits")
        code >>= pad
        if self.unary:
            return frame, epoch, seq, body, None
        if code >= self.n:
            raise WireError("value", f"reported value {code} >= {self.n}")
        return frame, epoch, seq, body, self.cfg.protocol.decoded_members(code, self.cfg, device_id, epoch)


def codec(cfg):
    """The wire codec of a config of any protocol."""
    return OracleCodec(cfg) if isinstance(cfg, OracleConfig) else WireCodec(cfg)
