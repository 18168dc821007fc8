"""MSS configuration: the parameters devices and aggregator share.

A configuration is the domain size k, pairwise-coprime moduli m_j < k with
prod m_j >= k, per-block SubsetSelection subset sizes omega_j, and the
integer thresholds T_j (section 2 of SPEC.md).  Everything else (p', q',
eps_effective, bit counts, config id) is derived from these integers.
"""
import json
import math
from fractions import Fraction
from functools import cached_property

import numpy as np

from mss_device.frame import KINDS
from mss_device.params import THRESHOLD_BITS, config_id
from mss_protocol import privacy
from mss_protocol.config_file import (FORMAT, FORMAT_VERSION, ConfigError, check_common, check_id, frame_index,
                                      read_json)
from mss_protocol.limits import DEVICE_DRAW, check_k
from mss_protocol.subset_selection import optimal_omega, rank_bits, ss_q, ss_variance


class MssConfig:
    """An immutable MSS configuration.

    Build one with :meth:`build` (computes omegas and thresholds) or load
    one with :meth:`from_dict` / :meth:`load` (validates everything).
    """

    def __init__(self, k, epsilon, moduli, omegas, thresholds, frame="full"):
        self.frame = frame_index(frame)  # the header kind (mss_device.frame); not part of the channel
        self.k = int(k)
        self.epsilon = float(epsilon)
        self.moduli = tuple(int(m) for m in moduli)
        self.omegas = tuple(int(w) for w in omegas)
        self.thresholds = tuple(int(t) for t in thresholds)
        self._validate()

    @classmethod
    def subset_selection(cls, k, epsilon):
        """SubsetSelection on the full domain (Wang et al. 2016): the one-block
        case m_0 = k, sharing the randomiser, wire format and decoder."""
        return cls.build(k, epsilon, [k])

    @classmethod
    def build(cls, k, epsilon, moduli, omegas=None):
        """Configuration for these moduli with SS-optimal (or given) omegas."""
        if why := privacy.epsilon_problem(epsilon):
            raise ConfigError(why)
        moduli = [int(m) for m in moduli]
        if omegas is None:
            omegas = [optimal_omega(m, epsilon) for m in moduli]
        _check_moduli(int(k), moduli)
        thresholds = [privacy.threshold(m, w, epsilon) for m, w in zip(moduli, omegas)]
        return cls(k=k, epsilon=epsilon, moduli=moduli, omegas=omegas, thresholds=thresholds)

    def _validate(self):
        _check_moduli(self.k, self.moduli)
        if why := privacy.epsilon_problem(self.epsilon):
            raise ConfigError(why)
        if not (len(self.omegas) == len(self.thresholds) == len(self.moduli)):
            raise ConfigError("omegas and thresholds need one entry per modulus")
        for m, w, t in zip(self.moduli, self.omegas, self.thresholds):
            if not 1 <= w <= m // 2:
                raise ConfigError(f"omega {w} for modulus {m} must be in [1, {m // 2}]")
            if not 0 < t < privacy.ONE:
                raise ConfigError(f"threshold {t} for modulus {m} must be in (0, 2**30)")
            if t > privacy.threshold(m, w, self.epsilon):
                raise ConfigError(f"threshold {t} for modulus {m} exceeds the epsilon budget")
            if privacy.worst(privacy.ratio(m, w, t)) > Fraction(privacy.exp_decimal(self.epsilon)):
                raise ConfigError(f"threshold {t} for modulus {m} is so low that leaving the residue "
                                  "out exceeds the epsilon budget")

    # -- derived quantities -------------------------------------------------
    @property
    def name(self):
        """Registry name: ``ss`` for the one-block case m_0 = k, else ``mss``."""
        return "ss" if self.moduli == (self.k,) else "mss"

    @property
    def l(self):
        return len(self.moduli)

    @property
    def jbits(self):
        """ceil(log2 l): bits of the block index."""
        return (self.l - 1).bit_length()

    @cached_property
    def rank_bits(self):
        return tuple(rank_bits(m, w) for m, w in zip(self.moduli, self.omegas))

    @cached_property
    def config_id(self):
        """4-byte id of the channel (bytes)."""
        return config_id(self.k, self.moduli, self.omegas, self.thresholds)

    @property
    def config_id_hex(self):
        return self.config_id.hex()

    @cached_property
    def eps_effective(self):
        return privacy.eps_effective(self.moduli, self.omegas, self.thresholds)

    @cached_property
    def p(self):
        """p'_j = T_j / 2**30, shape (l,)."""
        return np.array(self.thresholds, dtype=float) / privacy.ONE

    @cached_property
    def q(self):
        """q'_j = (omega_j - p'_j) / (m_j - 1), shape (l,)."""
        return np.array([ss_q(m, w, p) for m, w, p in zip(self.moduli, self.omegas, self.p)])

    @cached_property
    def unit_variance(self):
        """Per-row variance of ghat_j times n_j (class frequencies 1/m_j), shape (l,)."""
        return np.array([ss_variance(m, w, p) for m, w, p in zip(self.moduli, self.omegas, self.p)])

    @property
    def body_bits(self):
        """Bits of the report body per block, shape (l,)."""
        return np.array([self.jbits + b for b in self.rank_bits])

    @property
    def bits_per_report(self):
        """{"max", "mean"} body bits; the block is uniform so the mean is over j."""
        b = self.body_bits
        return {"max": int(b.max()), "mean": float(b.mean())}

    @cached_property
    def offsets(self):
        """Row offset of each block in the stacked residue matrix, shape (l + 1,)."""
        return np.concatenate([[0], np.cumsum(self.moduli)])

    def with_frame(self, frame):
        """The same channel sent in another frame kind."""
        return MssConfig(k=self.k, epsilon=self.epsilon, moduli=self.moduli, omegas=self.omegas,
                         thresholds=self.thresholds, frame=frame)

    def tally(self, j, members, sizes):
        """Inclusion counts (sum(moduli),) of stored reports: cell offset_j + residue."""
        rows = np.repeat(np.asarray(self.offsets[:-1])[j], sizes) + members
        return np.bincount(rows, minlength=int(self.offsets[-1]))

    # -- serialisation ------------------------------------------------------
    def to_dict(self):
        return {
            "format": FORMAT, "version": FORMAT_VERSION,
            "protocol": self.name,
            "k": self.k, "epsilon": self.epsilon, "eps_effective": self.eps_effective,
            "moduli": list(self.moduli), "omegas": list(self.omegas),
            "thresholds": list(self.thresholds), "threshold_bits": THRESHOLD_BITS,
            "rank_bits": list(self.rank_bits), "config_id": self.config_id_hex,
            "frame": KINDS[self.frame],
        }

    @classmethod
    def from_dict(cls, d, source="config"):
        """Validate a config dict (as written by :meth:`to_dict`): the fields every protocol
        shares (:func:`~mss_protocol.config_file.check_common`), the integers, the label
        (``ss`` iff the one modulus is k), ``rank_bits`` and the config id."""
        label = check_common(d, source)
        if label not in ("mss", "ss"):
            raise ConfigError(f"{source}: protocol {label!r} is not mss or ss")
        try:
            cfg = cls(k=d["k"], epsilon=d["epsilon"], moduli=d["moduli"], omegas=d["omegas"],
                      thresholds=d["thresholds"], frame=d.get("frame", "full"))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: {exc}") from None
        if label != cfg.name:
            raise ConfigError(f"{source}: protocol {label!r} does not match moduli {list(cfg.moduli)}: "
                              f"a config is ss exactly when its one modulus is k = {cfg.k}")
        check_id(d, cfg.config_id_hex, source)
        if d["rank_bits"] != list(cfg.rank_bits):
            raise ConfigError(f"{source}: rank_bits {d['rank_bits']!r} do not match moduli and omegas "
                              f"(expected {list(cfg.rank_bits)})")
        return cfg

    def save(self, path, extra=None):
        d = self.to_dict()
        if extra:
            d.update(extra)
        with open(path, "w") as fh:
            json.dump(d, fh, indent=1)
            fh.write("\n")

    @classmethod
    def load(cls, path):
        return cls.from_dict(read_json(path, "config"), source=str(path))

    def __eq__(self, other):
        return isinstance(other, MssConfig) and self.to_dict() == other.to_dict()

    def __hash__(self):
        return hash(self.config_id)

    def __repr__(self):
        return (f"MssConfig(k={self.k}, epsilon={self.epsilon}, moduli={list(self.moduli)}, "
                f"omegas={list(self.omegas)}, id={self.config_id_hex})")


def _check_moduli(k, moduli):
    """SPEC.md section 1: 2 <= k < 2**30; SS the one modulus k <= 2**23; MSS k >= 4 and
    pairwise coprime moduli in [2, k) and at most 2**23 with a product >= k."""
    try:
        check_k(k)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if list(moduli) == [k]:  # the SubsetSelection baseline: one block, the full domain
        if k > DEVICE_DRAW:
            raise ConfigError(f"SubsetSelection's modulus k = {k} exceeds 2**23 (the device's draw)")
        return
    if k < 4:
        raise ConfigError(f"k must be at least 4 (MSS needs two coprime moduli below k), got {k}")
    if not moduli:
        raise ConfigError("moduli must not be empty")
    for m in moduli:
        if not 2 <= m < k:
            raise ConfigError(f"modulus {m} must be in [2, k) = [2, {k})")
        if m > 1 << 23:
            raise ConfigError(f"modulus {m} exceeds 2**23 (the device's small-int limit)")
    for a in range(len(moduli)):
        for b in range(a + 1, len(moduli)):
            if math.gcd(moduli[a], moduli[b]) != 1:
                raise ConfigError(f"moduli {moduli[a]} and {moduli[b]} are not coprime")
    if math.prod(moduli) < k:
        raise ConfigError(f"product of moduli {math.prod(moduli)} is below k = {k}")
