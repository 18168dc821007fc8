"""No client reveals its input by position (the multi-freq-ldpy SS bug: the
true value listed first).  For every set-valued report (MSS, SS, unary
encodings) the statistic "the first listed element is x1's code" is audited
on the real client output (Clopper-Pearson, alpha = 0.001: a correct client
fails with probability <= 0.1%); an SS client that lists the true value
first is caught.  Single-valued reports (GRR, OLH, HR, PGR) have no order."""
import random

import pytest

from mss_aggregator.privacy.empirical import epsilon_lower_bound
from mss_device.randomiser import privatise
from mss_device.rng import ByteRng
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.wire import WireCodec
from mss_protocol.unary import UnaryEncoding

N, EPS, K = 6000, 1.0, 16
X1, X2 = 3, 9


def _residue_lists(cfg, broken=False):
    codec = WireCodec(cfg)
    mark = bytearray((max(cfg.moduli) + 7) // 8)

    def listed(x, rng, target):
        j = privatise(cfg, x, rng, mark)
        z = list(codec.decode(codec.encode(j, [v for v in range(cfg.moduli[j])
                                                if mark[v >> 3] >> (v & 7) & 1])).subset)
        m = cfg.moduli[j]
        if broken and x % m in z:  # the bug: true value first, as sampled
            z.remove(x % m)
            z.insert(0, x % m)
        return z, target % m  # the target's code in this report's block
    return listed


def _bits(oracle):
    def listed(x, rng, target):
        report = oracle.randomise(x, rng)
        return [v for v in range(oracle.k) if report[v >> 3] >> (v & 7) & 1], target
    return listed


def _bound(listed):
    rng = ByteRng(random.Random(11).randbytes)
    tp = fp = 0
    for _ in range(N):
        z, code = listed(X1, rng, X1)
        tp += bool(z) and z[0] == code
        z, code = listed(X2, rng, X1)
        fp += bool(z) and z[0] == code
    return epsilon_lower_bound(tp, N, fp, N)


@pytest.mark.parametrize("name,listed", [
    ("mss", _residue_lists(MssConfig.build(K, EPS, [11, 13, 15]))),
    ("ss", _residue_lists(MssConfig.subset_selection(K, EPS))),
    ("rappor", _bits(UnaryEncoding(K, EPS, "oue"))),
    ("sue", _bits(UnaryEncoding(K, EPS, "sue"))),
])
def test_no_position_leak(name, listed):
    assert _bound(listed) <= EPS


def test_true_value_first_is_caught():
    assert _bound(_residue_lists(MssConfig.subset_selection(K, EPS), broken=True)) > EPS
