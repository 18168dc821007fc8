"""The per-protocol shuffle bounds are deployed only where the device's channel IS the ideal one.

``mss_protocol.shuffling``'s ss-, oue-, sue-, hr- and grr- bounds are derived for the ideal channel of
the protocol at eps0.  ``bound_args`` passes a config's protocol (and size) to ``central_epsilon`` with
eps0 its exact ``eps_effective``; that is valid because the integer device randomiser's law, enumerated
over every random decision of the real client (tests/channel.py), equals the ideal channel at
eps_effective (SS: subset size w = omega, one block of modulus k; HR: the config's block size b), which
these tests check to 1e-12 on a grid of planned configs.  A change to a device randomiser that breaks
the equality fails here (and the protocol must then leave ``bound_args``)."""
import math

import numpy as np
import pytest
from channel import enumerate_outputs
from mss_protocol import configs, registry, shuffling
from mss_protocol.choose import choose
from test_plan_link import plan_json  # the plan tests' CLI helpers

MAX_DRAWS = {"hr": 2}
# the registry protocols whose configs name an ideal mechanism (Protocol.shuffle_channel) on the grid
# below; test_every_protocol_naming_a_mechanism_is_enumerated_here keeps this list complete
DEPLOYED = ("grr", "ss", "rappor", "sue", "hr")  # HR's rejection loop: through its first accepted draw (tests/channel.py)


def planned(name, k, eps):
    """The config ``mss plan --protocol name`` writes for (k, eps), loaded as a device would."""
    return configs.load_dict(choose(k, eps, name)["config"])


def ideal(name, k, eps, size, x, report):
    """P[report | x] of the ideal protocol at eps (w = size for ss, block size b = size for hr)."""
    e = math.exp(eps)
    if name == "grr":
        return (e if report == x else 1.0) / (e + k - 1)
    if name == "ss":
        w, (j, subset) = size, report
        z = math.comb(k - 1, w - 1) * e + math.comb(k - 1, w)
        return (e if x in subset else 1.0) / z if j == 0 and len(subset) == w else 0.0
    if name in ("rappor", "sue"):
        h = math.exp(eps / 2)
        p, q = (0.5, 1 / (e + 1)) if name == "rappor" else (h / (h + 1), 1 / (h + 1))
        bits = np.unpackbits(np.frombuffer(report, dtype=np.uint8))[:k].astype(bool)
        others = np.delete(bits, x)
        return (p if bits[x] else 1 - p) * float(np.prod(np.where(others, q, 1 - q)))
    raise ValueError(name)  # hr: channel_difference, from the channel's membership


def channel_difference(cfg):
    """max over x, y of |P_device[y | x] - P_ideal[y | x]| at the config's eps_effective, and the
    smallest total mass of the ideal law over the enumerated outputs (1 when none is missing)."""
    proto = registry.from_config(cfg)
    ch = proto.channel()
    name, k, eps = cfg.name, cfg.k, float(cfg.eps_effective)
    size = cfg.omegas[0] if name == "ss" else getattr(proto, "b", None)
    if name == "ss":
        assert tuple(cfg.moduli) == (k,) and len(cfg.omegas) == 1  # one block of all k items
    worst, mass = 0.0, 1.0
    for x in range(k):
        law = enumerate_outputs(lambda rng, x=x: ch.key(ch.client(x, rng)), MAX_DRAWS.get(name))
        if name == "hr":
            e, b = math.exp(eps), proto.b
            lo = 1 / (e * b / 2 + proto.K - b / 2)
            members = ch.members(np.arange(proto.K))[:, x]
            ideal_law = {u: (e if members[u] else 1.0) * lo for u in range(proto.K)}
        else:
            def report(key):
                return (key[0], set(np.frombuffer(key[1], dtype=np.int64).tolist())) if name == "ss" else key
            ideal_law = {y: ideal(name, k, eps, size, x, report(y)) for y in law}
        worst = max(worst, max(abs(float(law.get(y, 0)) - ideal_law.get(y, 0.0)) for y in set(law) | set(ideal_law)))
        mass = min(mass, sum(ideal_law[y] for y in law))
    return worst, mass, size


GRID = [(k, eps) for k in (2, 3, 5, 8) for eps in (0.5, 1.0, 2.0, 4.0, 6.0)]


def test_every_protocol_naming_a_mechanism_is_enumerated_here():
    """A protocol whose shuffle_channel() names a mechanism claims that mechanism's bounds: its device
    channel must be enumerated below, so it must be in DEPLOYED (MSS over several blocks names none)."""
    naming = {name for name in registry.AVAILABLE if registry.make(name, 8, 2.0).shuffle_channel() is not None}
    assert naming == set(DEPLOYED)


@pytest.mark.parametrize("name", DEPLOYED)
def test_device_channel_is_the_ideal_channel_at_eps_effective(name):
    """For every deployed protocol the enumerated device law equals the ideal channel at eps_effective."""
    for k, eps in GRID + ([(12, 2.0), (9, 4.0)] if name != "rappor" and name != "sue" else [(6, 3.0)]):
        cfg = planned(name, k, eps)
        worst, mass, size = channel_difference(cfg)
        assert worst <= 1e-12 and abs(mass - 1) <= 1e-12, (name, k, eps, size, worst, mass)


@pytest.mark.parametrize("name,size", [("ss", "omegas"), ("rappor", None), ("sue", None), ("hr", "b"), ("grr", None)])
def test_bound_args_names_the_protocol_with_its_size(name, size):
    cfg = planned(name, 16, 2.0)
    protocol, k, got = shuffling.bound_args(*shuffling.config_bound(cfg))
    assert (protocol, k) == ({"rappor": "oue"}.get(name, name), 16)
    want = cfg.omegas[0] if size == "omegas" else getattr(registry.from_config(cfg), size) if size else None
    assert got == want
    # an instantaneous layer keeps the generic bound
    assert shuffling.bound_args(protocol, 16, True, want) == (None, None, None)


def test_plan_shuffle_names_the_per_protocol_bound():
    """``mss plan --protocol P --shuffle-n`` states the central figure of P's own bound."""
    for name, method in (("ss", "ss-"), ("rappor", "oue-"), ("sue", "sue-"), ("hr", "hr-")):
        shuffle = plan_json("--k", 16, "--epsilon", 4, "--protocol", name, "--shuffle-n", 10_000,
                            "--delta", 1e-6)["shuffle"]
        assert shuffle["method"].startswith(method), (name, shuffle)
        assert shuffle["eps_c"] <= shuffling.central_epsilon(4.0, 10_000, 1e-6).eps
