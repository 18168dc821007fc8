"""How many devices a question needs: per-item standard error, detectable frequency, inverse planning.

Every protocol's predicted per-item MSE is proportional to 1/n (the
support counts' variance has a 1/n factor; MSS's noise and block-assignment
parts are both evaluated at one n and scaled, :mod:`.mss.variance`), so
``unit_mse`` = n x MSE(n) is a constant of the protocol and the prior, and

* the per-item standard error at N is sqrt(unit_mse / N), the 95%
  half-width z_{0.975} times that;
* the smallest N with standard error <= S is ceil(unit_mse / S^2).

Detection is the one-sided test of :mod:`.significance`: an item counts
when fhat_v > z_{0.95} se_v, se_v the decoder's standard error.  Its
variance depends on the item's own frequency F, so the detectable frequency
and the devices needed for --detect F use the curve n Var(fhat_v) = u0 + u1 F
+ u2 F^2 (:func:`item_curve`), with v at F and the rest of the fleet at the
prior renormalised to 1 - F:  f* = (z_{0.95} + z_{0.80}) se(f*) at N
(:func:`.significance.detectable`), N = (z_{0.95} + z_{0.80})^2 u(F) / F^2
(:func:`.significance.devices_for`).
"""
import math

import numpy as np

from mss_protocol import significance

Z_HALF = significance.z_interval()  # 95% two-sided: 1.96


def item_curve(protocol, unit_mse, prior=None):
    """(u0, u1, u2) with n Var(fhat_v) = u0 + u1 F + u2 F^2 for an item v at true frequency F.

    Parameters
    ----------
    protocol : Protocol
        Any protocol of :mod:`.registry` (``unit_item_variance``).
    unit_mse : float
        n x the predicted per-item MSE at the prior.
    prior : ndarray (k,), optional
        The rest of the fleet's distribution (uniform by default).

    Notes
    -----
    ``unit_item_variance`` is a polynomial of degree at most 2 in the
    frequencies (affine for the support-count protocols; MSS's block
    assignment is quadratic), which are affine in F (f_v = F, f_u = prior_u
    (1 - F) / (1 - prior_v)), so three evaluations (F = 0, 1/2, 1) give the
    curve exactly.  v is the item with the largest variance at the prior:
    support protocols' items all share one curve, MSS's differ with their
    residue classes, and the worst keeps the statement conservative.  What
    the predicted MSE holds beyond the decoder's own variance is added to u0
    (0 but for rounding: both count noise and assignment).
    """
    k = protocol.k
    f = np.full(k, 1.0 / k) if prior is None else np.asarray(prior, float)
    at_prior = protocol.unit_item_variance(f)
    v = int(np.argmax(at_prior))
    rest = np.where(np.arange(k) == v, 0.0, f)
    # a prior entirely on v: the rest uniform over the other items
    rest = rest / rest.sum() if rest.sum() > 0 else np.where(np.arange(k) == v, 0.0, 1.0 / (k - 1))
    at = [float(protocol.unit_item_variance((1 - F) * rest + F * np.eye(1, k, v)[0])[v]) for F in (0.0, 0.5, 1.0)]
    u2 = 2 * (at[2] - 2 * at[1] + at[0])
    return at[0] + max(0.0, unit_mse - float(at_prior.mean())), at[2] - at[0] - u2, u2


def figures(protocol, mse, n, prior=None, detect=None, target_se=None):
    """The resolution of ``protocol`` at n reports whose predicted per-item MSE is ``mse``.

    Returns
    -------
    dict
        ``per_item_se`` sqrt(mse), ``half_width_95`` z_{0.975} x that,
        ``detectable_frequency`` at n (power 0.80, one-sided 5%; may exceed 1:
        nothing is detected), and ``devices_needed``: reports to detect
        frequency ``detect`` or to bring the standard error to ``target_se``
        (None without either).
    """
    unit = mse * n
    u = item_curve(protocol, unit, prior)
    needed = None
    if detect is not None:
        needed = significance.devices_for(detect, *u)
    elif target_se is not None:
        needed = math.ceil(unit / target_se ** 2)
    se = math.sqrt(mse)
    return {"per_item_se": se, "half_width_95": Z_HALF * se,
            "detectable_frequency": float(significance.detectable(u[0], u[1], n, u[2])),
            "devices_needed": None if needed is None else max(1, int(needed))}


def warnings(k, n, fig, detect=None, target_se=None):
    """Plain-text warnings about the resolution ``fig`` (:func:`figures`) at n."""
    out = []
    f = fig["detectable_frequency"]
    where = f"at n={n} the smallest frequency this fleet detects (one-sided 5% test, 80% power)"
    if f >= 1:
        out.append(f"{where} is above 1: no item is distinguishable from noise")
    elif f > 1 / k:
        out.append(f"{where} is {f:.3g}, {f * k:.3g}x the mean frequency 1/k = {1 / k:.2g}: items rarer than "
                   "that are not distinguishable from noise")
    if detect is not None and f > detect:
        out.append(f"--detect {detect:g} needs {fig['devices_needed']} devices; n={n} detects {f:.3g} and above")
    if target_se is not None and fig["per_item_se"] > target_se:
        out.append(f"--target-se {target_se:g} needs {fig['devices_needed']} devices; at n={n} the per-item "
                   f"standard error is {fig['per_item_se']:.2g}")
    return out
