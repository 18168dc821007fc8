"""Check that ticks_us counts 1000 instructions under ``qemu-system-riscv32 -icount shift=0``.

The RV32 counterpart of tools/mcu_calib.py, frozen into the VIRT_RV32 image
only (inline RV32 assembler).  ``run()`` times a loop of exactly 2
instructions per turn (addi, bne) and prints ``RESULT {json}`` with
``ratio`` = measured / expected instructions (1.0 when ticks_us is right;
the call adds a few hundred instructions out of 4 M).
"""
import json
import time

import micropython

TURNS = 2000000


@micropython.asm_rv32
def _spin(a0):
    label(loop)  # noqa: F821 (the assembler's names)
    addi(a0, a0, -1)  # noqa: F821
    bne(a0, zero, loop)  # noqa: F821


def run():
    t0 = time.ticks_us()
    _spin(TURNS)
    t1 = time.ticks_us()
    measured = time.ticks_diff(t1, t0) * 1000
    print("RESULT " + json.dumps({"name": "calibration", "instr": measured, "expected": 2 * TURNS,
                                  "ratio": measured / (2 * TURNS)}))
