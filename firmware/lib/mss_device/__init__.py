"""The protocols on the device: integer-only, runs on MicroPython and CPython.

Shared by every protocol: ``rng`` (``below`` / ``chance`` on ``os.urandom``),
``params`` (the config as the device loads it), ``framing`` (serial lines).
MSS (and SS): ``randomiser`` and ``encoder`` (the report bytes).  Each
protocol's device code mirrors its home in ``mss_protocol``.
"""
