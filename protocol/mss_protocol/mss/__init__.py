"""ModularSubsetSelection (Arcolezi, AAAI 2026, arXiv 2511.11569).

:mod:`.config` (the parameters both ends share), :mod:`.planner` (choosing
moduli and subset sizes), :mod:`.wire` (the report bytes; shared test vectors:
:mod:`mss_protocol.vectors`), :mod:`.sampler` (vectorised channel),
:mod:`.decoder` (weighted least squares with standard errors;
:mod:`.residues` and :mod:`.linalg` hold its matrices), :mod:`.variance`
(predicted MSE), :mod:`.channel` (the attacker's view), and
:mod:`.protocol`, which puts them behind the common interface.  The
additive counts (:mod:`mss_protocol.counts`) and config loading
(:mod:`mss_protocol.config_file`, :mod:`mss_protocol.configs`) serve every
protocol, so they live outside this package.  The device side is
``mss_device`` in ``firmware/lib``.
"""
