"""Protocol parameters as a device loads them from config.json.

The config id is the first 4 bytes of SHA-256 over a canonical ASCII
string of the parameters that define the channel (SPEC.md section 5); the
host computes it with these same functions, so both sides always agree.
The frame kind (``frame``) is not part of it: it changes the header, not
the channel.
"""
import hashlib

from mss_device.frame import kind_index

THRESHOLD_BITS = 30

# The integer fields of each one-output protocol, in canonical order
# (MSS and SS have lists of them: see canonical()).
FIELDS = {
    "grr": ("t",),
    "rappor": ("tp", "tq"),
    "sue": ("tp", "tq"),
    "olh": ("P", "g", "t"),
    "hr": ("K", "block", "t"),
    "pgr": ("q", "d", "t"),
}
# The protocols with one output y' in [0, n_out) that may add an instantaneous layer
# (config field ``irr``: RAPPOR's IRR, GRR on the n_out outputs; SPEC.md section 3).
IRR = ("grr", "olh", "hr", "pgr")
# OLH's hash seed: per epoch (derived from config id, epoch, device id) or per device
# (config id, device id: the same every epoch, so memoization works; SPEC.md section 3).
SEEDS = ("epoch", "device")
# The device module of each protocol (loaded on demand: a board holds only its own).
MODULES = {"mss": "mss_device.mss", "ss": "mss_device.mss", "grr": "mss_device.grr",
           "rappor": "mss_device.unary", "sue": "mss_device.unary", "olh": "mss_device.olh",
           "hr": "mss_device.hr", "pgr": "mss_device.pgr"}


def _join(values):
    return ",".join([str(v) for v in values])


def canonical(k, moduli, omegas, thresholds):
    """The MSS / SS string (SS is MSS with the one modulus k)."""
    return "mss/1;k=%d;m=%s;w=%s;t=%s;b=%d" % (
        k, _join(moduli), _join(omegas), _join(thresholds), THRESHOLD_BITS)


def canonical_oracle(name, k, values, seed="epoch", irr=None):
    """The string of a one-output protocol: ``name/1;k=K;<field>=<int>;...;b=30``,
    fields in FIELDS order; OLH adds ``seed=public`` (``seed`` "epoch") or
    ``seed=device``; an instantaneous layer of threshold ``irr`` adds ``irr=<T1>``
    just before ``b=30``."""
    s = "%s/1;k=%d" % (name, k)
    fields = FIELDS[name]
    for i in range(len(fields)):
        s += ";%s=%d" % (fields[i], values[i])
    if name == "olh":
        s += ";seed=device" if seed == "device" else ";seed=public"
    if irr is not None:
        s += ";irr=%d" % irr
    return s + ";b=%d" % THRESHOLD_BITS


def _digest(s):
    return hashlib.sha256(s.encode()).digest()[:4]


def config_id(k, moduli, omegas, thresholds):
    return _digest(canonical(k, moduli, omegas, thresholds))


def oracle_config_id(name, k, values, seed="epoch", irr=None):
    return _digest(canonical_oracle(name, k, values, seed, irr))


def _int(d, name):
    v = d[name]
    if type(v) is not int or v < 0:
        raise ValueError("config field %s must be a non-negative integer" % name)
    return v


class Params:
    """The fields of a config dict that the device's protocol module reads.

    ``protocol`` (default mss), ``k``, the protocol's integers, ``frame``
    (index into frame.KINDS), ``config_id`` (bytes), ``seed`` (OLH: "epoch" or
    "device"; None for the others), ``irr_t`` and ``irr_epsilon`` (the
    instantaneous layer's threshold and declared epsilon, None without one).  Raises ValueError
    naming the field when the dict is inconsistent, so a corrupt config
    never produces reports.  Whether the integers are in range and private
    is :func:`mss_device.check.verify`'s job (the node's loader runs both).
    """

    def __init__(self, d):
        self.protocol = d.get("protocol", "mss")
        if self.protocol not in MODULES:
            raise ValueError("config field protocol: unknown protocol %r" % (self.protocol,))
        self.k = _int(d, "k")
        if self.k < 2:
            raise ValueError("config field k must be at least 2")
        self.frame = kind_index(d.get("frame", "full"))
        self._layers(d)
        if self.protocol in FIELDS:
            values = [_int(d, f) for f in FIELDS[self.protocol]]
            for i in range(len(values)):
                setattr(self, FIELDS[self.protocol][i], values[i])
            cid = oracle_config_id(self.protocol, self.k, values, self.seed, self.irr_t)
        else:
            self._mss(d)
            cid = config_id(self.k, self.moduli, self.omegas, self.thresholds)
        self.config_id = cid
        if type(d["config_id"]) is not str or cid != bytes.fromhex(d["config_id"]):
            raise ValueError("config_id does not match the parameters")

    def _layers(self, d):
        """OLH's ``seed`` and the ``irr`` object of the one-output protocols (SPEC.md section 5)."""
        self.seed = None
        if self.protocol == "olh":
            self.seed = d.get("seed", "epoch")
            if self.seed not in SEEDS:
                raise ValueError("config field seed must be epoch or device")
        elif "seed" in d:
            raise ValueError("config field seed: only olh has a hash seed")
        self.irr_t = self.irr_epsilon = None
        if "irr" not in d:
            return
        if self.protocol not in IRR:
            raise ValueError("config field irr: only grr, olh, hr and pgr have an instantaneous layer")
        irr = d["irr"]
        if type(irr) is not dict:
            raise ValueError("config field irr must be an object {epsilon, t}")
        t = irr.get("t")
        if type(t) is not int or not 0 < t < (1 << THRESHOLD_BITS):
            raise ValueError("config field irr.t must be an integer in (0, 2**30)")
        if "epsilon" not in irr:
            raise ValueError("config field irr.epsilon is missing")
        self.irr_t, self.irr_epsilon = t, irr["epsilon"]  # the epsilon: check.verify

    def _mss(self, d):
        self.moduli = list(d["moduli"])
        self.omegas = list(d["omegas"])
        self.thresholds = list(d["thresholds"])
        self.rank_bits = list(d["rank_bits"])
        l = len(self.moduli)
        for name in ("omegas", "thresholds", "rank_bits"):
            if len(getattr(self, name)) != l:
                raise ValueError("config field %s must have one entry per modulus" % name)
        self.jbits = 0  # ceil(log2 l); MicroPython ints have no bit_length()
        while (1 << self.jbits) < l:
            self.jbits += 1

    def module(self):
        """The protocol's device module (imported on demand: only that protocol's)."""
        return __import__(MODULES[self.protocol], None, None, ["Client"])

    def client(self):
        """The protocol's device client."""
        return self.module().Client(self)
