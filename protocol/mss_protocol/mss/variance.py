"""Predicted accuracy of an MSS configuration.

With block weights w_j = 1 / Var[ghat_j(r)] (SS variance on [m_j] with
n_j = n / l reports and class frequencies 1/m_j) and independent rows, the
GLS estimate has covariance (A^T W A)^-1, so the per-item MSE is

    MSE = tr((A^T W A)^-1) / k                      (notes section 5.5)

compared with SubsetSelection on the full domain, whose per-item MSE
averaged over [k] is V(k, omega*, p) of :mod:`.subset_selection`.
"""
import numpy as np

from mss_protocol.mss.linalg import ResidueComponents
from mss_protocol.subset_selection import optimal_omega, ss_p, ss_variance

EXACT_LIMIT = 4096


def block_weights(cfg, n_per_block):
    """GLS weight of each block's rows: n_j / (n_j Var[ghat_j]), shape (l,)."""
    return n_per_block / cfg.unit_variance


def predicted_mse(cfg, n, exact_limit=EXACT_LIMIT, rel_tol=0.003, maxiter=500):
    """(per-item MSE at n reports, relative error of that figure; 0 if exact).

    Exact whenever every connected component of A^T A has at most
    ``exact_limit`` items (always for k <= exact_limit); otherwise the large
    components use Hutchinson's estimator at ``rel_tol``, with at most
    ``maxiter`` conjugate-gradient steps (SingularError beyond).
    """
    comps = ResidueComponents(cfg.k, cfg.moduli, max_exact=exact_limit)
    w = np.repeat(block_weights(cfg, n / cfg.l), cfg.moduli)
    trace, rel = comps.trace_inverse(w, rel_tol=rel_tol, maxiter=maxiter)
    return trace / cfg.k, rel


def ss_mse(k, eps, n):
    """Exact per-item MSE of SubsetSelection on [k] (SS-optimal omega, real p)."""
    omega = optimal_omega(k, eps)
    return float(ss_variance(k, omega, ss_p(k, omega, eps), n)), omega

