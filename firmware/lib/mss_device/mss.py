"""MSS and SubsetSelection on the device: :mod:`.randomiser` then :mod:`.encoder`."""
from mss_device.check import MAX_N, ONE, at_most, bad, threshold
from mss_device.encoder import Encoder
from mss_device.frame import bits_for, get
from mss_device.randomiser import Randomiser


class Client:
    def __init__(self, params):
        self.p = params
        self.mark = bytearray((max(params.moduli) + 7) >> 3)  # reused: no allocation per report
        self.encoder = Encoder(params)
        self.randomiser = Randomiser(params)
        self.nbits = params.jbits + max(params.rank_bits)

    def report(self, x, rng, epoch, seq):
        j = self.randomiser.privatise(x, rng, self.mark)
        return self.encoder.encode(j, self.mark, epoch, seq)

    def fits(self, body):
        """Block index in range, that block's body length, zero padding."""
        p = self.p
        if len(body) << 3 < p.jbits:
            return False
        j = get(body, 0, p.jbits)
        if j >= len(p.moduli):
            return False
        pad = (len(body) << 3) - p.jbits - p.rank_bits[j]
        return 0 <= pad < 8 and not body[-1] & ((1 << pad) - 1)


def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


def rank_bits(m, w):
    """ceil(log2 C(m, w)) = the bit length of C(m, w) - 1, exactly, for 1 <= w <= m / 2.

    C(m - w + i, i) for i = 1..w, each the last times (m - w + i) divided
    (exactly) by i: a long int, at load time only."""
    c = 1
    for i in range(1, w + 1):
        c = c * (m - w + i) // i
    h = hex(c - 1)  # MicroPython ints have no bit_length(); C(m, w) >= 2 here
    return 4 * (len(h) - 3) + bits_for(int(h[2], 16) + 1)


def check(p):
    """Labelled ss exactly when the moduli are the one modulus k (<= 2**23), else mss
    with moduli pairwise coprime in [2, min(k - 1, 2**23)] with product >= k;
    1 <= omega <= m / 2, thresholds in (0, 2**30), rank_bits as computed."""
    moduli, l = p.moduli, len(p.moduli)
    ss = moduli == [p.k]
    if l == 0:
        bad("moduli", "must not be empty")
    if p.protocol == "ss" and not ss:
        bad("moduli", "of ss must be the one modulus k")
    if p.protocol != "ss" and ss:  # ss iff the one modulus is k (SPEC.md section 5)
        bad("protocol", "must be ss for the one modulus k")
    top = MAX_N if ss else min(p.k - 1, MAX_N)
    prod = 1
    for j in range(l):
        m = moduli[j]
        at_most("moduli", m, 2, top)
        at_most("omegas", p.omegas[j], 1, m // 2)
        threshold("thresholds", p.thresholds[j])
        if type(p.rank_bits[j]) is not int:
            bad("rank_bits", "must be integers")
        for i in range(j):
            if _gcd(moduli[i], m) != 1:
                bad("moduli", "%d and %d are not coprime" % (moduli[i], m))
        if prod < p.k:
            prod = p.k if prod >= (p.k + m - 1) // m else prod * m  # below k + m
    if prod < p.k:
        bad("moduli", "have a product below k = %d" % p.k)
    for j in range(l):
        if p.rank_bits[j] != rank_bits(moduli[j], p.omegas[j]):
            bad("rank_bits", "do not match the moduli and omegas")


def ratios(p):
    """Block j: R_j = T_j (m_j - omega_j) / ((2**30 - T_j) omega_j) (SPEC.md section 2)."""
    return [(p.thresholds[j] * (p.moduli[j] - p.omegas[j]), (ONE - p.thresholds[j]) * p.omegas[j])
            for j in range(len(p.moduli))]
