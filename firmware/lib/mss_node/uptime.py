"""Board time: milliseconds that never run ahead of real time (SPEC.md sections 10, 11).

``time.ticks_ms`` differences (wrap-safe: read at least once a tick, far more often than
the 2^29 ms a difference may span) added to what state.json kept at its last write;
the time the board is off counts as zero, and the time of a deep sleep (``nap``, ms,
written just before it) only when the sleep's timer ended it.  So board time is at
most real time (up to the timer's own error): a wall clock (NTP, network time, an RTC)
never enters it.  The pace of clockless compact frames (:mod:`mss_node.pace`, ``ago``)
and the budget's ledger (:mod:`mss_node.ledger`, ``bt``) both count on it.
"""
try:
    from time import ticks_diff, ticks_ms
except ImportError:  # CPython (host tests)
    import time

    def ticks_ms():
        return int(time.monotonic() * 1000)

    def ticks_diff(a, b):
        return a - b


def timer_woke():
    """The board booted from a deep sleep its timer ended (machine.DEEPSLEEP_RESET, and a
    TIMER_WAKE where the port tells the wake): not a power cycle, a watchdog or a button."""
    try:
        import machine

        w = getattr(machine, "wake_reason", None)
        return machine.reset_cause() == machine.DEEPSLEEP_RESET and (w is None or w() == machine.TIMER_WAKE)
    except Exception:  # not told (the unix port, rp2): the time asleep counts as zero
        return False


def napped(st):
    """ms of the deep sleep this boot woke from, to credit (0 unless its timer ended it);
    the same answer all boot long (the node clears ``nap`` once the pace and the ledger
    have read it)."""
    n = st.napped
    if n is None:
        n = st.nap if st.nap > 0 and timer_woke() else 0
        st.napped = n
    return n
