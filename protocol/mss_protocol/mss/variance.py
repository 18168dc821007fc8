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
import numpy as np
from scipy import sparse

from mss_protocol.mss.decoder import sandwich_terms
from mss_protocol.mss.linalg import ResidueComponents, block_cg
from mss_protocol.subset_selection import optimal_omega, ss_p, ss_variance

EXACT_LIMIT = 4096
N_REF = 1e6  # both parts scale as 1/n; evaluated here, where n_j >= 1 always holds


def block_weights(cfg, n_per_block):
    """GLS weight of each block's rows: n_j / (n_j Var[ghat_j]), shape (l,)."""
    return n_per_block / cfg.unit_variance


def predicted_mse(cfg, n, prior=None, exact_limit=EXACT_LIMIT, rel_tol=0.003, maxiter=500, parts=False):
    """(per-item MSE at n reports, relative standard error of that figure; 0 if exact).

    ``prior``: the value distribution f, shape (k,) (default uniform).  Exact
    whenever every connected component of A^T A has at most ``exact_limit``
    items (always for k <= exact_limit); larger components use Hutchinson's
    estimator at ``rel_tol``, with at most ``maxiter`` conjugate-gradient
    steps (SingularError beyond).  ``parts=True`` returns ({"noise",
    "assignment"}, rel) instead.
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
        noise += np.einsum("cij,cjk,cki->", minv, comps._blocks(nodes, h_rows), minv)
        fc = f[nodes]
        for j in range(l):
            ga = minv @ comps.block_term(nodes, j, w)  # G_j A_j on the component
            assign += np.einsum("cil,cl->", ga ** 2, fc) - np.sum(np.einsum("cil,cl->ci", ga, fc) ** 2)
    MV = inv.apply(V)
    if comps.large:
        M = (comps.A.T @ sparse.diags(w) @ comps.A).tocsr()
        At = comps.A.T.tocsr()
        for nodes in comps.large:
            for idx in nodes:
                est, se, MV[idx] = _hutchinson(M[idx][:, idx], At[idx], V[idx], h_rows, w, cfg.offsets, f[idx],
                                               l / N_REF, rel_tol, maxiter)
                noise += est[0]
                assign += est[1]
                var += se ** 2
    noise += float(np.sum((MV * c).sum(axis=1) * MV[:, 0]))
    assign = max(0.0, (l / N_REF) * assign - (1 - f @ f) / N_REF)  # a covariance's trace: >= 0 but for rounding
    out = {"noise": noise * N_REF / (n * k), "assignment": assign * N_REF / (n * k)}
    total = out["noise"] + out["assignment"]
    rel = float(np.sqrt(var)) * N_REF / (n * k) / total if var else 0.0
    return (out if parts else total), rel


def _hutchinson(M, At, V, h_rows, w, offsets, f, assign_scale, rel_tol, maxiter, batch=32, max_probes=4096,
                seed=0):
    """Hutchinson estimates, on one component (``At``: its rows of A^T), of
    tr(M^-1 A^T diag(h) A M^-1) and of sum_j tr(M^-1 B_j Sigma B_j M^-1),
    B_j = A_j^T W_j A_j, from the same probes y = M^-1 z: ([noise,
    assignment], standard error of noise + assign_scale * assignment,
    M^-1 V)."""
    rng = np.random.default_rng(seed)
    blocks = [At[:, lo:hi] for lo, hi in zip(offsets[:-1], offsets[1:])]
    MV = block_cg(M, V, maxiter=maxiter)
    samples = []
    while True:
        Z = rng.choice([-1.0, 1.0], size=(M.shape[0], batch))
        Y = block_cg(M, Z, maxiter=maxiter)
        AY = At.T @ Y
        noise = np.einsum("r,rb->b", h_rows, AY ** 2)
        assign = 0.0
        for j, bt in enumerate(blocks):
            lo, hi = offsets[j], offsets[j + 1]
            BY = bt @ (w[lo:hi, None] * AY[lo:hi])  # B_j y = A_j^T W_j A_j y
            assign = assign + f @ BY ** 2 - (f @ BY) ** 2
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
