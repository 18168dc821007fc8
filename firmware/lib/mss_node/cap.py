"""The board's cap on a config's privacy loss: ``device.max_epsilon`` and its exact
form ``device.max_ratio`` (SPEC.md section 5), read by mss_node.settings when set;
:func:`exact` also reads ``device.budget``'s ratio (mss_node.ledger)."""
import math

from mss_device import check


def exact(eps, ratio, eps_field, ratio_field, what):
    """(num, den): the decimal string ``ratio`` (e^``eps``, written by the host to 60
    digits) as the exact fraction num / 10^d, once it agrees with ``eps`` to float
    precision.  ValueError naming the fields; ``what`` says who writes them."""
    if type(eps) not in (int, float) or not eps > 0 or not isinstance(ratio, str):
        raise ValueError("%s (a positive number) needs %s (e^%s as a decimal string; %s)"
                         % (eps_field, ratio_field, eps_field.split(".")[-1], what))
    parts = ratio.split(".")
    digits = "".join(parts)
    if len(parts) > 2 or not digits.isdigit() or int(digits) == 0:
        raise ValueError("%s must be a decimal number such as 7.389056" % ratio_field)
    # ln of 0.<digits> * 10^len(whole): no float ever holds the whole number (float32 ports)
    if abs(math.log(float("0." + digits)) + len(parts[0]) * math.log(10) - eps) > check.EPS_SLACK:
        raise ValueError("%s is not e^%s" % (ratio_field, eps_field.split(".")[-1]))
    return int(digits), 10 ** (len(digits) - len(parts[0]))


def cap(eps, ratio, worst):
    """(num, den) of device.max_ratio, exactly, once the config's ``worst`` ratio (hi, lo)
    is within it.  max_epsilon is what the operator chose (logs); max_ratio, e^max_epsilon
    written by the host to 60 digits, is what is compared, so the two must agree (to float
    precision here)."""
    c = exact(eps, ratio, "device.max_epsilon", "device.max_ratio", "mss deploy --max-epsilon writes both")
    if not check.within(worst, c):
        raise ValueError("config thresholds give epsilon %.6g, above device.max_epsilon %.6g"
                         % (check.epsilon(worst), eps))
    return c
