"""Every registered protocol implements the one interface (mss_protocol.base),
so the simulator, ``mss bench``, the dashboard and ``mss audit`` can use it
without knowing which protocol it is."""
import numpy as np
import pytest

from mss_device.rng import ByteRng
from mss_protocol import registry
from mss_protocol.base import Protocol
from mss_protocol.estimate import Estimate

K, EPS, N = 16, 1.0, 2000


@pytest.mark.parametrize("name", registry.AVAILABLE)
def test_protocol_interface(name):
    proto = registry.make(name, K, EPS)
    assert isinstance(proto, Protocol) and proto.name == name and proto.k == K
    assert 0 < proto.eps_effective <= proto.epsilon == EPS
    assert set(proto.bits) == {"max", "mean"} and proto.bits["max"] >= proto.bits["mean"] > 0
    ch = proto.channel()
    assert ch.name == name and ch.eps_effective == proto.eps_effective
    report = ch.client(3, ByteRng())
    mask, log_r = ch.support(report)
    assert mask.shape == (K,) and log_r > 0
    assert ch.support(ch.parse(ch.wire(3, ByteRng())))[0].shape == (K,)
    values = np.random.default_rng(0).integers(0, K, size=N)
    est = proto.decode(proto.sample_counts(values, np.random.default_rng(1)), N, post="simplex")
    assert isinstance(est, Estimate) and est.n == N
    for a in (est.estimate, est.raw, est.stderr, est.ci_low, est.ci_high):
        assert a.shape == (K,)
    assert est.estimate.sum() == pytest.approx(1.0) and (est.stderr > 0).all()
    assert 0 < proto.variance(N) < 1


def test_unknown_protocol_is_named():
    with pytest.raises(ValueError, match="unknown protocol 'nope'"):
        registry.make("nope", K, EPS)


@pytest.mark.parametrize("name", ("grr", "rappor", "sue", "olh", "hr", "pgr"))
def test_decoder_unbiased_and_standard_errors_calibrated(name):
    """400 fleets of 2,000 devices (k = 16, eps = 1, a skewed distribution):
    per item, the mean error is within 4.5 standard errors of the mean of 0
    (Bonferroni over 16 items: false alarm < 0.02%), and the 95% CIs cover
    the fleet's frequencies in 93-97% of the 6,400 item-trials (a binomial sd
    of 0.27%: the band is 7 sd wide each side, room for the items' correlation).
    MSS's decoder has its own tests (test_decoder.py)."""
    proto = registry.make(name, K, EPS)
    rng = np.random.default_rng(12)
    probs = np.arange(1, K + 1)[::-1] / np.arange(1, K + 1).sum()
    errors, covered = [], []
    for _ in range(400):
        values = rng.choice(K, size=N, p=probs)
        truth = np.bincount(values, minlength=K) / N
        est = proto.decode(proto.sample_counts(values, rng), N)
        errors.append(est.raw - truth)
        covered.append((est.ci_low <= truth) & (truth <= est.ci_high))
    errors = np.array(errors)
    assert np.all(np.abs(errors.mean(axis=0)) < 4.5 * errors.std(axis=0, ddof=1) / np.sqrt(len(errors)))
    assert 0.93 <= np.mean(covered) <= 0.97
