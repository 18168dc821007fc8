"""No device-side intermediate reaches 2**30, the subset rank included.

CPython: every local integer (and list element) of the device code is
checked after every line (sys.settrace) while reports are made for
several configs, k = 22000 included.
MicroPython: the randomiser runs under micropython.heap_lock(), so it
allocates nothing at all (with its random bytes reserved beforehand).
"""
import sys
from array import array

import pytest

from micropython_runner import FIRMWARE, run
from mss_node.reporter import Reporter
from mss_protocol import vectors
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import plan

LIMIT = 1 << 30
DEVICE = str(FIRMWARE / "lib")


def _checker(violations):
    def local(frame, event, arg):
        # Fast path, as strict as the full scan below: one C-level pass picks the
        # int scalars (bools are not ``type(v) is int`` and are in range anyway),
        # min/max bound them all; the per-variable scan (which names the culprit
        # and looks inside limb lists) runs only when a bound fails or a function
        # returns.  The old per-variable generator on every line made the
        # k = 22000 report take a minute.
        scalars = [v for v in frame.f_locals.values() if type(v) is int]
        if event == "return" or scalars and not (-LIMIT < min(scalars) and max(scalars) < LIMIT):
            _scan(frame, event, arg, violations)
        return local

    def glob(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(DEVICE) else None

    return glob


def _scan(frame, event, arg, violations):
    name = frame.f_code.co_name
    for var, val in frame.f_locals.items():
        # scalars after every line; the rank's limb lists when a function returns
        values = val if type(val) in (list, array) and event == "return" else [val]
        if any(type(v) is int and not -LIMIT < v < LIMIT for v in values):
            violations.append((frame.f_code.co_filename, name, var, val))
    if event == "return" and type(arg) is int and not -LIMIT < arg < LIMIT:
        violations.append((frame.f_code.co_filename, name, "<return>", arg))


# moduli None: the planner's choice.  k = 22000 gives plan(22000, 5)'s moduli (15-bit limbs,
# the largest moduli below 2**15; omegas 147) without planning them here (a minute of CPU
# on a busy runner): the device code and its integers are the same.
CASES = [(64, 1.0, None, 40), (1024, 4.0, None, 5), (1024, 0.5, None, 1),
         (22000, 5.0, [21991, 21995, 21997, 21998, 21999], 1),
         (33000, 8.0, [32771, 32779], 1)]  # the last has moduli above 2**15: 7-bit limbs


@pytest.mark.parametrize("k,eps,moduli,reports", CASES)
def test_device_ints_stay_small(k, eps, moduli, reports):
    from mss_device.params import Params

    cfg = MssConfig.build(k, eps, moduli) if moduli else MssConfig.from_dict(plan(k, eps)["config"])
    reporter = Reporter(Params(cfg.to_dict()))
    violations = []
    sys.settrace(_checker(violations))
    try:
        for i in range(reports):
            reporter.report((i * 7919) % k, epoch=(1 << 30) - 1, seq=0xFFFF)
    finally:
        sys.settrace(None)
    assert violations == []


def test_checker_catches_a_big_int():
    """The checker itself can fail: a config threshold of 2**30 is caught."""
    cfg = MssConfig.build(64, 1.0, [59, 61, 63]).to_dict()
    from mss_device.params import Params

    p = Params(cfg)
    p.thresholds = [LIMIT] * 3
    violations = []
    sys.settrace(_checker(violations))
    try:
        Reporter(p).report(5, 0, 0)
    finally:
        sys.settrace(None)
    assert violations


HEAP_LOCK = r"""
import json, micropython, sys
from mss_device.params import Params
from mss_device.randomiser import Randomiser
from mss_device.rng import ByteRng
p = Params(json.load(open(sys.argv[1]))["config"])
rng = ByteRng()
mark = bytearray((max(p.moduli) + 7) // 8)
randomiser = Randomiser(p)


def locked(x):  # inside a function: no new globals are created under the lock
    micropython.heap_lock()
    try:
        randomiser.privatise(x % p.k, rng, mark)
    finally:
        micropython.heap_unlock()


for x in range(50):
    rng.reserve(4096)
    locked(x)
print("ok")
"""


@pytest.mark.parametrize("vector", ["k64_eps1", "k1024_eps4", "k22000_eps5"])
def test_randomiser_allocates_nothing_under_heap_lock(vector):
    out = run(HEAP_LOCK, args=[str(vectors.DIR / f"{vector}.json")])
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr
