"""Progress of a long computation (``mss plan``'s moduli search), said only once it is long.

The planner calls a hook ``progress(what, done, total)`` after each step;
:class:`Reporter` is the hook a command line gives it: silent for the first
``after`` seconds (a plan that takes less prints nothing), then one line at
most every ``every`` seconds, and always the last step of a phase.
"""
import time


class Reporter:
    """``progress(what, done, total)`` hook that sends ``emit(text)`` lines once ``after``
    seconds have passed since it was made (``clock``: seconds, monotonic; a test passes a fake)."""

    def __init__(self, emit, after=2.0, every=1.0, clock=time.monotonic):
        self.emit, self.after, self.every, self.clock = emit, after, every, clock
        self.start, self.last = clock(), None

    def __call__(self, what, done, total):
        now = self.clock()
        elapsed = now - self.start
        if elapsed < self.after:
            return
        if self.last is not None and now - self.last < self.every and done < total:
            return
        self.last = now
        self.emit(f"{what}: {done}/{total}, {elapsed:.0f} s")
