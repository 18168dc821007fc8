"""Suspect devices: tests of a campaign's stored reports against the honest channel (issue 47 item 4).

The store holds every accepted report with its device id and epoch, so each device's reports can be
tested together, which is far stronger than testing one report: a crafted report hides in the noise
of one epoch, not in thirty.  What a report supports is asked of the protocol
(:meth:`mss_protocol.base.Protocol.supported_items`, ``support_rate``, ``support_size_law``), so
every protocol is tested the same way.

The tests (each a bound on the honest null that holds for EVERY input sequence, values changing
or not; ``alpha`` is the false-alarm rate per honest device, split evenly, Bonferroni, over the
tests that can fire on an honest device):

``support-size``
    Each report's likelihood under the honest channel for any input.  Where the number of items a
    report supports varies with the draw and not with the input (the unary encodings:
    Bernoulli(p) + Binomial(k - 1, q) bits, whatever the value; :meth:`support_size_law`), a
    device's E reports support T = sum_e |S(y_e)| items in all, whose law is exactly the
    convolution of E such laws; the test is two-sided, p = min(1, 2 min(P[T' <= T], P[T' >= T])).
    A crafted report of the Maximal Gain Attack sets just the targets' bits, far fewer than an
    honest report at large k.  Where every wire-valid report is one an honest device sends with a
    likelihood within e^eps of any other (one point, a subset of a fixed size, a hash preimage)
    no single report says anything: there is no such test.

``one-item``
    Consistency across epochs.  N_v, the device's reports that support item v, is a sum of
    independent Bernoulli variables (one per epoch), of rate at most p = support_rate(1) in the
    E_v epochs whose input is v and at most q = other_item_rate() in the others, so
    P[N_v >= t] <= f(E_v, t) = P[Binomial(E_v, p) + Binomial(E - E_v, q) >= t].  Over the k items
    (a union bound) and the worst honest input sequence (values may change: any E_v summing to E)

        P[max_v N_v >= t] <= k f(0, t) + max over parts n_1 + n_2 + ... = E of sum_i (f(n_i, t) - f(0, t)),

    the maximum found by dynamic programming over E (:func:`one_item_bound`).  It is at most
    k P[Binomial(E, p) >= t] and far below it when q << p (GRR at k = 16, eps = 4, E = 30:
    p^30 + 15 q^30 = 5.8e-4 at t = 30 where k p^30 = 9.3e-3).

``two-items``
    The same for the reports supporting both of two items, N_vw, of rate at most
    rho_2 = support_rate(2) (e.g. p q for the unary encodings), over the C(k, 2) pairs:
    P[max N_vw >= t] <= C(k, 2) P[Binomial(E, rho_2) >= t].  Where no honest report supports two
    items (GRR: rho_2 = 0) any co-support is impossible, the test costs no false alarms and takes
    no share of alpha.  A device whose reports support the same several items every epoch (the
    Maximal Gain Attack) fails it by far.

``population``
    Targets co-supported more often than chance, over the whole fleet.  For one pair, a device has
    N_vw >= s with probability at most pi_s = P[Binomial(E, rho_2) >= s] whatever its inputs, and
    devices are independent, so D_vw (the devices reaching s) is at most Binomial(D, pi_s) in law;
    a pair is flagged when C(k, 2) P[Binomial(D, pi_s) >= D_vw] <= alpha (family-wise, for the
    fleet; s is the smallest count with pi_s <= the per-device share of alpha).  A device is named
    on a flagged pair when its own N_vw reaches the count whose tail, times the F pairs flagged
    (Bonferroni over them), is within its share of alpha, so naming costs an honest device no more
    than its share however many pairs are flagged; its evidence is its strongest flagged pair.
    It finds a group of devices each staying under its own thresholds but all pushing one pair.

A device is flagged when a test's p-value (Bonferroni over the items or pairs it ranges over) is at
most its share of alpha; every bound is a tail of the worst honest input, so the false-alarm rate
of an honest fleet is at most alpha per device and usually far below it (measured on simulated
fleets in tests/test_detect.py and ``tools/bench_poison.py --detect``).

Memoized reports (``device.memoize``): a memoizer resends one report while its value holds, so its
copies are one draw, not E; the tests run on each device's distinct reports (each a fresh draw).
What cannot be seen: a compromised memoizer sends one crafted report forever, which is one report
to test (only ``support-size`` can see it), and a device that lies about its input and randomises
honestly (the input lie) sends reports of the honest law: no test of reports can see either, and the
certified interval (docs/privacy.md section 7) is what bounds them.
"""
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import stats
from scipy.signal import fftconvolve

from mss_protocol import registry

#: The default false-alarm rate per honest device (docs/privacy.md section 7, "Detection").
DEFAULT_ALPHA = 0.01
TESTS = ("support-size", "one-item", "two-items", "population")
CHUNK_CELLS = 1 << 24  # devices x reports x items unpacked at once


@dataclass(frozen=True)
class Evidence:
    """Why a device is suspect: one test it failed.

    Attributes
    ----------
    device_id : str
    test : str
        One of :data:`TESTS`.
    statistic : int
        The count tested (items supported in all, or reports supporting ``items``).
    threshold : int or list of two ints
        The count at which the test fires (support-size: the two-sided acceptance band [lo, hi]).
    p_value : float
        Bonferroni-adjusted over the items or pairs the test ranges over; the device is flagged
        at p_value <= ``alpha`` (its share of the operator's alpha).
    alpha : float
        The test's share of the false-alarm rate.
    items : tuple of int
        The items the statistic is about (the most supported item or pair).
    reports : int
        The device's reports tested (distinct ones for a memoized store).
    """
    device_id: str
    test: str
    statistic: int
    threshold: object
    p_value: float
    alpha: float
    items: tuple = ()
    reports: int = 0

    def to_dict(self):
        return {"device_id": self.device_id, "test": self.test, "statistic": int(self.statistic),
                "threshold": self.threshold, "p_value": float(self.p_value), "alpha": float(self.alpha),
                "items": [int(v) for v in self.items], "reports": int(self.reports)}


def tail_threshold(trials, rate, union, alpha):
    """The smallest count t with union * P[Binomial(trials, rate) >= t] <= alpha (trials + 1: none)."""
    if rate <= 0:
        return 1
    t = np.arange(trials + 2)
    tails = union * stats.binom.sf(t - 1, trials, rate)
    ok = np.flatnonzero(tails <= alpha)
    return int(ok[0]) if ok.size else trials + 1


def one_item_bound(trials, p, q, k):
    """(trials + 2,) the bound on P[max_v N_v >= t] for t = 0 .. trials + 1 over the worst honest input
    sequence (module docstring, ``one-item``): k f(0, t) + h[trials](t), h[e] = max over n in 1..e of
    (f(n, t) - f(0, t)) + h[e - n] (a part for each value the device held; more parts than k items
    only loosen it), capped at 1."""
    e = trials
    t = np.arange(e + 2)
    f = part_tails(e, p, q)
    g = np.maximum(f - f[0], 0)
    h = np.zeros((e + 1, t.size))
    for total in range(1, e + 1):
        h[total] = np.max(g[1:total + 1] + h[total - 1::-1][:total], axis=0)
    return np.minimum(1.0, k * f[0] + h[e])


def part_tails(e, p, q):
    """(e + 1, e + 2): P[Binomial(n, p) + Binomial(e - n, q) >= t] for n = 0 .. e, t = 0 .. e + 1."""
    out = np.zeros((e + 1, e + 2))
    for n in range(e + 1):
        pmf = np.convolve(stats.binom.pmf(np.arange(n + 1), n, p), stats.binom.pmf(np.arange(e - n + 1), e - n, q))
        out[n, :e + 1] = np.clip(pmf[::-1].cumsum()[::-1], 0, 1)
    return out


def tail_p(count, trials, rate, union):
    """min(1, union * P[Binomial(trials, rate) >= count]) (0 where the rate is 0 and count >= 1)."""
    if count <= 0:
        return 1.0
    if rate <= 0:
        return 0.0
    return float(min(1.0, union * stats.binom.sf(count - 1, trials, rate)))


class DeviceTest:
    """The per-device tests of one protocol at false-alarm rate ``alpha`` per honest device.

    Parameters
    ----------
    protocol : mss_protocol.base.Protocol
    alpha : float
        False-alarm rate per honest device, in (0, 1).
    population : bool
        Whether the population test takes a share of ``alpha`` (the fleet test of :func:`scan`).
    """

    def __init__(self, protocol, alpha=DEFAULT_ALPHA, population=True):
        if not 0 < alpha < 1:
            raise ValueError(f"alpha (a false-alarm rate) must be in (0, 1), got {alpha!r}")
        self.protocol, self.alpha, self.k = protocol, float(alpha), protocol.k
        self.rho1, self.rho2 = float(protocol.support_rate(1)), float(protocol.support_rate(2))
        self.q = min(float(protocol.other_item_rate()), self.rho1)
        self.law = protocol.support_size_law()
        # the tests an honest device can fail, each taking an equal share of alpha
        fires = ["one-item"] + (["two-items"] if self.rho2 > 0 else []) \
            + (["support-size"] if self.law is not None else []) \
            + (["population"] if population and self.rho2 > 0 and self.k > 2 else [])
        self.share = self.alpha / len(fires)
        self.fires = tuple(fires)
        self.pairs = self.k * (self.k - 1) // 2

    @lru_cache(maxsize=None)
    def thresholds(self, reports):
        """{test: threshold} for a device with ``reports`` reports: one-item t1, two-items t2,
        population s (its membership count), support-size (lo, hi) (the band of totals at which
        it does not fire); see the module docstring."""
        e, a = reports, self.share
        ok = np.flatnonzero(self.one_item(e) <= a)
        out = {"one-item": int(ok[0]) if ok.size else e + 1,
               "two-items": tail_threshold(e, self.rho2, self.pairs, a)}
        if "population" in self.fires:
            out["population"] = tail_threshold(e, self.rho2, 1, a)
        if self.law is not None:
            pmf = self.size_pmf(e)
            cdf, sf = np.cumsum(pmf), np.cumsum(pmf[::-1])[::-1]
            lo_ok = np.flatnonzero(2 * cdf > a)
            hi_ok = np.flatnonzero(2 * sf > a)
            out["support-size"] = (int(lo_ok[0]) if lo_ok.size else 0, int(hi_ok[-1]) if hi_ok.size else pmf.size)
        return out

    @lru_cache(maxsize=None)
    def one_item(self, reports):
        """(reports + 2,) the one-item test's bound on P[max_v N_v >= t], t = 0 .. reports + 1."""
        return one_item_bound(reports, self.rho1, self.q, self.k)

    @lru_cache(maxsize=None)
    def size_pmf(self, reports):
        """The exact law of the items ``reports`` honest reports support in all (an array indexed by the
        total): the convolution of Binomial(reports * trials, rate) over :meth:`support_size_law`."""
        pmf = np.ones(1)
        for trials, rate in self.law:
            n = reports * int(trials)
            pmf = fftconvolve(pmf, stats.binom.pmf(np.arange(n + 1), n, rate))
        pmf = np.clip(pmf, 0, None)
        return pmf / pmf.sum()

    def size_p(self, total, reports):
        pmf = self.size_pmf(reports)
        total = int(min(max(total, 0), pmf.size - 1))
        return float(min(1.0, 2 * min(pmf[:total + 1].sum(), pmf[total:].sum())))

    def statistics(self, supports):
        """Per device of ``supports`` (bool (D, E, k): D devices' E reports each): a dict of arrays
        "one-item" (D,) max_v N_v and its item, "two-items" (D,) the largest N_vw among the items
        with N_v >= min(t2, s) (exact whenever it reaches t2 or s) and its pair, "total" (D,)
        items supported in all, and "pairs": per device the pairs with N_vw >= s (population)."""
        supports = np.asarray(supports, dtype=bool)
        d, e, _ = supports.shape
        th = self.thresholds(e)
        counts = supports.sum(axis=1, dtype=np.int32)
        one = counts.max(axis=1)
        one_item = counts.argmax(axis=1)
        two = np.zeros(d, dtype=np.int64)
        two_items = np.zeros((d, 2), dtype=np.int64)
        low = min(th["two-items"], th.get("population", th["two-items"]))
        members = [()] * d
        for i in np.flatnonzero((counts >= max(low, 1)).sum(axis=1) >= 2):
            cand = np.flatnonzero(counts[i] >= max(low, 1))
            sub = supports[i][:, cand].astype(np.int32)
            co = np.triu(sub.T @ sub, 1)
            a, b = np.unravel_index(np.argmax(co), co.shape)
            two[i], two_items[i] = co[a, b], (cand[a], cand[b])
            if "population" in th:
                ia, ib = np.nonzero(co >= th["population"])
                members[i] = tuple(((int(cand[x]), int(cand[y])), int(co[x, y])) for x, y in zip(ia, ib))
        return {"one-item": one, "one-item-item": one_item, "two-items": two, "two-items-pair": two_items,
                "total": counts.sum(axis=1), "pairs": members}

    def device_evidence(self, device_id, stat, i, reports):
        """[Evidence] of device ``i`` of :meth:`statistics`' ``stat`` that fails a per-device test."""
        th, a, out = self.thresholds(reports), self.share, []
        n1 = int(stat["one-item"][i])
        p1 = float(self.one_item(reports)[n1])
        if p1 <= a:
            out.append(Evidence(device_id=device_id, test="one-item", statistic=n1, threshold=th["one-item"],
                                p_value=p1, alpha=a, items=(int(stat["one-item-item"][i]),), reports=reports))
        n2 = int(stat["two-items"][i])
        p2 = tail_p(n2, reports, self.rho2, self.pairs)
        if n2 >= th["two-items"] and p2 <= a:
            out.append(Evidence(device_id=device_id, test="two-items", statistic=n2, threshold=th["two-items"],
                                p_value=p2, alpha=a, items=tuple(int(v) for v in stat["two-items-pair"][i]),
                                reports=reports))
        if self.law is not None:
            total = int(stat["total"][i])
            ps = self.size_p(total, reports)
            if ps <= a:
                out.append(Evidence(device_id=device_id, test="support-size", statistic=total,
                                    threshold=list(th["support-size"]), p_value=ps, alpha=a, reports=reports))
        return out


@dataclass
class Suspects:
    """The result of :func:`scan`: ``flagged`` {device_id: [Evidence]}, the devices tested, the
    pairs the population test flagged, and the tests' parameters."""
    protocol: str
    alpha: float
    devices: int
    flagged: dict = field(default_factory=dict)
    pairs: list = field(default_factory=list)
    tests: tuple = ()
    memoized: bool = False

    def to_dict(self):
        return {"protocol": self.protocol, "alpha": self.alpha, "devices": self.devices,
                "memoized": self.memoized, "tests": list(self.tests),
                "flagged": len(self.flagged),
                "suspects": [{"device_id": d, "evidence": [ev.to_dict() for ev in evs]}
                             for d, evs in sorted(self.flagged.items())],
                "population_pairs": self.pairs}


def scan(protocol, devices, alpha=DEFAULT_ALPHA, memoized=False):
    """Test every device's reports.

    Parameters
    ----------
    protocol : mss_protocol.base.Protocol
    devices : iterable of (device_id, supports)
        Each device's reports as bool (E_d, k) (:meth:`Protocol.supported_items` of its stored
        reports, one row a report); devices with equal E_d are tested together.
    alpha : float
        False-alarm rate per honest device.
    memoized : bool
        The devices memoize: identical reports of one device are one draw (tested once).

    Returns
    -------
    Suspects
    """
    test = DeviceTest(protocol, alpha)
    groups = {}
    for device_id, supports in devices:
        supports = np.asarray(supports, dtype=bool)
        if memoized and len(supports):
            supports = np.unique(supports, axis=0)
        if len(supports):
            groups.setdefault(len(supports), []).append((device_id, supports))
    out = Suspects(protocol=protocol.name, alpha=test.alpha, devices=sum(map(len, groups.values())),
                   tests=test.fires, memoized=memoized)
    by_pair = {}  # (v, w) -> [(device_id, reports)] of devices reaching the population count
    population = "population" in test.fires
    for e, group in sorted(groups.items()):
        step = max(1, CHUNK_CELLS // (e * test.k))
        for lo in range(0, len(group), step):
            part = group[lo:lo + step]
            stat = test.statistics(np.stack([s for _, s in part]))
            for i, (device_id, _) in enumerate(part):
                evidence = test.device_evidence(device_id, stat, i, e)
                if evidence:
                    out.flagged[device_id] = evidence
                if population:
                    for pair, count in stat["pairs"][i]:
                        by_pair.setdefault(pair, []).append((device_id, e, count))
    if population and by_pair:
        flag_population(test, groups, by_pair, out)
    return out


def flag_population(test, groups, by_pair, out):
    """The population test (module docstring) over the pairs some device reached s on: devices are
    grouped by their report count, and the pair's count of devices is compared with the sum of
    binomials of each group (its mean and a Poisson-binomial tail by convolution)."""
    pis = {e: float(stats.binom.sf(test.thresholds(e)["population"] - 1, e, test.rho2)) for e in groups}
    law = np.ones(1)
    for e, group in groups.items():
        n = len(group)
        law = np.convolve(law, stats.binom.pmf(np.arange(n + 1), n, pis[e]))
    tail = np.cumsum(law[::-1])[::-1]  # P[D >= d]
    flagged = []
    for pair, members in sorted(by_pair.items()):
        d = len(members)
        p = float(min(1.0, test.pairs * tail[min(d, tail.size - 1)]))
        if p <= test.alpha:
            flagged.append((pair, members, p))
    # a device is named on a flagged pair when its own count is beyond chance for ANY of the F pairs
    # flagged (Bonferroni over them: an honest device's share of alpha holds however many there are);
    # its evidence is its strongest flagged pair (the largest count)
    named = {}
    for pair, members, p in flagged:
        out.pairs.append({"items": list(pair), "devices": len(members), "p_value": p})
        for device_id, e, count in members:
            if count >= population_threshold(test, e, len(flagged)) and count > named.get(device_id, (0,))[0]:
                named[device_id] = (count, pair, p, e)
    for device_id, (count, pair, p, e) in named.items():
        out.flagged.setdefault(device_id, []).append(
            Evidence(device_id=device_id, test="population", statistic=count,
                     threshold=population_threshold(test, e, len(flagged)), p_value=p, alpha=test.share, items=pair,
                     reports=e))


@lru_cache(maxsize=4096)
def population_threshold(test, reports, pairs):
    """The count at which a device of ``reports`` reports is named on one of ``pairs`` flagged pairs."""
    return tail_threshold(reports, test.rho2, pairs, test.share)


def store_devices(store, protocol):
    """(device_id, bool (E_d, k)) of each device of ``store`` (its accepted reports, by epoch).

    A shuffled store names no device: nothing to test per device (StoreError-free: empty)."""
    from mss_aggregator.collect.store import SHUFFLER

    if store.mode == SHUFFLER:
        return
    rows = store.accepted_reports()
    current, rowset = None, []
    for row in rows + [(None, None, None, None)]:
        device = row[0]
        if device != current and rowset:
            j = np.array([r[2] for r in rowset], dtype=np.int64)
            blobs = [bytes(r[3]) for r in rowset]
            sizes = np.array([len(b) // 4 for b in blobs], dtype=np.int64)
            members = np.frombuffer(b"".join(blobs), dtype="<u4").astype(np.int64)
            yield current, protocol.supported_items(j, members, sizes)
            rowset = []
        current = device
        if device is not None:
            rowset.append(row)


def suspects(store, alpha=DEFAULT_ALPHA):
    """:class:`Suspects` of a store (``mss suspects --store S``): every device's accepted reports
    tested, memoized stores on each device's distinct reports.

    Parameters
    ----------
    store : mss_aggregator.collect.store.Store
    alpha : float
        False-alarm rate per honest device (:data:`DEFAULT_ALPHA`).
    """
    protocol = registry.from_config(store.cfg)
    memoized = store.memoized()
    return scan(protocol, store_devices(store, protocol), alpha=alpha, memoized=bool(memoized))
