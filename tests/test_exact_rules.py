"""Every integer the host derives from epsilon follows SPEC.md section 1 exactly.

E = e^eps correctly rounded to 60 significant digits (computed here on its
own); each rule is checked against its definition with exact fractions, at
epsilons chosen right at the boundaries where a rounding slip would show
(the eps whose ratio is the next integer's, one and two doubles either side).
"""
import math
from decimal import Decimal, localcontext
from fractions import Fraction

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from mss_protocol import privacy
from mss_protocol.olh import OLH
from mss_protocol.pgr import _is_prime, field_and_dimension
from mss_protocol.privacy import MAX_EPSILON, ONE
from mss_protocol.unary import thresholds

NUDGE = st.integers(-2, 2)


def big_e(eps):
    """E by the definition: the exact decimal of the double, e^it to 60 digits (nearest)."""
    with localcontext() as ctx:
        ctx.prec = 60
        return Fraction(Decimal(eps).exp())


def eps_of(r, nudge):
    """The double nearest ln r (r a Fraction > 1), moved by ``nudge`` doubles."""
    with localcontext() as ctx:
        ctx.prec = 80
        eps = float((Decimal(r.numerator) / Decimal(r.denominator)).ln())
    for _ in range(abs(nudge)):
        eps = math.nextafter(eps, math.inf if nudge > 0 else 0)
    return eps


def within(r, e):
    return r <= e


@st.composite
def channels(draw):
    m = draw(st.one_of(st.integers(2, 64), st.integers(2, (1 << 23) + 1)))
    return m, draw(st.integers(1, m // 2))


@st.composite
def targets(draw):
    """(m, omega, T0) with the ratio of T0 in (1, 2**30 - 1]: a threshold some eps <= MAX_EPSILON gives."""
    m, w = draw(channels())
    lo = ONE * w // m + 1
    hi = (ONE - 1) * ONE * w // ((m - w) + (ONE - 1) * w)
    assume(lo <= hi)
    return m, w, draw(st.integers(lo, hi))


@settings(max_examples=400, deadline=None)
@given(targets(), NUDGE)
@example((2, 1, ONE - 2), 0)
@example(((1 << 23) + 1, 1, 1 << 29), 1)
def test_threshold_is_the_largest_within_e_near_the_boundary(target, nudge):
    """eps is the double nearest the ln of the ratio of a target T0 (or a few doubles off):
    the exact bound then passes within rounding of T0's, where slips show."""
    m, w, t0 = target
    eps = eps_of(privacy.ratio(m, w, t0), nudge)
    assume(0 < eps <= MAX_EPSILON)
    e, t = big_e(eps), privacy.threshold(m, w, eps)
    assert 0 < t < ONE
    assert within(privacy.ratio(m, w, t), e)
    assert t + 1 == ONE or not within(privacy.ratio(m, w, t + 1), e)


@settings(max_examples=200, deadline=None)
@given(channels(), st.floats(1e-9, MAX_EPSILON))
def test_threshold_is_the_largest_within_e(mw, eps):
    m, w = mw
    e, t = big_e(eps), privacy.threshold(m, w, eps)
    assert within(privacy.ratio(m, w, t), e) and not within(privacy.ratio(m, w, t + 1), e)


def two_bit(tp, tq):
    return Fraction(tp * (ONE - tq), (ONE - tp) * tq)


@settings(max_examples=300, deadline=None)
@given(st.integers((1 << 29) + 1, ONE - 2), NUDGE)
def test_sue_tp_is_the_largest_within_e(tp0, nudge):
    eps = eps_of(two_bit(tp0, ONE - tp0), nudge)
    assume(0 < eps <= MAX_EPSILON)
    e = big_e(eps)
    tp, tq = thresholds("sue", eps)
    assert tq == ONE - tp
    assert within(two_bit(tp, tq), e) and not within(two_bit(tp + 1, tq - 1), e)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, (1 << 29) - 1), NUDGE)
def test_oue_tq_is_the_smallest_within_e(tq0, nudge):
    eps = eps_of(two_bit(1 << 29, tq0), nudge)
    assume(0 < eps <= MAX_EPSILON)
    e = big_e(eps)
    tp, tq = thresholds("oue", eps)
    assert tp == 1 << 29
    assert within(two_bit(tp, tq), e) and not within(two_bit(tp, tq - 1), e)


PRIMES = [p for p in range(3, 1 << 15) if _is_prime(p)]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PRIMES), NUDGE)
@example(59, 0)
def test_pgr_q_is_the_smallest_prime_at_least_e_plus_one(p, nudge):
    """At eps = ln(p - 1) a double's exp lands either side of p - 1; the rule decides by E."""
    eps = eps_of(Fraction(p - 1), nudge)
    assume(0 < eps <= math.log(1 << 15))
    e = big_e(eps)
    q, _ = field_and_dimension(2, eps)
    assert _is_prime(q) and q >= e + 1
    assert not any(_is_prime(c) for c in range(math.ceil(e + 1), q))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4000), NUDGE)
def test_olh_g_is_e_rounded_half_up_plus_one(n, nudge):
    eps = eps_of(Fraction(2 * n + 1, 2), nudge)  # E about n + 1/2: the rounding's edge
    assume(0 < eps <= MAX_EPSILON)
    e = big_e(eps)
    g = OLH(64, eps).g
    assert g - 1 - Fraction(1, 2) <= e < g - 1 + Fraction(1, 2)


def test_the_cap_is_e():
    """device.max_ratio is the same E, written out exactly."""
    for eps in (0.5, 1.0, 2.0, MAX_EPSILON):
        assert Fraction(Decimal(privacy.cap(eps))) == big_e(eps) == privacy.exp_fraction(eps)
