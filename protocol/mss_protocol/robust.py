"""A robust estimate: the honest devices' frequencies recovered from an estimate that M crafted
reports may have poisoned (issue 47 item 5, ``mss estimate --robust``).

The method takes the three steps of LDPRecover (Sun, Ye, Hu, Duan, Wo, Xu and Yang, "LDPRecover:
Recovering Frequencies from Poisoning Attacks against Local Differential Privacy", ICDE 2024,
arXiv 2403.09351): a genuine-frequency estimator that removes the malicious reports' share, the
malicious reports' statistics learned from the protocol's own properties, and constraint
inference.  The formulas below are ours, for this project's decoders and what a fleet's store
holds (one epoch's counts):

1. **The genuine-frequency estimator.**  Of the n reports decoded, m are crafted (the operator's
   stated compromised devices times the reports each can place: the certified interval's m,
   :class:`mss_aggregator.estimates.Integrity`), beta = m / n.  Every decoder here is affine in the
   counts, so the unbiased estimate is the mixture

       z = (1 - beta) x + beta y,

   x the honest reports' estimate (E x = f, the fleet's frequencies) and y the mean decoded
   contribution of the crafted reports; hence x = (z - beta y) / (1 - beta).
2. **What the crafted reports' statistics must be.**  y is unknown, but the protocol bounds it:
   on an item a report does not aim at, it adds the protocol's floor ``report_floor()`` (a
   support protocol: -q / (p - q)), and on a target at most ``shift_per_report(1)`` more.  Writing
   y = floor + e with e >= 0 the attack's excess, the sum of the honest estimate is 1 in
   expectation (the estimators are unbiased and the frequencies sum to 1), which gives the
   excess's total, as LDPRecover learns the malicious data's sum:

       u = (z - beta floor) / (1 - beta),    E_hat = max(0, sum_v u_v - 1),

   and x = u - d with d = beta e / (1 - beta) >= 0, each item's d_v at most
   cap = beta shift(1) / (1 - beta), summing to E_hat (the honest x sums to 1).
3. **Constraint inference.**  LDPRecover solves for x under these constraints and the
   simplex's; which items carry the excess is what the counts of one epoch cannot say (any
   placement fits them equally).  Ours: the excess is removed from the *suspected* items, those
   distinguishable from 0 (u_v > z_d s_v, the one-sided test of :mod:`.significance`; an item
   the attack lifted is), each in proportion to the most the attack could have added to it,
   min(u_v, cap) (so never more than cap, nor below 0):

       d_v = min(u_v, cap) min(1, E_hat / sum_w min(u_w, cap)),    x = u - d.

   An item below detection keeps u_v.  Norm-Sub, the simplex projection of :mod:`.postprocess`
   (LDPRecover's constraint set; ``post="simplex"``), then applies as to any estimate.

The Maximal Gain Attack (Cao, Jia and Gong, USENIX Security 2021) against rare items is the
case this targets: each crafted report lifts its targets by the most a report can, so they carry
a full share of the removal (min(u, cap) = cap) while a fleet's rare honest item carries little,
and the floor the reports leave on every other item is restored.  Of a common item, which also
carries a full share, the removal takes what belonged to the fleet.  An attacker who knows the
rule can keep its targets' lift under detection, or hide in a protocol whose crafted reports
leave the sum statistic unchanged (GRR's decoded sum is 1 whatever a report is, so E_hat is the
m reports' whole mass, attack or not); with no attack the rule still removes the stated m
reports' mass.  That is the price, measured beside the gain in docs/benchmarks.md
("Resistance").

**The interval claims nothing the recovery does not know.**  The recovery is a guess about the
attack, not an observation, so the robust estimate's standard error is the plain one widened by
1 / (1 - beta) (the honest reports are fewer) plus the distance the recovery moved the estimate
over z_95:

    stderr_robust = stderr / (1 - beta) + |x - z| / z_95,

so its 95% interval x +- z_95 stderr_robust always contains the plain decoder's interval
z +- z_95 stderr, whichever explanation of the counts is true; the certified interval (the
plain interval widened by the most the m reports can move an item) stays beside it.
"""
from dataclasses import dataclass

import numpy as np

from mss_protocol import significance
from mss_protocol.estimate import Z95, Estimate

#: The method's name in ``mss estimate --json`` (``robust.method``).
METHOD = "ldprecover-ci"


@dataclass(frozen=True)
class Recovery:
    """What :func:`recover` found.

    Attributes
    ----------
    method : str
        :data:`METHOD`.
    crafted : int
        The crafted reports assumed among those decoded (m).
    beta : float
        m / n.
    raw : ndarray, shape (k,)
        The recovered honest estimate x (frequencies; before post-processing).
    stderr : ndarray, shape (k,)
        Its widened standard error (module docstring).
    excess : float
        The attack's excess removed, summed over the items (a frequency).
    suspected : ndarray of int
        The items the excess was removed from, in item order.
    """
    method: str
    crafted: int
    beta: float
    raw: np.ndarray
    stderr: np.ndarray
    excess: float
    suspected: np.ndarray

    def estimate(self, n, post="none", seconds=0.0):
        """The recovery as an :class:`~mss_protocol.estimate.Estimate` (its intervals, detections and
        post-processing as any decoder's).

        Parameters
        ----------
        n : int
            Reports decoded.
        post : str
            Post-processing (:data:`mss_protocol.postprocess.CHOICES`).

        Returns
        -------
        Estimate
        """
        return Estimate.build(raw=self.raw, stderr=self.stderr, n=n, post=post, stderr_method="robust",
                              iterations=0, seconds=seconds)

    def document(self):
        """The ``robust`` field of ``mss estimate --json``.

        Returns
        -------
        dict
            ``method``, ``crafted`` (reports assumed), ``excess`` (the mass removed, a frequency) and
            ``suspected`` (the items it was removed from).
        """
        return {"method": self.method, "crafted": self.crafted, "excess": self.excess,
                "suspected": [int(i) for i in self.suspected]}


def recover(protocol, raw, stderr, n, crafted):
    """The honest reports' estimate from a possibly poisoned one (module docstring).

    Parameters
    ----------
    protocol : mss_protocol.base.Protocol
        The protocol decoded (its ``report_floor()`` and ``shift_per_report(1)``).
    raw, stderr : array_like, shape (k,)
        The plain decoder's unbiased estimate and standard errors (frequencies).
    n : int
        Reports decoded (0: nothing to recover, the plain estimate is returned).
    crafted : int
        Crafted reports assumed among them, 0 <= crafted < n / 2.

    Returns
    -------
    Recovery

    Raises
    ------
    ValueError
        ``crafted`` out of range, or a protocol that computes no floor or coefficient at its k
        (MSS above k = 2048).

    Examples
    --------
    Four common items and a rare one (63) that 20 crafted SS reports out of 1000 lift by the most
    a report can (their expected counts): the excess is measured and shared among the detected
    items, the common ones included, so the target comes down only part of the way.

    >>> import numpy as np
    >>> from mss_protocol.ss import SubsetSelection
    >>> ss = SubsetSelection(64, 2.0)
    >>> m, n = 20, 1000
    >>> f = np.r_[np.full(4, 0.25), np.zeros(60)]
    >>> raw = (n - m) / n * f + m / n * ss.report_floor()
    >>> raw[63] += m / n * ss.shift_per_report(1)
    >>> r = recover(ss, raw, np.full(64, 0.01), n, m)
    >>> r.suspected.tolist(), round(r.excess, 3), bool(r.raw[63] < raw[63])
    ([0, 1, 2, 3, 63], 0.052, True)
    >>> bool(np.all(r.stderr >= 0.01))  # never a narrower interval than the plain one
    True
    """
    raw, stderr = np.asarray(raw, float), np.asarray(stderr, float)
    if n and not 0 <= crafted < n / 2:
        raise ValueError(f"the crafted reports assumed must be at least 0 and fewer than half of the {n} decoded, "
                         f"not {crafted}")
    if not crafted or not n:  # nothing assumed crafted, or nothing decoded: the plain estimate
        return Recovery(method=METHOD, crafted=0, beta=0.0, raw=raw.copy(), stderr=stderr.copy(), excess=0.0,
                        suspected=np.zeros(0, dtype=np.int64))
    beta = crafted / n
    u = (raw - beta * protocol.report_floor()) / (1 - beta)
    s = stderr / (1 - beta)
    cap = beta * float(protocol.shift_per_report(1)) / (1 - beta)
    excess = max(0.0, float(u.sum()) - 1.0)
    room = np.where(u > significance.z_detect() * s, np.minimum(u, cap), 0.0)
    total = float(room.sum())
    removed = room * min(1.0, excess / total) if total > 0 else room
    x = u - removed
    widened = s + np.abs(x - raw) / Z95
    return Recovery(method=METHOD, crafted=int(crafted), beta=beta, raw=x, stderr=widened,
                    excess=float(removed.sum()), suspected=np.flatnonzero(removed > 0))
