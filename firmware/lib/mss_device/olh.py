"""Optimised local hashing on the device, with a public hash seed (mss_protocol.olh).

The seed (a, b), a in [1, P), b in [0, P), is not drawn from the device's
randomness nor sent: both ends derive it from what the report already
carries (SPEC.md section 3, "OLH"): SHA-256 of
``"mss-olh/1" || config id || epoch u32 BE || device id (UTF-8)`` read as
a byte stream (then SHA-256 of the previous digest, as needed) through
``below``; with the config's ``seed: device``, SHA-256 of
``"mss-olh-device/1" || config id || device id`` instead, the same every
epoch (so a memo holds, and a compact frame needs no drawing epoch).
The report is y = GRR_g((a x + b) mod P mod g) in ceil(log2 g) bits;
a x + b < 2**30.
"""
import hashlib

from mss_device.check import MAX_N, ONE, at_most, bad, threshold
from mss_device.point import PointClient, grr
from mss_device.rng import ByteRng


class _Digests:
    """read(n) over SHA-256(seed material), then SHA-256 of each digest in turn."""

    def __init__(self, material):
        self.d = hashlib.sha256(material).digest()
        self.used = False

    def read(self, n):
        if self.used:
            self.d = hashlib.sha256(self.d).digest()
        self.used = True
        return self.d


def _ab(material, P):
    rng = ByteRng(_Digests(bytes(material)).read, 32)
    a = 1 + rng.below(P - 1)
    return a, rng.below(P)


def seed(config_id, epoch, device_id, P):
    """(a, b) for one report (``seed: epoch``)."""
    m = bytearray(b"mss-olh/1")
    m.extend(config_id)
    m.extend(bytes([(epoch >> 24) & 0xFF, (epoch >> 16) & 0xFF, (epoch >> 8) & 0xFF, epoch & 0xFF]))
    m.extend(device_id.encode())
    return _ab(m, P)


def device_seed(config_id, device_id, P):
    """(a, b) of every report of one device (``seed: device``): no epoch."""
    m = bytearray(b"mss-olh-device/1")
    m.extend(config_id)
    m.extend(device_id.encode())
    return _ab(m, P)


class Client(PointClient):
    def __init__(self, params):
        PointClient.__init__(self, params, params.g)
        self.device_id = None  # set by the node before the first report
        self._fixed = None  # (device id, (a, b)) with seed: device

    def seed(self):
        """(a, b) of the report being drawn (its epoch: ``self.epoch``)."""
        p, dev = self.p, self.device_id
        if dev is None:
            raise ValueError("olh needs the device id (its hash seed is derived from it)")
        if p.seed != "device":
            return seed(p.config_id, self.epoch, dev, p.P)
        if self._fixed is None or self._fixed[0] != dev:
            self._fixed = (dev, device_seed(p.config_id, dev, p.P))
        return self._fixed[1]

    def draw(self, x, rng):
        p = self.p
        a, b = self.seed()
        return grr((a * x + b) % p.P % p.g, p.g, p.t, rng)


def check(p):
    """P is the SPEC's prime (a x + b < P**2 < 2**30 needs k <= P <= 32768); g outputs."""
    if p.P != 32749:
        bad("P", "must be 32749")
    if p.frame == 1 and p.seed != "device":  # compact: dated by arrival, an epoch seed is the drawing epoch's
        bad("frame", "olh with seed epoch needs the epoch on the wire: use full or compact-epoch, or seed device")
    at_most("k", p.k, 2, p.P)
    at_most("g", p.g, 2, MAX_N + 1)
    threshold("t", p.t)


def outputs(p):
    """The report alphabet's size (the instantaneous layer's n_out)."""
    return p.g


def ratios(p):
    """Given the public seed, GRR on the g hash values: (m, omega) = (g, 1)."""
    return [(p.t * (p.g - 1), ONE - p.t)]
