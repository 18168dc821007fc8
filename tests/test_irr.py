"""The instantaneous layer (RAPPOR's IRR) and OLH's seed per device (issue 25 item 4).

* Exact privacy by enumeration of the firmware's own code (``mss_device``
  under CPython, every random decision a path, probabilities as Fractions):
  the permanent draw y' (the protocol's ``draw``) and, for every y', the
  re-sent memo (``Client.replay``: the IRR draw and the report bytes).  One
  composed report's worst ratio is exp(report_eps_effective) exactly (the
  host's Fraction), at most min(e^eps, e^irr.eps); the IRR's own is
  exp(irr eps_effective) <= e^irr.eps; the permanent layer is the config
  without an IRR, unchanged.  The composed support probabilities are the
  decoder's p*, q*.
* The decoder of the composed channel by simulation (the host's vectorised
  samplers, which apply the IRR): unbiased, 95% CIs covering, predicted MSE
  (``variance()``) against the simulated one; fixed seeds, tolerances from the
  variance (false-alarm rates in the comments).
* OLH seed: device: one seed per device whatever the epoch, compact frames
  and memoization allowed; host and board refuse the same configs.
* The node under MicroPython: memoize with an IRR re-draws the IRR every
  epoch from the one memoized body; memoize with olh seed device re-sends it.
"""
import json
import math
import random
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from channel import enumerate_outputs
from mss_device.frame import HEADER, put
from mss_device.params import Params
from mss_device.rng import ByteRng
from mss_protocol.codec import codec
from mss_protocol.config_file import ConfigError
from mss_protocol.configs import load_dict
from mss_protocol.mss.config import MssConfig
from mss_protocol.oracle_config import OracleConfig
from mss_protocol.privacy import ONE, ratio

MAX_DRAWS = {"hr": 2, "pgr": 2}  # rejection loops: enumerated through their first accepted draw


def _exp(eps):
    with localcontext() as ctx:
        ctx.prec = 60
        return Fraction(Decimal(eps).exp())


def _client(cfg, device_id):
    client = Params(cfg.to_dict()).client()
    client.device_id = device_id
    return client


def _body(client, y):
    out = bytearray((client.nbits + 7) // 8)
    put(out, 0, y, client.nbits)
    return bytes(out)


def _prr(client, x):
    """P[y' | x] of the firmware's permanent draw (the protocol's ``draw``)."""
    client.epoch = 7
    return enumerate_outputs(lambda rng: client.draw(x, rng), MAX_DRAWS.get(client.p.protocol))


def _kernel(client):
    """P[report bytes | y'] of the firmware's re-sent memo, for every y' (no loop: exact)."""
    return {y: enumerate_outputs(lambda rng, b=_body(client, y): client.replay(b, rng, 7, 0))
            for y in range(client.n)}


def _worst(dists):
    """The largest P[u | a] / P[u | b] over outputs u and inputs a, b (every output has
    positive probability under every input here)."""
    outputs = set().union(*dists)
    return max(max(d.get(u, 0) for d in dists) / min(d.get(u, 0) for d in dists) for u in outputs)


def _device_id(cfg):
    """A device id whose hash seed separates values 0 and 1 (OLH: else, for k = 2 and a
    small g, both could hash alike and the enumerated ratio would be 1 for that device)."""
    from mss_device.olh import device_seed

    for i in range(100):
        dev = f"dev-{i}"
        if cfg.name != "olh":
            return dev
        a, b = device_seed(cfg.config_id, dev, cfg.protocol.P)
        if cfg.protocol.hash(a, b, 0) != cfg.protocol.hash(a, b, 1):
            return dev
    raise AssertionError("no separating device id")


# (protocol, k, eps): small k, eps up to 8 where the report alphabet stays small enough to
# enumerate every y' (olh's g and pgr's K grow as e^eps: up to eps 4 there, n_out <= 60)
GRID = [("grr", k, e) for k in (2, 5, 16) for e in (0.5, 2.0, 8.0)]
GRID += [("hr", k, e) for k in (2, 5, 16) for e in (0.5, 2.0, 8.0)]
GRID += [("olh", k, e) for k in (2, 16) for e in (0.5, 2.0, 4.0)]
GRID += [("pgr", k, e) for k in (2, 12) for e in (0.5, 2.0, 4.0)]
IRR_EPS = (0.5, 2.0, 8.0)


@pytest.mark.parametrize("name,k,eps", GRID)
def test_exact_privacy_of_both_layers_by_enumeration(name, k, eps):
    base = OracleConfig(name, k, eps, seed="device" if name == "olh" else "epoch")
    prr_plain = [_prr(_client(base, _device_id(base)), x) for x in range(k)]
    assert all(sum(d.values()) == 1 for d in prr_plain)
    # the permanent layer alone: the config without an IRR, its eps_effective exactly
    assert math.log(_worst(prr_plain)) == pytest.approx(base.eps_effective, rel=1e-12)
    assert _worst(prr_plain) <= _exp(eps)
    kernels = {}
    for e1 in IRR_EPS:
        cfg = OracleConfig(name, k, eps, seed=base.seed, irr_epsilon=e1)
        dev = _device_id(cfg)
        client = _client(cfg, dev)
        prr = [_prr(client, x) for x in range(k)]
        # the IRR leaves the permanent draw as it was (olh: its seed follows the config id, so
        # the same law up to which bucket each value hashes to)
        if name == "olh":
            assert [sorted(d.values()) for d in prr] == [sorted(d.values()) for d in prr_plain]
            assert _worst(prr) == _worst(prr_plain)
        else:
            assert prr == prr_plain
        key = (client.n, client.irr)
        if key not in kernels:
            kernels[key] = _kernel(client)
        kernel = kernels[key]
        # the IRR's own ratio: over re-sends of two different y'
        irr = _worst(list(kernel.values()))
        assert irr == ratio(client.n, 1, cfg.irr_threshold) <= _exp(e1)
        assert math.log(irr) == pytest.approx(cfg.irr_eps_effective, rel=1e-12)
        # one composed report: sum over y' of P[y' | x] P[report | y']
        composed = []
        for d in prr:
            out = {}
            for y, py in d.items():
                for rep, pr in kernel[y].items():
                    out[rep] = out.get(rep, 0) + py * pr
            composed.append(out)
        assert all(sum(d.values()) == 1 for d in composed)
        worst = _worst(composed)
        assert worst == cfg.protocol.report_ratio  # the host's exact Fraction
        assert math.log(worst) == pytest.approx(cfg.report_eps_effective, rel=1e-12)
        assert cfg.report_eps_effective <= min(cfg.eps_effective, cfg.irr_eps_effective)
        assert worst <= min(_exp(eps), _exp(e1))
        _check_support(cfg, client, composed, dev)


def _check_support(cfg, client, composed, dev):
    """The enumerated chance that a report supports a value is the decoder's p* (holders)
    or q* (the others): exact for grr, hr and pgr (hr: q* for a value of the holder's
    block, 2 q* - p* for one of another block); for olh given this device's seed, p*
    for the holder and the composed GRR's (1 - p*) / (g - 1) for a value hashed elsewhere."""
    proto, k = cfg.protocol, cfg.k
    head = HEADER[client.p.frame]
    p, q = Fraction(proto.p), Fraction(proto.q)
    members = proto.channel().members(np.arange(proto.K)) if cfg.name == "hr" else None

    def supports(rep, v):
        y = int.from_bytes(rep[head:], "big") >> (8 * (len(rep) - head) - client.nbits)
        if cfg.name == "grr":
            return y == v
        if cfg.name == "olh":
            a, b = client.seed()
            return proto.hash(a, b, v) == y
        if cfg.name == "hr":
            return members[y, v]
        return int(np.dot(proto.coords[y], proto.coords[v])) % proto.field == 0

    for x in range(k):
        for v in range(k):
            got = sum(pr for rep, pr in composed[x].items() if supports(rep, v))
            if v == x:
                want = p
            elif cfg.name == "olh":
                a, b = client.seed()
                want = p if proto.hash(a, b, v) == proto.hash(a, b, x) else (1 - p) / (proto.g - 1)
            elif cfg.name == "hr" and proto.item_block[v] != proto.item_block[x]:
                want = 2 * q - p
            else:
                want = q
            assert float(got) == pytest.approx(float(want), rel=1e-12, abs=1e-15), (x, v)


def test_composed_support_probabilities_are_the_affine_map():
    """p*, q* of the decoder: P(y' in S) a + P(y' not in S) b (irr.py, RAPPOR's composition),
    and the protocols' own closed forms at the composed keep probability (olh: the hash's
    collision probability; pgr: r at s*)."""
    for name in ("grr", "olh", "hr", "pgr"):
        cfg = OracleConfig(name, 40, 3.0, irr_epsilon=1.0)
        pr, irr, out = cfg.protocol.prr, cfg.protocol.irr, cfg.protocol
        a, b = irr.support_map(pr.support_size)
        assert out.p == pytest.approx(a * pr.p + b * (1 - pr.p), rel=1e-15)
        assert out.q == pytest.approx(a * pr.q + b * (1 - pr.q), rel=1e-15)
        if name == "olh":
            P, g = pr.P, pr.g
            c, r = divmod(P, g)
            gamma = (r * (c + 1) * c + (g - r) * c * (c - 1)) / (P * (P - 1))
            assert out.q == pytest.approx(gamma * out.p + (1 - gamma) * (1 - out.p) / (g - 1), rel=1e-12)
        if name == "pgr":
            s = out.p
            r = s * pr.c_int / pr.c_set + (1 - s) * (pr.c_set - pr.c_int) / (pr.K - pr.c_set)
            assert out.q == pytest.approx(r, rel=1e-12)
        if name == "hr":  # q = (p + q_o) / 2, q_o = (1 - p) / (2B - 1) (mss_protocol.hr); B = 1: 1/2
            assert out.q == pytest.approx((out.p + (1 - out.p) / (2 * pr.blocks - 1)) / 2, rel=1e-12)
        assert out.variance(1000) > pr.variance(1000)  # the extra layer costs accuracy


# -- the decoder of the composed channel, by simulation ------------------------------------
def _population(k, n, seed):
    """n values from a Zipf(1.1)-like prior on [k] (fixed), and their frequencies f."""
    rng = np.random.default_rng(seed)
    w = 1.0 / np.arange(1, k + 1) ** 1.1
    values = rng.choice(k, size=n, p=w / w.sum())
    return values, np.bincount(values, minlength=k) / n


def _trials(cfg, values, trials, seed):
    """(estimates (trials, k), standard errors (trials, k)) of the composed channel's decoder
    on reports drawn by the host's vectorised sampler (which applies the IRR)."""
    rng = np.random.default_rng(seed)
    est, se = [], []
    for _ in range(trials):
        e = cfg.protocol.decode(cfg.protocol.sample_counts(values, rng), values.size)
        est.append(e.estimate)
        se.append(e.stderr)
    return np.array(est), np.array(se)


# (protocol, k, eps, irr eps): k = 2, 5, 16, eps up to 8 (pgr up to 3: its decoder's DFT has q^d
# cells and a pass per element of F_q, q = 23 at eps 3, 59 at 4: seconds per config)
UNBIASED = [("grr", 2, 8.0, 2.0), ("grr", 5, 1.0, 4.0), ("grr", 16, 8.0, 8.0),
            ("olh", 2, 4.0, 1.0), ("olh", 5, 8.0, 2.0), ("olh", 16, 2.0, 8.0),
            ("hr", 2, 8.0, 8.0), ("hr", 5, 2.0, 4.0), ("hr", 16, 8.0, 1.0),
            ("pgr", 2, 3.0, 4.0), ("pgr", 5, 1.0, 8.0), ("pgr", 16, 3.0, 2.0)]
N_REPORTS, TRIALS = 3000, 200


@pytest.mark.parametrize("name,k,eps,e1", UNBIASED)
def test_composed_decoder_is_unbiased_and_its_cis_cover(name, k, eps, e1):
    """Mean of T = 200 estimates within 4.5 standard errors of the fleet's frequencies
    (the SE of the mean from the composed channel's exact variance, the formula of
    support.py at p*, q* and the true f): per item a false alarm of 6.8e-6, at most
    8.2e-4 over the 120 items of this grid.  Coverage of the 95% CIs (estimated SEs),
    pooled over the k items: 0.95 within 4.5 binomial SDs of T trials (conservative:
    the k items of one trial counted as one), false alarm 6.8e-6 a config."""
    cfg = OracleConfig(name, k, eps, irr_epsilon=e1)
    values, f = _population(k, N_REPORTS, seed=k)
    est, se = _trials(cfg, values, TRIALS, seed=hash((name, k)) % 2 ** 32)
    p, q, n = cfg.protocol.p, cfg.protocol.q, N_REPORTS
    var = q * (1 - q) / (n * (p - q) ** 2) + f * (1 - p - q) / (n * (p - q))
    z = (est.mean(axis=0) - f) / np.sqrt(var / TRIALS)
    assert np.all(np.abs(z) < 4.5), z
    cover = np.mean(np.abs(est - f) <= 1.96 * se)
    assert abs(cover - 0.95) < 4.5 * math.sqrt(0.95 * 0.05 / TRIALS), cover


# predicted MSE: k = 2..64, eps up to 8 (pgr up to 3), several IRR budgets
MSE_GRID = [(name, k, eps, e1) for name in ("grr", "olh", "hr", "pgr")
            for k, eps, e1 in ((2, 8.0, 1.0), (5, 0.5, 4.0), (16, 2.0, 0.5), (64, 8.0, 4.0), (64, 1.0, 8.0))]
MSE_GRID = [(n, k, min(e, 3.0) if n == "pgr" else e, e1) for n, k, e, e1 in MSE_GRID]


@pytest.mark.parametrize("name,k,eps,e1", MSE_GRID)
def test_predicted_mse_of_the_composed_channel(name, k, eps, e1):
    """variance() (the per-item MSE averaged over [k]; the same for every prior) against
    the mean per-item squared error of T = 150 decodes of n = 2000 reports.  Each trial's
    MSE is a sum of squared near-normal errors (a scaled chi-square); the tolerance is
    4.5 standard errors of the mean from its measured spread, plus 2% for the normal
    approximation: a false alarm of about 7e-6 per cell, 1.4e-4 over the 20 cells."""
    trials, n = 150, 2000
    cfg = OracleConfig(name, k, eps, irr_epsilon=e1)
    values, f = _population(k, n, seed=100 + k)
    est, _ = _trials(cfg, values, trials, seed=7 * k + int(eps * 10))
    mse = ((est - f) ** 2).mean(axis=1)
    pred = cfg.protocol.variance(n)
    assert abs(mse.mean() - pred) < 4.5 * mse.std(ddof=1) / math.sqrt(trials) + 0.02 * pred, \
        (mse.mean(), pred)
    if e1 <= 1.0:  # the IRR matters here: the permanent draw's prediction alone is far off
        assert cfg.protocol.prr.variance(n) < 0.8 * pred


# -- configs ------------------------------------------------------------------------------
def test_config_round_trip_and_ids():
    for name in ("grr", "olh", "hr", "pgr"):
        cfg = OracleConfig(name, 64, 2.0, irr_epsilon=1.0)
        d = cfg.to_dict()
        assert d["irr"] == {"epsilon": 1.0, "t": cfg.irr_threshold, "eps_effective": cfg.irr_eps_effective}
        assert load_dict(d) == cfg and load_dict(json.loads(json.dumps(d))).irr_threshold == cfg.irr_threshold
        assert cfg.config_id != OracleConfig(name, 64, 2.0).config_id  # the IRR changes the channel
        assert Params(d).config_id == cfg.config_id
        assert load_dict(cfg.with_frame("compact-epoch").to_dict()).irr_epsilon == 1.0
    from mss_device.params import canonical_oracle

    cfg = OracleConfig("olh", 5, 1.0, seed="device", irr_epsilon=1.0)
    assert canonical_oracle("olh", 5, cfg.values, "device", cfg.irr_threshold) == \
        "olh/1;k=5;P=32749;g=4;t=510421307;seed=device;irr=%d;b=30" % cfg.irr_threshold
    assert canonical_oracle("grr", 5, (434446330,), irr=7) == "grr/1;k=5;t=434446330;irr=7;b=30"
    # no IRR, epoch seed: every existing id unchanged (SPEC.md section 5's table)
    assert OracleConfig("olh", 5, 1.0).config_id_hex == "7bb2a18f"
    assert OracleConfig("grr", 5, 1.0).config_id_hex == "24451136"
    plain = OracleConfig("grr", 16, 2.0)
    assert plain.report_eps_effective == plain.eps_effective and plain.irr_threshold is None
    assert "irr" not in plain.to_dict() and "seed" not in OracleConfig("olh", 16, 2.0).to_dict()


def test_the_host_refuses_what_the_board_refuses():
    with pytest.raises(ConfigError, match="irr: only grr, olh, hr, pgr"):
        OracleConfig("rappor", 16, 2.0, irr_epsilon=1.0)
    with pytest.raises(ConfigError, match="irr: only grr, olh, hr, pgr"):
        OracleConfig("sue", 16, 2.0, irr_epsilon=1.0)
    for base in (MssConfig.build(64, 2.0, [59, 61, 63]), MssConfig.subset_selection(16, 2.0)):
        d = dict(base.to_dict(), irr={"epsilon": 1.0, "t": 5})
        with pytest.raises(ConfigError, match="irr: only"):
            load_dict(d)
        with pytest.raises(ValueError, match="config field irr"):
            Params(d)
    d = OracleConfig("hr", 16, 2.0, irr_epsilon=1.0).to_dict()
    for t, why in ((d["irr"]["t"] + 1, r"irr\.t = \d+ is not"), (0, r"irr\.t = 0 is not"),
                   (float(d["irr"]["t"]), r"irr\.t must be a JSON integer")):
        with pytest.raises(ConfigError, match=why):
            load_dict(dict(d, irr=dict(d["irr"], t=t)))
    with pytest.raises(ConfigError, match="seed: only olh"):
        OracleConfig("grr", 16, 2.0, seed="device")
    with pytest.raises(ConfigError, match="olh cannot use compact frames with seed epoch"):
        OracleConfig("olh", 16, 2.0, "compact")
    assert OracleConfig("olh", 16, 2.0, "compact", seed="device").frame == 1


def test_board_checks_the_irr_ratio_against_its_epsilon():
    """mss_device.check.verify: the IRR's ratio within e^irr.epsilon (+ the float slack); the
    ratio it returns (cap, budget) stays the permanent draw's."""
    from mss_device.check import verify

    cfg = OracleConfig("pgr", 64, 3.0, irr_epsilon=1.0)
    d = cfg.to_dict()
    hi, lo = verify(Params(d), 3.0)
    assert Fraction(hi, lo) == ratio(cfg.protocol.K, cfg.protocol.c_set, cfg.values[2])
    with pytest.raises(ValueError, match="irr.t gives epsilon"):
        verify(Params(dict(d, irr=dict(d["irr"], epsilon=0.9))), 3.0)
    with pytest.raises(ValueError, match="irr.epsilon must be a positive"):
        verify(Params(dict(d, irr=dict(d["irr"], epsilon=True))), 3.0)


# -- OLH's seed per device ---------------------------------------------------------------
def test_olh_device_seed_is_the_same_every_epoch_and_decodes():
    from mss_device.olh import device_seed, seed

    cfg = OracleConfig("olh", 64, 2.0, "compact", seed="device")
    c = codec(cfg)
    client = _client(cfg, "board-1")
    seeds = set()
    for epoch in (0, 1, 70000, (1 << 32) - 1):
        r = c.decode(client.report(9, ByteRng(), epoch, 0), "board-1", epoch)
        seeds.add(tuple(r.subset[:2]))
    assert seeds == {device_seed(cfg.config_id, "board-1", cfg.protocol.P)}
    others = {device_seed(cfg.config_id, f"b{i}", cfg.protocol.P) for i in range(200)}
    assert len(others) == 200  # distinct devices, distinct seeds
    # a distinct domain: never the epoch seed of the same device
    assert all(device_seed(cfg.config_id, "board-1", cfg.protocol.P) != seed(cfg.config_id, e, "board-1",
                                                                             cfg.protocol.P) for e in range(100))


def test_fresh_and_replay_on_the_device():
    """Reporter.fresh: (report, memo body of y'); without an IRR the body is the report's and a
    replay reads no byte; with one, each replay is a fresh IRR draw of y' (the law enumerated
    above), and a memo that is no body of the config is refused."""
    from mss_node.reporter import Reporter

    dry = ByteRng(lambda n: b"")  # any draw raises EOFError
    plain = Params(OracleConfig("olh", 64, 2.0, seed="device").to_dict())
    rep = Reporter(plain, ByteRng(), "d1")
    out, body = rep.fresh(5, 3, 0)
    assert out[HEADER[0]:] == body
    assert Reporter(plain, dry, "d1").replay(body, 4, 1)[HEADER[0]:] == body and dry.consumed == 0
    p = Params(OracleConfig("grr", 16, 8.0, irr_epsilon=0.5).to_dict())
    rep = Reporter(p, ByteRng(random.Random(1).randbytes), "d1")
    out, body = rep.fresh(5, 3, 0)
    assert body[0] >> 4 == 5  # y' (4 bits): 5 but for a 0.5% chance (this seed: 5)
    bodies = {rep.replay(body, 4 + i, i)[HEADER[0]:] for i in range(200)}
    assert len(bodies) > 5  # p1 = e^0.5 / (e^0.5 + 15) ~ 0.1: 200 re-sends spread over the 16
    assert rep.replay(b"\xff", 5, 0) is None and rep.replay(b"", 5, 0) is None


@pytest.mark.parametrize("name", ["grr", "olh", "hr", "pgr"])
def test_the_audit_channel_is_the_composed_report(name):
    """cfg.protocol.channel() (what mss_aggregator.privacy attacks) is one composed report:
    its log-ratio and eps_effective are the exact composed ones, and (grr, hr, pgr: enumerable)
    its exact Bayes attacker's success equals the sum over outputs of max_x prior(x) P[u | x]
    of the firmware's enumerated composed channel; protocol.prr.channel() is the PRR's."""
    k = 5
    cfg = OracleConfig(name, k, 2.0, seed="device" if name == "olh" else "epoch", irr_epsilon=1.0)
    ch = cfg.protocol.channel()
    assert ch.eps_effective == cfg.report_eps_effective
    assert cfg.protocol.prr.channel().eps_effective == cfg.eps_effective
    report = ch.client(0, ByteRng(random.Random(5).randbytes))
    _, log_r = ch.support(report)
    assert log_r == pytest.approx(math.log(cfg.protocol.report_ratio), rel=1e-12)
    if name == "olh":
        return
    client = _client(cfg, "d")
    kernel = _kernel(client)
    prior = np.array([0.4, 0.3, 0.15, 0.1, 0.05])
    composed = []
    for x in range(k):
        out = {}
        for y, py in _prr(client, x).items():
            for rep, pr in kernel[y].items():
                out[rep] = out.get(rep, 0) + py * pr
        composed.append(out)
    outputs = set().union(*composed)
    bayes = sum(max(prior[x] * float(composed[x][u]) for x in range(k)) for u in outputs)
    assert ch.bayes_exact(prior) == pytest.approx(bayes, rel=1e-9)
