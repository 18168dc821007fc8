"""ModularSubsetSelection (Arcolezi, AAAI 2026, arXiv 2511.11569).

:mod:`.config` (the parameters both ends share), :mod:`.planner` (choosing
moduli and subset sizes), :mod:`.wire` (the report bytes; shared test vectors:
:mod:`mss_protocol.vectors`), :mod:`.sampler` (vectorised channel), :mod:`.counts`
(the additive statistic), :mod:`.decoder` (weighted least squares with
standard errors; :mod:`.residues` and :mod:`.linalg` hold its matrices),
:mod:`.variance` (predicted MSE), :mod:`.channel` (the attacker's view),
and :mod:`.protocol`, which puts them behind the common interface.  The
device side is ``mss_device`` in ``firmware/lib``.
"""
