"""Reconstruction attacks: exact success from the channel, the real clients,
and the ceilings.

* Exact values: each closed form / output enumeration equals the Bayes and
  paper-rule success computed from the exact output distribution of the
  real client code (tests/channel.py), in Fractions, to 1e-12.
* Empirical runs of the real clients agree with the exact values: |z| <= 4.4
  per comparison (two-sided 1e-5), 32 comparisons: false-alarm rate < 4e-4.
* Ceilings: no protocol's exact Bayes success exceeds the eps-LDP ceiling
  for its prior (nor the ReRo bound); GRR attains it under a uniform prior;
  the general-prior ceiling equals the linear program over all channels.
"""
import itertools
import math

import numpy as np
import pytest
from scipy.linalg import hadamard
from scipy.optimize import linprog

from channel import enumerate_outputs
from mss_aggregator.distributions import parse
from mss_aggregator.privacy import ceilings
from mss_aggregator.privacy.attacks import Reporting, longitudinal, single_report
from mss_aggregator.privacy.model import channel
from mss_protocol.channel import subset_bayes
from mss_protocol.olh import OLH, OLHChannel

ALL = ("mss", "ss", "grr", "rappor", "sue", "olh", "hr", "pgr")
ENUMERABLE = ("mss", "ss", "grr", "rappor", "sue")  # clients without rejection loops or 10^9 seeds


class ToyOLH(OLH):
    """OLH with hash prime 17, so its 16 * 17 seeds can be enumerated."""
    P = 17


def _channel(name, k, eps):
    return OLHChannel(ToyOLH(k, eps)) if name == "olh-toy" else channel(name, k, eps)


def _priors(k):
    rng = np.random.default_rng(k)
    return {"uniform": parse("uniform", k), "zipf": parse("zipf:1.3", k), "spike": parse("spike", k),
            "random": rng.dirichlet(np.full(k, 0.7))}


def _law(ch):
    """The exact output law of the real client, one {output key: probability} per item (it holds
    no prior: enumerated once a channel, for every prior)."""
    return [enumerate_outputs(lambda rng, x=x: ch.key(ch.client(x, rng))) for x in range(ch.k)]


def _enumerated(ch, law, prior):
    """(Bayes, paper-rule) success from ``law``, the exact output law of the real client (:func:`_law`)."""
    reports = {}
    for d in law:
        reports.update(d)
    bayes = paper = 0.0
    for y in reports:
        report = _from_key(ch, y)
        bayes += max(prior[x] * float(d.get(y, 0)) for x, d in enumerate(law))
        mask = ch.support(report)[0]
        for x, d in enumerate(law):
            if y in d:
                if ch.name in ("mss", "ss"):  # uniform residue, then uniform preimage
                    j, z = report
                    m = ch.cfg.moduli[j]
                    hit = (x % m in set(z)) / (len(z) * ((ch.k - 1 - x % m) // m + 1))
                else:
                    hit = mask[x] / mask.sum() if mask.any() else 1 / ch.k
                paper += prior[x] * float(d[y]) * hit
    return bayes, paper


def _from_key(ch, key):
    if isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], bytes):
        return key[0], np.frombuffer(key[1], dtype=np.int64)
    return key


@pytest.mark.parametrize("name", ENUMERABLE + ("olh-toy",))
@pytest.mark.parametrize("k,eps", [(5, 0.5), (8, 1.0), (8, 3.0)])
def test_exact_equals_enumerated_client(name, k, eps):
    ch = _channel(name, k, eps)
    law = _law(ch)
    for label, prior in _priors(k).items():
        bayes, paper = _enumerated(ch, law, prior)
        assert ch.bayes_exact(prior) == pytest.approx(bayes, abs=1e-12), label
        assert ch.paper_exact(prior) == pytest.approx(paper, abs=1e-12), label


def test_subset_bayes_equals_brute_force():
    rng = np.random.default_rng(3)
    for m, omega in [(7, 1), (7, 3), (9, 2), (9, 4), (10, 5)]:
        w, p = rng.random(m), 0.3 + 0.4 * rng.random()
        a, b = p / math.comb(m - 1, omega - 1), (1 - p) / math.comb(m - 1, omega)
        brute = sum(max(a * max(w[list(z)]), b * max(np.delete(w, list(z))))
                    for z in itertools.combinations(range(m), omega))
        assert subset_bayes(w, omega, p) == pytest.approx(brute, rel=1e-12)


def test_membership_sets_match_their_definitions():
    """HR's sets are the +1 entries of the Sylvester-Hadamard matrix; PGR's are
    the points orthogonal to the item in F_q^t."""
    hr = channel("hr", 20, 1.0)
    H = hadamard(hr.n_outputs)
    assert np.array_equal(hr.members(np.arange(hr.n_outputs)), H[:, 1:21] == 1)
    pgr = channel("pgr", 30, 2.0)
    o = pgr.oracle
    dots = np.array([[int(np.dot(o.coords[u], o.coords[v])) % o.field == 0 for v in range(30)]
                     for u in range(o.K)])
    assert np.array_equal(pgr.members(np.arange(o.K)), dots)


def _z(hits, n, p):
    return (hits / n - p) / math.sqrt(max(p * (1 - p), 1e-12) / n)


@pytest.mark.parametrize("name", ("mss", "ss", "grr", "rappor", "sue", "olh-toy", "hr", "pgr"))
def test_empirical_attack_agrees_with_exact(name):
    k, eps, n = 16, 1.0, 20000
    ch = _channel(name, k, eps)
    for label in ("uniform", "zipf"):
        prior = _priors(k)[label]
        r = single_report(ch, prior, n, seed=7)
        assert abs(_z(r["bayes"], n, ch.bayes_exact(prior))) <= 4.4, label
        assert abs(_z(r["paper"], n, ch.paper_exact(prior))) <= 4.4, label


@pytest.mark.parametrize("k", [16, 64, 256])
def test_no_protocol_exceeds_the_ceiling(k):
    for eps in (0.5, 1.0, 2.0, 4.0):
        for label, prior in _priors(k).items():
            ceiling, rero = ceilings.ldp_prior(prior, eps), ceilings.rero(prior, eps)
            assert ceilings.no_information(prior) <= ceiling <= rero + 1e-15
            names = [n for n in ALL if n != "olh"] + (["olh-toy"] if k <= ToyOLH.P else [])
            for name in names:
                ch = _channel(name, k, eps)
                assert ch.eps_effective <= eps
                b = ch.bayes_exact(prior)
                assert b <= ceiling + 1e-12, (name, eps, label)
                assert ch.paper_exact(prior) <= b + 1e-12, (name, eps, label)  # Bayes is optimal


@pytest.mark.parametrize("k", [2, 16, 1024])
def test_grr_attains_the_uniform_ceiling(k):
    for eps in (0.5, 1.0, 3.0):
        grr = channel("grr", k, eps)
        prior = np.full(k, 1 / k)
        b = grr.bayes_exact(prior)
        assert b == pytest.approx(ceilings.ldp_uniform(k, grr.eps_effective), rel=1e-9)
        assert b <= ceilings.ldp_uniform(k, eps)


def _lp_optimum(prior, eps):
    """max sum_y pi(y) P[y|y] over all eps-LDP channels with outputs = guesses."""
    k = len(prior)
    idx = {(y, x): y * k + x for y in range(k) for x in range(k)}  # P[y | x]
    c = np.zeros(k * k)
    for y in range(k):
        c[idx[y, y]] = -prior[y]
    rows = []
    for y in range(k):
        for x in range(k):
            for x2 in range(k):
                if x != x2:
                    row = np.zeros(k * k)
                    row[idx[y, x]], row[idx[y, x2]] = 1, -math.exp(eps)
                    rows.append(row)
    eq = np.zeros((k, k * k))
    for x in range(k):
        for y in range(k):
            eq[x, idx[y, x]] = 1
    res = linprog(c, A_ub=np.array(rows), b_ub=np.zeros(len(rows)), A_eq=eq, b_eq=np.ones(k),
                  bounds=(0, 1))
    return -res.fun


def test_prior_ceiling_is_the_linear_program_optimum():
    rng = np.random.default_rng(5)
    for k in (2, 3, 4, 5):
        for eps in (0.3, 1.0, 2.5):
            prior = rng.dirichlet(np.ones(k))
            assert ceilings.ldp_prior(prior, eps) == pytest.approx(_lp_optimum(prior, eps), abs=1e-7)


def test_longitudinal_fresh_reports_compose_and_memoized_stay_flat():
    """k = 16, eps = 1, 60 devices.  Fresh reports: after 300 of them the
    product attack beats any single-report attack (whose success is at most
    the ceiling 0.153): >= 30 hits would happen with probability < 1e-9 under
    Binomial(60, 0.153).  Memoized reports: the same hits at every T, exactly."""
    prior = parse("uniform", 16)
    assert ceilings.ldp_uniform(16, 1.0) < 0.154
    for name in ("grr", "mss"):
        ch = channel(name, 16, 1.0)
        fresh = longitudinal(ch, prior, [1, 300], 60, seed=2)
        assert fresh[1] >= 30 and fresh[1] > fresh[0], name
        memo = longitudinal(ch, prior, [1, 10, 100], 60, seed=2, reporting=Reporting(memoize=True))
        assert memo[0] == memo[1] == memo[2], name


def test_longitudinal_horizons_may_repeat():
    ch = channel("grr", 16, 1.0)
    hits = longitudinal(ch, parse("uniform", 16), [5, 1, 5, 1], 30, seed=3)
    assert len(hits) == 2 and list(hits) == list(longitudinal(ch, parse("uniform", 16), [1, 5], 30, seed=3))
