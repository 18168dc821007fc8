"""The MSS normal matrix (A^T W A), its inverse component by component, and CG.

The MSS normal matrix M = A^T diag(w) A links x and x' only when they share
a residue class, M[x, x'] = sum_j w_{j, x mod m_j} 1{x = x' (mod m_j)}.
After permuting its connected components M is block diagonal; for moduli
near k most components are tiny (an item alone in all its classes is a
1x1 block), so inverting each component densely is exact and fast.
Components are grouped by size and handled as stacked (c, s, s) arrays,
one batched LAPACK call per size, never a Python loop over components.

Components above ``max_exact`` items are left to conjugate gradients
(:func:`block_cg`); :mod:`.variance` estimates their traces with
Hutchinson's estimator.

BLAS threads (:func:`blas_threads`): the decoder's BLAS calls are LSMR's
norms and dot products on vectors of sum(m_j) or k entries (10^3..5 10^6)
and LAPACK on components of at most ``max_exact`` items (most of 1-8), too
little work to share between threads.  OpenBLAS's default pool (one thread
per core) gains nothing on an idle machine and, once other processes hold
the cores, makes every call wait for a second thread to be scheduled: on
the 2-core VM at load average 5, norm + dot of a 10^5-element vector took
3.6 ms with two threads against 0.16 ms with one, and an MSS decode at
k = 22000 1.18 s against 0.18 s (tools/bench_loaded.py, docs/benchmarks.md).
So decoding runs with one BLAS thread, and the caller's setting is restored after.
"""
from functools import cache, wraps

import numpy as np
from scipy.sparse.csgraph import connected_components
from threadpoolctl import ThreadpoolController

from mss_protocol.mss.residues import residue_matrix


# BLAS threads while decoding; None leaves the libraries' own pools (the behaviour before
# issue 28, which tools/bench_loaded.py measures beside this one).
BLAS_THREADS = 1


@cache
def _threadpools():
    """The BLAS libraries loaded (numpy's and scipy's OpenBLAS), found once: a
    controller's ``limit`` costs ~70 us, threadpool_limits() rescanning them ~1.6 ms."""
    return ThreadpoolController()


def blas_threads(fn):
    """Decorator: run ``fn`` with every BLAS library limited to ``BLAS_THREADS``
    threads (module docstring: why one), restoring the caller's setting after."""
    @wraps(fn)
    def limited(*args, **kwargs):
        with _threadpools().limit(limits=BLAS_THREADS, user_api="blas"):
            return fn(*args, **kwargs)
    return limited


class SingularError(np.linalg.LinAlgError):
    """The normal matrix is singular or too ill-conditioned to solve."""


class InverseBlocks:
    """M^-1 held as its dense component blocks (exact components only)."""

    def __init__(self, components, groups):
        self.components, self.groups = components, groups

    def diag_sandwich(self, row_values):
        """diag(M^-1 H M^-1) with H = A^T diag(row_values) A; NaN above ``max_exact``."""
        out = np.full(self.components.k, np.nan)
        for nodes, inv in self.groups:
            h = self.components._blocks(nodes, row_values)
            out[nodes] = np.einsum("cij,cjk,cki->ci", inv, h, inv)
        return out

    def apply(self, V):
        """M^-1 V for V of shape (k, r); NaN rows above ``max_exact``."""
        out = np.full(V.shape, np.nan)
        for nodes, inv in self.groups:
            out[nodes] = np.einsum("cij,cjr->cir", inv, V[nodes])
        return out


class ResidueComponents:
    """Connected components of A^T A for (k, moduli); reusable across weights.

    ``row_values`` arguments below have one entry per row of A (shape
    (sum(moduli),), block j's rows at offsets[j] + r).
    """

    def __init__(self, k, moduli, max_exact=4096):
        self.k, self.moduli, self.max_exact = k, tuple(moduli), max_exact
        self.offsets = np.concatenate([[0], np.cumsum(moduli)[:-1]])
        self.A = residue_matrix(k, moduli)
        _, labels = connected_components(self.A.T @ self.A, directed=False)
        sizes = np.bincount(labels)
        order = np.argsort(labels, kind="stable")
        starts = np.concatenate([[0], np.cumsum(sizes)])
        self.exact_groups, self.large = [], []
        for s in np.unique(sizes):
            comps = np.nonzero(sizes == s)[0]
            nodes = order[(starts[comps][:, None] + np.arange(s)).ravel()].reshape(comps.size, s)
            (self.exact_groups if s <= max_exact else self.large).append(nodes)
        self.largest = int(sizes.max())

    @property
    def exact(self):
        return not self.large

    def _blocks(self, nodes, row_values, ridge=0.0):
        """Dense blocks sum_j v_{j, x mod m_j} 1{x = x' mod m_j} + ridge I on ``nodes`` (c, s)."""
        out = np.zeros(nodes.shape + nodes.shape[1:])
        out += ridge * np.eye(nodes.shape[1])
        for j in range(len(self.moduli)):
            out += self.block_term(nodes, j, row_values)
        return out

    def block_term(self, nodes, j, row_values):
        """Block j's part of :meth:`_blocks`: v_{j, x mod m_j} 1{x = x' mod m_j}, (c, s, s)."""
        res = nodes % self.moduli[j]
        same = res[:, :, None] == res[:, None, :]
        return same * row_values[self.offsets[j] + res][:, :, None]

    def inverse(self, row_weights, ridge=0.0):
        """M^-1 on every exact component, M = A^T diag(row_weights) A + ridge I.

        Raises SingularError when a component is singular, or singular to
        rounding: its 1-norm condition number ||M||_1 ||M^-1||_1 (an upper
        bound on the 2-norm one) above 1 / eps_machine, where the computed
        inverse carries no correct digit.  Cholesky alone does not tell: on
        a singular M it may find rounding-sized pivots or fail, depending on
        the BLAS kernel (k = 200, moduli 23, 25, 31, 36, 43, 49: cond 2e17,
        refused on one CPU, a unit MSE of 1.5e14 on an AVX-512 one).
        """
        groups = []
        for nodes in self.exact_groups:
            blocks = self._blocks(nodes, row_weights, ridge)
            try:
                chol = np.linalg.cholesky(blocks)
            except np.linalg.LinAlgError:
                raise SingularError("normal matrix is singular: A lacks full column rank") from None
            linv = np.linalg.inv(chol)  # M^-1 = L^-T L^-1
            inv = np.swapaxes(linv, 1, 2) @ linv
            cond = np.abs(blocks).sum(axis=1).max(axis=-1) * np.abs(inv).sum(axis=1).max(axis=-1)
            if not cond.max() < 1 / np.finfo(float).eps:
                raise SingularError(f"normal matrix is singular to rounding (condition number {cond.max():.1e})")
            groups.append((nodes, inv))
        return InverseBlocks(self, groups)


def block_cg(M, B, rtol=1e-10, maxiter=500):
    """Solve M X = B for SPD sparse M and a block B (k, s): independent CG per column.

    Jacobi-preconditioned; column j stops once |r_j| <= rtol |b_j|; raises
    SingularError when some column has not after ``maxiter`` steps.  Updates
    in place and norms as squared dot products: no (k, s) temporary a step
    but the sparse product.
    """
    dinv = 1.0 / M.diagonal()[:, None]
    X = np.zeros_like(B)
    R = B.copy()
    P = dinv * R
    step = np.empty_like(B)
    rz = np.einsum("ij,ij->j", R, P)
    stop = rtol ** 2 * np.einsum("ij,ij->j", B, B)
    for _ in range(maxiter):
        if np.all(np.einsum("ij,ij->j", R, R) <= stop):
            return X
        MP = M @ P
        alpha = rz / np.einsum("ij,ij->j", P, MP)
        X += np.multiply(alpha, P, out=step)
        R -= np.multiply(alpha, MP, out=MP)
        np.multiply(dinv, R, out=step)  # Z = D^-1 R
        rz_new = np.einsum("ij,ij->j", R, step)
        P *= rz_new / rz
        P += step
        rz = rz_new
    raise SingularError("conjugate gradients did not converge (ill-conditioned normal matrix)")
