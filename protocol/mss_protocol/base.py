"""The one interface every protocol implements.

A protocol object holds one parameter set and everything the rest of the
project needs from it: the planner and ``mss plan`` (parameters, privacy,
bits), the simulator and ``mss bench`` (sampler, decoder, predicted
variance), the collection side and the dashboard (decoder), and the privacy
audit (the real client and the channel).

==============================  ================================================
``name``                        registry name (``mss``, ``ss``, ``pgr``, ...)
``k``, ``epsilon``              domain size; the configured budget
``eps_effective``               exact privacy of the integer thresholds the
                                device uses (never above ``epsilon``)
``bits``                        {"max", "mean"} bits of a report body
``randomise(x, rng)``           the exact integer client for value x, drawing
                                only through ``rng.below`` / ``rng.chance``
``sample_counts(values, rng)``  the additive counts of reports for ``values``,
                                vectorised (``rng``: a NumPy Generator), in
                                the law of :meth:`randomise`
``estimate(counts, n)``         (unbiased estimate, standard error), (k,) each
``decode(counts, n, post)``     -> :class:`~mss_protocol.estimate.Estimate`
``variance(n, prior)``          predicted per-item MSE at n reports from
                                values distributed as ``prior`` (uniform)
``unit_item_variance(f)``       (k,) n Var(fhat_v) when the fleet's frequencies
                                are f: the decoder's standard error squared
                                times n at expected counts, affine in f
``channel()``                   the attacker's view (:mod:`.channel`)
==============================  ================================================

Counts are whatever additive statistic the protocol decodes from (support
counts (k,), a histogram over the output space, per-block counts); the
protocol's module says which.
"""
import time

import numpy as np

from mss_protocol.estimate import Estimate


class Protocol:
    """Base class: subclasses set the attributes above and implement the methods."""

    name = ""

    @property
    def bits(self):
        raise NotImplementedError

    def randomise(self, x, rng):
        raise NotImplementedError

    def sample_counts(self, values, rng):
        raise NotImplementedError

    def estimate(self, counts, n):
        raise NotImplementedError

    def decode(self, counts, n=None, post="none"):
        """Estimates with standard errors and 95% CIs (closed-form decoders);
        ``counts`` may be a :class:`~mss_protocol.mss.counts.Counts` (n implied)."""
        t0 = time.perf_counter()
        if hasattr(counts, "cfg"):
            counts, n = counts.c, counts.total
        if n:
            raw, stderr = self.estimate(counts, n)
        else:  # no reports (an empty store or epoch): nothing known, as the MSS decoder says
            raw, stderr = np.zeros(self.k), np.full(self.k, np.inf)
        return Estimate.build(raw, stderr, n, post, "exact", 0, time.perf_counter() - t0)

    def variance(self, n, prior=None):
        raise NotImplementedError

    def unit_item_variance(self, f):
        """(k,) n Var(fhat_v) at frequencies f (n-free: every decoder's variance is
        proportional to 1/n); a polynomial of degree <= 2 in f, which
        :mod:`mss_protocol.resolution` uses."""
        raise NotImplementedError

    def channel(self):
        raise NotImplementedError
