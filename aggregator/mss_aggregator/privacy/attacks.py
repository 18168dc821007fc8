"""Empirical reconstruction and linking attacks run against the real integer clients.

Values are drawn from the prior, each is randomised by the protocol's own
client code (``Channel.client``, the device randomiser for MSS/SS) on a
seeded device byte stream, and the attackers of :mod:`mss_protocol.channel`
guess it back.  Success rates come with 95% Clopper-Pearson intervals.
One exception, for speed: the longitudinal attack on MSS, SS, OLH, HR and PGR without
an instantaneous layer draws its reports for all devices at once from the
client's exact law (``Channel.sample_logliks``, the NumPy samplers of
``mss simulate``, checked against that law in tests/test_sampler.py and
tests/test_simulation_samplers.py), 10-45x faster than one client call a
report (k = 16 to 256).

Longitudinal: one device holds a fixed value and sends T reports; the
Bayes-optimal attacker adds their log-likelihoods (posterior product).
Which reports are fresh draws is the report schedule (:func:`schedule`):
every report (fresh), the first only (``device.memoize``: the others re-send
its body), or as many as a budget allows (``device.budget``: a fresh draw
only while the window holds fewer than B draws; the epochs in between are
replays of the memo, or skipped without one).  The attacker knows the
schedule, so a replay without an instantaneous layer tells it nothing new.

With an instantaneous layer (RAPPOR's IRR, :class:`Irr`) every report is
GRR over the protocol's n_out outputs applied afresh to the permanent draw
y' (its body).  The attacker then uses the exact likelihood of each draw's
reports y_1..y_m, sum_{y'} P_prr(y' | x) prod_t P_irr(y_t | y'), which only
depends on how often each output was reported (:func:`irr_loglik`).

Linkability (:func:`linkability`): two reports, of one device or of two;
the attacker says "same device" iff they are identical.  Its exact rates for
the one-output protocols are in :func:`link_exact`.
"""
import math
import random
from dataclasses import dataclass

import numpy as np

from mss_aggregator.privacy.empirical import clopper_pearson
from mss_device.point import grr
from mss_device.rng import ByteRng
from mss_protocol.irr import PROTOCOLS as IRR_PROTOCOLS  # one output y' in [n_out): an IRR layer applies

ONE = 1 << 30


def rate(hits, n):
    """(success rate, [low, high] 95% Clopper-Pearson interval)."""
    low, high = clopper_pearson(int(hits), int(n), 0.05)
    return hits / n, [low, high]


# A simulated success whose true value is provably at most ``bound`` (docs/privacy.md section 3,
# "Simulated figures"): the interval is the sampling statement and is shown as measured; the
# point is the estimate under that constraint, min(measured, bound) (the maximum-likelihood
# estimate of a binomial rate restricted to [0, bound]), flagged ``capped`` when it was lowered.
# A measurement too far above the bound to be sampling noise is a ``conflict`` (a bug in the
# simulation or the bound): its one-sided 99.9% Clopper-Pearson lower end is above the bound,
# which a correct simulation does with probability at most 0.1% per figure.
CONFLICT_ALPHA = 0.002  # two-sided, so one-sided 0.001
BOUND_RTOL = 1e-9  # float slack of an exact bound


def bounded_rate(hits, n, bound):
    """A simulated success rate beside its exact ceiling ``bound`` (None: no bound
    known, 1 is used): {"success" (min(measured, bound)), "ci" (the 95% Clopper-Pearson
    interval of the measurement, which may straddle the bound), "measured", "capped"
    (measured > bound, beyond float rounding: a ceiling of 1 computes as 1 - 2e-16),
    "conflict" (measured above the bound beyond sampling noise: the 99.9% one-sided
    lower end is above it), "bound"}."""
    hits, n = int(hits), int(n)
    point, ci = rate(hits, n)
    bound = 1.0 if bound is None else float(bound)
    low = clopper_pearson(hits, n, CONFLICT_ALPHA)[0]
    return {"success": min(point, bound), "ci": [float(ci[0]), float(ci[1])], "measured": point,
            "capped": point > bound * (1 + BOUND_RTOL), "conflict": low > bound * (1 + BOUND_RTOL), "bound": bound}


def _log_prior(prior):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(prior, dtype=float))


def single_report(ch, prior, trials, seed=0):
    """Hits of the Bayes-optimal and the paper's attacker over ``trials`` devices:
    {"bayes": hits, "paper": hits, "trials": trials}."""
    rng = np.random.default_rng(seed)
    device = ByteRng(random.Random(seed).randbytes)
    log_prior = _log_prior(prior)
    bayes = paper = 0
    for x in rng.choice(ch.k, size=trials, p=prior):
        report = ch.client(int(x), device)
        bayes += int(np.argmax(log_prior + ch.loglik(report))) == x
        paper += ch.paper_guess(report, rng) == x
    return {"bayes": bayes, "paper": paper, "trials": trials}


# -- the one-output protocols' permanent draw and the instantaneous layer ------
def n_out(ch):
    """The size of a one-output protocol's report alphabet: k (grr), g (olh), K (hr, pgr)."""
    if ch.name not in IRR_PROTOCOLS:
        raise ValueError(f"{ch.name} has no single output: an instantaneous layer applies to "
                         f"{', '.join(IRR_PROTOCOLS)} only")
    return ch.oracle.outputs


def body(ch, report):
    """The drawn output y' of a one-output report (olh: y of (a, b, y)): ``ch.body``."""
    return ch.body(report)


def with_body(ch, report, y):
    """``report`` with its output replaced by ``y`` (olh keeps its seed): ``ch.with_body``."""
    return ch.with_body(report, y)


def prr_rows(ch, report, ys):
    """P_prr(y' | x) for the outputs ``ys`` (rows) and every x (columns), under
    ``report``'s hash seed for olh: shape (len(ys), k) (``ch.prr_rows``)."""
    return ch.prr_rows(report, ys)


class Irr:
    """RAPPOR's instantaneous layer: GRR over the n_out outputs with the device's
    keep-threshold ``threshold`` (report y' with probability p1 = T1 / 2**30,
    else a uniform other output), applied by the device's own ``mss_device.grr.grr``."""

    def __init__(self, n, threshold):
        if n < 2 or not 0 < threshold < ONE:
            raise ValueError(f"an IRR needs n_out >= 2 and a threshold in (0, 2**30), got {n}, {threshold}")
        self.n, self.threshold = n, threshold
        self.p1 = threshold / ONE
        self.q1 = (1 - self.p1) / (n - 1)
        self.w = math.log(self.p1 / self.q1)  # log-likelihood ratio of one report equal to y'

    @classmethod
    def for_epsilon(cls, n, epsilon):
        """The layer at ``epsilon`` on n outputs: T1 = mss_protocol.privacy.threshold(n, 1, epsilon)."""
        from mss_protocol import privacy

        return cls(n, privacy.threshold(n, 1, epsilon))

    @property
    def epsilon(self):
        """Its exact worst log-ratio, p1 (n - 1) / (1 - p1)."""
        return math.log(self.threshold * (self.n - 1)) - math.log(ONE - self.threshold)

    def apply(self, y, rng):
        """One report of the output y' (the device's code, its byte stream ``rng``)."""
        return grr(int(y), self.n, self.threshold, rng)

    def counts(self, y, m, rng):
        """How often each output is reported in m reports of y' (same law as m calls of
        :meth:`apply`: numpy's multinomial on the exact p1), as {output: count}."""
        keep = int(rng.binomial(m, self.p1))
        out = {}
        if m - keep:
            others = rng.multinomial(m - keep, np.full(self.n - 1, 1.0 / (self.n - 1)))
            for v in np.flatnonzero(others):
                out[int(v) + (v >= y)] = int(others[v])
        if keep:
            out[int(y)] = out.get(int(y), 0) + keep
        return out


def irr_loglik(ch, irr, report, counts):
    """log sum_{y'} P_prr(y' | x) prod_t P_irr(y_t | y') for every x, up to a constant,
    for the reports of one permanent draw (``report``: any of them, for olh's seed)
    reported ``counts`` ({output: times}).  prod_t P_irr(y_t | y') = q1^m e^(w c(y')),
    so the sum is (1 - sum_{seen} P_prr(y'|x)) + sum_{seen y'} P_prr(y'|x) e^(w c(y'))."""
    ys = np.fromiter(counts, dtype=np.int64)
    c = np.fromiter(counts.values(), dtype=float)
    rows = prr_rows(ch, report, ys)
    with np.errstate(divide="ignore"):
        rest = np.log(np.clip(1.0 - rows.sum(axis=0), 0.0, None))
        terms = np.log(rows) + irr.w * c[:, None]
    return np.logaddexp(rest, np.logaddexp.reduce(terms, axis=0))


# -- report schedules -----------------------------------------------------------
def schedule(reports, memoize=False, draws=None, window=None):
    """What each of ``reports`` epochs of a device with a FIXED value sends:
    bool array, True for a fresh draw.  ``memoize``: the first only (the rest
    re-send it); ``draws`` per ``window`` epochs (a budget): a fresh draw only
    while the last ``window`` epochs (this one included) hold fewer than
    ``draws``; the others are replays (with a memo) or skipped."""
    fresh = np.zeros(reports, dtype=bool)
    if memoize:
        fresh[:1] = draws is None or draws > 0
        return fresh
    if draws is None:
        fresh[:] = True
        return fresh
    if draws <= 0:
        return fresh
    last = []  # epochs of the draws in the window
    for t in range(reports):
        last = [s for s in last if s > t - window]
        if len(last) < draws:
            fresh[t] = True
            last.append(t)
    return fresh


LOGLIK_CACHE_BYTES = 32 << 20


@dataclass(frozen=True)
class Reporting:
    """How a device reports over time, as :func:`longitudinal` simulates it.

    Parameters
    ----------
    memoize : bool
        A report that is not fresh is a replay of the last draw (with ``irr``: a fresh IRR of it;
        without: nothing new); else it is skipped.
    irr : Irr, optional
        The instantaneous layer; the attacked channel is then the permanent draw's (the protocol
        without the layer).
    fresh : numpy.ndarray of bool, optional
        The schedule, one a report (:func:`schedule`); None: every report fresh, or only the first
        with ``memoize``.
    device_seed : bool
        olh's hash seed is drawn once per device and kept for all its draws (``seed: device``), else
        drawn afresh per draw.
    """
    memoize: bool = False
    irr: object = None
    fresh: object = None
    device_seed: bool = False


def longitudinal(ch, prior, horizons, trials, seed=0, reporting=Reporting()):
    """Bayes-optimal hits after T reports, for each distinct T in ``horizons``
    (ascending): array of len(set(horizons)), over ``trials`` devices reporting as
    ``reporting`` (:class:`Reporting`) says; with its ``irr``, ``ch`` is the permanent
    draw's channel."""
    memoize, irr, fresh, device_seed = reporting.memoize, reporting.irr, reporting.fresh, reporting.device_seed
    rng = np.random.default_rng(seed)
    device = ByteRng(random.Random(seed).randbytes)
    log_prior = _log_prior(prior)
    horizons = sorted(set(horizons))
    last = horizons[-1]
    if fresh is None:
        fresh = schedule(last, memoize)
    if len(fresh) < last:
        raise ValueError(f"the schedule has {len(fresh)} reports, fewer than the horizon {last}")
    hits = np.zeros(len(horizons), dtype=np.int64)
    draws = set((np.flatnonzero(fresh[:last]) + 1).tolist())  # report numbers (1-based) of fresh draws
    events = sorted(draws | set(horizons))
    if irr is None and hasattr(ch, "sample_logliks"):
        return _longitudinal_batch(ch=ch, log_prior=log_prior, xs=rng.choice(ch.k, size=trials, p=prior),
                                   horizons=horizons, draws=draws, events=events, rng=rng,
                                   device_seed=device_seed and ch.oracle.has_seed)
    # log-likelihood by report: the devices' reports repeat where the output set is small (HR, GRR,
    # SS at small k); kept up to LOGLIK_CACHE_BYTES of (k,) rows
    logliks, room = {}, LOGLIK_CACHE_BYTES // (8 * ch.k)
    for x in rng.choice(ch.k, size=trials, p=prior):
        x = int(x)
        post = log_prior.copy()
        memo = None  # with irr: [a report of the current draw, {output: times reported}]
        done, h = 0, 0  # reports sent so far; next horizon
        fixed = None  # olh's seed of this device with device_seed
        for t in events:
            if memo is not None and memoize:  # the epochs since the last event re-send the draw
                _add(memo[1], irr.counts(body(ch, memo[0]), t - 1 - done, rng))
            if t in draws:
                if memo is not None:  # a new draw: the old one's reports are complete
                    post = post + irr_loglik(ch, irr, *memo)
                    memo = None
                if device_seed and ch.oracle.has_seed:
                    report = ch.oracle.randomise(x, device, seed=fixed)
                    fixed = report[:2]
                else:
                    report = ch.client(x, device)
                if irr is None:
                    key = ch.key(report)
                    ll = logliks.get(key)
                    if ll is None:
                        ll = ch.loglik(report)
                        if len(logliks) < room:
                            logliks[key] = ll
                    post = post + ll
                else:
                    memo = [report, {irr.apply(body(ch, report), device): 1}]
            elif memo is not None and memoize:
                _add(memo[1], irr.counts(body(ch, memo[0]), 1, rng))
            done = t
            if h < len(horizons) and horizons[h] == t:
                score = post if memo is None else post + irr_loglik(ch, irr, *memo)
                hits[h] += int(np.argmax(score)) == x
                h += 1
    return hits


BATCH_CELLS = 1 << 21  # (report, value) log-likelihoods drawn at once: 16 MB


def _longitudinal_batch(ch, log_prior, xs, horizons, draws, events, rng, device_seed=False):
    """:func:`longitudinal` without an instantaneous layer for a channel that draws
    many reports' log-likelihoods at once (``ch.sample_logliks``: MSS, SS, OLH, HR, PGR): every
    device's posterior a row of ``post`` (devices, k), one call for up to
    BATCH_CELLS / k (report, device) pairs, several draws of every device at once
    (``device_seed``: olh's seed drawn once a device, ``ch.oracle.sample_seeds``)."""
    hits = np.zeros(len(horizons), dtype=np.int64)
    rows = max(1, BATCH_CELLS // ch.k)
    for lo in range(0, xs.size, rows):
        x = xs[lo:lo + rows]
        post = np.tile(log_prior, (x.size, 1))
        seeds = ch.oracle.sample_seeds(x.size, rng) if device_seed else None
        per, left = max(1, rows // x.size), len(draws)  # draws a call; draws not yet made
        lls, used, h = (), 0, 0
        for t in events:
            if t in draws:
                if used == len(lls):
                    n, used = min(per, left), 0
                    kw = {} if seeds is None else {"seeds": tuple(np.tile(s, n) for s in seeds)}
                    lls = ch.sample_logliks(np.tile(x, n), rng, **kw).reshape(n, x.size, ch.k)
                    left -= n
                post += lls[used]
                used += 1
            if h < len(horizons) and horizons[h] == t:
                hits[h] += int(np.count_nonzero(post.argmax(axis=1) == x))
                h += 1
    return hits


def _add(counts, more):
    for y, c in more.items():
        counts[y] = counts.get(y, 0) + c


# -- linkability --------------------------------------------------------------------
def link_exact(ch, prior, irr=None):
    """Exact rates of the test "same device iff the two reports are identical" for a
    one-output protocol whose device re-sends one memoized draw y' (with ``irr``: a
    fresh IRR of it each time; olh: its seed fixed per device, ``seed: device``):

    * same device: P(y1 = y2) = sum_{y'} P(y') (p1^2 + (n-1) q1^2) = p1^2 + (1-p1)^2/(n-1)
      (1 without an IRR);
    * two devices (values from the prior, independent draws and seeds):
      P(y1 = y2) = sum_y m(y)^2, m the marginal law of one report: for the draw
      m(y) = sum_x pi(x) P_prr(y | x) (olh: averaged over the seed, P(H(x) = r) = c_r / P),
      through the IRR m'(y) = p1 m(y) + q1 (1 - m(y)).

    {"tpr", "fpr", "advantage" (tpr - fpr)}."""
    m = ch.output_marginal(np.asarray(prior, dtype=float))  # a NotImplementedError names a protocol without it
    if irr is None:
        tpr = 1.0
    else:
        tpr = irr.p1 ** 2 + (1 - irr.p1) ** 2 / (irr.n - 1)
        m = irr.p1 * m + irr.q1 * (1 - m)
    fpr = float(np.sum(m ** 2))
    return {"tpr": tpr, "fpr": fpr, "advantage": tpr - fpr}


def linkability(ch, prior, pairs, seed=0, irr=None):
    """The identical-report linking test measured on the real clients: ``pairs``
    pairs of reports of one memoized device (one draw of the client, re-sent; with
    ``irr`` each send a fresh IRR by the device's grr) and ``pairs`` pairs of two
    devices (values from the prior).  {"tpr", "tpr_ci", "fpr", "fpr_ci",
    "advantage", "pairs"}; MSS, SS and the unary encodings compare their bodies."""
    rng = np.random.default_rng(seed)
    device = ByteRng(random.Random(seed).randbytes)
    if irr is not None and ch.name not in IRR_PROTOCOLS:
        raise ValueError(f"{ch.name} takes no instantaneous layer")

    def send(report):
        if irr is None:
            return ch.key(report)
        return with_body(ch, report, irr.apply(body(ch, report), device))

    same = diff = 0
    xs = rng.choice(ch.k, size=3 * pairs, p=prior)
    for i in range(pairs):
        r = ch.client(int(xs[i]), device)
        same += _key(ch, send(r)) == _key(ch, send(r))
        r1, r2 = ch.client(int(xs[pairs + 2 * i]), device), ch.client(int(xs[pairs + 2 * i + 1]), device)
        diff += _key(ch, send(r1)) == _key(ch, send(r2))
    tpr, tpr_ci = rate(same, pairs)
    fpr, fpr_ci = rate(diff, pairs)
    return {"pairs": pairs, "tpr": tpr, "tpr_ci": tpr_ci, "fpr": fpr, "fpr_ci": fpr_ci, "advantage": tpr - fpr}


def _key(ch, sent):
    """What the link attacker compares: the body (olh: y; its seed is not sent)."""
    return ch.link_key(sent)
