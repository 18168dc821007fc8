"""Reports made by the firmware under MicroPython with its real os.urandom.

* Distribution: 20,000 reports for each of two values are decoded by the
  host's wire decoder and classified by (j, r in Z, r+1 in Z, r+2 in Z),
  whose exact probabilities follow from the integer thresholds and the
  hypergeometric law of uniform fillers.  A chi-square test at alpha =
  0.001 per value (false-alarm rate 0.2% for the test).
* Audit (``mss audit --empirical``'s statistic): the ldp-audit epsilon lower
  bound (Clopper-Pearson, alpha = 0.001, so a correct client fails with
  probability <= 0.1%) from the same reports is <= epsilon; a deliberately
  broken randomiser (always keeps the true residue) is caught.
"""
from collections import Counter

import pytest
from scipy.stats import chisquare

from micropython_runner import run
from mss_aggregator.privacy.empirical import X1, X2, audit_client
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import plan
from mss_protocol.mss.protocol import MssProtocol
from mss_protocol.mss.wire import WireCodec
from mss_protocol.privacy import ONE

N = 20000  # X1 = 0, X2 = 1: different residues in every block

GENERATE = r"""
import json, sys
from mss_device.params import Params
from mss_node.reporter import Reporter
p = Params(json.load(open(sys.argv[1])))
if sys.argv[4] == "broken":
    p.thresholds = [1 << 30] * len(p.moduli)  # always keep the true residue
r = Reporter(p)
x = int(sys.argv[2])
for i in range(int(sys.argv[3])):
    print(r.report(x, 1, i & 0xFFFF).hex())
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    cfg = MssConfig.from_dict(plan(64, 1.0)["config"])
    path = tmp_path_factory.mktemp("cfg") / "cfg.json"
    cfg.save(path)
    return cfg, path


def _reports(path, x, n, mode="real"):
    out = run(GENERATE, args=[str(path), str(x), str(n), mode], timeout=600)
    assert out.returncode == 0, out.stderr
    return [bytes.fromhex(h) for h in out.stdout.split()]


def _exact(cfg):
    """P[(j, r in Z, r+1 in Z, r+2 in Z)] for any value x (same for all x)."""
    probs = {}
    for j, (m, w, t) in enumerate(zip(cfg.moduli, cfg.omegas, cfg.thresholds)):
        big = m - 1  # fillers come from the m - 1 residues other than r
        for keep, pk in ((1, t / ONE), (0, 1 - t / ONE)):
            s = w - keep
            pair = big * (big - 1)
            for b, c, pbc in ((1, 1, s * (s - 1) / pair), (1, 0, s * (big - s) / pair),
                              (0, 1, s * (big - s) / pair),
                              (0, 0, (big - s) * (big - s - 1) / pair)):
                probs[(j, keep, b, c)] = pbc * pk / cfg.l
    return probs


def _classify(codec, reports, x):
    out = []
    for data in reports:
        r = codec.decode(data)
        m = codec.cfg.moduli[r.j]
        z = set(r.subset)
        out.append((r.j, int(x % m in z), int((x + 1) % m in z), int((x + 2) % m in z)))
    return out


@pytest.fixture(scope="module")
def real_reports(setup):
    cfg, path = setup
    return _reports(path, X1, N), _reports(path, X2, N)


def test_distribution_matches_exact_channel(setup, real_reports):
    cfg, _ = setup
    codec = WireCodec(cfg)
    exact = _exact(cfg)
    assert sum(exact.values()) == pytest.approx(1.0)
    keys = sorted(exact)
    for x, reports in zip((X1, X2), real_reports):
        assert len(reports) == N
        seen = Counter(_classify(codec, reports, x))
        assert set(seen) <= set(keys)
        p = chisquare([seen.get(k_, 0) for k_ in keys], [exact[k_] * N for k_ in keys]).pvalue
        assert p > 0.001


def test_audit_bound_within_epsilon(setup, real_reports):
    cfg, _ = setup
    assert audit_client(MssProtocol(cfg).channel(), *real_reports, cfg.epsilon)["within_epsilon"]


def test_audit_catches_broken_randomiser(setup):
    cfg, path = setup
    broken = [_reports(path, x, N, "broken") for x in (X1, X2)]
    assert not audit_client(MssProtocol(cfg).channel(), *broken, cfg.epsilon)["within_epsilon"]
