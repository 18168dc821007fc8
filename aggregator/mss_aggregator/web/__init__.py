"""The aggregator's web face: :mod:`.live` (a background snapshot of the
store: decoded estimates, counters, the config's exact privacy summary) and
:mod:`.server` (the dashboard in ``static/``, the JSON API, /metrics).
Reads ``collect``'s store and ``privacy``'s ceilings; decodes through
``mss_protocol``.
"""
