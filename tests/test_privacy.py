"""Exact privacy of the integer implementation, by enumerating the channel."""
import math
from decimal import Decimal, localcontext
from fractions import Fraction
from itertools import combinations

import pytest

from channel import enumerate_reports
from mss_device.encoder import encode
from mss_protocol import privacy
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import plan

# the last two are the SubsetSelection baseline (one block, m = k); the
# enumeration is over exact wire bytes, so an order leak would show here too
SMALL = [(8, 1.0, [5, 7]), (6, 0.5, [5, 4]), (10, 2.0, [7, 9]), (9, 3.0, [5, 7, 8]),
         (7, 1.0, [7]), (9, 0.5, [9])]


def _exp(eps):
    with localcontext() as ctx:
        ctx.prec = 60
        return Fraction(Decimal(eps).exp())


@pytest.mark.parametrize("k,eps,moduli", SMALL)
def test_enumerated_channel_ratio_is_exp_eps_effective(k, eps, moduli):
    cfg = MssConfig.build(k, eps, moduli)
    dists = [enumerate_reports(cfg, x) for x in range(k)]
    for d in dists:
        assert sum(d.values()) == 1
    outputs = set().union(*dists)
    worst = max(max(d.get(y, 0) for d in dists) / min(d.get(y, 0) for d in dists) for y in outputs)
    # The ratio realised by the code equals the analytic one, exactly ...
    assert worst == max(privacy.ratio(m, w, t) for m, w, t in zip(cfg.moduli, cfg.omegas, cfg.thresholds))
    # ... so exp(eps_effective) is the true worst case, and it is within budget.
    assert worst <= _exp(eps)
    assert math.log(worst) == pytest.approx(cfg.eps_effective, rel=1e-12)
    assert cfg.eps_effective <= eps


@pytest.mark.parametrize("k,eps,moduli", SMALL[:2])
def test_enumerated_channel_matches_formula(k, eps, moduli):
    """P[(j, Z) | x] = (1/l) p'/C(m-1, w-1) if x mod m in Z else (1/l)(1-p')/C(m-1, w)."""
    cfg = MssConfig.build(k, eps, moduli)
    for x in range(k):
        d = enumerate_reports(cfg, x)
        for j, (m, w, t) in enumerate(zip(cfg.moduli, cfg.omegas, cfg.thresholds)):
            p = Fraction(t, privacy.ONE)
            for z in combinations(range(m), w):
                mark = bytearray((max(cfg.moduli) + 7) // 8)
                for v in z:
                    mark[v >> 3] |= 1 << (v & 7)
                key = encode(cfg, j, mark, 0, 0)
                want = (p / math.comb(m - 1, w - 1) if x % m in z else (1 - p) / math.comb(m - 1, w))
                assert d.get(key, 0) == want / cfg.l


@pytest.mark.parametrize("k", [64, 1024])
@pytest.mark.parametrize("eps", [0.5, 1, 2, 3, 4, 5])
def test_planned_thresholds_are_maximal_and_within_budget(k, eps):
    cfg = MssConfig.from_dict(plan(k, eps)["config"])
    assert cfg.eps_effective <= eps
    for m, w, t in zip(cfg.moduli, cfg.omegas, cfg.thresholds):
        assert privacy.ratio(m, w, t) <= _exp(eps)
        assert privacy.ratio(m, w, t + 1) > _exp(eps)  # rounding gave away nothing more


def test_config_with_inflated_threshold_is_rejected():
    good = MssConfig.build(64, 1.0, [59, 61, 63]).to_dict()
    bad = dict(good, thresholds=[t + 1 for t in good["thresholds"]])
    with pytest.raises(ValueError, match="exceeds the epsilon budget"):
        MssConfig.from_dict(bad)
