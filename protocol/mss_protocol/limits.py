"""What a device can run: the limits every host constructor, planner and loader enforces.

SPEC.md section 5 ("What a loader checks") lists them beside the device's
own checks; the numbers are imported from the device code (``mss_device``),
so the two ends cannot drift apart:

* every protocol: 2 <= k < 2**30 (``mss_device.check.verify``);
* a uniform draw has at most 2**23 outcomes (``mss_device.rng.below``):
  MSS and SS moduli, GRR's k - 1 others, OLH's g - 1, HR's and PGR's K;
* PGR's field q <= 2**15, so its coordinate products q**2 stay small ints
  (``mss_device.pgr.check``).

Each check raises ValueError naming the field; the loaders wrap it in a
ConfigError with the file's name, the planner leaves the protocol out with it.
"""
from mss_device.check import MAX_N, ONE
from mss_device.pgr import MAX_Q

DEVICE_DRAW = MAX_N  # 2**23, the largest n of the device's uniform draw, mss_device.rng.below(n)
MAX_K = ONE  # k < 2**30
PGR_MAX_Q = MAX_Q  # 2**15


def check_draw(n, what):
    """Refuse parameters whose reports need a uniform draw of more than
    DEVICE_DRAW outcomes: no device can send them, and the host's tables of
    the outcomes would not fit in memory (PGR's at epsilon 20: 15 GB)."""
    if n > DEVICE_DRAW:
        raise ValueError(f"{what} = {n} > 2**23 (device draw)")


def check_k(k, least=2):
    """k an integer (not bool) in [least, 2**30)."""
    if type(k) is not int or not least <= k < MAX_K:
        raise ValueError(f"k must be an integer in [{least}, 2**30), got {k!r}")


def check_field(q):
    """PGR's q <= 2**15: the device multiplies coordinates below q."""
    if q > PGR_MAX_Q:
        raise ValueError(f"q = {q} > 2**15 (the device's coordinate products q**2 must stay below 2**30)")
