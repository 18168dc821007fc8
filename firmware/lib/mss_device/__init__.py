"""The protocols on the device: integer-only, runs on MicroPython and CPython.

Shared by every protocol: ``rng`` (``below`` / ``chance`` on ``os.urandom``),
``params`` (the config as the device loads it; ``Params.client()`` imports
only the configured protocol's module), ``frame`` (report headers and body
bits), ``framing`` (serial lines), ``point`` (one-integer bodies, GRR's ``grr``
and the instantaneous layer ``irr`` built on it).
One module per protocol, each with a ``Client(params)`` whose
``report(x, rng, epoch, seq)`` returns the report bytes: ``mss`` (MSS and
SS, on ``randomiser`` and ``encoder``, whose rank is ``limbs``), ``grr``, ``unary`` (rappor = OUE,
sue), ``olh``, ``hr``, ``pgr`` -- mirroring their homes in ``mss_protocol``.
The hot loops are ``@micropython.viper`` kernels that are plain Python too
(CPython, ports without the native emitter): docs/device-cost.md.
"""
