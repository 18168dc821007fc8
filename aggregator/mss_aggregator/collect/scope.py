"""Which accepted reports an estimate decodes, and standard errors that are
honest about it (``mss estimate`` and the dashboard share this).

A device has at most one accepted report per epoch, so the estimate of one
epoch counts every device once: that is the default, and ``--epoch E``.
The default epoch is the fullest of a set of epochs that the reports cannot
choose:

* with a campaign clock (``device.period_s``, recorded in the store by the
  aggregator), the fuller of the clock's epochs current - 1 (the last
  complete one) and current (ties: the current one).  Reports dated after
  the current epoch (device clocks a little ahead) wait until the clock
  reaches them.  When both are empty (the campaign is over, an outage) the
  current epoch, empty, is decoded and the selection names the epoch with
  the most devices, for ``--epoch``;
* without a clock (a store of an older aggregator, a hand-written config:
  ``mss aggregate`` refuses a config without one), the epoch with the most
  devices (ties: the latest), never "the latest with reports", which a
  device picks by dating a report.

The guarantee: one device id adds at most one device to any epoch, so with
its reports the decoded epoch holds at least (the devices of the default
without them) - 1 honest devices, and at most one of its reports, whatever
epochs it dates them (argmax over a fixed set: h(e*) + 1 >= h(e*) + a(e*) >=
h(e0) + a(e0) >= h(e0), a(e) <= 1 its reports in e).  A set that depends on
the reports does not keep it: falling back to the fullest epoch of all when
the clock's two are empty would let one report in either of them be the
estimate instead of the fleet's last epoch (tests/test_hostile_epochs.py
checks the guarantee over random epoch sets).

Pooling every epoch (``--all-epochs``) counts a device once per epoch it
reported in.  The estimate stays unbiased, but a device's reports are not
independent (a memoized device re-sends one draw), so pooled standard errors
are widened by sqrt(sum_d R_d^2 / N), N = sum_d R_d reports, R_d those of
device d: the variance of the sum of R_d reports of one device is at most
R_d^2 times one report's, whatever their correlation, with equality for
identical reports (docs/privacy.md, section 3).  The factor is 1 when every
device reported once and sqrt(E) when all reported in all E epochs.
One epoch of a shuffled store is widened the same way when a batch released in it
was merged over several epochs (it may hold one report of a device from each: the
store's ``tally`` bounds R_d by the epochs its batches cover).
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


GUARANTEE = "one device id adds at most one report to the epoch chosen"


def default_epoch(store, now=None):
    """(epoch or None, current epoch or None, why): see the module docstring."""
    current = current_epoch(store.clock(), now)
    if current is None:
        fullest = store.fullest_epoch()
        if fullest is None:
            return None, None, "no reports"
        epoch, devices = fullest
        return epoch, None, (f"the epoch with the most devices ({devices}; the latest of the fullest: no "
                             f"campaign clock; {GUARANTEE})")
    have = store.epoch_devices([current - 1, current])
    now_d, last_d = have.get(current, 0), have.get(current - 1, 0)
    if now_d >= last_d:
        if now_d == 0:
            fullest = store.fullest_epoch(until=current)
            hint = (f"; the epoch with the most devices is {fullest[0]} ({fullest[1]}): --epoch {fullest[0]}"
                    if fullest else "")
            return current, current, f"the current epoch (no reports in it or the one before{hint})"
        return current, current, (f"the current epoch ({now_d} devices; the last complete one, {current - 1}, "
                                  f"has {last_d}; {GUARANTEE})")
    return current - 1, current, (f"the last complete epoch ({last_d} devices; the current one, {current}, "
                                  f"has {now_d} so far; {GUARANTEE})")


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
    # 1 for one epoch of device reports (one each); above 1 pooled, or for a shuffled batch merged
    # over several epochs, which may hold several reports of one device (store.tally)
    factor = math.sqrt(squares / reports) if reports else 1.0
    return Scope(store.counts(one), one, bool(all_epochs), epochs, devices, factor, current, why)


def decode(protocol, scope, post="none"):
    """The :class:`~mss_protocol.estimate.Estimate` of ``scope``, its standard
    errors and intervals widened by ``scope.stderr_factor``."""
    est = protocol.decode(scope.counts, post=post)
    if scope.stderr_factor == 1.0:
        return est
    return Estimate.build(est.raw, est.stderr * scope.stderr_factor, est.n, est.post, est.stderr_method,
                          est.iterations, est.seconds)


def contents(store, latest=5):
    """What ``store`` holds, in one phrase for an error that found nothing to
    decode: its accepted reports, epochs and devices, the ``latest`` epochs and
    the fullest one with their devices."""
    reports, devices, _, epochs = store.tally()
    if not reports:
        c = store.counters()
        return (f"{store.name} holds no accepted reports (config {store.cfg.config_id_hex}; "
                f"{c['received']} received, {c['rejected']} rejected)")
    last = ", ".join(f"{e} ({d} devices)" for e, d in store.devices_per_epoch(last=latest))
    full, most = store.fullest_epoch()
    return (f"{store.name} holds {reports} accepted reports of config {store.cfg.config_id_hex} from {devices} "
            f"devices in {epochs} epochs; the latest: {last}; the fullest: {full} ({most} devices): "
            f"--epoch E or --all-epochs")
