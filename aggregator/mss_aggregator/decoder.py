"""Decode MSS counts into frequency estimates with standard errors.

For block j with n_j > 0 reports the debiased residue-class frequencies are
(mss-protocol-notes.md section 5.1, with the device's integer p'_j, q'_j)

    ghat_j(r) = (c_j(r) / n_j - q'_j) / (p'_j - q'_j),    E[ghat_j] = A_j f.

The estimate solves the weighted (ridge) least-squares problem

    fhat = argmin_z sum_j w_j ||A_j z - ghat_j||^2 + damp^2 ||z||^2

with ``scipy.sparse.linalg.lsmr`` on diag(sqrt(w)) A (Fong & Saunders 2011).
w_j = 1 / Var[ghat_j(r)] = n_j / V_j, V_j the SS variance of
:mod:`mss_protocol.subset_selection`, so damp = 0 is the unbiased GLS
estimate (paper Theorem 2).  Blocks without reports get weight 0.

Standard errors come from the sandwich covariance

    Cov(fhat) = M^-1 A^T W S W A M^-1,    M = A^T W A + damp^2 I,

with S the plug-in row variances q(1-q)/(n_j (p-q)^2) + g(1-p-q)/(n_j (p-q)),
g = ghat clipped to [0, 1] (the second term matters for heavy hitters).
The diagonal is exact, component by component, whenever every connected
component of A^T A has at most 4096 items; otherwise it is approximated
by ignoring shared classes (H_xx / M_xx^2, documented in SPEC.md).
95% confidence intervals are estimate +- 1.96 SE.
"""
import time
from dataclasses import dataclass

import numpy as np
from scipy.sparse import diags
from scipy.sparse.linalg import lsmr
from scipy.stats import norm

from mss_protocol.linalg import ResidueComponents, SingularError
from mss_aggregator import postprocess

Z95 = float(norm.ppf(0.975))


@dataclass
class Estimate:
    """Per-item frequency estimates; arrays of shape (k,)."""

    estimate: np.ndarray  # after post-processing
    raw: np.ndarray  # unbiased (damp = 0) or ridge estimate before post-processing
    stderr: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    n: int
    post: str
    stderr_method: str  # "exact" or "approx"
    iterations: int
    seconds: float

    def rows(self):
        return [{"item": i, "estimate": float(e), "stderr": float(s),
                 "ci_low": float(lo), "ci_high": float(hi)}
                for i, (e, s, lo, hi) in enumerate(zip(self.estimate, self.stderr,
                                                       self.ci_low, self.ci_high))]


class Decoder:
    """LSMR decoder for one configuration; build once, decode many times.

    Parameters
    ----------
    damp : float
        Ridge parameter of LSMR (sqrt of lambda, in units of the weighted
        residual); 0 gives the unbiased estimate.
    atol, btol : float
        LSMR stopping tolerances (relative residual and normal-equation
        residual); 1e-10 makes the iteration error negligible next to the
        statistical error.
    maxiter : int or None
        LSMR iteration cap (default min(k, 1000)).
    """

    def __init__(self, cfg, damp=0.0, atol=1e-10, btol=1e-10, maxiter=None):
        self.cfg = cfg
        self.damp, self.atol, self.btol = damp, atol, btol
        self.maxiter = maxiter or min(cfg.k, 1000)
        self.components = ResidueComponents(cfg.k, cfg.moduli)
        self.A = self.components.A

    def decode(self, counts, post="none"):
        """Estimate frequencies from :class:`~mss_aggregator.counts.Counts`."""
        if counts.cfg.config_id != self.cfg.config_id:
            raise ValueError("counts were made under another config")
        t0 = time.perf_counter()
        cfg = self.cfg
        n_j = counts.n.astype(float)
        active = n_j > 0
        safe_n = np.where(active, n_j, 1.0)
        p, q = cfg.p, cfg.q
        rep = np.asarray(cfg.moduli)
        n_rows, p_rows, q_rows = (np.repeat(a, rep) for a in (safe_n, p, q))
        ghat = (counts.c / n_rows - q_rows) / (p_rows - q_rows)
        w = np.repeat(np.where(active, n_j / cfg.unit_variance, 0.0), rep)
        sw = np.sqrt(w)
        res = lsmr(diags(sw) @ self.A, sw * ghat, damp=self.damp, atol=self.atol,
                   btol=self.btol, maxiter=self.maxiter)
        raw = res[0]
        row_var = (q_rows * (1 - q_rows) / (n_rows * (p_rows - q_rows) ** 2)
                   + np.clip(ghat, 0, 1) * (1 - p_rows - q_rows) / (n_rows * (p_rows - q_rows)))
        var, method = self._variance(w, w ** 2 * row_var)
        se = np.sqrt(var)
        est = postprocess.apply(raw, post)
        lo, hi = raw - Z95 * se, raw + Z95 * se
        if post != "none":
            lo, hi = np.clip(lo, 0, 1), np.clip(hi, 0, 1)
        return Estimate(est, raw, se, lo, hi, counts.total, post, method, int(res[2]),
                        time.perf_counter() - t0)

    def _variance(self, w, h):
        """diag(M^-1 H M^-1): exact by components, else the diagonal approximation."""
        ridge = self.damp ** 2
        comps = self.components
        if comps.exact:
            try:
                return comps.diag_sandwich(w, h, ridge=ridge), "exact"
            except SingularError:
                return np.full(self.cfg.k, np.inf), "singular"
        m_diag = self.A.T @ w + ridge
        h_diag = self.A.T @ h
        with np.errstate(divide="ignore"):
            return np.where(m_diag > 0, h_diag / m_diag ** 2, np.inf), "approx"

