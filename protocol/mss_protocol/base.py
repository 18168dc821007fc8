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
``shift_per_report(r)``         the largest change one crafted report can make
                                to the sum of any r items' n fhat_v (the
                                manipulation coefficient)
``report_floor()``              (k,) what a report aimed at other items adds to
                                each n fhat_v (:mod:`.robust`)
``crafted_counts(...)``         (targets, m, rng): the counts m Maximal Gain
                                Attack reports add, each a wire-valid report
                                supporting as many targets as one report can
``random_output_counts(...)``   (m, rng): the counts of m uniformly random
                                wire-valid reports (the random-output attack)
``supported_items(j, m, sizes)`` bool (n, k): the items each of n stored
                                reports (blocks j, members as stored) supports
``sample_supports(values, rng)`` bool (n, k): the supports of honest reports of
                                ``values`` (the client's law, vectorised)
``support_rate(r)``             the largest chance, over every input, that one
                                honest report supports all of r given items
``support_size_law()``          the law of |S(y)| of one honest report where it
                                varies (the same for every input), else None
``channel()``                   the attacker's view (:mod:`.channel`)
``cost_family``                 the device cost model's family (a key of
                                ``device_cost.COEF[isa]``)
``device_features()``           that model's features of one report
``decode_cells(n)``             array cells the decoder touches for n reports
``ingest_us()``                 microseconds to parse and check one report
``simulated_report_us()``       microseconds of one report in the attacks' simulation
``has_seed``                    a report carries a public hash seed (OLH)
``min_k``, ``min_k_why``        the smallest k it takes (class attributes)
``config_kind``                 "oracle" (fixed by (k, epsilon)) or "mss" (planned)
``searches_moduli``             the planner searches its moduli sets
``unary_body``                  the body is k bits, one per item
``irr``, ``prr``                an instantaneous layer and the protocol without it
``report_eps_effective``        one report's exact privacy (with a layer: composed)
``configures(name)``            its config may be audited as protocol ``name``
==============================  ================================================

What depends on the protocol is asked of its object, never decided by its
name elsewhere: a protocol that lacks one of these raises
NotImplementedError naming itself and what it lacks.

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
    # A report carries a public hash seed (OLH's (a, b)) that a device may keep for all its
    # draws (config ``seed: device``); ``randomise(x, rng, seed=...)`` then takes it.
    has_seed = False
    # The smallest domain the protocol takes, and why (a format string of k) where it is above 2
    min_k = 2
    min_k_why = ""
    # Its config: "oracle" (an OracleConfig, fixed by (k, epsilon)) or "mss" (an MssConfig the
    # planner searches); ``searches_moduli``: ``mss plan`` may search it quickly (greedy sets)
    config_kind = "oracle"
    searches_moduli = False
    # The report body is the k bits of a unary encoding (else a rank or a point: an integer)
    unary_body = False
    # An instantaneous layer (mss_protocol.irr; one-output protocols, SupportOracle.with_irr):
    # ``irr`` the layer and ``prr`` the protocol without it, None without one
    irr = None
    prr = None

    @property
    def report_eps_effective(self):
        """The exact worst log-ratio of one report: ``eps_effective`` without an instantaneous layer."""
        return self.eps_effective

    def shuffle_channel(self):
        """The ideal mechanism of the shuffle literature this protocol's device channel IS, for the
        central bounds of :mod:`mss_protocol.shuffling`: (mechanism, size) with mechanism one of
        ``shuffling.PROTOCOLS`` ("grr", "ss", "oue", "sue", "hr") and size its subset size w (ss) or
        block size b (hr), else None.  None, the default, is always valid: the generic bound holds
        for every eps0-LDP randomiser.  A protocol that returns a mechanism must have its integer
        device channel enumerated equal to the ideal one at eps_effective
        (tests/test_shuffle_device_channel.py), or the mechanism's bound would not hold for it."""
        return None

    def configures(self, name):
        """Whether this protocol's config may be audited as protocol ``name``: its own name
        (MSS adds SS, its one-block case)."""
        return name == self.name

    def missing(self, what):
        """The NotImplementedError of a protocol that does not define ``what``."""
        return NotImplementedError(f"protocol {self.name!r} ({type(self).__name__}) does not define {what} "
                                   f"(mss_protocol.base.Protocol)")

    @property
    def cost_family(self):
        """The key of ``mss_protocol.device_cost.COEF[isa]`` whose linear model
        gives this protocol's instructions a report."""
        raise self.missing("cost_family")

    def device_features(self):
        """The features of one report in the cost model of :attr:`cost_family`:
        a dict keyed like ``device_cost.COEF[isa][cost_family]`` (counts of the
        device's work: draws, limb steps, coins, ...; ``base`` 1)."""
        raise self.missing("device_features()")

    def decode_cells(self, n):
        """Array cells the decoder touches for ``n`` reports (the host's decode time
        is this over ``choose.DECODE_CELLS_PER_S``)."""
        raise self.missing("decode_cells(n)")

    def ingest_us(self):
        """Microseconds to parse and check one report on the host (fitted to
        ``tools/bench_codecs.py``)."""
        raise self.missing("ingest_us()")

    def simulated_report_us(self):
        """Microseconds one report takes in the attacks' simulation (client + posterior),
        a model fitted on a 2-core AMD EPYC VM (k = 12 to 22000) to one client call a
        report; ``mss_aggregator.privacy.over_time`` sizes its simulated horizon by it."""
        raise self.missing("simulated_report_us()")

    @property
    def bits(self):
        raise self.missing("bits")

    def randomise(self, x, rng):
        raise self.missing("randomise(x, rng)")

    def sample_counts(self, values, rng):
        raise self.missing("sample_counts(values, rng)")

    def estimate(self, counts, n):
        raise self.missing("estimate(counts, n)")

    def decode(self, counts, n=None, post="none"):
        """Estimates with standard errors and 95% CIs (closed-form decoders);
        ``counts`` may be a :class:`~mss_protocol.counts.Counts` (n implied)."""
        t0 = time.perf_counter()
        if hasattr(counts, "cfg"):
            counts, n = counts.c, counts.total
        if n:
            raw, stderr = self.estimate(counts, n)
        else:  # no reports (an empty store or epoch): nothing known, as the MSS decoder says
            raw, stderr = np.zeros(self.k), np.full(self.k, np.inf)
        return Estimate.build(raw=raw, stderr=stderr, n=n, post=post, stderr_method="exact", iterations=0,
                              seconds=time.perf_counter() - t0)

    def variance(self, n, prior=None):
        raise self.missing("variance(n, prior=None)")

    def unit_item_variance(self, f):
        """(k,) n Var(fhat_v) at frequencies f (n-free: every decoder's variance is
        proportional to 1/n); a polynomial of degree <= 2 in f, which
        :mod:`mss_protocol.resolution` uses."""
        raise self.missing("unit_item_variance(f)")

    def shift_per_report(self, r=1):
        """The manipulation coefficient: the largest change ONE report, any wire-valid report
        chosen adversarially in place of an honest one, can make to the sum over any ``r``
        items of the unbiased estimate, in units of frequency times n.

        M crafted reports among n move the sum of any r items' estimates by at most
        ``M * shift_per_report(r) / n``.  Each protocol derives it from its decoder's affine
        form and its exact integer thresholds, beside its variance."""
        raise self.missing("shift_per_report(r)")

    def report_floor(self):
        """(k,) what one wire-valid report aimed at other items adds to each item's n fhat_v
        (frequency times n): the value a crafted report's decoded contribution takes on the
        items it does not target, which the robust estimate (:mod:`mss_protocol.robust`)
        restores to them.  Each protocol derives it from its decoder's affine form."""
        raise self.missing("report_floor()")

    def crafted_counts(self, targets, m, rng):
        """The counts ``m`` reports of the Maximal Gain Attack add (Cao, Jia and Gong, "Data
        poisoning attacks to local differential privacy protocols", USENIX Security 2021): each a
        wire-valid report chosen to support as many of the items ``targets`` (an int array) as one
        report of this protocol can, in the protocol's counts (:meth:`sample_counts`' kind);
        ``rng`` (a NumPy Generator) picks among equally good reports.  Where several reports
        support the most targets but different ones, they take turns (round robin)."""
        raise self.missing("crafted_counts(targets, m, rng)")

    def random_output_counts(self, m, rng):
        """The counts of ``m`` uniformly random wire-valid reports (Cao et al.'s random-output
        attack), drawn through ``rng`` (a NumPy Generator)."""
        raise self.missing("random_output_counts(m, rng)")

    def channel(self):
        raise self.missing("channel()")

    # -- what a report supports (issue 47 item 4: mss_aggregator.integrity.detect) -----------------
    def supported_items(self, j, members, sizes):
        """The items each of n stored reports supports, S(y) of :mod:`.channel`.

        Parameters
        ----------
        j : ndarray of int, shape (n,)
            The reports' blocks (0 for one-block protocols).
        members : ndarray of int
            Their members as the store holds them, concatenated (:meth:`Counts.add_tally`).
        sizes : ndarray of int, shape (n,)
            Members per report.

        Returns
        -------
        ndarray of bool, shape (n, k)
        """
        raise self.missing("supported_items(j, members, sizes)")

    def sample_supports(self, values, rng):
        """bool (n, k): the supports of one honest report of each of ``values`` (n,), in the
        client's law (``rng`` a NumPy Generator); by default drawn through the channel's
        vectorised ``sample_logliks`` (a supported item has log-likelihood log R(y) > 0)."""
        channel = self.channel()
        if not hasattr(channel, "sample_logliks"):
            raise self.missing("sample_supports(values, rng)")
        return channel.sample_logliks(np.asarray(values), rng) > 0

    def support_rate(self, r):
        """The largest probability, over every input x, that one honest report supports all
        of r given items (r = 1 or 2): what bounds a device's consistency across epochs, since
        over E reports of ANY input sequence the epochs that support a given r-set are a sum
        of independent Bernoulli variables of rates at most this, so at most Binomial(E, rate)
        in law (:mod:`mss_aggregator.integrity.detect`).  0 where no report supports r items."""
        raise self.missing("support_rate(r)")

    def other_item_rate(self):
        """The largest probability, over every input x and item v != x, that one honest report
        supports v (q of the support estimator; at most :meth:`support_rate` (1)): with it the
        one-item test bounds its union over the items by the worst honest input sequence rather
        than by k times the worst item (:mod:`mss_aggregator.integrity.detect`)."""
        return self.support_rate(1)

    def support_size_law(self):
        """The law of |S(y)|, the items one honest report supports, where it varies with the
        draw and not with the input: a tuple of (trials, probability) whose independent
        binomials sum to |S(y)| for every input.  None (the default) where every wire-valid
        report is one an honest device sends with a likelihood within e^eps of any other's
        (one point, a subset of a fixed size, a hash preimage): nothing to test per report."""
        return None
