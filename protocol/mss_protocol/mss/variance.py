"""Predicted accuracy of an MSS configuration: the per-item MSE of the decoder.

The decoder (:mod:`.decoder`) is the GLS estimate fhat = G ghat,
G = M^-1 A^T W, M = A^T W A, with block weights w_j = n_j / V_j.  Against
the fleet's own frequencies f its error has two independent parts
(SPEC.md section 7):

* **noise**, the randomisation of each report given the block each device
  picked: diag(M^-1 H M^-1) with H = A^T W Cov(ghat) W A and the exact
  within-block covariance of SubsetSelection at class frequencies
  g_j = A_j f (:func:`.decoder.noise_variance`);
* **assignment**, which devices land in which block.  Block j sees only its
  n_j ~ n / l devices, whose frequencies f^(j) differ from f.  The blocks
  partition the fleet (each device picks one uniformly), so with
  Sigma = diag(f) - f f^T, linearising f^(j) around f,

      Cov(f^(j) - f, f^(j') - f) = (l 1{j = j'} - 1) Sigma / n,

  and since G A = I,

      Cov_assign(fhat) = (l / n) sum_j (G_j A_j) Sigma (G_j A_j)^T - Sigma / n.

  It vanishes for SubsetSelection (one block) and when every residue class
  is a single item, but not as epsilon grows: at small k and high epsilon
  it dominates (k = 16, eps = 5: noise 0.016 / n, assignment 0.029 / n).

MSE = (1/k) tr(Cov_noise + Cov_assign), at a prior f (uniform by default).
Both parts are proportional to 1/n.  SubsetSelection's per-item MSE
averaged over [k] is V(k, omega*, p) of :mod:`mss_protocol.subset_selection`
for any distribution.
"""
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from mss_protocol.mss.decoder import sandwich_terms
from mss_protocol.mss.linalg import ResidueComponents, block_cg
from mss_protocol.subset_selection import optimal_omega, ss_p, ss_variance

EXACT_LIMIT = 4096
N_REF = 1e6  # both parts scale as 1/n; evaluated here, where n_j >= 1 always holds


@dataclass(frozen=True)
class Probing:
    """When :func:`_hutchinson` stops: the standard error of its figure within ``rel_tol`` of it, or
    ``max_probes`` probes, drawn ``batch`` at a time from ``seed``; each probe solved by conjugate
    gradients to a relative residual ``cg_rtol`` in at most ``maxiter`` steps."""
    rel_tol: float
    maxiter: int
    cg_rtol: float
    batch: int = 32
    max_probes: int = 4096
    seed: int = 0


def block_weights(cfg, n_per_block):
    """GLS weight of each block's rows: n_j / (n_j Var[ghat_j]), shape (l,)."""
    return n_per_block / cfg.unit_variance


def predicted_mse(cfg, n, prior=None, exact_limit=EXACT_LIMIT, rel_tol=0.003, maxiter=500, cg_rtol=1e-10,
                  parts=False):
    """(per-item MSE at n reports, relative standard error of that figure; 0 if exact).

    ``prior``: the value distribution f, shape (k,) (default uniform).  Exact
    whenever every connected component of A^T A has at most ``exact_limit``
    items (always for k <= exact_limit); larger components use Hutchinson's
    estimator at ``rel_tol``, with at most ``maxiter`` conjugate-gradient
    steps to a relative residual ``cg_rtol`` (SingularError beyond).
    ``parts=True`` returns ({"noise", "assignment"}, rel) instead.
    """
    k, l = cfg.k, cfg.l
    f = np.full(k, 1.0 / k) if prior is None else np.asarray(prior, dtype=float)
    comps = ResidueComponents(k, cfg.moduli, max_exact=exact_limit)
    n_j = np.full(l, N_REF / l)
    w = np.repeat(block_weights(cfg, n_j), cfg.moduli)
    g = comps.A @ f
    h_rows, V, c = sandwich_terms(cfg, n_j, w, g)
    noise, assign, var = 0.0, 0.0, 0.0

    inv = comps.inverse(w)
    for nodes, minv in inv.groups:
        for j in range(l):
            d_noise, d_assign = _exact_block_terms(minv=minv, nodes=nodes, m=cfg.moduli[j], offset=cfg.offsets[j],
                                                   h_rows=h_rows, w=w, f=f)
            noise += d_noise
            assign += d_assign
    MV = inv.apply(V)
    probing = Probing(rel_tol=rel_tol, maxiter=maxiter, cg_rtol=cg_rtol)
    if comps.large:
        M = (comps.A.T @ sparse.diags(w) @ comps.A).tocsr()
        rows = comps.offsets + np.arange(k)[:, None] % np.asarray(cfg.moduli)  # (k, l): each item's row in block j
        for nodes in comps.large:
            for idx in nodes:
                used, local = np.unique(rows[idx], return_inverse=True)  # the component's rows of A
                est, se, MV[idx] = _hutchinson(M=M[idx][:, idx], A=comps.A[used][:, idx],
                                               rows=local.reshape(idx.size, l), V=V[idx], h_rows=h_rows[used],
                                               w=w[used], f=f[idx], probing=probing)
                noise += est[0]
                assign += est[1]
                var += se ** 2
    noise += float(np.sum((MV * c).sum(axis=1) * MV[:, 0]))
    assign = max(0.0, (l / N_REF) * assign - (1 - f @ f) / N_REF)  # a covariance's trace: >= 0 but for rounding
    out = {"noise": noise * N_REF / (n * k), "assignment": assign * N_REF / (n * k)}
    total = out["noise"] + out["assignment"]
    rel = float(np.sqrt(var)) * N_REF / (n * k) / total if var else 0.0
    return (out if parts else total), rel


def _exact_block_terms(minv, nodes, m, offset, h_rows, w, f):
    """Block j's share of the noise and assignment traces on a group of exact
    components (``minv``: their M^-1, (c, s, s); ``nodes``: their items, (c, s)).

    On a component, A_j^T diag(v) A_j = P diag(v_r) P^T with P the indicator of
    the residue classes r (mod m) the component's items fall in.  With
    S_r = M^-1 P e_r, the sum of M^-1's columns over class r, and F_r the prior
    mass of class r, H's block-j part and G_j A_j = M^-1 P diag(w_r) P^T give

        tr(M^-1 A_j^T diag(h) A_j M^-1) = sum_r h_r |S_r|^2,
        sum_l (G_j A_j)_il^2 f_l = sum_r w_r^2 F_r S_r[i]^2,
        (G_j A_j f)_i = sum_r w_r F_r S_r[i],

    so the return, (sum_r h_r |S_r|^2, sum_i sum_l (G_j A_j)_il^2 f_l - (G_j A_j f)_i^2),
    costs O(c s^2) once M^-1 is known, against the O(c s^3) of forming G_j A_j."""
    c, s = nodes.shape
    res = nodes % m
    order = np.argsort(res, axis=1, kind="stable")  # each component's items, class by class
    res = np.take_along_axis(res, order, axis=1)
    first = np.ones((c, s), dtype=bool)
    first[:, 1:] = res[:, 1:] != res[:, :-1]
    starts = np.flatnonzero(first)  # where each class begins in the flattened (component, item) order
    rows = np.take_along_axis(minv, order[:, :, None], axis=1).reshape(c * s, s)  # M^-1 symmetric: rows = columns
    S = np.add.reduceat(rows, starts, axis=0)  # (classes, s): S_r
    F = np.add.reduceat(np.take_along_axis(f[nodes], order, axis=1).ravel(), starts)
    r = offset + res.ravel()[starts]
    sq = np.einsum("ri,ri->r", S, S)
    comp_starts = np.searchsorted(starts // s, np.arange(c))
    Gf = np.add.reduceat(S * (w[r] * F)[:, None], comp_starts, axis=0)  # (c, s): G_j A_j f
    return h_rows[r] @ sq, (w[r] ** 2 * F) @ sq - np.einsum("ci,ci->", Gf, Gf)


def _hutchinson(M, A, rows, V, h_rows, w, f, probing):
    """Hutchinson estimates, on one component (``A``: its submatrix of A, CSR;
    ``rows`` (s, l): each of its items' row of ``A`` in block j; ``h_rows``, ``w``
    on those rows), of
    tr(M^-1 A^T diag(h) A M^-1) and of sum_j tr(M^-1 B_j Sigma B_j M^-1),
    B_j = A_j^T W_j A_j, from the same probes y = M^-1 z: ([noise,
    assignment], standard error of noise + (l / N_REF) * assignment,
    M^-1 V), stopping as ``probing`` (:class:`Probing`) says.

    An item x has one row in block j, r = rows[x, j], so B_j y at x is
    w_r (A y)_r: a gather of W A y, all blocks at once, and z^T B_j Sigma B_j z
    = sum_x f_x (B_j y)_x^2 - (f . B_j y)^2."""
    rel_tol, maxiter, cg_rtol = probing.rel_tol, probing.maxiter, probing.cg_rtol
    batch, max_probes = probing.batch, probing.max_probes
    assign_scale = rows.shape[1] / N_REF  # l / N_REF
    rng = np.random.default_rng(probing.seed)
    MV, samples = None, []
    while True:
        Z = rng.choice([-1.0, 1.0], size=(M.shape[0], batch))
        if MV is None:  # the first batch solves for V too: one CG run (per column) instead of two
            Y = block_cg(M, np.column_stack([V, Z]), cg_rtol, maxiter)
            MV, Y = Y[:, :V.shape[1]], Y[:, V.shape[1]:]
        else:
            Y = block_cg(M, Z, cg_rtol, maxiter)
        AY = A @ Y
        noise = np.einsum("r,rb->b", h_rows, AY ** 2)
        BY = (w[:, None] * AY)[rows]  # (s, l, batch): B_j y
        assign = np.einsum("x,xjb->b", f, BY ** 2) - (np.einsum("x,xjb->jb", f, BY) ** 2).sum(axis=0)
        samples.extend(np.column_stack([noise, assign]))
        arr = np.array(samples)
        combined = arr[:, 0] + assign_scale * arr[:, 1]
        se = float(np.std(combined, ddof=1) / np.sqrt(len(samples)))
        if se <= rel_tol * abs(combined.mean()) or len(samples) >= max_probes:
            return arr.mean(axis=0), se, MV


def ss_mse(k, eps, n):
    """Exact per-item MSE of SubsetSelection on [k] (SS-optimal omega, real p)."""
    omega = optimal_omega(k, eps)
    return float(ss_variance(k, omega, ss_p(k, omega, eps), n)), omega
