"""Exact privacy of the integer device implementation.

The device keeps the true residue with probability p' = T / 2**30 where the
integer threshold T is computed here, and draws everything else exactly
uniformly (rejection sampling).  For block j the channel is therefore

    P[(j, Z) | x] = (1/l) * p'_j / C(m_j - 1, omega_j - 1)       if x mod m_j in Z
                  = (1/l) * (1 - p'_j) / C(m_j - 1, omega_j)     otherwise,

and the worst-case likelihood ratio over inputs is

    R_j = p'_j (m_j - omega_j) / ((1 - p'_j) omega_j) = T (m - omega) / ((2**30 - T) omega),

so eps_effective = max_j ln R_j (mss-protocol-notes.md section 2.3).  R_j
grows with T, so T = floor(p_j 2**30) rounds towards more privacy and
eps_effective <= eps.  Both are computed in 60-digit decimal arithmetic.

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
from decimal import ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction

from mss_device.params import THRESHOLD_BITS

ONE = 1 << THRESHOLD_BITS
MAX_EPSILON = math.log(ONE - 1)


def epsilon_problem(eps):
    """Why ``eps`` is not a budget the protocols support (positive, finite,
    at most MAX_EPSILON), or None."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not 0 < eps < math.inf:
        return f"epsilon must be a positive finite number, got {eps!r}"
    if eps > MAX_EPSILON:
        return (f"epsilon {eps!r} is above {MAX_EPSILON:.4f} = ln(2**30 - 1), the largest a 30-bit "
                f"threshold delivers (beyond it a report is the truth but for a 2**-30 chance)")
    return None


def threshold(m, omega, eps):
    """Largest integer T with T (m - omega) <= e^eps (2**30 - T) omega.

    That is T = floor(2**30 * omega e^eps / (omega e^eps + m - omega)).
    """
    with localcontext() as ctx:
        ctx.prec = 60
        e = Decimal(eps).exp()
        t = int((ONE * omega * e / (omega * e + m - omega)).to_integral_value(ROUND_FLOOR))
    # Guard the decimal rounding: never exceed the exact bound.
    while t > 0 and ratio(m, omega, t) > Fraction(exp_decimal(eps)):
        t -= 1
    return t


def ratio(m, omega, t):
    """Exact likelihood ratio R = T (m - omega) / ((2**30 - T) omega) as a Fraction."""
    return Fraction(t * (m - omega), (ONE - t) * omega)


def exp_decimal(eps):
    """e^eps to 60 digits."""
    with localcontext() as ctx:
        ctx.prec = 60
        return Decimal(eps).exp()


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
