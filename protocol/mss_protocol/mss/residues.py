"""The stacked residue matrix A and the GLS normal matrix A^T W A.

A_j in {0,1}^{m_j x k} has A_j[r, x] = 1{x mod m_j = r}; A = [A_0; ...;
A_{l-1}] has T = sum_j m_j rows and exactly l ones per column
(mss-protocol-notes.md section 5.2).  (A^T W A)[x, x'] = sum of w_j over
the blocks j with x = x' (mod m_j); for moduli above k/2 each block adds a
matching x <-> x + m_j, so the matrix is a sparse union of matchings.
"""
import numpy as np
from scipy import sparse


def residue_matrix(k, moduli):
    """A as a CSR matrix of shape (sum(moduli), k), built in O(k l)."""
    x = np.arange(k)
    offsets = np.concatenate([[0], np.cumsum(moduli)[:-1]])
    rows = np.concatenate([off + x % m for off, m in zip(offsets, moduli)])
    cols = np.tile(x, len(moduli))
    data = np.ones(rows.size)
    return sparse.csr_matrix((data, (rows, cols)), shape=(int(sum(moduli)), k))

