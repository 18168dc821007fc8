"""A device's privacy budget over time: the ``device.budget`` section (host side).

``device.budget = {"epsilon": E, "ratio": R, "days": D}``: the product of the
worst likelihood ratios of all *fresh* draws a board makes in any window of D
days is at most R (a memoized re-send costs nothing; the board keeps the
ledger, ``firmware/lib/mss_node``, SPEC.md section 10).  R is e^E as a plain
decimal string **rounded down** to ``DIGITS`` (60) significant digits, so the
budget the board enforces is never above the E the operator chose (the cap's
``device.max_ratio`` is rounded to nearest instead: there the ratio is an upper
bound the config must stay under, here it is what may be spent).

``mss plan --device-config`` writes one for periodic reporting (default
``DEFAULT_FACTOR`` x the config's epsilon per ``DEFAULT_DAYS`` days, ``--budget
EPS/DAYS``); ``mss deploy`` refuses a periodic config without one unless
told ``--no-budget``.
"""
import math
from decimal import ROUND_DOWN, Decimal, localcontext
from fractions import Fraction

DIGITS = 60
DEFAULT_FACTOR = 4  # default budget: 4 x the config's epsilon ...
DEFAULT_DAYS = 30  # ... per 30 days
MAX_EPSILON = 200.0  # e^200 has 87 digits (and the float32 check of a board stays within 1e-4)
MAX_DAYS = 10000  # days x 86400 s stays below 2**30 (a small int on every MicroPython port)
SPENT_MAX = 256  # fresh draws a board's ledger holds in a window (mss_node.state.SPENT_MAX): no more may be allowed


def ratio(epsilon):
    """e^epsilon rounded toward zero to DIGITS significant digits, as a plain decimal string.

    ``Decimal.exp`` rounds half-even whatever the context says, so e^epsilon is
    computed with 20 guard digits and truncated; the truncation is certain once
    the guarded value is more than one of its ulps away from a DIGITS-digit
    boundary (it is within half an ulp of e^epsilon, which is irrational for a
    non-zero rational epsilon and so never on a boundary; more guard digits are
    taken otherwise)."""
    check_epsilon(epsilon)
    x = Decimal(float(epsilon))  # the double, exactly
    guard = 20
    while True:
        with localcontext() as ctx:
            ctx.prec = DIGITS + guard
            e = x.exp()
            ulp = Decimal(1).scaleb(e.adjusted() - ctx.prec + 1)
        with localcontext() as ctx:
            ctx.prec = DIGITS
            ctx.rounding = ROUND_DOWN
            down = +e
            step = Decimal(1).scaleb(down.adjusted() - DIGITS + 1)
        with localcontext() as ctx:
            ctx.prec = 4 * (DIGITS + guard)  # exact: the operands are short
            if e - down > ulp and down + step - e > ulp:
                return format(down, "f")
        guard *= 2


def check_epsilon(epsilon):
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0 < epsilon <= MAX_EPSILON:
        raise ValueError(f"budget epsilon must be a positive number up to {MAX_EPSILON:g}, got {epsilon!r}")


def check_days(days):
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise ValueError(f"budget days must be a whole number of days from 1 to {MAX_DAYS}, got {days!r}")


def budget_section(epsilon, days):
    """The ``device.budget`` dict: {"epsilon", "ratio" (e^epsilon rounded down, 60 digits), "days"}."""
    check_epsilon(epsilon)
    check_days(days)
    return {"epsilon": float(epsilon), "ratio": ratio(epsilon), "days": days}


def check_device(device, cfg):
    """Refuse (ValueError naming the field) a ``device`` section whose ``memoize`` or ``budget``
    the boards would refuse for ``cfg`` (mss_node.settings): what the aggregator reads of them
    (its start line, the dashboard's loss so far) is then what the boards enforce."""
    memoize = device.get("memoize", False)
    if not isinstance(memoize, bool):
        raise ValueError(f"device.memoize must be true or false, got {memoize!r}")
    section = device.get("budget")
    if section is None:
        return
    if not isinstance(section, dict) or set(section) != {"epsilon", "ratio", "days"}:
        raise ValueError("device.budget must be an object {epsilon, ratio, days} "
                         "(the device config of a plan carries it)")
    check_epsilon(section["epsilon"])
    check_days(section["days"])
    r = section["ratio"]
    if not isinstance(r, str) or not r.replace(".", "", 1).isdigit() or \
            abs(_ln(ratio_fraction(section)) - section["epsilon"]) > 1e-4:
        raise ValueError(f"device.budget.ratio must be e^epsilon as a decimal string, got {r!r}")
    n = draws_per_window(section, worst_ratio(cfg))
    if not 1 <= n <= SPENT_MAX:
        raise ValueError(f"device.budget allows {n} fresh draws of this config a window: a board takes "
                         f"1 to {SPENT_MAX}")


def default_device(epsilon):
    """The device fields ``mss plan --device-config`` writes unless ``--fresh-reports``:
    memoized reports and the default budget for a config at ``epsilon``."""
    return {"memoize": True, "budget": budget_section(DEFAULT_FACTOR * epsilon, DEFAULT_DAYS)}


def parse_budget(text):
    """``"EPS/DAYS"`` (e.g. ``"4/30"``) -> (4.0, 30); ValueError naming what is wrong."""
    eps_text, sep, days_text = str(text).strip().partition("/")
    if not sep or not eps_text.strip() or not days_text.strip():
        raise ValueError(f"must be EPS/DAYS such as 4/30 (at most epsilon 4 spent in any 30 days), got {text!r}")
    try:
        epsilon = float(eps_text)
    except ValueError:
        raise ValueError(f"its epsilon {eps_text.strip()!r} is not a number (EPS/DAYS such as 4/30)") from None
    if not math.isfinite(epsilon) or not 0 < epsilon <= MAX_EPSILON:
        raise ValueError(f"its epsilon must be a positive number up to {MAX_EPSILON:g}, got {eps_text.strip()!r}")
    days_text = days_text.strip()
    if not days_text.isdigit() or not 1 <= int(days_text) <= MAX_DAYS:
        raise ValueError(f"its days must be a whole number of days from 1 to {MAX_DAYS}, got {days_text!r}")
    return epsilon, int(days_text)


def ratio_fraction(section):
    """The budget's ratio as an exact Fraction."""
    return Fraction(Decimal(section["ratio"]))


def worst_ratio(cfg):
    """The config's worst likelihood ratio as the board computes it (mss_device.check.verify),
    as an exact Fraction: what one fresh draw costs in the ledger."""
    from mss_device.check import verify
    from mss_device.params import Params

    hi, lo = verify(Params(cfg.to_dict()), cfg.epsilon)
    return Fraction(hi, lo)


def draws_per_window(section, worst):
    """The most fresh draws of worst ratio ``worst`` (a Fraction) one window allows:
    the largest n with worst^n <= ratio, exactly (0: the budget allows none)."""
    cap = ratio_fraction(section)
    if worst <= 1:
        raise ValueError("a worst ratio of 1 spends nothing")
    # a float guess first, then exact steps
    n = max(0, int(_ln(cap) / _ln(worst)) - 1)
    product = worst ** n
    while product * worst <= cap:
        product *= worst
        n += 1
    while n and product > cap:  # the float guess was one too many
        product /= worst
        n -= 1
    return n


def _ln(r):
    return math.log(r.numerator) - math.log(r.denominator)


def describe(cfg, device):
    """(one line, weak) saying what a campaign's ``device`` section bounds, for ``cfg``:
    ``mss aggregate`` says it at start.  ``weak`` when nothing bounds a device's loss
    over the campaign (no budget), the line then says why (docs/privacy.md section 3)."""
    device = device or {}
    eps = cfg.eps_effective
    per_day = 86400 / device.get("period_s", 3600)
    memo = device.get("memoize") is True
    section = device.get("budget")
    if section:
        n = draws_per_window(section, worst_ratio(cfg))
        return (f"privacy: {'memoized' if memo else 'fresh'} reports, device.budget {section['epsilon']:g} per "
                f"{section['days']} days ({n} fresh draws of epsilon {eps:.4g} a window, enforced by the boards)",
                False)
    if memo:
        return (f"no device.budget: memoized reports spend epsilon {eps:.4g} per distinct value a device "
                f"reports, with no bound over the campaign (mss plan --budget EPS/DAYS --device-config)", True)
    eps = getattr(cfg, "report_eps_effective", eps)  # one report of the composed channel (an irr layer)
    return (f"no device.budget and no device.memoize: every report is a fresh draw, epsilon {eps:.4g} x "
            f"{per_day:.3g} reports a day = {eps * per_day:.4g} a day per device; a stable value is recovered "
            f"within days (mss audit --config CONFIG --longitudinal; mss plan --device-config writes both)", True)
