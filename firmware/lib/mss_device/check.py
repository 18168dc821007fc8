"""What a device checks in a config before it uses it (SPEC.md section 5).

:class:`~mss_device.params.Params` reads the fields and the config id;
:func:`verify` makes sure the integers are ones the device can run and
whose privacy follows from them alone: each protocol module's ``check``
(ranges, coprime moduli, recomputed rank widths, ...) and ``ratios`` (its
channel's likelihood ratios as exact fractions), the worst of which must
not exceed e^epsilon of the declared epsilon; with an instantaneous layer
(``irr``, SPEC.md section 3), its own ratio (GRR on the protocol's
``outputs``) must not exceed e^irr.epsilon either.  The ratio returned (for
the cap and the budget) is the permanent draw's: it bounds one report and
any number of re-sends of one memoized draw.  The node also holds that
worst ratio against its cap (``device.max_epsilon``, mss_node.settings).

The ratios' terms reach 2**53 and their cross products more: they are
MicroPython long ints, formed once per config load and never while
reporting (every port this firmware runs on has them).  The declared
epsilon is a float (single precision on ESP32 and RP2), so it is compared
with a slack of ``EPS_SLACK``: every float error here is below 1e-5 (SPEC.md
section 5); the cap is compared exactly.
"""
import math

try:
    from micropython import const
except ImportError:  # CPython
    def const(x):
        return x

ONE = const(1 << 30)
MAX_N = const(1 << 23)  # the largest n of rng.below
EPS_SLACK = 1e-4


def bad(field, why):
    raise ValueError("config field %s %s" % (field, why))


def threshold(field, t):
    """A keep-threshold must be in (0, 2**30): at 0 or 2**30 some output is impossible
    for one value and possible for another (an infinite ratio)."""
    if type(t) is not int or not 0 < t < ONE:
        bad(field, "must be an integer in (0, 2**30)")


def at_most(field, v, lo, hi):
    if type(v) is not int or not lo <= v <= hi:
        bad(field, "must be an integer in [%d, %d]" % (lo, hi))


def worst(pairs):
    """(hi, lo), hi >= lo, of the largest max(a/b, b/a) over the pairs (a, b) of
    positive integers: the two orders of x and x' give a ratio and its inverse."""
    hi, lo = 1, 1
    for a, b in pairs:
        if a < b:
            a, b = b, a
        if a * lo > hi * b:
            hi, lo = a, b
    return hi, lo


def epsilon(ratio):
    """ln of the ratio (hi, lo), as a float (for comparing with a declared epsilon and logs)."""
    return math.log(ratio[0]) - math.log(ratio[1])


def within(ratio, cap):
    """The ratio hi/lo is at most the cap num/den, exactly."""
    return ratio[0] * cap[1] <= cap[0] * ratio[1]


def _finite(x):
    """x (an int or float) is finite as a float: a JSON integer such as 10**400 is
    infinite on MicroPython and overflows on CPython, so it is no budget either."""
    try:
        x = float(x)
    except OverflowError:
        return False
    return x - x == 0


def verify(p, eps):
    """Check the config ``p`` (Params) declaring ``eps``; return its worst ratio (hi, lo).

    Raises ValueError naming the field at fault."""
    if p.k >= ONE:
        bad("k", "must be below 2**30")
    if type(eps) not in (int, float) or not _finite(eps) or not eps > 0:
        bad("epsilon", "must be a positive finite number")
    mod = p.module()
    mod.check(p)
    ratio = worst(mod.ratios(p))
    got = epsilon(ratio)
    if got > eps + EPS_SLACK:
        raise ValueError("config thresholds give epsilon %.6g, more than its epsilon %.6g" % (got, eps))
    if p.irr_t is not None:
        e1 = p.irr_epsilon
        if type(e1) not in (int, float) or not _finite(e1) or not e1 > 0:
            bad("irr.epsilon", "must be a positive finite number")
        irr = worst(irr_ratios(p, mod.outputs(p)))
        got = epsilon(irr)
        if got > e1 + EPS_SLACK:
            raise ValueError("config irr.t gives epsilon %.6g, more than its irr.epsilon %.6g" % (got, e1))
    return ratio


def irr_ratios(p, n):
    """The instantaneous layer's ratio: GRR on the n outputs, (m, omega) = (n, 1)."""
    return [(p.irr_t * (n - 1), ONE - p.irr_t)]
