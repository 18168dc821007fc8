"""The SubsetSelection baseline (one block, m = k) shares the MSS randomiser,
wire format and decoder; its empirical MSE matches the analytic variance
within 15% (n = 10^5, k = 1024; 8 trials give the MSE a relative standard
error of about 2%, so the band is a > 7-sigma margin)."""
import json

import numpy as np
import pytest

from collect_helpers import mss
from mss_protocol.counts import Counts
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.decoder import Decoder
from mss_protocol.mss.sampler import sample_counts
from mss_protocol.subset_selection import ss_p, ss_variance


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_ss_mse_matches_analytic(eps):
    cfg = MssConfig.subset_selection(1024, eps)
    assert cfg.eps_effective <= eps and cfg.name == "ss"
    rng = np.random.default_rng(5)
    values = rng.integers(0, 1024, size=100_000)
    truth = np.bincount(values, minlength=1024) / values.size
    dec = Decoder(cfg)
    mse = np.mean([np.mean((dec.decode(Counts(cfg, *sample_counts(cfg, values, rng))).raw - truth) ** 2)
                   for _ in range(8)])
    w = cfg.omegas[0]
    assert mse == pytest.approx(float(ss_variance(1024, w, ss_p(1024, w, eps), values.size)), rel=0.15)


def test_simulate_ss_json():
    out = mss("simulate", "--k", 256, "--epsilon", 2, "--n", 20000, "--protocol", "ss", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["protocol"] == "ss" and d["bits_per_report"]["max"] == MssConfig.subset_selection(256, 2.0).bits_per_report["max"]


def test_rank_bits_equals_the_exact_binomial():
    """The lgamma fast path of rank_bits is exact: every (m, omega) with m < 300
    (powers of two and near-integers included), 200 random blocks up to 2^20
    with omega up to 5,000, and one k = 2^20, eps = 4 block."""
    import math
    import random

    from mss_protocol.subset_selection import rank_bits

    rng = random.Random(1)
    cases = [(m, w) for m in range(1, 300) for w in range(m + 1)]
    cases += [(m, rng.randrange(1, min(m // 2, 5000) + 1))
              for m in (rng.randrange(1000, 1 << 20) for _ in range(200))]
    cases.append((1048575, 18960))
    assert all(rank_bits(m, w) == (math.comb(m, w) - 1).bit_length() for m, w in cases)
