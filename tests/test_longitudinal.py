"""The longitudinal attacker against memoized, budgeted and IRR fleets, and linkability.

A device holds a fixed value and sends T reports (T up to 1000).  The
Bayes-optimal product attacker (:func:`mss_aggregator.privacy.attacks.longitudinal`)
must never beat the eps-LDP ceiling (:mod:`mss_aggregator.privacy.ceilings`) at the
epsilon the fleet actually spends: eps for a memoized draw (with or without an
instantaneous layer: the attacker then uses the exact composed likelihood
sum_{y'} P_prr(y'|x) prod_t P_irr(y_t|y')), B x eps for a budget that allows B
fresh draws in the horizon.  Controls show each check can fail: fresh reports,
and an IRR fleet that re-draws its permanent response, go far above it.

Statistics (fixed seeds, so a run is reproducible): a success "exceeds the
ceiling" when its one-sided Clopper-Pearson lower bound at alpha = 1e-4 is above
it, so a correct fleet is flagged with probability <= 1e-4 per check (<= 0.4% over
the 39 checks here).  Measured link rates are compared with the exact ones at
|z| <= 4.4 (two-sided false alarm 1.1e-5 per comparison, 16 comparisons).
"""
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from mss_aggregator.distributions import parse
from mss_aggregator.privacy import attacks, ceilings
from mss_aggregator.privacy.model import channel, prr_channel
from mss_aggregator.privacy.empirical import clopper_pearson

HORIZONS = (1, 10, 100, 1000)
ALPHA = 1e-4
Z = 4.4


def lower(hits, n):
    """One-sided (1 - ALPHA) Clopper-Pearson lower bound."""
    return clopper_pearson(int(hits), int(n), 2 * ALPHA)[0]


def upper(hits, n):
    return clopper_pearson(int(hits), int(n), 2 * ALPHA)[1]


def assert_under(hits, trials, ceiling, what):
    for h, c, t in zip(hits, ceiling, HORIZONS):
        assert lower(h, trials) <= c, f"{what}: T={t}: {h}/{trials} above the ceiling {c:.4f}"


@pytest.mark.parametrize("name", ["grr", "mss", "olh", "hr"])
def test_memoized_fleet_stays_under_the_ceiling_at_epsilon(name):
    """T identical re-sends of one draw are one eps-LDP release whatever T."""
    k, eps, trials = 8, 1.0, 400
    prior = parse("zipf:1.1", k)
    ch = channel(name, k, eps)
    hits = attacks.longitudinal(ch, prior, HORIZONS, trials, seed=3, reporting=attacks.Reporting(memoize=True))
    assert_under(hits, trials, [ceilings.ldp_prior(prior, eps)] * 4, f"{name} memoize")
    assert len(set(hits)) == 1  # the copies tell it nothing


def test_schedule_of_a_budget_keeps_every_window():
    """B draws per window of W epochs: no W consecutive epochs hold more than B, and
    each epoch that could draw does (greedy, as the board's ledger)."""
    fresh = attacks.schedule(40, draws=2, window=5)
    assert np.flatnonzero(fresh).tolist() == [0, 1, 5, 6, 10, 11, 15, 16, 20, 21, 25, 26, 30, 31, 35, 36]
    for w in range(36):
        assert fresh[w:w + 5].sum() <= 2
    fresh = attacks.schedule(100, draws=3, window=7.5)  # a window of 7.5 periods
    for w in range(100):
        assert fresh[w:w + 8].sum() <= 3  # epochs w..w+7 are 7 periods apart: within one window
    assert attacks.schedule(10, memoize=True, draws=3, window=5).tolist() == [True] + [False] * 9
    assert not attacks.schedule(10, draws=0, window=5).any()


def test_budgeted_fleet_stays_under_the_ceiling_at_its_draws():
    """Fresh reports within a budget of B = 2 draws per 400 epochs: after T reports
    (F(T) draws: 2, 2, 2, 6) the attacker stays under the ceiling at F(T) eps; the same
    fleet without the budget goes far above it (the check can fail)."""
    k, eps, trials = 16, 0.7, 400
    prior = parse("uniform", k)
    ch = channel("grr", k, eps)
    fresh = attacks.schedule(HORIZONS[-1], draws=2, window=400)
    draws = [int(fresh[:t].sum()) for t in HORIZONS]
    assert draws == [1, 2, 2, 6]
    hits = attacks.longitudinal(ch, prior, HORIZONS, trials, seed=5, reporting=attacks.Reporting(fresh=fresh))
    assert_under(hits, trials, [ceilings.ldp_prior(prior, d * eps) for d in draws], "budgeted grr")
    # control: unbudgeted fresh reports beat the budget's ceiling at T = 100
    mss = channel("mss", k, eps)
    free = attacks.longitudinal(mss, prior, [100], 200, seed=5)
    assert lower(free[0], 200) > ceilings.ldp_prior(prior, 2 * eps)


@pytest.mark.parametrize("name", ["grr", "olh", "hr", "pgr"])
def test_irr_fleet_stays_under_the_ceiling_at_the_prr_epsilon(name):
    """Memoized PRR + a fresh IRR on each report: any number of reports is one
    eps-LDP release (post-processing of y').  The attacker's exact composed
    likelihood recovers y' as T grows, so at T = 1000 it reaches the PRR's own
    single-report success (exact where the channel is enumerable): it is strong."""
    k, eps, e1, trials = 8, 1.0, 1.0, 300
    prior = parse("zipf:1.1", k)
    ch = channel(name, k, eps)
    irr = attacks.Irr.for_epsilon(attacks.n_out(ch), e1)
    hits = attacks.longitudinal(ch, prior, HORIZONS, trials, seed=7, reporting=attacks.Reporting(memoize=True, irr=irr))
    assert_under(hits, trials, [ceilings.ldp_prior(prior, eps)] * 4, f"{name} memoize+irr")
    exact = ch.bayes_exact(prior)
    if exact is not None:
        assert lower(hits[-1], trials) <= exact <= upper(hits[-1], trials)


def test_irr_that_redraws_its_prr_goes_above_the_ceiling():
    """Control: the same layers without the memo (a fresh PRR each report) leak
    like fresh reports: at T = 1000 far above the ceiling at eps."""
    k, eps, trials = 8, 1.0, 100
    prior = parse("uniform", k)
    ch = channel("grr", k, eps)
    irr = attacks.Irr.for_epsilon(k, 1.0)
    hits = attacks.longitudinal(ch, prior, [1000], trials, seed=7, reporting=attacks.Reporting(irr=irr))
    assert lower(hits[0], trials) > ceilings.ldp_prior(prior, eps)


def test_irr_likelihood_is_the_exact_composed_one():
    """irr_loglik against the composed likelihood summed over y' by brute force
    (grr k = 5, three reports of one draw)."""
    ch = channel("grr", 5, 1.0)
    irr = attacks.Irr.for_epsilon(5, 0.5)
    reports = [2, 2, 4]
    brute = np.array([math.log(sum(
        (ch.oracle.p if y == x else ch.oracle.q) * math.prod(irr.p1 if r == y else irr.q1 for r in reports)
        for y in range(5))) for x in range(5)])
    got = attacks.irr_loglik(ch, irr, 2, {2: 2, 4: 1})
    assert np.allclose(got - got[0], brute - brute[0], atol=1e-12)


def test_link_exact_by_enumeration():
    """P(identical | same device) and P(identical | two devices) for grr k = 3 with
    an IRR, enumerated in Fractions over values, draws and IRR outputs."""
    k, prior = 3, [Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)]
    ch = channel("grr", k, 1.0)
    irr = attacks.Irr.for_epsilon(k, 0.8)
    p, q = Fraction(ch.oracle.threshold, 1 << 30), (1 - Fraction(ch.oracle.threshold, 1 << 30)) / (k - 1)
    p1 = Fraction(irr.threshold, 1 << 30)
    q1 = (1 - p1) / (k - 1)
    prr = lambda y, x: p if y == x else q  # noqa: E731
    ir = lambda r, y: p1 if r == y else q1  # noqa: E731
    same = sum(prior[x] * prr(y, x) * ir(r, y) ** 2 for x, y, r in itertools.product(range(k), repeat=3))
    marg = [sum(prior[x] * prr(y, x) * ir(r, y) for x in range(k) for y in range(k)) for r in range(k)]
    diff = sum(m * m for m in marg)
    got = attacks.link_exact(ch, np.array([float(v) for v in prior]), irr)
    assert got["tpr"] == pytest.approx(float(same), abs=1e-12)
    assert got["fpr"] == pytest.approx(float(diff), abs=1e-12)


@pytest.mark.parametrize("name", ["grr", "olh", "hr", "pgr"])
def test_linkability_measured_matches_exact_and_the_irr_lowers_it(name):
    """Memoized bodies link (advantage 1 - collision rate); a fresh IRR per report
    cuts the advantage to p1^2 + (1-p1)^2/(n-1) - sum m'^2.  Measured on the real
    clients (the device's grr for the IRR) within |z| <= 4.4 of the exact rates."""
    k, eps, pairs = 16, 1.0, 3000
    prior = parse("zipf:1.1", k)
    ch = channel(name, k, eps)
    irr = attacks.Irr.for_epsilon(attacks.n_out(ch), 1.0)
    adv = {}
    for layer in (None, irr):
        exact = attacks.link_exact(ch, prior, layer)
        got = attacks.linkability(ch, prior, pairs, seed=11, irr=layer)
        for rate in ("tpr", "fpr"):
            sd = math.sqrt(max(exact[rate] * (1 - exact[rate]), 1e-12) / pairs)
            assert abs(got[rate] - exact[rate]) <= Z * sd + 1e-12, (name, layer, rate, got[rate], exact[rate])
        adv[layer is None] = exact["advantage"], got["advantage"]
    (with_irr, measured_irr), (without, measured) = adv[False], adv[True]
    assert without > 0.7 and with_irr < 0.2 * without  # the exact drop, from p1
    assert measured - measured_irr > 0.5


def test_prr_channel_of_a_config_with_an_irr():
    """A config's instantaneous layer (helper A's OracleConfig irr_epsilon) is split off
    for the longitudinal attack: the permanent draw's channel and the layer's threshold."""
    from mss_protocol.oracle_config import OracleConfig

    try:
        cfg = OracleConfig("grr", 8, 2.0, irr_epsilon=1.0)
    except TypeError:
        pytest.skip("OracleConfig has no irr_epsilon yet")
    ch, irr = prr_channel("grr", 8, 2.0, cfg)
    assert irr is not None and irr.threshold == cfg.irr_threshold and irr.n == 8
    assert ch.eps_effective == pytest.approx(channel("grr", 8, 2.0).eps_effective)


class _OneClientCallAReport:
    """``ch`` without its batch draw: :func:`attacks.longitudinal` then calls the real
    integer client once a report."""

    def __init__(self, ch):
        self._ch = ch

    def __getattr__(self, name):
        if name == "sample_logliks":
            raise AttributeError(name)
        return getattr(self._ch, name)


@pytest.mark.parametrize("name,k,eps,prior,device_seed", [
    ("mss", 64, 1.0, "uniform", False), ("ss", 16, 2.0, "zipf:1.1", False), ("mss", 24, 3.0, "zipf:1.1", False),
    ("olh", 32, 2.0, "zipf:1.1", False), ("olh", 12, 3.0, "uniform", True), ("hr", 16, 2.0, "zipf:1.1", False),
    ("pgr", 12, 2.0, "uniform", False)])
def test_batch_draws_attack_as_the_real_client_does(name, k, eps, prior, device_seed):
    """MSS, SS, OLH, HR and PGR draw every device's reports at once from the client's
    exact law (OLH with ``seed: device``: one seed a device); their attacker succeeds as
    often as against one real client call a report (two-proportion |z| <= Z at T = 1, 5,
    30, 1000 devices each; 21 comparisons), and at T = 1 as the exact single-report
    success where it is computed (|z| <= Z)."""
    ch, pi = channel(name, k, eps, None), parse(prior, k)
    trials, horizons = 1000, [1, 5, 30]
    batch = attacks.longitudinal(ch, pi, horizons, trials, seed=4,
                                 reporting=attacks.Reporting(device_seed=device_seed)) / trials
    client = attacks.longitudinal(_OneClientCallAReport(ch), pi, horizons, trials, seed=4,
                                  reporting=attacks.Reporting(device_seed=device_seed)) / trials
    pooled = (batch + client) / 2
    se = np.sqrt(np.maximum(pooled * (1 - pooled), 1 / trials) * 2 / trials)
    assert np.all(np.abs(batch - client) <= Z * se), (batch, client)
    exact = ch.bayes_exact(pi)
    if exact is not None:
        assert abs(batch[0] - exact) <= Z * math.sqrt(exact * (1 - exact) / trials), (batch[0], exact)
