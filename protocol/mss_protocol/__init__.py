"""The one definition of the ModularSubsetSelection protocol on the host.

Parameters and planning (:mod:`.config`, :mod:`.planner`), the exact privacy
of the integer device implementation (:mod:`.privacy`), the wire format
(:mod:`.wire`) and a vectorised sampler of the device channel
(:mod:`.sampler`).  The per-report randomiser itself lives in the firmware
package :mod:`mss_device` and is reused here unchanged.
"""
