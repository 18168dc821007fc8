"""The privacy budget the board enforces (``device.budget``; SPEC.md section 10,
"Budget"); loaded only on a board with a budget.

``device.budget = {"epsilon": E, "ratio": R, "days": D}``: R is e^E written by the
host as a decimal string rounded down (60 digits), read exactly as N / 10^d
(:func:`mss_node.cap.exact`).  Every fresh draw (a report drawn from the sensor's
value, not a memo's re-send) spends the worst likelihood ratio hi/lo of its
config (:func:`mss_device.check.verify`, exact integers).  Before a fresh draw
the board checks, in integers, that the product of the ratios of the fresh draws
of the last window, times this one, is at most R:

    prod(hi) * hi' * d  <=  N * prod(lo) * lo'

If not, the node re-sends the current value's memo (free) or skips the epoch.

The window is D days of board time (:mod:`mss_node.uptime`: ticks while the board
runs, the time off counted as zero, a deep sleep credited only when its timer ended
it) plus 1/64 of it, so that neither a wall clock set by NTP or the network, in
either direction, nor a timer up to 1.5% fast can renew a budget early.  A draw
made at board time t counts while now - t < W (W = :func:`window_ms`) and no
longer from now - t = W on.  The ledger (state.json ``spent`` and ``bt``,
:mod:`mss_node.state`) is the device's: a config switch keeps it.

A second copy (:mod:`mss_node.ledger_copy`: NVS on an ESP32, else ledger.json) is
written before the state.json write that queues a fresh draw's report, so it holds
every draw ever sent; at boot the ledger is the union of both places (each draw time as
often as the place holding it more often; board time the later of the two), so a
deleted, torn or corrupt state.json refunds nothing (a corrupt one blocks a whole window
from the board time resumed), and a corrupt copy is ignored (and rewritten).
"""
from mss_node import log, uptime
from mss_node.ledger_copy import Copy
from mss_node.state import SPENT_MAX
from mss_node.uptime import napped

MAX_DAYS = 10000  # as the host (mss_protocol.budget.MAX_DAYS)
_DAY_MS = 86400000
_SLACK = 64  # the window is D days + D days / 64 of board time


def window_ms(days):
    """W: the board time (ms) a fresh draw stays in the ledger."""
    return days * _DAY_MS + days * _DAY_MS // _SLACK


def draws(ratio, num, den, most=SPENT_MAX + 1):
    """How many fresh draws of ``ratio`` (hi, lo) one window allows: the largest n with
    (hi/lo)^n <= num/den, exactly; at most ``most``."""
    hi = lo = 1
    n = 0
    while n < most:
        hi *= ratio[0]
        lo *= ratio[1]
        if hi * den > num * lo:
            break
        n += 1
    return n


def budget(b, worst):
    """device.budget checked against the config's worst ratio ``worst`` (hi, lo):
    {"epsilon", "days", "num", "den", "ms", "draws"}; ValueError naming the field."""
    from mss_device.check import epsilon
    from mss_node.cap import exact

    if not isinstance(b, dict):
        raise ValueError("config field device.budget must be an object {epsilon, ratio, days}")
    for key in b:
        if key not in ("epsilon", "ratio", "days"):
            raise ValueError("unknown field device.budget.%s" % key)
    days = b.get("days")
    if type(days) is not int or not 1 <= days <= MAX_DAYS:
        raise ValueError("device.budget.days must be a whole number of days, 1 to %d" % MAX_DAYS)
    eps = b.get("epsilon")
    num, den = exact(eps, b.get("ratio"), "device.budget.epsilon", "device.budget.ratio",
                     "mss plan --device-config writes both")
    n = draws(worst, num, den)
    if n == 0:
        raise ValueError("device.budget.epsilon %.6g is below one fresh report of this config (epsilon %.6g): "
                         "the board could never report" % (eps, epsilon(worst)))
    if n > SPENT_MAX:
        raise ValueError("device.budget.epsilon %.6g allows more than %d fresh reports of this config "
                         "(epsilon %.6g) in %d days; the ledger holds %d" % (eps, SPENT_MAX, epsilon(worst),
                                                                            days, SPENT_MAX))
    return {"epsilon": eps, "days": days, "num": num, "den": den, "ms": window_ms(days), "draws": n}


def fits(spent, ratio, num, den):
    """The draws of ``spent`` and one more of ``ratio`` stay within num/den, exactly."""
    hi, lo = ratio
    n = 1
    for g in spent:
        k = len(g) - 2
        hi *= g[0] ** k
        lo *= g[1] ** k
        n += k
    return n <= SPENT_MAX and hi * den <= num * lo


def live(spent, now, w):
    """The draws of ``spent`` still in the window of ``w`` ms at board time ``now``."""
    keep = []
    for g in spent:
        ts = [t for t in g[2:] if now - t < w]
        if ts:
            keep.append(g[:2] + ts)
    return keep


def _times(x, y):
    """The union of ascending draw times ``x`` and ``y``: each time as often as in the one
    holding it more often (two draws at one board ms are two draws)."""
    out, i, j = [], 0, 0
    while i < len(x) or j < len(y):
        if j == len(y) or (i < len(x) and x[i] < y[j]):
            out.append(x[i])
            i += 1
        elif i == len(x) or y[j] < x[i]:
            out.append(y[j])
            j += 1
        else:
            out.append(x[i])
            i += 1
            j += 1
    return out


def union(a, b):
    """The ledger holding every draw of ledgers ``a`` and ``b`` (groups by ratio)."""
    out = [list(g) for g in a]
    for g in b:
        for i in range(len(out)):
            o = out[i]
            if o[0] == g[0] and o[1] == g[1]:
                out[i] = o[:2] + _times(o[2:], g[2:])
                break
        else:
            out.append(list(g))
    return out


class Ledger:
    """The node's ledger over ``state`` (its ``spent`` and ``bt``) for the parsed
    ``budget`` (:func:`budget`)."""

    def __init__(self, state, b):
        self.st, self.b = state, b
        self.copy = Copy(state.path)
        self._restore()
        self.ms = state.bt + napped(state)  # board time now: resumed from the last write
        self.t = uptime.ticks_ms()
        state.board = self.now  # every write keeps it (bt)

    def _restore(self):
        """state's ledger and board time: the union of state.json's and the second copy's;
        the copy rewritten only when it lacks a draw (absent, corrupt, an older firmware's
        state.json).  A state file that was there but broken blocks a whole window from the
        board time resumed (its ratio 1/0 moved there from 0)."""
        st = self.st
        kept = self.copy.load()
        spent, bt = kept if kept is not None else ([], 0)
        bt = max(st.bt, bt)
        merged = live(union(st.spent, spent), bt, self.b["ms"])  # what left the window stays out
        if st.broken:
            merged = [g for g in merged if g[1]] + [[1, 0, bt]]
        if merged and (kept is None or merged != live(spent, bt, self.b["ms"])):  # not every boot: flash wear
            try:
                self.copy.save(merged, bt)
            except OSError as exc:  # state.json still holds it; the next fresh draw tries again (or fails)
                log.warn("cannot write the ledger's second copy (%s): %r" % (self.copy.where, exc))
        st.spent, st.bt = merged, bt

    def now(self):
        """Board time (ms) now; read at least once a tick (wrap-safe ticks)."""
        t = uptime.ticks_ms()
        d = uptime.ticks_diff(t, self.t)
        self.t = t
        if d > 0:
            self.ms += d
        return self.ms

    def _prune(self):
        self.st.spent = live(self.st.spent, self.now(), self.b["ms"])

    def allows(self, ratio):
        """A fresh draw of ``ratio`` fits the budget now (expired draws pruned first)."""
        self._prune()
        return fits(self.st.spent, ratio, self.b["num"], self.b["den"])

    def spend(self, ratio):
        """The ledger with a fresh draw of ``ratio`` now (for :meth:`State.add`), already in
        the second copy."""
        now = self.ms  # the time of the check just made
        out = []
        done = False
        for g in self.st.spent:
            if not done and g[0] == ratio[0] and g[1] == ratio[1]:
                g = g + [now]
                done = True
            out.append(g)
        if not done:
            out.append([ratio[0], ratio[1], now])
        self.copy.save(out, now)  # the second copy first: a report is never queued unless both hold its spend
        return out

    def wait_ms(self, ratio):
        """Board ms until a fresh draw of ``ratio`` fits (its oldest draws expiring)."""
        spent, w = self.st.spent, self.b["ms"]
        for t in sorted([t for g in spent for t in g[2:]]):
            rest = []
            for g in spent:
                ts = [x for x in g[2:] if x > t]
                if ts:
                    rest.append(g[:2] + ts)
            if fits(rest, ratio, self.b["num"], self.b["den"]):
                return max(0, t + w - self.ms)
        return w

    def skipped(self, ratio, epoch, memoize):
        """Log the epoch skipped (once: the node marks it used)."""
        h = (self.wait_ms(ratio) + 3599999) // 3600000
        log.warn("budget spent (epsilon %g per %d days)%s: skipped epoch %s; next fresh draw possible in about %d h"
                 % (self.b["epsilon"], self.b["days"], ": the value has no memo" if memoize else "",
                    "(no clock)" if epoch is None else epoch, h))
