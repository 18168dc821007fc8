"""Device configuration of the one-output protocols: grr, rappor, sue, olh, hr, pgr.

Such a protocol is fixed by (name, k, epsilon): its integers (thresholds,
field and sizes, in ``mss_device.params.FIELDS`` order) follow from them,
and a loaded config must carry exactly those integers, so the decoder's p
and q are the device's.  The additive counts (:mod:`.counts`) have one block
of ``size`` cells: the support counts (k,) for grr, the unary encodings and
olh, the report histogram (K,) for hr and pgr.

Two optional layers (SPEC.md sections 3 and 5): OLH's ``seed`` ("epoch", the
default, or "device": the hash seed from the config id and device id only,
the same every epoch, which allows memoization and compact frames), and for
grr, olh, hr and pgr an instantaneous layer ``irr`` {epsilon, t, eps_effective}
(RAPPOR's IRR, :mod:`.irr`): ``epsilon`` and ``eps_effective`` stay the
permanent draw's, ``irr_eps_effective`` is the layer's and
``report_eps_effective`` one composed report's; the protocol object decodes
with the composed channel.
"""
import json
from functools import cached_property

import numpy as np

from mss_device.frame import HEADER, KINDS, put, start
from mss_device.olh import device_seed, seed
from mss_device.params import FIELDS, IRR, SEEDS, THRESHOLD_BITS, Params, oracle_config_id
from mss_protocol import privacy, registry
from mss_protocol.batch import Batch
from mss_protocol.frames import Report, WireError, check_device, split
from mss_protocol.config_file import (FORMAT, FORMAT_VERSION, ConfigError, check_common, check_id, frame_index,
                                      is_int, read_json)
from mss_protocol.limits import check_k

NAMES = tuple(FIELDS)
# SPEC.md section 4: OLH's epoch seed is derived from the epoch the board drew in
OLH_COMPACT = ("frame: olh cannot use compact frames with seed epoch (its seed needs the drawing epoch): "
               "use compact-epoch, or seed device")


class OracleConfig:
    """An immutable config of protocol ``name`` on [k] at ``epsilon``; ``seed`` (olh:
    "epoch" or "device"), ``irr_epsilon`` (grr, olh, hr, pgr: the instantaneous layer's
    budget, None for none)."""

    def __init__(self, name, k, epsilon, frame="full", seed="epoch", irr_epsilon=None):
        if name not in FIELDS:
            raise ConfigError(f"protocol must be one of {', '.join(NAMES)}, got {name!r}")
        try:
            check_k(k)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if why := privacy.epsilon_problem(epsilon):
            raise ConfigError(why)
        self.name, self.k, self.epsilon = name, k, float(epsilon)
        self.frame = frame_index(frame)
        if seed not in SEEDS:
            raise ConfigError(f"seed must be one of {', '.join(SEEDS)}, got {seed!r}")
        if seed != "epoch" and name != "olh":
            raise ConfigError("seed: only olh has a hash seed")
        self.seed = seed
        if name == "olh" and self.frame == 1 and seed == "epoch":
            raise ConfigError(OLH_COMPACT)
        if irr_epsilon is not None and name not in IRR:
            raise ConfigError(f"irr: only {', '.join(IRR)} have an instantaneous layer (one output per "
                              f"report), not {name}")
        if irr_epsilon is not None and (why := privacy.epsilon_problem(irr_epsilon)):
            raise ConfigError(f"irr.{why}")
        try:
            self.protocol = registry.make(name, k, self.epsilon)
            if irr_epsilon is not None:
                self.protocol = self.protocol.with_irr(float(irr_epsilon))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.values = tuple(self.protocol.device_values())
        irr = self.protocol.irr if irr_epsilon is not None else None
        self.irr_epsilon = None if irr is None else irr.epsilon
        self.irr_threshold = None if irr is None else irr.threshold
        self.irr_eps_effective = None if irr is None else irr.eps_effective
        self.config_id = oracle_config_id(name, k, self.values, seed, self.irr_threshold)
        self.eps_effective = self.protocol.eps_effective
        # one composed report's exact worst log-ratio (without an IRR: eps_effective)
        self.report_eps_effective = getattr(self.protocol, "report_eps_effective", self.eps_effective)

    # the shape of the counts: one block (MSS's Counts serve every protocol)
    l = 1

    @cached_property
    def size(self):
        return getattr(self.protocol, "K", self.k) if self.name in ("hr", "pgr") else self.k

    @property
    def offsets(self):
        return np.array([0, self.size])

    @property
    def config_id_hex(self):
        return self.config_id.hex()

    @property
    def bits_per_report(self):
        return self.protocol.bits

    def with_frame(self, frame):
        return OracleConfig(self.name, self.k, self.epsilon, frame, self.seed, self.irr_epsilon)

    def tally(self, j, members, sizes):
        """Counts (size,) of stored reports: their members, or OLH's support of (a, b, y)."""
        if self.name == "olh":
            return self.protocol.tally(tuple(members.reshape(-1, 3).T))
        return np.bincount(members, minlength=self.size)

    # -- serialisation ------------------------------------------------------
    def to_dict(self):
        d = {"format": FORMAT, "version": FORMAT_VERSION, "protocol": self.name, "k": self.k,
             "epsilon": self.epsilon, "eps_effective": self.eps_effective}
        d.update(zip(FIELDS[self.name], self.values))
        if self.seed != "epoch":
            d["seed"] = self.seed
        if self.irr_threshold is not None:
            d["irr"] = self.protocol.irr.to_dict()
        d.update({"threshold_bits": THRESHOLD_BITS, "config_id": self.config_id_hex,
                  "frame": KINDS[self.frame]})
        return d

    @classmethod
    def from_dict(cls, d, source="config"):
        """Validate a config dict: the fields every protocol shares
        (:func:`~mss_protocol.config_file.check_common`), then its integers must be the
        ones (k, epsilon) give, within the device's limits, and the config id theirs."""
        name = check_common(d, source)
        if name not in FIELDS:
            raise ConfigError(f"{source}: protocol must be one of {', '.join(NAMES)}, got {name!r}")
        seed = d.get("seed", "epoch")
        if not isinstance(seed, str) or seed not in SEEDS:
            raise ConfigError(f"{source}: seed must be one of {', '.join(SEEDS)}, got {seed!r}")
        irr = d.get("irr")
        if "irr" in d:
            if not isinstance(irr, dict):
                raise ConfigError(f"{source}: irr must be an object {{epsilon, t}}, got {irr!r}")
            for field in ("epsilon", "t"):
                if field not in irr:
                    raise ConfigError(f"{source}: missing field 'irr.{field}'")
            if not is_int(irr["t"]):
                raise ConfigError(f"{source}: irr.t must be a JSON integer, got {irr['t']!r}")
        try:
            cfg = cls(name, d["k"], d["epsilon"], d.get("frame", "full"), seed,
                      None if irr is None else irr["epsilon"])
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
        for field, value in zip(FIELDS[name], cfg.values):
            if d[field] != value:
                raise ConfigError(f"{source}: {field} = {d[field]!r} is not {name}'s value {value} "
                                  f"for k = {cfg.k}, epsilon = {cfg.epsilon}")
        if irr is not None and irr["t"] != cfg.irr_threshold:
            raise ConfigError(f"{source}: irr.t = {irr['t']!r} is not the instantaneous layer's value "
                              f"{cfg.irr_threshold} for n_out = {cfg.protocol.irr.n}, irr.epsilon = "
                              f"{cfg.irr_epsilon}")
        check_id(d, cfg.config_id_hex, source)
        return cfg

    def save(self, path, extra=None):
        d = self.to_dict()
        d.update(extra or {})
        with open(path, "w") as fh:
            json.dump(d, fh, indent=1)
            fh.write("\n")

    def __eq__(self, other):
        return isinstance(other, OracleConfig) and self.to_dict() == other.to_dict()

    def __hash__(self):
        return hash(self.config_id)

    def __repr__(self):
        return f"OracleConfig({self.name}, k={self.k}, epsilon={self.epsilon}, id={self.config_id_hex})"


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
        self.unary = cfg.name in ("rappor", "sue")
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
        return Report(self.cfg.config_id, epoch, seq, 0, subset, frame)

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
            batch.sizes = np.full(len(parts), 3 if self.cfg.name == "olh" else 1, dtype=np.int64)
        return batch

    def _parse(self, data, device_id, epoch):
        """(frame, epoch, seq, body, subset) of a valid report, else WireError; the
        subset of a unary encoding (its set bits) is left to the caller (None)."""
        frame, epoch, seq, body = split(data, self.cfg.config_id, self.body_lengths, self.cfg.frame, epoch)
        if self.cfg.name == "olh":  # its seed: checked with the link's data, before the body
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
        subset = (code,)
        if self.cfg.name == "olh":
            P = self.cfg.protocol.P
            a, b = (device_seed(self.cfg.config_id, device_id, P) if self.cfg.seed == "device"
                    else seed(self.cfg.config_id, epoch, device_id, P))
            subset = (a, b, code)
        return frame, epoch, seq, body, subset


def load_dict(d, source="config"):
    """The config of any protocol: :class:`~mss_protocol.mss.config.MssConfig`
    for mss and ss, :class:`OracleConfig` for the others."""
    from mss_protocol.mss.config import MssConfig

    name = check_common(d, source)
    return (MssConfig if name in ("mss", "ss") else OracleConfig).from_dict(d, source)


def load(path):
    return load_dict(read_json(path, "config"), source=str(path))


def codec(cfg):
    """The wire codec of a config of any protocol."""
    from mss_protocol.mss.wire import WireCodec

    return OracleCodec(cfg) if isinstance(cfg, OracleConfig) else WireCodec(cfg)
