"""Post-processing of frequency estimates (mss-protocol-notes.md section 6).

``none`` keeps the unbiased estimate; ``clip`` sets negatives to 0 and
renormalises to sum 1; ``simplex`` is the Euclidean projection onto the
probability simplex (Duchi et al. 2008, Fig. 1): argmin_{p >= 0, sum p = 1}
||p - v||_2, computed by sorting in O(k log k).
"""
import numpy as np

CHOICES = ("none", "clip", "simplex")


def clip(v):
    v = np.clip(v, 0.0, None)
    s = v.sum()
    return v / s if s > 0 else np.full(v.size, 1.0 / v.size)


def simplex(v):
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1.0
    idx = np.arange(1, v.size + 1)
    rho = np.nonzero(u - css / idx > 0)[0][-1]
    return np.maximum(v - css[rho] / (rho + 1), 0.0)


def apply(v, post):
    if post == "none":
        return v
    if post == "clip":
        return clip(v)
    if post == "simplex":
        return simplex(v)
    raise ValueError(f"post-processing must be one of {', '.join(CHOICES)}, got {post!r}")
