"""The device loader against hostile configs (CPython; MicroPython and a real
Mosquitto: tests/firmware/test_node_hostile_config.py).

* the worst likelihood ratio the device computes from a config's integers is
  its client's channel, exactly (enumerated, for rule thresholds and for
  arbitrary ones), and agrees with mss_protocol.privacy's eps_effective over
  every protocol;
* the cap is exact to the 60 digits of e^max_epsilon; the declared epsilon
  is held with the stated slack;
* every out-of-range integer of every protocol is refused with its field;
* signed pushes: the firmware's HMAC is CPython's, and each forgery, replay
  and re-issue is handled; mss deploy and mss aggregate provision and sign.
"""
import hmac
import json
import math
import random
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction

import pytest

import collect_helpers
from channel import enumerate_outputs
from hostile import CAP, GOOD, HOSTILE, KEY, OTHER_KEY, device, mss, retag
from mss_device import check
from mss_device.params import Params
from mss_node import auth
from mss_node.app import Node
from mss_node.settings import Settings
from mss_protocol import privacy
from mss_protocol import sealed
from mss_protocol.config_file import ConfigError
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import plan
from mss_protocol.oracle_config import NAMES, OracleConfig
from mss_protocol.privacy import ONE
from mss_protocol.sealed import seal

MAX_DRAWS = {"hr": 2, "pgr": 2}  # rejection loops: enumerated through their first accepted draw


def _settings(d, **dev):
    return Settings(dict(d, device=dict({"device_id": "x"}, **dev)))


def _host_ratio(cfg):
    """The exact worst ratio of a host config, from mss_protocol's own formulas."""
    if isinstance(cfg, MssConfig):
        return max(privacy.worst(privacy.ratio(m, w, t)) for m, w, t in zip(cfg.moduli, cfg.omegas, cfg.thresholds))
    p = cfg.protocol
    if cfg.name in ("rappor", "sue"):
        return privacy.worst(Fraction(p.tp * (ONE - p.tq), (ONE - p.tp) * p.tq))
    if cfg.name == "pgr":
        return privacy.worst(privacy.ratio(p.K, p.c_set, p.threshold))
    m = {"grr": cfg.k, "olh": getattr(p, "g", 0), "hr": 2 * getattr(p, "blocks", 0)}[cfg.name]
    return privacy.worst(privacy.ratio(m, 1, p.threshold))


def _oracles(names, ks, epsilons):
    """Every (protocol, k, epsilon) the host plans: it refuses HR and PGR above the device's 2**23 draws."""
    for n in names:
        for k in ks:
            for e in epsilons:
                try:
                    yield OracleConfig(n, k, e)
                except ConfigError:
                    pass


def _grid():
    out = list(_oracles(NAMES, (2, 3, 7, 64, 1000, 5000), (0.1, 0.5, 1, 2, 3.3, 5, 8)))
    assert len(out) >= 6 * 6 * 7 - 6  # only the few configs beyond the device are left out
    out += [MssConfig.from_dict(plan(k, e)["config"]) for k in (16, 64, 1024) for e in (0.5, 1, 2, 4)]
    out += [MssConfig.subset_selection(k, e) for k in (2, 9, 300) for e in (0.5, 3)]
    return out


GRID = _grid()


@pytest.mark.parametrize("cfg", GRID, ids=[f"{c.name}-k{c.k}-e{c.epsilon}" for c in GRID])
def test_device_ratio_is_the_hosts_and_within_its_epsilon(cfg):
    """Exactly the host's ratio (so ln of it is eps_effective), and within e^epsilon."""
    s = _settings(cfg.to_dict())
    got = Fraction(*s.ratio)
    assert got == _host_ratio(cfg)
    assert math.log(got) == pytest.approx(cfg.eps_effective, rel=1e-12, abs=1e-15)
    assert got <= Fraction(privacy.exp_decimal(cfg.epsilon))
    assert check.within(s.ratio, (got.numerator, got.denominator))  # the cap check at equality


def _enumerated_worst(p):
    """The worst ratio over outputs and pairs of values of the device client's channel;
    for OLH over the public seeds of 8 epochs too (one seed may hash all values alike)."""
    client = p.client()
    client.device_id = "dev-a"
    worst = 0
    for epoch in range(8 if p.protocol == "olh" else 1):
        dists = [enumerate_outputs(lambda rng, x=x: client.report(x, rng, epoch, 0), MAX_DRAWS.get(p.protocol))
                 for x in range(p.k)]
        outputs = set().union(*dists)
        worst = max([worst] + [max(d.get(y, 0) for d in dists) / min(d.get(y, 0) for d in dists) for y in outputs])
    return worst


def _tweak(d, rnd):
    """d with its thresholds replaced by arbitrary ones in (0, 2**30) (any side of uniform)."""
    d = dict(d)
    if d["protocol"] in ("mss", "ss"):
        d["thresholds"] = [rnd.randrange(1, ONE) for _ in d["moduli"]]
    for f in ("t", "tp", "tq"):
        if f in d:
            d[f] = rnd.randrange(1, ONE)
    return retag(d)


SMALL = [OracleConfig(n, k, e).to_dict() for n in NAMES for k, e in [(5, 1.0), (4, 3.0)]]
SMALL += [MssConfig.build(8, 1.0, [5, 7]).to_dict(), MssConfig.build(9, 2.0, [5, 7, 8]).to_dict(),
          MssConfig.subset_selection(6, 1.0).to_dict()]


@pytest.mark.parametrize("d", SMALL, ids=[f"{d['protocol']}-k{d['k']}-e{d['epsilon']}" for d in SMALL])
def test_device_ratio_is_the_enumerated_channel_whatever_the_thresholds(d):
    """The device's formula for each protocol against every random decision of its own
    client: the rule's thresholds, then arbitrary ones (below uniform too)."""
    rnd = random.Random(d["k"] * 7 + len(d["protocol"]))
    for cand in [d] + [_tweak(d, rnd) for _ in range(3)]:
        p = Params(cand)
        p.module().check(p)
        assert Fraction(*check.worst(p.module().ratios(p))) == _enumerated_worst(p)


def _decimal(fr, rounding):
    """fr as a 60-digit-after-the-point decimal string, rounded down or up."""
    scaled = fr * 10 ** 60
    n = math.floor(scaled) if rounding == "down" else math.ceil(scaled)
    return f"{n // 10 ** 60}.{n % 10 ** 60:060d}"


@pytest.mark.parametrize("cfg", [c for c in GRID if c.epsilon >= 0.5][::4],
                         ids=lambda c: f"{c.name}-k{c.k}-e{c.epsilon}")
def test_the_cap_is_exact(cfg):
    """A cap at the config's own ratio rounded up to 60 digits admits it; rounded down
    refuses it (unless the ratio is that decimal); a cap at its epsilon admits it."""
    d = cfg.to_dict()
    r = _host_ratio(cfg)
    eps = float(math.log(r))
    _settings(d, max_epsilon=eps, max_ratio=_decimal(r, "up"))
    _settings(d, max_epsilon=cfg.epsilon, max_ratio=privacy.cap(cfg.epsilon))  # planned at the cap
    below = _decimal(r, "down")
    if Fraction(Decimal(below)) < r:
        with pytest.raises(ValueError, match="above device.max_epsilon"):
            _settings(d, max_epsilon=eps, max_ratio=below)


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0, 6.0])
def test_declared_epsilon_is_held_with_its_slack(eps):
    """Thresholds of epsilon + 2 slack pass for no declared epsilon; epsilon + slack / 2 pass
    (the float slack, check.EPS_SLACK = 1e-4, SPEC.md section 5)."""
    moduli = [59, 61, 63]
    omegas = MssConfig.build(64, eps, moduli).omegas
    for extra, ok in [(check.EPS_SLACK / 2, True), (2 * check.EPS_SLACK, False)]:
        d = mss(64, eps, moduli, list(omegas),
                [privacy.threshold(m, w, eps + extra) for m, w in zip(moduli, omegas)])
        if ok:
            _settings(d)
        else:
            with pytest.raises(ValueError, match=f"more than its epsilon {eps:g}"):
                _settings(d)
    with pytest.raises(ValueError, match="epsilon must be a positive finite number"):
        _settings(dict(GOOD, epsilon=float("inf")))


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_configs_are_refused(name):
    d, why = HOSTILE[name]
    with pytest.raises(ValueError, match=why):
        _settings(d, **device())


def _oracle(name, k, eps, **fields):
    return retag(dict(OracleConfig(name, k, eps).to_dict(), **fields))


RANGES = [
    (_oracle("grr", 64, 1.0, t=0), "field t must be an integer in \\(0, 2\\*\\*30\\)"),
    (_oracle("grr", 64, 1.0, t=ONE), "field t must be an integer in \\(0, 2\\*\\*30\\)"),
    (retag(dict(_oracle("grr", 64, 1.0), k=(1 << 23) + 2)), "field k must be an integer in \\[2, 8388609\\]"),
    (_oracle("rappor", 64, 1.0, tq=0), "field tq must be"),
    (_oracle("sue", 64, 1.0, tp=ONE), "field tp must be"),
    (_oracle("olh", 64, 1.0, P=32771), "field P must be 32749"),
    (_oracle("olh", 64, 1.0, g=1), "field g must be an integer in \\[2, 8388609\\]"),
    (_oracle("hr", 64, 1.0, K=96), "field K must be block \\* ceil\\(k / \\(block - 1\\)\\)"),
    (_oracle("hr", 64, 1.0, K=64), "field K must be block \\* ceil\\(k / \\(block - 1\\)\\)"),
    (_oracle("hr", 64, 4.0, K=80), "field K must be block \\* ceil\\(k / \\(block - 1\\)\\)"),
    (_oracle("hr", 64, 1.0, K=1 << 24), "field K must be block \\* ceil\\(k / \\(block - 1\\)\\), at most 2\\*\\*23"),
    (_oracle("hr", 64, 1.0, block=96), "field block must be a power of two in \\[2, 2\\*\\*23\\]"),
    (_oracle("hr", 64, 1.0, block=1), "field block must be a power of two"),
    (_oracle("hr", 1 << 22, 4.0, block=2), "field K must be block \\* ceil\\(k / \\(block - 1\\)\\), at most 2\\*\\*23"),
    (_oracle("pgr", 64, 1.0, q=4), "field q must be a prime"),
    (_oracle("pgr", 64, 1.0, q=32771), "field q must be an integer in \\[2, 32768\\]"),
    (_oracle("pgr", 64, 1.0, d=1), "field d must be an integer in \\[2, 24\\]"),
    (_oracle("pgr", 1000, 1.0, d=2), "field d must give k <= K"),
    (_oracle("pgr", 64, 1.0, q=2, d=24), "field d must give k <= K = .* <= 2\\*\\*23"),
    (mss(64, 1.0, [59, 61], [0, 15]), "field omegas must be an integer in \\[1, 29\\]"),
    (mss(64, 1.0, [59, 61], [30, 15]), "field omegas must be an integer in \\[1, 29\\]"),
    (mss(64, 1.0, [5, 7], [2, 3]), "moduli have a product below k = 64"),
    (mss(64, 1.0, [1, 61, 63], [1, 15, 15], [5000] * 3), "field moduli must be an integer in \\[2, 63\\]"),
    (dict(mss(64, 1.0, [59, 61], [15, 15]), protocol="ss"), "moduli of ss must be the one modulus k"),
    (retag(dict(GOOD, moduli=[59.0, 61, 63])), "field moduli must be an integer"),
    (retag(dict(GOOD, k=1 << 30, moduli=[1 << 30], omegas=[1], thresholds=[5], rank_bits=[30])),
     "field k must be below 2\\*\\*30"),
]


@pytest.mark.parametrize("d,why", RANGES, ids=[w.split(" must")[0][:40] for _, w in RANGES])
def test_out_of_range_integers_are_refused_with_their_field(d, why):
    with pytest.raises(ValueError, match=why):
        _settings(d)


def test_host_refuses_a_threshold_below_uniform_and_counts_its_inverse():
    """T = 1 keeps the residue almost never: its absence gives the value away.  The host
    used to accept it (T <= the rule's T) and report a negative eps_effective."""
    d = HOSTILE["threshold-below-uniform"][0]
    with pytest.raises(ConfigError, match="so low that leaving the residue out exceeds the epsilon budget"):
        MssConfig.from_dict(d)
    r = privacy.ratio(59, 15, 1)
    assert r < 1 and privacy.eps_effective([59], [15], [1]) == pytest.approx(math.log(1 / r), rel=1e-12)


@pytest.mark.parametrize("dev,why", [
    ({"fleet_key": "00" * 15}, "device.fleet_key must be at least 32 hex digits"),
    ({"fleet_key": "zz" * 16}, "device.fleet_key must be at least 32 hex digits"),
    ({"max_epsilon": 2.0}, "device.max_epsilon .* needs device.max_ratio"),
    ({"max_ratio": privacy.cap(2.0)}, "device.max_epsilon .* needs device.max_ratio"),
    ({"max_epsilon": 2.0, "max_ratio": "7.3.8"}, "device.max_ratio must be a decimal number"),
    ({"max_epsilon": 2.0, "max_ratio": "-7.38"}, "device.max_ratio must be a decimal number"),
    ({"max_epsilon": 2.0, "max_ratio": privacy.cap(2.1)}, "device.max_ratio is not e\\^max_epsilon"),
    ({"max_epsilon": 150.0, "max_ratio": privacy.cap(151.0)}, "device.max_ratio is not e\\^max_epsilon"),
])
def test_device_fields_of_the_key_and_cap_are_checked(dev, why):
    with pytest.raises(ValueError, match=why) as exc:
        _settings(GOOD, **dev)
    assert "zz" * 16 not in str(exc.value)  # a key is never echoed
    _settings(GOOD, max_epsilon=150.0, max_ratio=privacy.cap(150.0))  # a 66-digit cap reads


def test_firmware_hmac_is_cpythons():
    rnd = random.Random(11)
    for _ in range(300):
        key, msg = rnd.randbytes(rnd.randrange(0, 150)), rnd.randbytes(rnd.randrange(0, 300))
        assert auth.hmac_sha256(key, msg) == hmac.new(key, msg, "sha256").digest()
    a = bytes(32)
    assert auth.same(a, a) and not auth.same(a, a[:-1] + b"\x01") and not auth.same(a, a[:-1])


@pytest.mark.parametrize("msg,why", [
    (GOOD, "not signed \\(no hmac\\)"),
    ([1, 2], "not signed"),
    (json.loads(seal(GOOD, OTHER_KEY, "t", 5)), "bad hmac"),
    (dict(json.loads(seal(GOOD, KEY, "t", 5)), hmac="ab" * 31), "malformed signature"),
    (dict(json.loads(seal(GOOD, KEY, "t", 5)), signed=5), "malformed signature"),
    (json.loads(seal(GOOD, KEY, "u", 5)), "signed for campaign 'u', not 't'"),
    (json.loads(seal(GOOD, KEY, "t", -1)), "no issued counter"),
])
def test_unseal_names_why_a_message_is_refused(msg, why):
    with pytest.raises(ValueError, match=why):
        auth.unseal(msg, KEY, "t")
    assert auth.unseal(json.loads(seal(GOOD, KEY, "t", 5)), KEY, "t") == (GOOD, 5)


def test_a_config_message_longer_than_a_board_takes_is_never_signed():
    """Boards drop a config message above MAX_MESSAGE bytes unread (SPEC.md section 5), so
    the aggregator refuses to publish one rather than have the fleet ignore it."""
    from mss_node.mqtt_link import MAX_MESSAGE as BOARD_MAX

    assert sealed.MAX_MESSAGE == BOARD_MAX
    seal(GOOD, KEY, "t", 5)
    with pytest.raises(ConfigError, match=f"boards drop any above {BOARD_MAX}"):
        seal(dict(GOOD, labels=["x" * 40] * 100), KEY, "t", 5)


class _Link:
    def send(self, b):
        return True

    def poll(self):
        pass


def test_a_reissued_config_moves_the_counter_so_an_older_one_is_a_replay(tmp_path, capsys):
    """The aggregator re-signs the config in use (a restart): the board keeps it and its
    newer issue, so a recording of an older config issued between is refused."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(GOOD, issued=10, device=device(device_id="x", campaign="t"))))
    node = Node(str(path), str(tmp_path / "state.json"), lambda: 3, link=_Link())
    other = MssConfig.build(64, 2.0, [55, 59, 61, 62]).to_dict()
    recorded = json.loads(seal(other, KEY, "t", 15))
    node.new_config(json.loads(seal(GOOD, KEY, "t", 20)))
    assert json.loads(path.read_text())["issued"] == 20 and node.s.issued == 20
    node.new_config(recorded)
    assert "issued 15, before 20" in capsys.readouterr().out
    assert node.s.config_id == GOOD["config_id"]
    node.new_config(json.loads(seal(other, KEY, "t", 21)))
    assert node.s.config_id == other["config_id"] and json.loads(path.read_text())["issued"] == 21
    node = Node(str(path), str(tmp_path / "state.json"), lambda: 3, link=_Link())  # a reboot keeps it
    node.new_config(json.loads(seal(GOOD, KEY, "t", 20)))
    assert node.s.config_id == other["config_id"] and "issued 20, before 21" in capsys.readouterr().out


def _deploy(tmp_path, *args):
    """``mss deploy --dry-run`` of GOOD, run in-process: exit code, stdout, stderr as printed."""
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(GOOD))
    return collect_helpers.mss("deploy", "--config", cfg, "--dry-run", "--no-budget", *args, unwrap=False)


def _flashed(out):
    line = out.stdout.splitlines()[-1]
    return json.loads(line.split("config.json: ", 1)[1].rsplit(" config_id", 1)[0])


def test_deploy_provisions_the_key_and_the_cap(tmp_path):
    key = tmp_path / "fleet.key"
    key.write_text(KEY.hex() + "\n")
    held = tmp_path / "cfg-b.json"
    held.write_text(json.dumps(MssConfig.build(64, 1.5, [55, 59, 61, 62]).to_dict()))
    out = _deploy(tmp_path, "--fleet-key-file", key, "--hold", held)
    assert out.returncode == 0, out.stderr
    dev = _flashed(out)
    assert dev["fleet_key"] == "***" and KEY.hex() not in out.stdout  # the dry run hides it
    assert dev["max_epsilon"] == 1.5 and dev["max_ratio"] == privacy.cap(1.5)  # the largest flashed
    out = _deploy(tmp_path, "--fleet-key-file", key, "--max-epsilon", CAP)
    assert out.returncode == 0 and _flashed(out)["max_ratio"] == privacy.cap(CAP), out.stderr
    out = _deploy(tmp_path, "--max-epsilon", 1.2, "--hold", held)
    assert out.returncode != 0 and "held config" in out.stderr and "above device.max_epsilon 1.2" in out.stderr
    assert "mpremote" not in out.stdout
    key.write_text("abcd")
    out = _deploy(tmp_path, "--fleet-key-file", key)
    assert out.returncode != 0 and f"{key}: a fleet key needs at least 16 bytes" in out.stderr
    out = _deploy(tmp_path, "--max-epsilon", -1)
    assert out.returncode != 0 and "--max-epsilon" in out.stderr


def test_deploy_without_key_or_cap_adds_neither(tmp_path):
    dev = _flashed(_deploy(tmp_path))
    assert not {"fleet_key", "max_epsilon", "max_ratio"} & set(dev)


@pytest.mark.parametrize("how", ["file", "env"])
def test_aggregate_refuses_a_bad_fleet_key_before_connecting(tmp_path, how):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(GOOD))
    key = tmp_path / "fleet.key"
    key.write_text("not hex")
    args = [sys.executable, "-m", "mss_cli", "aggregate", "--broker", "mqtt://127.0.0.1:9", "--config", cfg,
            "--store", tmp_path / "s.sqlite", "--quiet"]
    env = dict(__import__("os").environ, MSS_FLEET_KEY="1234")
    if how == "file":
        args += ["--fleet-key-file", key]
    out = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 3, out.stderr
    assert (f"{key}: a fleet key is hex digits" if how == "file" else "$MSS_FLEET_KEY: a fleet key needs") \
        in " ".join(out.stderr.split())
