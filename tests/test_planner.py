"""Planner: accuracy target, exact MSE, bit budgets, caching."""
import json

import numpy as np
import pytest

from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import PlanError, cache_dir, plan
from mss_protocol.mss.residues import residue_matrix
from mss_protocol.mss.variance import block_weights, predicted_mse

EPS = [0.5, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("k", [64, 1024, 22000])
@pytest.mark.parametrize("eps", EPS)
def test_variance_ratio_target(k, eps):
    r = plan(k, eps)
    assert r["variance_ratio_vs_ss"] <= 1.10
    assert r["eps_effective"] <= eps
    assert r["predicted_mse_rel_error"] <= 0.01


@pytest.mark.parametrize("k,eps,moduli", [(64, 1.0, [37, 41, 43, 47]), (300, 2.0, [101, 103, 107])])
def test_predicted_mse_equals_dense_trace(k, eps, moduli):
    cfg = MssConfig.build(k, eps, moduli)
    A = residue_matrix(k, cfg.moduli).toarray()
    w = np.repeat(block_weights(cfg, 1000 / cfg.l), cfg.moduli)
    dense = np.trace(np.linalg.inv(A.T @ (w[:, None] * A))) / k
    assert predicted_mse(cfg, 1000)[0] == pytest.approx(dense, rel=1e-10)


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
    r = plan(1024, 4.0, max_bits=64)
    assert r["bits_per_report"]["max"] <= 64
    front = r["frontier"]
    bits = [f["bits_per_report"]["max"] for f in front]
    mses = [f["predicted_mse"] for f in front]
    assert bits == sorted(bits) and mses == sorted(mses, reverse=True)
    assert r["predicted_mse"] == pytest.approx(min(m for b, m in zip(bits, mses) if b <= 64))


def test_impossible_budget_is_a_clear_error():
    with pytest.raises(PlanError, match="fits in 3 bits"):
        plan(1024, 4.0, max_bits=3)


def test_results_are_cached():
    first = plan(512, 2.0)
    files = list(cache_dir().glob("*.json"))
    assert files
    for f in files:  # a doctored cache entry is what a second call returns
        d = json.loads(f.read_text())
        if d["config"]["k"] == 512:
            d["unit_mse"] *= 2
            f.write_text(json.dumps(d))
    assert plan(512, 2.0)["predicted_mse"] == pytest.approx(2 * first["predicted_mse"])
    assert plan(512, 2.0, use_cache=False)["predicted_mse"] == pytest.approx(first["predicted_mse"])
