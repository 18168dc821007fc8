"""Protocol parameters as a device loads them from config.json.

The config id is the first 4 bytes of SHA-256 over a canonical ASCII
string of the parameters that define the channel (SPEC.md section 5); the
host computes it with this same function, so both sides always agree.
"""
import hashlib

THRESHOLD_BITS = 30


def _join(values):
    return ",".join([str(v) for v in values])


def canonical(k, moduli, omegas, thresholds):
    return "mss/1;k=%d;m=%s;w=%s;t=%s;b=%d" % (
        k, _join(moduli), _join(omegas), _join(thresholds), THRESHOLD_BITS)


def config_id(k, moduli, omegas, thresholds):
    return hashlib.sha256(canonical(k, moduli, omegas, thresholds).encode()).digest()[:4]


class Params:
    """The fields of a config dict that the randomiser and encoder read.

    Raises ValueError naming the field when the dict is inconsistent, so a
    corrupt config never produces reports.
    """

    def __init__(self, d):
        self.k = d["k"]
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
        self.config_id = config_id(self.k, self.moduli, self.omegas, self.thresholds)
        if self.config_id != bytes.fromhex(d["config_id"]):
            raise ValueError("config_id does not match the parameters")
