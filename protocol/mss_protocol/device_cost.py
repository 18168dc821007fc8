"""Per-report device cost: Cortex-M0 instructions and the time on an RP2040.

A model of what ``tools/bench_mcu.py`` measures (the firmware frozen into
MicroPython for a Cortex-M0 under ``qemu-system-arm -icount shift=0``,
docs/device-cost.md): instructions = coefficients . features, one linear
model per protocol over the work the device code does,

* MSS / SS: the rank kernel's limb steps (:func:`rank_work`: the fused
  multiply-divide passes and the additions, over the limbs of C(c, i) at
  every position c), the positions scanned and the omega draws of Floyd's
  loop;
* RAPPOR / SUE: k coins; PGR: the expected rejection rounds (and their
  coordinates: rounds x dimension); HR: the bits
  of K; GRR: the bits of k (the width of its draw); OLH: a constant.

The model is of the mean (the expected cost of a report): for PGR, whose
rounds are geometric, the median is lower and the tail longer.

The coefficients are least-squares fits to the benchmark's M0 means
(``tools/fit_device_cost.py --fit`` prints them and every config's
measured / model ratio).  Time on an RP2040 (Cortex-M0+, 125 MHz) is instructions x
CPI_RP2040 / 125 MHz; 1.55 cycles per instruction is what the M0+ manual's
cycle timings give for the executed mix (docs/device-cost.md).
"""
import math

import numpy as np
from scipy.special import gammaln

CPI_RP2040 = 1.55
HZ_RP2040 = 125e6

# instructions = sum(COEF[family][f] * features(cfg)[f]): tools/fit_device_cost.py --fit on bench_mcu.py's JSON
COEF = {
    "mss": {"base": 32770.0, "passes": 64.96, "adds": 96.59, "positions": 311.6, "draws": 835.9},
    "unary": {"base": 14280.0, "items": 596.9},
    "pgr": {"base": 53950.0, "rounds": 4008.0, "coords": 1162.0},
    "hr": {"base": 17600.0, "bits": 2188.0},
    "grr": {"base": 18930.0, "bits": 1219.0},
    "olh": {"base": 90660.0},
}
FAMILY = {"mss": "mss", "ss": "mss", "rappor": "unary", "sue": "unary", "pgr": "pgr", "hr": "hr",
          "grr": "grr", "olh": "olh"}


def _odd(f):
    """The odd part of f > 0."""
    return f >> ((f & -f).bit_length() - 1)


def rank_work(m, omega):
    """(pass limb steps, add limb steps, positions) of ``mss_device.limbs.rank``
    for omega elements spread evenly over [0, m), the shape of a uniform subset.

    Follows the kernel's batching exactly (odd parts of the factors multiplied
    while both products stay <= 2**(30 - RB)); the limbs of b = C(c, i) at c
    come from log2 C(c, i) (lgamma), so no big integer is formed."""
    rb = 15 if m <= 1 << 15 else 7
    top = 1 << (30 - rb)
    spread = np.unique(((np.arange(omega) + 0.5) * m / omega).astype(int))
    hit = np.zeros(spread[-1] + 1, dtype=bool)
    hit[spread] = True
    c = np.arange(hit.size)
    i = 1 + np.cumsum(hit) - hit  # the index of the next element at c
    live = c >= i  # b = C(c, i) > 0
    bits = (gammaln(c + 1) - gammaln(i + 1) - gammaln(np.where(live, c - i, 0) + 1)) / math.log(2)
    limbs = np.where(live, np.floor(np.maximum(bits, 0) / rb) + 1, 0)
    passes = adds = 0.0
    n = d = 1
    for x in np.flatnonzero(live).tolist():
        f = _odd(x + 1)
        g = _odd(int(i[x]) + 1 if hit[x] else x + 1 - int(i[x]))
        if hit[x] or rb != 15 or n * f > top or d * g > top:
            if n > 1 or d > 1:
                passes += limbs[x]
            if hit[x]:
                adds += limbs[x]
            n, d = f, g
        else:
            n, d = n * f, d * g
    return float(passes), float(adds), hit.size


def features(cfg):
    """The model's features of a config (``MssConfig`` or ``OracleConfig``):
    a dict keyed like COEF[FAMILY[cfg.name]].  MSS: the largest block
    (the one that costs most), as the planner's ``device_ms`` is a bound."""
    name = cfg.name
    if name in ("mss", "ss"):
        j = max(range(len(cfg.moduli)), key=lambda j: cfg.moduli[j] * cfg.rank_bits[j])
        passes, adds, positions = rank_work(cfg.moduli[j], cfg.omegas[j])
        return {"base": 1.0, "passes": passes, "adds": adds, "positions": positions, "draws": cfg.omegas[j]}
    p = cfg.protocol
    if name in ("rappor", "sue"):
        return {"base": 1.0, "items": cfg.k}
    if name == "pgr":  # rejection until the point is on the drawn side of x's hyperplane
        side = p.c_set / p.K
        rounds = p.p / side + (1 - p.p) / (1 - side)
        return {"base": 1.0, "rounds": rounds, "coords": rounds * p.t}
    if name == "hr":
        return {"base": 1.0, "bits": p.K.bit_length()}
    if name == "grr":
        return {"base": 1.0, "bits": cfg.k.bit_length()}
    return {"base": 1.0}


def instructions(cfg):
    """Predicted Cortex-M0 instructions of one report (randomise + encode)."""
    coef = COEF[FAMILY[cfg.name]]
    return float(sum(coef[f] * v for f, v in features(cfg).items()))


def rp2040_ms(instr):
    """Milliseconds on an RP2040 at 125 MHz for ``instr`` M0 instructions."""
    return instr * CPI_RP2040 / HZ_RP2040 * 1e3


def device_ms(cfg):
    """Predicted per-report time on an RP2040 (ms)."""
    return rp2040_ms(instructions(cfg))
