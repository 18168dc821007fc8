"""The board's cap on a config's privacy loss: ``device.max_epsilon`` and its exact
form ``device.max_ratio`` (SPEC.md section 5), read by mss_node.settings when set."""
import math

from mss_device import check


def cap(eps, ratio, worst):
    """(num, den) of device.max_ratio, exactly, once the config's ``worst`` ratio (hi, lo)
    is within it.  max_epsilon is what the operator chose (logs); max_ratio, e^max_epsilon
    written by the host to 60 digits, is what is compared, so the two must agree (to float
    precision here)."""
    if type(eps) not in (int, float) or not eps > 0 or not isinstance(ratio, str):
        raise ValueError("device.max_epsilon (a positive number) needs device.max_ratio "
                         "(e^max_epsilon as a decimal string; tools/deploy.py --max-epsilon writes both)")
    parts = ratio.split(".")
    digits = "".join(parts)
    if len(parts) > 2 or not digits.isdigit() or int(digits) == 0:
        raise ValueError("device.max_ratio must be a decimal number such as 7.389056")
    # ln of 0.<digits> * 10^len(whole): no float ever holds the whole number (float32 ports)
    if abs(math.log(float("0." + digits)) + len(parts[0]) * math.log(10) - eps) > check.EPS_SLACK:
        raise ValueError("device.max_ratio is not e^max_epsilon")
    c = int(digits), 10 ** (len(digits) - len(parts[0]))
    if not check.within(worst, c):
        raise ValueError("config thresholds give epsilon %.6g, above device.max_epsilon %.6g"
                         % (check.epsilon(worst), eps))
    return c
