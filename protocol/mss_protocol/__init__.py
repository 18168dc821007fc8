"""The one definition of every protocol: one module (or, for MSS, one package) each.

The rule for what lives here: everything that is a protocol's math.  What
both ends must agree on bit for bit (parameters, integer thresholds and
``eps_effective``, the wire format, test vectors) and what follows from the
protocol alone (its host client and vectorised sampler, the shape of its
additive counts, its decoder with standard errors, its predicted variance,
its channel as an attacker sees it).  The aggregator only collects, stores,
schedules decoding, compares, audits and serves; it never defines a
protocol.  The device side of each protocol lives in ``firmware/lib``.

==================  ==========================================================
:mod:`.registry`    every protocol by name (``make(name, k, epsilon)``)
:mod:`.base`        the interface every protocol implements
:mod:`.mss`         ModularSubsetSelection (config, planner, wire, decoder, ...)
:mod:`.ss`          SubsetSelection, MSS's one-block case
:mod:`.pgr`         projective geometry response
:mod:`.grr`         generalised randomised response
:mod:`.unary`       unary encoding: RAPPOR (OUE) and SUE
:mod:`.olh`         optimised local hashing
:mod:`.hr`          Hadamard response
==================  ==========================================================

Shared math: :mod:`.privacy` (integer thresholds, exact ``eps_effective``),
:mod:`.subset_selection` (SS on [m]), :mod:`.support` (the support-count
estimator), :mod:`.estimate` and :mod:`.postprocess` (estimates, CIs,
projection), :mod:`.channel` (attacker-view base classes).
"""
