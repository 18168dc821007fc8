"""Empirical epsilon lower bounds from a distinguishing test (ldp-audit style).

Run the randomiser n1 times on x1 and n2 times on x2, count how often a
test event E holds on the reports (tp of n1, fp of n2).  With one-sided
Clopper-Pearson bounds at confidence 1 - alpha/2 each,

    eps_lb = ln(TPR_low / FPR_high)

is a lower bound on the true epsilon with probability at least 1 - alpha
(Arcolezi & Gambs, "Revisiting Locally Differentially Private Protocols:
Towards Better Trade-offs in Privacy, Utility, and Attack Resistance",
PETS 2024 / ldp-audit).  It is computed on the exact wire bytes, so an
implementation leak (e.g. report order) is seen, not just the design.
"""
import math

from scipy.stats import beta


def clopper_pearson(successes, n, alpha):
    """Two-sided (1 - alpha) Clopper-Pearson interval (low, high) for a proportion."""
    low = 0.0 if successes == 0 else float(beta.ppf(alpha / 2, successes, n - successes + 1))
    high = 1.0 if successes == n else float(beta.ppf(1 - alpha / 2, successes + 1, n - successes))
    return low, high


def epsilon_lower_bound(tp, n1, fp, n2, alpha=0.001):
    """ln(TPR_low / FPR_high), each bound one-sided at alpha/2 (0 if not positive)."""
    tpr_low = clopper_pearson(tp, n1, alpha)[0]
    fpr_high = clopper_pearson(fp, n2, alpha)[1]
    if tpr_low <= 0:
        return 0.0
    return max(0.0, math.log(tpr_low / fpr_high))
