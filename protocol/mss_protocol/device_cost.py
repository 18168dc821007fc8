"""Per-report device cost: instructions on three instruction sets and the time on a board.

A model of what ``tools/bench_mcu.py`` measures (the firmware frozen into
MicroPython for a Cortex-M0 and a Cortex-M3 under ``qemu-system-arm
-icount shift=0``, for RV32IMC under ``qemu-system-riscv32 -icount shift=0``,
docs/device-cost.md): instructions = coefficients . features, one linear
model per instruction set (``ISAS``) and protocol over the work the device
code does,

* MSS / SS: the rank kernel's limb steps (:func:`rank_work`: the fused
  multiply-divide passes and the additions, over the limbs of C(c, i) at
  every position c), the positions scanned and the omega draws of Floyd's
  loop;
* RAPPOR / SUE: k coins; PGR: the expected rejection rounds (and their
  coordinates: rounds x dimension); HR: the bits
  of K; GRR: the bits of k (the width of its draw); OLH: a constant.

Each protocol object names its family (``cost_family``, a key of
``COEF[isa]``) and gives its features (``device_features()``), beside its math.

The model is of the mean (the expected cost of a report): for PGR, whose
rounds are geometric, the median is lower and the tail longer.

The coefficients are least-squares fits to the benchmark's means
(``tools/fit_device_cost.py --fit --isa ISA`` prints them and every config's
measured / model ratio).  The time on a board (``CORES``) is its instruction
set's count x its cycles per instruction / its clock:

* rp2040: Cortex-M0+ at 125 MHz, the M0 count at 1.55 cycles per
  instruction, what the M0+ manual's cycle timings give for the executed mix
  (docs/device-cost.md);
* rp2350: its Cortex-M33 cores at 150 MHz (RP2350 datasheet: the default
  clock), the Cortex-M3 count as the proxy of the M33's (both run the
  Thumb-2 instruction set of ARMv7-M / ARMv8-M Mainline that GCC emits for
  MicroPython; ports/qemu has no M33, and its M55 board adds Helium, not
  what the RP2350 runs) at 1.3 cycles per instruction, the rough figure of
  docs/device-cost.md for a three-stage Cortex-M pipeline (ASSUMPTION: not
  derived from a cycle table).  The Arm cores, not the Hazard3 RISC-V ones:
  MicroPython's RPI_PICO2 firmware runs on them;
* esp32c3: RV32IMC at 160 MHz (ESP32-C3 datasheet: the CPU's top clock),
  the RV32 count (VIRT_RV32 built for rv32imc, viper on the RV32 native
  emitter) at CPI_ESP32C3 (see there);
* esp32 (Xtensa LX6, 160 MHz as docs/energy.md's currents): NOT measured
  (no Xtensa board in ports/qemu, no ESP32 core in Debian's QEMU): the M3
  count at 1.3 cycles per instruction, an ASSUMPTION.
"""
import math

import numpy as np
from scipy.special import gammaln

CPI_RP2040 = 1.55
HZ_RP2040 = 125e6
CPI_RP2350 = 1.3
HZ_RP2350 = 150e6
# ESP32-C3: "a 32-bit RISC-V RV32IMC single-core processor" (ESP-IDF docs, About, esp32c3) at up to 160 MHz
# (ESP32-C3 Series Datasheet), scalar and in order; Espressif publishes no cycle table (only CoreMark, 407.22
# at 160 MHz, 2.55/MHz): taken branches, jumps, load-use stalls, divisions and flash-cache misses (code runs
# from flash through a 16 KB cache) add cycles.  ASSUMPTION 1.3, the rough figure docs/device-cost.md
# uses for a Cortex-M3-class pipeline
CPI_ESP32C3 = 1.3
HZ_ESP32C3 = 160e6
ISAS = ("m0", "m3", "rv32")
# board -> (instruction set whose count it runs, cycles per instruction, clock Hz): see the module docstring
CORES = {"rp2040": ("m0", CPI_RP2040, HZ_RP2040),
         "rp2350": ("m3", CPI_RP2350, HZ_RP2350),
         "esp32c3": ("rv32", CPI_ESP32C3, HZ_ESP32C3),
         "esp32": ("m3", 1.3, 160e6)}  # ASSUMPTION (module docstring): the Xtensa was not emulated

# instructions = sum(COEF[isa][family][f] * features(cfg)[f]): tools/fit_device_cost.py --fit on bench_mcu.py's JSON
COEF = {"m0": {
    "mss": {"base": 32770.0, "passes": 64.96, "adds": 96.59, "positions": 311.6, "draws": 835.9},
    "unary": {"base": 14280.0, "items": 596.9},
    "pgr": {"base": 53950.0, "rounds": 4008.0, "coords": 1162.0},
    "hr": {"base": 17600.0, "bits": 2188.0},
    "grr": {"base": 18930.0, "bits": 1219.0},
    "olh": {"base": 90660.0},
}, "m3": {
    "mss": {"base": 23410.0, "passes": 65.0, "adds": 97.07, "positions": 295.2, "draws": 658.0},
    "unary": {"base": 10040.0, "items": 487.0},
    "pgr": {"base": 37660.0, "rounds": 3137.0, "coords": 607.0},
    "hr": {"base": 14830.0, "bits": 979.0},
    "grr": {"base": 12890.0, "bits": 931.5},
    "olh": {"base": 60830.0},
}, "rv32": {
    "mss": {"base": 28740.0, "passes": 54.23, "adds": 77.87, "positions": 284.3, "draws": 691.8},
    "unary": {"base": 12570.0, "items": 560.0},
    "pgr": {"base": 47320.0, "rounds": 3632.0, "coords": 859.5},
    "hr": {"base": 18580.0, "bits": 1329.0},
    "grr": {"base": 16490.0, "bits": 1240.0},
    "olh": {"base": 71680.0},
}}


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


def family(cfg):
    """The cost model's family of a config: its protocol's ``cost_family`` (a key of ``COEF[isa]``)."""
    from mss_protocol import registry

    return registry.from_config(cfg).cost_family


def features(cfg):
    """The model's features of a config (``MssConfig`` or ``OracleConfig``): its
    protocol's :meth:`~mss_protocol.base.Protocol.device_features`, a dict keyed like
    ``COEF[isa][protocol.cost_family]``."""
    from mss_protocol import registry

    return registry.from_config(cfg).device_features()


def instructions(cfg, isa="m0"):
    """Predicted instructions of one report (randomise + encode) on instruction set ``isa`` (``ISAS``)."""
    from mss_protocol import registry

    protocol = registry.from_config(cfg)
    coef = COEF[isa][protocol.cost_family]
    return float(sum(coef[f] * v for f, v in protocol.device_features().items()))


def board_ms(instr, board):
    """Milliseconds on ``board`` (``CORES``) for ``instr`` instructions of its instruction set."""
    _, cpi, hz = CORES[board]
    return instr * cpi / hz * 1e3


def rp2040_ms(instr):
    """Milliseconds on an RP2040 at 125 MHz for ``instr`` M0 instructions."""
    return board_ms(instr, "rp2040")


def device_ms(cfg, board="rp2040"):
    """Predicted per-report time on ``board`` (ms; ``CORES``)."""
    return board_ms(instructions(cfg, CORES[board][0]), board)
