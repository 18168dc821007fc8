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

from mss_device.frame import KINDS
from mss_device.params import FIELDS, IRR, SEEDS, THRESHOLD_BITS, oracle_config_id
from mss_protocol import privacy, registry
from mss_protocol.config_file import (FORMAT, FORMAT_VERSION, ConfigError, check_common, check_id, frame_index,
                                      seeded as seeded_names,
                                      is_int)
from mss_protocol.limits import check_k

NAMES = tuple(FIELDS)
# SPEC.md section 4: OLH's epoch seed is derived from the epoch the board drew in
SEEDED_COMPACT = ("frame: {name} cannot use compact frames with seed epoch (its seed needs the drawing epoch): "
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
        seeded = registry.protocol_class(name).has_seed
        if seed != "epoch" and not seeded:
            raise ConfigError(f"seed: only {', '.join(seeded_names())} has a hash seed")
        self.seed = seed
        if seeded and self.frame == 1 and seed == "epoch":
            raise ConfigError(SEEDED_COMPACT.format(name=name))
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
        self.config_id = oracle_config_id(name=name, k=k, values=self.values, seed=seed, irr=self.irr_threshold)
        self.eps_effective = self.protocol.eps_effective
        # one composed report's exact worst log-ratio (without an IRR: eps_effective)
        self.report_eps_effective = self.protocol.report_eps_effective

    # the shape of the counts: one block (MSS's Counts serve every protocol)
    l = 1

    @cached_property
    def size(self):
        """Cells of the counts: the protocol's ``counts_size``."""
        return self.protocol.counts_size

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
        return OracleConfig(name=self.name, k=self.k, epsilon=self.epsilon, frame=frame, seed=self.seed,
                            irr_epsilon=self.irr_epsilon)

    def tally(self, j, members, sizes):
        """Counts (size,) of stored reports: the protocol's ``tally_members`` of their members
        (the point, or OLH's support of (a, b, y))."""
        return self.protocol.tally_members(members)

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
            cfg = cls(name=name, k=d["k"], epsilon=d["epsilon"], frame=d.get("frame", "full"), seed=seed,
                      irr_epsilon=None if irr is None else irr["epsilon"])
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
