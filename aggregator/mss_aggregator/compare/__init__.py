"""Simulation and the protocol comparison.

:mod:`.simulate` (``mss simulate``: n devices through one protocol's
sampler and decoder, MSE against the truth) and :mod:`.bench` (``mss
bench``: every protocol of the registry on the same populations).  Uses
only the protocol interface (``mss_protocol.registry``) and the shared
distributions.
"""
