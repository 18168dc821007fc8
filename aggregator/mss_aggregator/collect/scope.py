"""Which accepted reports an estimate decodes, and standard errors that are
honest about it (``mss estimate`` and the dashboard share this).

A device has at most one accepted report per epoch, so the estimate of one
epoch counts every device once: that is the default, and ``--epoch E``.
The default epoch is the fuller of two: the last complete epoch (the latest
with reports before the campaign clock's current epoch) and the current one
-- the current one once it holds at least as many devices.  Without a clock
(no ``device.period_s``) the two are the latest two epochs with reports.
One device adds at most one report to either, so it cannot choose which of
them is decoded unless their device counts differ by at most one; reports
dated after the current epoch (device clocks a little ahead) wait until the
clock reaches them.

Pooling every epoch (``--all-epochs``) counts a device once per epoch it
reported in.  The estimate stays unbiased, but a device's reports are not
independent (a memoized device re-sends one draw), so pooled standard errors
are widened by sqrt(sum_d R_d^2 / N), N = sum_d R_d reports, R_d those of
device d: the variance of the sum of R_d reports of one device is at most
R_d^2 times one report's, whatever their correlation, with equality for
identical reports (docs/privacy.md, section 3).  The factor is 1 when every
device reported once and sqrt(E) when all reported in all E epochs.
"""
import math
import time
from dataclasses import dataclass

from mss_protocol.estimate import Estimate
from mss_protocol.mss.counts import Counts


@dataclass
class Scope:
    counts: Counts
    epoch: int | None  # the epoch decoded; None when pooled (or an empty store without a clock)
    pooled: bool
    epochs: int  # distinct epochs among the decoded reports
    devices: int  # distinct devices among them
    stderr_factor: float  # >= 1: what the decoder's standard errors are multiplied by
    current_epoch: int | None  # of the campaign clock; None without one
    selection: str  # why these reports, in words

    def document(self):
        """The JSON fields ``mss estimate --json`` and the API add."""
        return {"epoch": self.epoch, "pooled": self.pooled, "epochs": self.epochs, "devices": self.devices,
                "stderr_factor": self.stderr_factor, "current_epoch": self.current_epoch,
                "selection": self.selection}


def current_epoch(clock, now=None):
    """The epoch of unix time ``now`` (default: now) on ``clock`` (Store.clock()), or None."""
    if not clock:
        return None
    return int(((time.time() if now is None else now) - clock["epoch_origin"]) // clock["period_s"])


def default_epoch(store, now=None):
    """(epoch or None, current epoch or None, why): see the module docstring."""
    current = current_epoch(store.clock(), now)
    latest = store.latest_epochs(until=current, last=2)  # [(epoch, devices)], latest first
    if current is not None and (not latest or latest[0][0] != current):
        latest.insert(0, (current, 0))
    if not latest:
        return None, None, "no reports"
    (now_e, now_d), last = latest[0], (latest[1] if len(latest) > 1 else None)
    here = "current" if current is not None else "latest"
    if last is None or now_d >= last[1]:
        other = f"; the one before, {last[0]}, has {last[1]}" if last else ""
        return now_e, current, f"the {here} epoch ({now_d} devices{other})"
    return last[0], current, (f"the last complete epoch ({last[1]} devices; the {here} one, {now_e}, "
                              f"has {now_d} so far)")


def select(store, epoch=None, all_epochs=False, now=None):
    """The :class:`Scope` of one ``epoch``, of every epoch (``all_epochs``), or the default."""
    current = current_epoch(store.clock(), now)
    if all_epochs:
        why = "every epoch, pooled; standard errors widened by the reports per device"
    elif epoch is None:
        epoch, current, why = default_epoch(store, now)
    else:
        why = "the epoch asked for"
    one = None if all_epochs else epoch
    reports, devices, squares, epochs = store.tally(one)
    factor = math.sqrt(squares / reports) if all_epochs and reports else 1.0
    return Scope(store.counts(one), one, bool(all_epochs), epochs, devices, factor, current, why)


def decode(protocol, scope, post="none"):
    """The :class:`~mss_protocol.estimate.Estimate` of ``scope``, its standard
    errors and intervals widened by ``scope.stderr_factor``."""
    est = protocol.decode(scope.counts, post=post)
    if scope.stderr_factor == 1.0:
        return est
    return Estimate.build(est.raw, est.stderr * scope.stderr_factor, est.n, est.post, est.stderr_method,
                          est.iterations, est.seconds)
