"""Errors that say what the caller can do about them, in the library's own terms.

A store or a queue that holds another campaign's data is refused with what to do: use another
one, or collect as the recorded campaign; a dashboard bound beyond loopback without a token, with
how to protect it.  The library says it in its terms (:data:`REMEDIES`);
a command line says it with its flags (``mss_cli.common.REMEDY_FLAGS``), from the ``detail``,
``remedy`` and ``values`` kept on the error (docs/style.md habit 2: a library error never names
a ``--flag``).
"""

REMEDIES = {
    "another-store": "use another store",
    "recorded-campaign": "collect as campaign {recorded} (or name none: the recorded one is used), "
                         "or use another store",
    "another-queue": "use another queue",
    "older-queue": "let that version forward them, or use another queue",
    "token-needed": "give a token, or bind to 127.0.0.1",
}


def with_remedy(error, detail, remedy, **values):
    """An ``error`` (an exception class) saying ``detail`` then the remedy ``remedy`` (a key of
    :data:`REMEDIES`, formatted with ``values``); ``detail``, ``remedy`` and ``values`` are kept on
    it for a caller that says the remedy its own way."""
    exc = error(f"{detail}; {REMEDIES[remedy].format(**values)}")
    exc.detail, exc.remedy, exc.values = detail, remedy, values
    return exc
