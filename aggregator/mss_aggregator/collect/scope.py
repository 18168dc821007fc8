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
reported in.  The estimate stays unbiased, but a memoized device re-sends one
draw, so its copies are not independent reports: pooled standard errors are
widened by sqrt(sum_d R_d^2 / N), N = sum_d R_d reports, R_d those of device d
(docs/privacy.md, section 3; derived in :func:`pooled_stderr_factor`).  The
factor is 1 when every device reported once and sqrt(E) when all reported in
all E epochs.  Only what repeats is widened: the store records the config's
``device.memoize`` (:meth:`~.store.Store.record_memoize`), and reports that are
fresh draws with fresh randomness each (no memoize, no hash seed fixed per
device) are independent, so their pooled errors are the decoder's own.
A store that records nothing (an older aggregator) is widened as memoized.
One epoch of a shuffled store is widened the same way when a batch released in it
was merged over several epochs (it may hold one report of a device from each: the
store's ``tally`` bounds R_d by the epochs its batches cover).

:meth:`Scope.summary` says what was decoded in one phrase ("epoch 1234: 24
reports from 24 devices", "6 epochs pooled: 144 reports from 24 devices,
standard errors widened x2.45 for memoized copies"): ``mss estimate``, the
dashboard and ``mss demo`` print it.
"""
import math
import time
from dataclasses import dataclass

from mss_aggregator.collect.store import SHUFFLER
from mss_protocol.counts import Counts
from mss_protocol.estimate import Estimate


@dataclass
class Scope:
    counts: Counts
    epoch: int | None  # the epoch decoded; None when pooled (or an empty store without a clock)
    pooled: bool
    epochs: int  # distinct epochs among the decoded reports
    devices: int  # distinct devices among them (a shuffled store: a lower bound)
    stderr_factor: float  # >= 1: what the decoder's standard errors are multiplied by
    current_epoch: int | None  # of the campaign clock; None without one
    selection: str  # why these reports, in words
    memoized: bool | None = None  # the boards' device.memoize as the store records it; None: unknown
    correlated: bool = True  # whether a device's reports may repeat a draw (then they are widened)
    shuffled: bool = False  # a shuffler's store: it names no device

    def document(self):
        """The JSON fields ``mss estimate --json`` and the API add."""
        return {"epoch": self.epoch, "pooled": self.pooled, "epochs": self.epochs, "devices": self.devices,
                "stderr_factor": self.stderr_factor, "current_epoch": self.current_epoch,
                "selection": self.selection, "memoized": self.memoized, "decoded": self.summary()}

    def summary(self):
        """What was decoded, in one phrase: the epoch or the epochs pooled, the reports
        and devices, and the standard errors' widening and why (or why none)."""
        n = self.counts.total
        devices = f"at least {self.devices} devices (shuffled)" if self.shuffled else f"{self.devices} devices"
        if not self.pooled:
            head = "no epoch" if self.epoch is None else f"epoch {self.epoch}"
            if self.stderr_factor == 1:
                return f"{head}: {n} reports from {devices}"
            return (f"{head}: {n} reports from {devices}, standard errors widened x{self.stderr_factor:.2f} "
                    f"for a batch merged over several epochs")
        head = (f"{self.epochs} epochs pooled" if self.epochs > 1 else
                f"every epoch ({'one' if self.epochs else 'none'})") + f": {n} reports from {devices}"
        if self.stderr_factor != 1:
            return head + f", standard errors widened x{self.stderr_factor:.2f} for {self._repeats()}"
        if not self.correlated:
            return head + ", fresh draws: standard errors not widened"
        return head + ", each device once: standard errors not widened"

    def _repeats(self):
        if self.memoized:
            return "memoized copies"
        if self.memoized is None:
            return "repeated reports (the store does not record device.memoize: widened as if memoized)"
        return "reports sharing a device's hash seed"


def current_epoch(clock, now=None):
    """The epoch of unix time ``now`` (default: now) on ``clock`` (Store.clock()), or None."""
    if not clock:
        return None
    return int(((time.time() if now is None else now) - clock["epoch_origin"]) // clock["period_s"])


GUARANTEE = "one device id adds at most one report to the epoch chosen"


def counted(store):
    """What an epoch's count of a store is of: its devices, or for a shuffled store its
    reports (batch slots: a device has one in each batch, and a release epoch may have several)."""
    return "shuffled reports" if store.mode == SHUFFLER else "devices"


def default_epoch(store, now=None):
    """(epoch or None, current epoch or None, why): see the module docstring."""
    unit = counted(store)
    current = current_epoch(store.clock(), now)
    if current is None:
        fullest = store.fullest_epoch()
        if fullest is None:
            return None, None, "no reports"
        epoch, devices = fullest
        return epoch, None, (f"the epoch with the most {unit} ({devices}; the latest of the fullest: no "
                             f"campaign clock; {GUARANTEE})")
    have = store.epoch_devices([current - 1, current])
    now_d, last_d = have.get(current, 0), have.get(current - 1, 0)
    if now_d >= last_d:
        if now_d == 0:
            fullest = store.fullest_epoch(until=current)
            hint = (f"; the epoch with the most {unit} is {fullest[0]} ({fullest[1]}): --epoch {fullest[0]}"
                    if fullest else "")
            return current, current, f"the current epoch (no reports in it or the one before{hint})"
        return current, current, (f"the current epoch ({now_d} {unit}; the last complete one, {current - 1}, "
                                  f"has {last_d}; {GUARANTEE})")
    return current - 1, current, (f"the last complete epoch ({last_d} {unit}; the current one, {current}, "
                                  f"has {now_d} so far; {GUARANTEE})")


def copies_correlated(cfg, memoized):
    """Whether one device's reports of ``cfg`` may share randomness across epochs: a
    memoized draw (``memoized`` True, or None: not known) or a hash seed fixed per
    device (OLH ``seed: device``, SPEC.md section 3), so that pooled epochs must widen."""
    return memoized is not False or getattr(cfg, "seed", "epoch") == "device"


def pooled_stderr_factor(reports, squares, correlated=True):
    """What the decoder's standard errors are multiplied by when it decodes one
    device's several reports as if they were independent.

    Parameters
    ----------
    reports : int
        N, the reports decoded: N = sum_d R_d, R_d those of device d.
    squares : int
        sum_d R_d^2 (:meth:`~.store.Store.tally`; for a shuffled store its bound C N).
    correlated : bool
        Whether a device's reports may repeat a draw (:func:`copies_correlated`).

    Returns
    -------
    factor : float
        sqrt(sum_d R_d^2 / N) >= 1 when ``correlated``, else 1.0; 1.0 for N = 0.

    Notes
    -----
    The decoders are linear in the counts: the estimate is the mean of N
    per-report terms, f_hat = (1/N) sum_d sum_r z_dr, each z_dr unbiased with
    variance s^2 (an LDP frequency oracle's per-report variance is nearly the
    same for every value: q(1 - q)/(p - q)^2 plus a term of the item's own
    frequency), and the decoder's standard error is s / sqrt(N).  Devices are
    independent, so Var(f_hat) = (1/N^2) sum_d Var(sum_r z_dr), and for one
    device, whatever the correlation of its reports (Cauchy-Schwarz)

        Var(sum_r z_dr) <= (sum_r sd(z_dr))^2 = R_d^2 s^2,

    with equality for identical reports: a memoized device that keeps its value
    re-sends the same body every epoch, so T epochs of n such devices are n
    independent draws each counted T times.  Hence

        Var(f_hat) <= s^2 sum_d R_d^2 / N^2 = (s^2 / N) (sum_d R_d^2 / N),

    and the widened standard error (s / sqrt(N)) sqrt(sum_d R_d^2 / N) holds for
    any within-device correlation (docs/privacy.md, section 3).  It is Kish's
    design effect of cluster sampling, deff = 1 + (m - 1) rho (Kish, "Survey
    Sampling", Wiley 1965), at intra-cluster correlation rho = 1 with clusters
    (devices) of unequal size m = R_d: deff = sum_d R_d^2 / N, and the factor is
    sqrt(deff); the cluster-robust ("sandwich") variance of Liang and Zeger
    (Biometrika 73, 1986) reaches the same bound when every cluster's residuals
    are perfectly correlated.  With every device in all E epochs the factor is
    sqrt(E).  Fresh draws with fresh randomness are independent,
    Var(sum_r z_dr) = R_d s^2, and the decoder's own s / sqrt(N) is exact: factor 1.

    Examples
    --------
    >>> pooled_stderr_factor(144, 24 * 6 ** 2)  # 24 devices x 6 epochs of memoized copies
    2.449489742783178
    >>> pooled_stderr_factor(144, 24 * 6 ** 2, correlated=False)  # fresh draws
    1.0
    """
    if not correlated or not reports:
        return 1.0
    return math.sqrt(squares / reports)


def select(store, epoch=None, all_epochs=False, now=None):
    """The :class:`Scope` of one ``epoch``, of every epoch (``all_epochs``), or the default."""
    current = current_epoch(store.clock(), now)
    if all_epochs:
        why = "every epoch, pooled; standard errors widened by the reports per device when they repeat a draw"
    elif epoch is None:
        epoch, current, why = default_epoch(store, now)
    else:
        why = "the epoch asked for"
    one = None if all_epochs else epoch
    reports, devices, squares, epochs = store.tally(one)
    memoized = store.memoized()
    correlated = copies_correlated(store.cfg, memoized)
    # 1 for one epoch of device reports (one each); above 1 pooled, or for a shuffled batch merged
    # over several epochs, which may hold several reports of one device (store.tally)
    factor = pooled_stderr_factor(reports, squares, correlated)
    return Scope(counts=store.counts(one), epoch=one, pooled=bool(all_epochs), epochs=epochs, devices=devices,
                 stderr_factor=factor, current_epoch=current, selection=why, memoized=memoized,
                 correlated=correlated, shuffled=store.mode == SHUFFLER)


def decode(protocol, scope, post="none"):
    """The :class:`~mss_protocol.estimate.Estimate` of ``scope``, its standard
    errors and intervals widened by ``scope.stderr_factor``."""
    est = protocol.decode(scope.counts, post=post)
    if scope.stderr_factor == 1.0:
        return est
    return Estimate.build(raw=est.raw, stderr=est.stderr * scope.stderr_factor, n=est.n, post=est.post,
                          stderr_method=est.stderr_method,
                          iterations=est.iterations, seconds=est.seconds)


def contents(store, latest=5):
    """What ``store`` holds, in one phrase for an error that found nothing to
    decode: its accepted reports, epochs and devices, the ``latest`` epochs and
    the fullest one with their devices."""
    reports, devices, _, epochs = store.tally()
    if not reports:
        c = store.counters()
        return (f"{store.name} holds no accepted reports (config {store.cfg.config_id_hex}; "
                f"{c['received']} received, {c['rejected']} rejected)")
    unit, at_least = counted(store), "at least " if store.mode == SHUFFLER else ""
    last = ", ".join(f"{e} ({at_least}{d} devices)" for e, d in store.devices_per_epoch(last=latest))
    full, most = store.fullest_epoch()
    return (f"{store.name} holds {reports} accepted reports of config {store.cfg.config_id_hex} from {at_least}"
            f"{devices} devices in {epochs} epochs; the latest: {last}; the fullest: {full} ({most} {unit}). "
            f"Choose one with --epoch E, or pool them all with --all-epochs")
