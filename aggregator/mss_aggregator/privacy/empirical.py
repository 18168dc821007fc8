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


def clopper_pearson(successes, n, alpha):
    """Two-sided (1 - alpha) Clopper-Pearson interval (low, high) for a proportion."""
    from scipy.stats import beta  # here: scipy.stats costs 0.3 s of every CLI start

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


# -- the audit of real clients ----------------------------------------------
# Inputs 0 and 1 differ in every residue (m_j >= 2) and in every other protocol.
X1, X2 = 0, 1


def distinguishing_hits(ch, wire_reports, x1=X1, x2=X2):
    """How many reports support x1 but not x2: the event whose probability
    ratio between inputs x1 and x2 is the channel's largest (e^eps for a
    correct client).  Every report is parsed from its exact wire output."""
    hits = 0
    for data in wire_reports:
        mask = ch.support(ch.parse(data))[0]
        hits += bool(mask[x1]) and not mask[x2]
    return hits


def host_reports(ch, x, n, rng):
    """n wire outputs of the protocol's integer client for value x."""
    return [ch.wire(x, rng) for _ in range(n)]


def firmware_reports(cfg, x, n, runtime="micropython", timeout=3600):
    """n report bytes for value x from the firmware (``mss_node.emit``) under
    ``runtime``, with the runtime's own os.urandom."""
    import os
    import tempfile

    from mss_aggregator.devices.runtime import run_module

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.json")
        cfg.save(path)
        out = run_module(runtime, "mss_node.emit", [path, x, n], timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"firmware under {runtime} failed: {out.stderr.strip()[-500:]}")
    return [bytes.fromhex(line) for line in out.stdout.split()]


def audit_client(ch, reports_x1, reports_x2, epsilon, alpha=0.001):
    """The ldp-audit row for one client: counts, Clopper-Pearson epsilon lower
    bound, and whether it stays within the claimed ``epsilon``."""
    tp = distinguishing_hits(ch, reports_x1)
    fp = distinguishing_hits(ch, reports_x2)
    lb = epsilon_lower_bound(tp, len(reports_x1), fp, len(reports_x2), alpha)
    return {"trials": len(reports_x1), "tp": tp, "fp": fp, "eps_lower_bound": lb,
            "within_epsilon": lb <= epsilon}
