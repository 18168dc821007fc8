"""The privacy audit (``mss audit``).

:mod:`.attacks` (reconstruction attacks run on the real clients, one
report and many), :mod:`.ceilings` (what no epsilon-LDP protocol can
exceed), :mod:`.empirical` (empirical epsilon lower bounds from the wire
output, ldp-audit style) and :mod:`.audit` (the audit's JSON: every
protocol's channel from ``mss_protocol.registry`` against the ceilings).
Imports ``mss_protocol``, ``mss_device`` and ``devices`` (the firmware
under MicroPython, for the empirical audit).
"""
