"""20,000 reports per protocol made by the firmware under MicroPython with its
real os.urandom, against each protocol's exact channel.

Value x = 3 on k = 16 at epsilon = 2, one device id, epochs 0..N-1 (so OLH's
public seed changes every report).  Each report is decoded by the host's
codec and classified; the class counts are tested against the exact
probabilities from the integer thresholds by a chi-square test at alpha =
0.001 (false-alarm rate 0.1% per protocol, 0.6% for the six).  Classes:
grr the reported value; hr and pgr the reported point; olh (y - H(x)) mod g
under each report's seed; rappor and sue the per-item bit counts (a sum of
16 independent binomial z^2, about chi-square with 16 degrees of freedom).
MSS's firmware reports are tested in ``test_wire_distribution.py``.
"""
import numpy as np
import pytest
from scipy.stats import chi2, chisquare

from micropython_runner import run
from mss_protocol.codec import codec
from mss_protocol.oracle_config import NAMES, OracleConfig

N, K, EPS, X = 20000, 16, 2.0, 3

GENERATE = r"""
import json, sys
from mss_device.params import Params
from mss_node.reporter import Reporter
r = Reporter(Params(json.load(open(sys.argv[1]))), None, "dev-7")
for i in range(int(sys.argv[2])):
    print(r.report(int(sys.argv[3]), i, 0).hex())
"""


def _exact(cfg):
    """Class probabilities, shape (classes,), for the value X."""
    o = cfg.protocol
    if cfg.name == "grr":
        return np.where(np.arange(K) == X, o.p, o.q)
    if cfg.name == "olh":
        return np.where(np.arange(o.g) == 0, o.p, (1 - o.p) / (o.g - 1))
    if cfg.name == "hr":
        inside = o.channel().members(np.arange(o.K))[:, X]
        return np.where(inside, o.p / (o.b // 2), (1 - o.p) / (o.K - o.b // 2))
    if cfg.name == "pgr":
        inside = (o.coords @ o.coords[X]) % o.field == 0
        return np.where(inside, o.p / o.c_set, (1 - o.p) / (o.K - o.c_set))
    raise ValueError(cfg.name)


@pytest.mark.parametrize("name", NAMES)
def test_firmware_reports_follow_the_exact_channel(tmp_path, name):
    cfg = OracleConfig(name, K, EPS)
    path = tmp_path / "cfg.json"
    cfg.save(path)
    out = run(GENERATE, args=[str(path), str(N), str(X)], timeout=900)
    assert out.returncode == 0, out.stderr
    c = codec(cfg)
    reports = [c.decode(bytes.fromhex(h), "dev-7") for h in out.stdout.split()]
    assert len(reports) == N
    o = cfg.protocol
    if name in ("rappor", "sue"):
        counts = np.bincount([v for r in reports for v in r.subset], minlength=K)
        p = np.where(np.arange(K) == X, o.p, o.q)
        stat = np.sum((counts - N * p) ** 2 / (N * p * (1 - p)))
        assert chi2.sf(stat, K) > 0.001, (counts, N * p)
        return
    if name == "olh":
        a, b, y = np.array([r.subset for r in reports]).T
        classes = (y - o.hash(a, b, X)) % o.g
        assert len(set(zip(a.tolist(), b.tolist()))) > N * 0.99  # the seed changes with the epoch
    else:
        classes = np.array([r.subset[0] for r in reports])
    probs = _exact(cfg)
    counts = np.bincount(classes, minlength=probs.size)
    assert chisquare(counts, N * probs).pvalue > 0.001
