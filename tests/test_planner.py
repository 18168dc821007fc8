"""Planner: accuracy target, exact MSE, bit budgets, caching."""
import itertools
import json
import math
import threading

import numpy as np
import pytest

from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import PlanError, Search, cache_dir, plan
from mss_protocol.mss.residues import residue_matrix
from mss_protocol.mss.variance import block_weights, predicted_mse

EPS = [0.5, 1, 2, 3, 4, 5]


MISSED = pytest.mark.xfail(strict=True, reason="MSS proper is 1.149x SS at k=64, eps=5 once the block-"
                           "assignment variance is counted; mss plan (auto) returns SS there")


# k = 22000 at three budgets (the low, middle and high ends): each plan is a 25-s search on one core,
# and the suite's 10 minutes on two cores cannot take six (docs/benchmarks.md has every epsilon)
@pytest.mark.parametrize("k,eps", [(k, eps) for k in (64, 1024) for eps in EPS if (k, eps) != (64, 5)]
                         + [(22000, eps) for eps in (0.5, 2, 5)] + [pytest.param(64, 5, marks=MISSED)])
def test_variance_ratio_target(k, eps):
    """MSS proper within 10% of SubsetSelection (``mss plan``'s default, auto, may
    return SS instead: test_auto_never_returns_mss_worse_than_ss_in_both)."""
    r = plan(k, eps)
    assert r["eps_effective"] <= eps
    assert r["predicted_mse_rel_error"] <= 0.01
    assert r["variance_ratio_vs_ss"] <= 1.10


def _dense_prediction(cfg, f, n):
    """The decoder's per-item MSE from first principles, densely: the covariance
    of one SubsetSelection report's indicator vector from its enumerated output
    law, summed over a block's reports, pushed through G = M^-1 A^T W; plus the
    multinomial variance of which devices land in which block."""
    k, l = cfg.k, cfg.l
    A = residue_matrix(k, cfg.moduli).toarray()
    n_j = n / l
    w = np.repeat(block_weights(cfg, np.full(l, n_j)), cfg.moduli)
    G = np.linalg.inv(A.T @ (w[:, None] * A)) @ A.T * w
    sigma = np.diag(f) - np.outer(f, f)
    noise, assign = np.zeros((k, k)), -sigma / n
    for j, (m, omega, p) in enumerate(zip(cfg.moduli, cfg.omegas, cfg.p)):
        rows = slice(cfg.offsets[j], cfg.offsets[j + 1])
        g = A[rows] @ f
        cov = np.zeros((m, m))
        for t in range(m):  # Cov(y | true residue t), y = indicator of the reported subset
            mean, second = np.zeros(m), np.zeros((m, m))
            for z in itertools.combinations(range(m), omega):
                prob = p / math.comb(m - 1, omega - 1) if t in z else (1 - p) / math.comb(m - 1, omega)
                y = np.zeros(m)
                y[list(z)] = 1
                mean += prob * y
                second += prob * np.outer(y, y)
            cov += g[t] * (second - np.outer(mean, mean))
        cov_ghat = cov / (n_j * (p - cfg.q[j]) ** 2)
        noise += G[:, rows] @ cov_ghat @ G[:, rows].T
        GA = G[:, rows] @ A[rows]
        assign += (l / n) * GA @ sigma @ GA.T
    return np.trace(noise) / k, np.trace(assign) / k


@pytest.mark.parametrize("k,eps,moduli", [(16, 1.0, [11, 13, 14, 15]), (16, 5.0, [11, 13, 14, 15]),
                                          (30, 2.0, [13, 17, 19, 23])])
def test_predicted_mse_equals_dense_computation(k, eps, moduli):
    cfg = MssConfig.build(k, eps, moduli)
    for f in (np.full(k, 1 / k), np.random.default_rng(k).dirichlet(np.full(k, 0.5))):
        noise, assign = _dense_prediction(cfg, f, 1000)
        parts = predicted_mse(cfg, 1000, f, parts=True)[0]
        assert parts["noise"] == pytest.approx(noise, rel=1e-9)
        assert parts["assignment"] == pytest.approx(assign, rel=1e-9, abs=1e-15)
        assert predicted_mse(cfg, 1000, f)[0] == pytest.approx(noise + assign, rel=1e-9)


@pytest.mark.parametrize("moduli,tol", [
    ([977, 979, 1003, 1005, 1009, 1016, 1019, 1021], 0.003),  # well conditioned
    ([557, 563, 569, 571, 577, 587], 0.01),  # a 468-item component, cond ~ 100
])
def test_stochastic_trace_agrees_with_exact(moduli, tol):
    cfg = MssConfig.build(1024, 1.0, moduli)
    exact, rel0 = predicted_mse(cfg, 1.0)
    approx, rel = predicted_mse(cfg, 1.0, exact_limit=16, rel_tol=tol)
    assert rel0 == 0 and 0 < rel <= tol
    assert approx == pytest.approx(exact, rel=5 * rel)  # 5 sigma: false alarm < 1e-6


def test_bit_budget_is_respected_and_frontier_is_monotone():
    r = plan(256, 4.0, max_bits=24)  # the budget binds: 24 bits against 36 unbudgeted (3 s; k = 512 took 19 s)
    assert r["bits_per_report"]["max"] <= 24
    front = r["frontier"]
    bits = [f["bits_per_report"]["max"] for f in front]
    mses = [f["predicted_mse"] for f in front]
    assert bits == sorted(bits) and mses == sorted(mses, reverse=True)
    assert r["predicted_mse"] == pytest.approx(min(m for b, m in zip(bits, mses) if b <= 24))


def test_impossible_budget_is_a_clear_error():
    with pytest.raises(PlanError, match="fits in 3 bits"):
        plan(1024, 4.0, max_bits=3)


def test_results_are_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("MSS_CACHE_DIR", str(tmp_path))  # its own: the doctored entry must not reach other tests
    first = plan(512, 2.0)
    files = list(cache_dir().glob("*.json"))
    assert files
    for f in files:  # a doctored cache entry is what a second call returns
        d = json.loads(f.read_text())
        if d["config"]["k"] == 512:
            d["unit_mse"] *= 2
            f.write_text(json.dumps(d))
    assert plan(512, 2.0)["predicted_mse"] == pytest.approx(2 * first["predicted_mse"])
    assert plan(512, 2.0, how=Search(use_cache=False))["predicted_mse"] == pytest.approx(first["predicted_mse"])


def test_one_search_a_key_when_two_plan_it_at_once(tmp_path, monkeypatch):
    """Two threads planning the same key (as two test workers or two ``mss plan`` runs
    would): one searches, the other waits on the entry's lock and reads its result."""
    monkeypatch.setenv("MSS_CACHE_DIR", str(tmp_path))
    searched, results = [], []

    def one(name):
        results.append(plan(256, 2.0, how=Search(progress=lambda *a: searched.append(name))))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(searched)) == 1 and searched
    assert results[0] == results[1]


def test_a_cache_without_a_usable_lock_is_still_read(tmp_path, monkeypatch):
    """Where the lock file cannot be opened (a read-only cache folder; here a folder in
    its place, since root may write anywhere) the cache entry is still read."""
    monkeypatch.setenv("MSS_CACHE_DIR", str(tmp_path))
    first = plan(64, 2.0)
    for lock in tmp_path.glob("*.lock"):
        lock.unlink()
        lock.mkdir()
    assert plan(64, 2.0) == first


@pytest.mark.parametrize("k", [4, 16, 64, 256])
@pytest.mark.parametrize("eps", [0.5, 1, 2, 4, 5, 8])
def test_auto_never_returns_mss_worse_than_ss_in_both(k, eps):
    """With SubsetSelection among the candidates the planner returns SS (its
    one-block case) wherever the best MSS configuration is worse in MSE and
    bits; ``protocol="mss"`` still returns MSS proper."""
    auto, mss = plan(k, eps, protocol="auto"), plan(k, eps, protocol="mss")
    ss = plan(k, eps, protocol="ss")
    assert ss["protocol"] == "ss" and mss["protocol"] == "mss" and len(mss["moduli"]) > 1
    assert auto["predicted_mse"] <= min(mss["predicted_mse"], ss["predicted_mse"]) * (1 + 1e-9)
    if auto["protocol"] == "mss":
        assert (auto["predicted_mse"] < ss["predicted_mse"]
                or auto["bits_per_report"]["max"] < ss["bits_per_report"]["max"])


def test_prior_changes_the_prediction_and_the_cache_key():
    zipf = np.arange(1, 17, dtype=float) ** -1.5
    zipf /= zipf.sum()
    uniform, skewed = plan(16, 4.0), plan(16, 4.0, prior=zipf, prior_label="zipf:1.5")
    assert skewed["prior"] == "zipf:1.5" and uniform["prior"] == "uniform"
    assert skewed["predicted_mse_parts"]["assignment"] != uniform["predicted_mse_parts"]["assignment"]


def test_unidentifiable_moduli_are_never_planned():
    """[3, 4, 7] is pairwise coprime with product 84 >= 16, but its residue
    marginals have rank sum(m_j - 1) + 1 = 12 < 16: the planner must not return
    it (it once did under a 5-bit budget, with a negative predicted MSE)."""
    from mss_protocol.mss.planner import search

    best, scored = search(16, 5.0, max_bits=5)
    assert all(sum(m - 1 for m in c.moduli) + 1 >= 16 and mse > 0 for c, mse, _ in scored)
    assert best[1] > 0


@pytest.mark.parametrize("moduli,refused", [((23, 25, 31, 36, 43, 49), True), ((29, 31, 43, 52, 53), False)])
def test_a_normal_matrix_singular_to_rounding_is_refused_on_any_cpu(moduli, refused):
    """k = 200: with the first set A^T W A has a 2-norm condition number near 1e17 (M^-1 has
    no correct digit; one BLAS kernel's Cholesky failed on it, an AVX-512 one scored it at a
    unit MSE of 1.5e14), with the second ~2e12: refused exactly when cond_2 > 1 / eps_machine."""
    from mss_protocol.mss.linalg import ResidueComponents, SingularError

    cfg = MssConfig.build(200, 2.0, list(moduli), [1] * len(moduli))
    comps = ResidueComponents(200, moduli)
    w = np.repeat(block_weights(cfg, np.full(cfg.l, 1.0 / cfg.l)), moduli)
    M = comps.A.T.toarray() @ (w[:, None] * comps.A.toarray())
    assert (np.linalg.cond(M) > 1 / np.finfo(float).eps) == refused
    if refused:
        with pytest.raises(SingularError, match="singular to rounding"):
            comps.inverse(w)
    else:
        comps.inverse(w)


def test_the_planner_leaves_out_what_no_device_runs():
    """PGR at epsilon 12.5 needs q = 268343 > 2**15 (mss device-sim ran it at 10.5 s a report): left
    out with the reason, never a crash; SubsetSelection above k = 2**23 likewise (SPEC.md section 1)."""
    from mss_protocol.choose import choose

    excluded = {c["protocol"]: c.get("excluded") for c in choose(64, 12.5)["candidates"]}
    assert excluded["pgr"].startswith("q = 268343 > 2**15")
    with pytest.raises(PlanError, match=r"pgr: q = 268343 > 2\*\*15"):
        choose(1024, 12.5, "pgr")
    with pytest.raises(PlanError, match=r"ss: SubsetSelection's modulus k = 8388609 exceeds 2\*\*23"):
        choose((1 << 23) + 1, 4.0, "ss", search=Search(use_cache=False))
