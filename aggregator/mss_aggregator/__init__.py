"""The desktop aggregator: it collects, stores, schedules decoding, compares,
audits and serves.  It defines no protocol: every protocol's math (clients,
counts, decoders, variances, channels) is in ``mss_protocol``.

================  ===========================================================
:mod:`.collect`   reports in (MQTT, serial), checked, stored once, counted
:mod:`.devices`   emulated devices: the real firmware under MicroPython or CPython
:mod:`.compare`   simulation and the protocol comparison (``mss simulate``, ``mss bench``)
:mod:`.privacy`   the privacy audit: reconstruction attacks, ceilings, empirical epsilon
:mod:`.web`       the live dashboard, JSON API and Prometheus metrics
================  ===========================================================

Shared by them: :mod:`.distributions` (value distributions and priors),
:mod:`.plotting`, :mod:`.jsonout` (strict JSON), :mod:`.ports` (free
loopback ports).  Subpackages import ``mss_protocol``, ``mss_device`` and
these shared modules; ``web`` also reads ``collect``'s store and the
``privacy`` ceilings; ``collect`` imports nothing of the others.  The
``mss`` command line (``mss_cli``) assembles them.
"""
