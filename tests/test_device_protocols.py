"""Every protocol's device client: exact privacy by enumeration, compact-frame
round trips and fuzzing, and the planner's few-byte configs on the device.

The clients are the firmware modules (``mss_device.<protocol>``) run under
CPython; ``tests/firmware/test_bit_exact.py`` shows MicroPython produces the
same bytes from the same random stream, and
``tests/firmware/test_protocol_distribution.py`` checks 20,000 reports per
protocol made by the firmware with its real ``os.urandom``.
"""
import json
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channel import enumerate_outputs
from collect_helpers import mss
from mss_device.params import Params
from mss_device.rng import ByteRng
from mss_protocol.codec import codec
from mss_protocol.config_file import ConfigError
from mss_protocol.frames import WireError
from mss_protocol.oracle_config import NAMES, OracleConfig

# rejection loops (hr, pgr) are enumerated through their first accepted draw
MAX_DRAWS = {"hr": 2, "pgr": 2}


def _exp(eps):
    with localcontext() as ctx:
        ctx.prec = 60
        return Fraction(Decimal(eps).exp())


def _client(cfg, device_id="dev-a"):
    client = Params(cfg.to_dict()).client()
    client.device_id = device_id
    return client


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("k,eps", [(5, 0.5), (5, 1.0), (6, 3.0)])
def test_exact_privacy_of_the_device_client(name, k, eps):
    """P[report bytes | x] enumerated over every random decision of the device
    code: the worst ratio over inputs is exp(eps_effective) <= exp(eps)."""
    cfg = OracleConfig(name, k, eps, "compact-epoch")
    client = _client(cfg)
    dists = [enumerate_outputs(lambda rng, x=x: client.report(x, rng, 3, 0), MAX_DRAWS.get(name))
             for x in range(k)]
    assert all(sum(d.values()) == 1 for d in dists)
    outputs = set().union(*dists)
    assert len({len(y) for y in outputs}) == 1  # the length never depends on the value
    worst = max(max(d.get(y, 0) for d in dists) / min(d.get(y, 0) for d in dists) for y in outputs)
    assert worst <= _exp(eps)
    assert math.log(worst) == pytest.approx(cfg.eps_effective, rel=1e-9)
    assert cfg.eps_effective <= eps


@pytest.mark.parametrize("k,eps", [(12, 2.0), (20, 3.0), (30, 2.0), (16, 4.0)])
def test_hr_device_draw_is_the_block_channel(k, eps):
    """HR with several blocks (b = 4 at k = 12 and 20, whose last block is partial; b = 16
    at k = 30; b = 2 at k = 16): the device's P[y | x], enumerated over every decision, is exactly
    point_probs()'s in-support value on S_x and its outside value elsewhere, for every x."""
    cfg = OracleConfig("hr", k, eps)
    proto, client = cfg.protocol, _client(cfg)
    assert proto.blocks > 1
    inside, outside = proto.point_probs()
    members = proto.channel().members(np.arange(proto.K))
    for x in range(k):
        d = enumerate_outputs(lambda rng, x=x: client.draw(x, rng), MAX_DRAWS["hr"])
        assert sum(d.values()) == 1
        assert all(d.get(y, 0) == (inside if members[y, x] else outside) for y in range(proto.K))


def test_olh_seed_is_public_and_changes_with_epoch_and_device():
    """The seed comes from (config id, epoch, device id) only: the same for
    any value and any random stream, different across epochs and devices."""
    from mss_device.olh import seed

    cfg = OracleConfig("olh", 64, 2.0)
    seeds = {seed(cfg.config_id, e, d, cfg.protocol.P) for e in range(50) for d in ("a", "b")}
    assert len(seeds) == 100
    c = codec(cfg)
    a, b, _ = c.decode(_client(cfg, "a").report(7, ByteRng(), 9, 0), "a").subset
    assert (a, b) == seed(cfg.config_id, 9, "a", cfg.protocol.P)


def _configs():
    from mss_protocol.mss.config import MssConfig

    out = []
    for frame in ("full", "compact", "compact-epoch"):
        out.append(MssConfig.build(64, 2.0, [61, 62, 63]).with_frame(frame))
        out += [OracleConfig(n, 64, 2.0, frame) for n in NAMES if (n, frame) != ("olh", "compact")]
    return out


CONFIGS = _configs()


@pytest.mark.parametrize("cfg", CONFIGS, ids=[f"{c.to_dict()['protocol']}-{c.to_dict()['frame']}" for c in CONFIGS])
def test_frames_round_trip(cfg):
    c = codec(cfg)
    client = _client(cfg)
    head = {"full": 11, "compact": 1, "compact-epoch": 3}[cfg.to_dict()["frame"]]
    for x in range(0, 64, 7):
        for epoch in (0, 65535, 70001):
            data = client.report(x, ByteRng(), epoch, 5)
            r = c.decode(data, "dev-a", epoch + 3)  # the link's epoch, a little later
            want_epoch = epoch + 3 if head == 1 else epoch
            assert r.epoch == want_epoch and r.frame == cfg.to_dict()["frame"]
            assert len(data) - head in c.body_lengths
            if head == 1:
                with pytest.raises(WireError, match="epoch"):
                    c.decode(data, "dev-a")  # no link epoch: refused, not guessed


FUZZ = [codec(cfg) for cfg in CONFIGS]


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(range(len(FUZZ))), st.binary(max_size=24), st.integers(0, 1 << 20))
def test_fuzzed_frames_are_named_errors_never_crashes(i, data, epoch):
    c = FUZZ[i]
    # make about half the inputs start like this config's frames, to reach the body checks
    cid, kind = c.cfg.config_id, c.cfg.frame
    if data and data[0] & 1:
        data = (bytes([1]) + cid if kind == 0 else bytes([(0x80, 0xC0)[kind - 1] | (cid[0] & 0x3F)])) + data[1:]
    try:
        r = c.decode(data, "dev-a", epoch)
    except WireError as exc:
        assert exc.reason in {"type", "length", "version", "kind", "config", "epoch", "block", "padding", "rank",
                              "value", "device"}
        return
    assert r.frame == ("full", "compact", "compact-epoch")[kind]


@pytest.mark.parametrize("transport", ["serial", "mqtt", "lorawan"])
def test_olh_is_never_sent_in_compact_frames(transport):
    """OLH's seed is the drawing epoch's, and a compact frame is dated by its
    arrival: the host config, the planner and the board all refuse the pair."""
    from mss_node.settings import Settings
    from mss_protocol.choose import Limits, choose

    with pytest.raises(ConfigError, match="frame: olh cannot use compact"):
        OracleConfig("olh", 64, 2.0, "compact")
    plan = choose(64, 2.0, "auto", limits=Limits(frame="compact", max_bytes=11))
    olh = [r for r in plan["candidates"] if r["protocol"] == "olh"][0]
    assert plan["protocol"] != "olh" and "olh cannot use compact" in olh["excluded"]
    d = dict(OracleConfig("olh", 64, 2.0).to_dict(), frame="compact")
    d["device"] = {"device_id": "a", "transport": transport}
    with pytest.raises(ValueError, match="frame"):
        Settings(d)


@pytest.mark.parametrize("transport", ["serial", "mqtt"])
def test_compact_frames_only_on_lorawan(transport):
    """A compact frame is dated by arrival: only a network server's receive
    time survives an aggregator outage, so other transports refuse it."""
    from mss_node.settings import Settings

    d = OracleConfig("grr", 16, 2.0, "compact").to_dict()
    d["device"] = {"device_id": "a", "transport": transport}
    with pytest.raises(ValueError, match="compact needs device.transport lorawan"):
        Settings(d)


@pytest.mark.parametrize("k", [16, 1024, 22000])
@pytest.mark.parametrize("eps", [1, 4])
def test_auto_plan_fits_an_lorawan_us915_dr0_payload(tmp_path, k, eps):
    """mss plan --protocol auto --max-bytes 11 --frame compact: the config it
    writes makes device reports of at most 11 bytes (run through the firmware)."""
    cfg_path = tmp_path / "cfg.json"
    out = mss("plan", "--k", k, "--epsilon", eps, "--protocol", "auto", "--max-bytes", 11, "--frame", "compact",
              "--json", "--device-config", cfg_path)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["frame"] == "compact" and plan["frame_bytes"] <= 11
    sim = mss("device-sim", "--config", cfg_path, "--value", k - 1, "--count", 30, "--runtime", "cpython")
    assert sim.returncode == 0, sim.stderr
    lengths = {len(bytes.fromhex(h)) for h in sim.stdout.split()}
    assert max(lengths) <= 11 and max(lengths) <= plan["frame_bytes"]


def test_device_refuses_olh_with_memoize_and_names_bad_fields():
    """A board loads only what it can honour: OLH's seed changes every epoch,
    so a memoized OLH config is refused; a wrong integer breaks the config id."""
    from mss_node.settings import Settings

    d = OracleConfig("olh", 64, 2.0).to_dict()
    d["device"] = {"device_id": "a", "memoize": True}
    with pytest.raises(ValueError, match="memoize cannot be used with olh"):
        Settings(d)
    d["device"]["memoize"] = False
    assert Settings(d).params.protocol == "olh"
    bad = dict(d, g=d["g"] + 1)
    with pytest.raises(ValueError, match="config_id does not match"):
        Settings(bad)
    with pytest.raises(ValueError, match="unknown protocol"):
        Settings(dict(d, protocol="nope"))
    with pytest.raises(ValueError, match="frame must be one of"):
        Settings(dict(d, frame="tiny"))
