"""Exact privacy of the integer device implementation.

The device keeps the true residue with probability p' = T / 2**30 where the
integer threshold T is computed here, and draws everything else exactly
uniformly (rejection sampling).  For block j the channel is therefore

    P[(j, Z) | x] = (1/l) * p'_j / C(m_j - 1, omega_j - 1)       if x mod m_j in Z
                  = (1/l) * (1 - p'_j) / C(m_j - 1, omega_j)     otherwise,

and the worst-case likelihood ratio over inputs is

    R_j = p'_j (m_j - omega_j) / ((1 - p'_j) omega_j) = T (m - omega) / ((2**30 - T) omega),

so eps_effective = max_j ln R_j (mss-protocol-notes.md section 2.3).  R_j
grows with T; T is the largest integer with R_j <= E, E = e^eps correctly
rounded to 60 significant digits (:func:`exp_decimal`, SPEC.md section 1),
found by exact integer arithmetic, so eps_effective <= eps.

The 30-bit threshold bounds the budget: T <= 2**30 - 1, so a two-outcome
channel (m = 2, omega = 1: a RAPPOR bit, Hadamard response) reaches
R = T / (2**30 - T) <= 2**30 - 1.  Above MAX_EPSILON = ln(2**30 - 1) (20.79)
such a channel cannot deliver epsilon (its eps_effective stops growing), and
every protocol reports the truth but for a chance of about (m - 1) / e^eps:
no privacy is left to spend, and the float variances round to zero (at
epsilon 50 SubsetSelection's is exactly 0; e^eps overflows above 709).
Every config and plan refuses a budget above it (:func:`epsilon_problem`).
"""
import math
import numbers
from decimal import Decimal, localcontext
from fractions import Fraction
from functools import lru_cache

from mss_device.params import THRESHOLD_BITS

ONE = 1 << THRESHOLD_BITS
DIGITS = 60  # significant digits of E = e^eps (exp_decimal)
# The double nearest ln(2**30 - 1) = 20.7944154158670367...: 0x1.4cb5ecf069650p+4,
# 20.79441541586703579...; a budget is refused when eps > MAX_EPSILON as doubles.
MAX_EPSILON = math.log(ONE - 1)
# The smallest budget the planner plans for (choose, mss.planner.plan; every --epsilon of mss).  A
# channel of m outcomes keeping omega has T = 2**30 omega / m at epsilon 0, and epsilon moves T by
# about 2**30 epsilon omega (m - omega) / m**2, at least about 2**30 epsilon / m: below m / 2**30 (2**-7 for the
# device's largest draw, m = 2**23) T may not move at all, p = q, eps_effective 0 and the variance
# a division by zero (SubsetSelection's at k = 16 already at 1e-8).  0.01 keeps every channel a device
# can draw at least one step of T above that.  Configs themselves are checked by epsilon_problem.
MIN_PLAN_EPSILON = 0.01


def epsilon_problem(eps):
    """Why ``eps`` is not a budget the protocols support (positive, finite,
    at most MAX_EPSILON), or None."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not 0 < eps < math.inf:
        return f"epsilon must be a positive finite number, got {eps!r}"
    if eps > MAX_EPSILON:
        return (f"epsilon {eps!r} is above {MAX_EPSILON:.4f} = ln(2**30 - 1), the largest a 30-bit "
                f"threshold delivers (beyond it a report is the truth but for a 2**-30 chance)")
    return None


def plan_epsilon_problem(eps):
    """Why the planner cannot plan for ``eps`` (:func:`epsilon_problem`, or below
    MIN_PLAN_EPSILON), or None."""
    if why := epsilon_problem(eps):
        return why
    if eps < MIN_PLAN_EPSILON:
        return (f"epsilon {eps!r} is below {MIN_PLAN_EPSILON}, the smallest planned for (a 30-bit threshold "
                f"hardly moves below it: no estimate would be possible)")
    return None


def threshold(m, omega, eps):
    """The largest integer T with T (m - omega) <= E (2**30 - T) omega, E = :func:`exp_decimal`.

    SPEC.md section 1, "The threshold rule".  With E = N / D exactly, the
    condition is T (omega N + (m - omega) D) <= 2**30 omega N, so T =
    floor(2**30 omega N / (omega N + (m - omega) D)): one exact integer
    division, no rounding anywhere (m - omega >= 1 makes T < 2**30).
    """
    n, d = _exp_ratio(eps)
    return ONE * omega * n // (omega * n + (m - omega) * d)


def ceil_exp(eps):
    """ceil(E): PGR's field is the smallest prime q >= E + 1, i.e. q >= ceil(E) + 1."""
    n, d = _exp_ratio(eps)
    return -(-n // d)


def round_exp(eps):
    """floor(E + 1/2), E rounded half up to an integer (OLH: g = round_exp + 1)."""
    n, d = _exp_ratio(eps)
    return (2 * n + d) // (2 * d)


def largest(ok, guess):
    """The largest integer t with ok(t), for ok true up to some point and false after
    it, searched from ``guess`` downward and upward (exact: ``guess`` only saves steps)."""
    t = guess
    while not ok(t):
        t -= 1
    while ok(t + 1):
        t += 1
    return t


def ratio(m, omega, t):
    """Exact likelihood ratio R = T (m - omega) / ((2**30 - T) omega) as a Fraction."""
    return Fraction(t * (m - omega), (ONE - t) * omega)


def exp_decimal(eps):
    """E = e^eps to DIGITS (60) significant digits, as a Decimal.

    SPEC.md section 1: the double eps is read as the exact decimal it is
    (``Decimal(eps)``), and e^eps is correctly rounded to the nearest 60-digit
    decimal (``Decimal.exp`` rounds half-even; e^eps of a non-zero rational is
    irrational, so no tie occurs).  Every integer the host derives from eps
    (thresholds, PGR's q, OLH's g, the unary thresholds) and the cap follow
    from this one number, compared as the exact fraction it is.
    """
    with localcontext() as ctx:
        ctx.prec = DIGITS
        return Decimal(eps).exp()


def exp_fraction(eps):
    """E as an exact Fraction."""
    return Fraction(*_exp_ratio(eps))


@lru_cache(maxsize=1024)
def _exp_ratio(eps):
    """(N, D), E = N / D exactly: the planner asks for the same eps many times."""
    return exp_decimal(eps).as_integer_ratio()


def ln_down(r):
    """ln of a positive Fraction, rounded down to a float (never above the exact value)."""
    with localcontext() as ctx:
        ctx.prec = 60
        ln = (Decimal(r.numerator) / Decimal(r.denominator)).ln()
        value = float(ln)
        return value if Decimal(value) <= ln else math.nextafter(value, -math.inf)


def worst(r):
    """max(r, 1/r): the two orders of a pair of values give a ratio and its inverse."""
    return max(r, 1 / r)


def eps_effective(moduli, omegas, thresholds):
    """max_j ln max(R_j, 1/R_j), rounded down to a float (never above the exact value).

    The same form covers GRR (m = k, omega = 1), Hadamard response (m = 2,
    omega = 1) and PGR (m = K, omega = c_set): one "set of omega of m
    outcomes weighted by e^eps" channel.  R_j < 1 (a threshold below the
    uniform T = 2**30 omega / m: the residue is kept less often than a
    filler) is as revealing as 1 / R_j.
    """
    return ln_down(max(worst(ratio(m, w, t)) for m, w, t in zip(moduli, omegas, thresholds)))


def cap(max_epsilon):
    """``device.max_ratio`` for a cap of ``max_epsilon``: e^max_epsilon to 60 digits (the
    number the threshold rule compares with), as a plain decimal string a device reads exactly."""
    if not (isinstance(max_epsilon, (int, float)) and 0 < max_epsilon < math.inf):
        raise ValueError(f"max_epsilon must be a positive finite number, got {max_epsilon!r}")
    return format(exp_decimal(max_epsilon), "f")
