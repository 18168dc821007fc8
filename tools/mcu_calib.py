"""Check that ticks_us counts 1000 instructions under ``qemu -icount shift=0``.

Frozen into the Cortex-M images only (inline Thumb assembler: not on the
unix port).  ``run()`` times a loop of exactly 2 instructions per turn
(subs, bne) and prints ``RESULT {json}`` with ``ratio`` = measured /
expected instructions (1.0 when ticks_us is right; the loop's call adds a
few hundred instructions out of 4 M).
"""
import json
import time

import micropython

TURNS = 2000000


@micropython.asm_thumb
def _spin(r0):
    label(loop)
    sub(r0, 1)
    bne(loop)


def run():
    t0 = time.ticks_us()
    _spin(TURNS)
    t1 = time.ticks_us()
    measured = time.ticks_diff(t1, t0) * 1000
    print("RESULT " + json.dumps({"name": "calibration", "instr": measured, "expected": 2 * TURNS,
                                  "ratio": measured / (2 * TURNS)}))
