"""Issue 29: mss plan --shuffle-n N --delta D --central-epsilon C (the shuffle model's plan)."""
import math

import pytest

from mss_protocol import shuffling
from test_plan_link import plan, plan_json  # the plan tests' CLI helpers


def test_flags_exist_in_help():
    out = plan("--help")
    for flag in ("--shuffle-n", "--delta", "--central-epsilon"):
        assert flag in out.output


def test_json_states_central_epsilon_below_eps0_at_large_n():
    d = plan_json("--k", 64, "--epsilon", 3, "--shuffle-n", 100_000)
    s = d["shuffle"]
    assert set(s) == {"n", "delta", "eps0", "eps_c", "method"}
    assert (s["n"], s["delta"], s["eps0"]) == (100_000, 1e-6, 3.0)
    assert s["eps_c"] < 0.2 < s["eps0"]  # Feldman et al.'s closed form alone gives 0.34 at n = 1e5 (eps0 = 3)
    from mss_protocol import configs  # the chosen protocol's own bound where its device channel is ideal

    bound = shuffling.bound_args(*shuffling.config_bound(configs.load_dict(d["config"])))
    assert s["eps_c"] == shuffling.central_epsilon(3.0, 100_000, 1e-6, *bound).eps <= \
        shuffling.central_epsilon(3.0, 100_000, 1e-6).eps
    assert d["n"] == 100_000  # without --n the MSE is of one shuffled batch
    assert d["protocol"] != "olh"
    olh = [c for c in d["candidates"] if c["protocol"] == "olh"]
    assert olh and "seed names the device" in olh[0]["excluded"]


def test_delta_is_used():
    loose = plan_json("--k", 16, "--epsilon", 2, "--shuffle-n", 10_000, "--delta", 1e-3)["shuffle"]
    tight = plan_json("--k", 16, "--epsilon", 2, "--shuffle-n", 10_000)["shuffle"]
    assert loose["delta"] == 1e-3 and loose["eps_c"] < tight["eps_c"]


def test_olh_refused_with_why():
    out = plan("--k", 64, "--epsilon", 2, "--shuffle-n", 1000, "--protocol", "olh")
    assert out.exit_code == 2 and "--protocol" in out.output and "device id" in out.output


def test_central_epsilon_plans_and_compares_at_n_1e5():
    d = plan_json("--k", 1024, "--central-epsilon", 1, "--shuffle-n", 100_000)
    s = d["shuffle"]
    assert s["central_epsilon"] == 1.0 and s["eps_c"] <= 1.0
    assert d["epsilon"] == s["eps0"] > 1.0
    assert s["eps0"] <= shuffling.largest_eps0(1.0, 100_000, 1e-6)  # rounded down, so still meets C
    assert s["shuffled_mse"] == d["predicted_mse"]
    assert s["ratio"] == pytest.approx(s["local_mse"] / s["shuffled_mse"]) and s["ratio"] > 1


def test_human_output_states_the_release_and_the_ratio():
    out = plan("--k", 32, "--central-epsilon", 2, "--shuffle-n", 10_000)
    assert out.exit_code == 0, out.output
    assert "central (" in out.output and "pure-local plan at epsilon 2" in out.output


@pytest.mark.parametrize("args,flag", [
    (["--k", 16, "--central-epsilon", 1], "--central-epsilon"),  # needs --shuffle-n
    (["--k", 16, "--epsilon", 2, "--delta", 1e-5], "--delta"),  # needs --shuffle-n
    (["--k", 16, "--epsilon", 2, "--central-epsilon", 1, "--shuffle-n", 100], "--epsilon"),  # one of them
    (["--k", 16], "--epsilon"),
    (["--k", 16, "--epsilon", 2, "--shuffle-n", 0], "--shuffle-n"),
    (["--k", 16, "--epsilon", 2, "--shuffle-n", 10, "--delta", 1], "--delta"),
])
def test_bad_combinations_name_the_flag(args, flag):
    out = plan(*args)
    assert out.exit_code == 2 and flag in out.output, out.output


def _tightest(eps0, n, k, protocol):
    """The central figure of a shuffled batch at eps0 under the protocol's bounds: its smallest bound."""
    c = shuffling.central_epsilon(eps0, n, 1e-6, protocol, k)
    name, eps = min(c.bounds, key=lambda bound: bound[1])
    assert (c.method, c.eps) == (name, eps)  # Central names the smallest of the bounds it computed
    return c


def _planned_eps0(eps_c, n, k, protocol=None):
    """The largest eps0 meeting eps_c under the bounds for ``protocol``, to 4 decimals rounded down as
    mss plan plans it."""
    return math.floor(shuffling.largest_eps0(eps_c, n, 1e-6, protocol, k) * 1e4) / 1e4


def test_grr_plans_at_its_own_tighter_bound():
    # k = 16, n = 1e5, C = 0.5: auto chooses GRR at the generic bound's epsilon and says GRR's own allows more;
    # --protocol grr plans at the largest epsilon its tightest proven bound allows and states that bound
    auto = plan("--k", 16, "--central-epsilon", 0.5, "--shuffle-n", 100_000)
    assert auto.exit_code == 0 and "--protocol grr plans it there" in auto.output
    grr = plan_json("--k", 16, "--central-epsilon", 0.5, "--shuffle-n", 100_000, "--protocol", "grr")
    generic = shuffling.largest_eps0(0.5, 100_000, 1e-6)
    assert grr["epsilon"] == _planned_eps0(0.5, 100_000, 16, "grr") > generic
    tightest = _tightest(grr["epsilon"], 100_000, 16, "grr")
    assert (grr["shuffle"]["method"], grr["shuffle"]["eps_c"]) == (tightest.method, tightest.eps)
    assert tightest.eps <= 0.5 and tightest.method not in ("feldman-closed-form", "feldman-numerical")


def test_auto_names_grr_at_its_own_bound_when_it_beats_the_plan():
    # k = 1024, n = 10,000, C = 1: auto plans MSS at the generic bound's epsilon; GRR's own bound allows a
    # larger one, where GRR's predicted MSE is below auto's (docs/benchmarks.md, shuffled against pure local)
    auto = plan("--k", 1024, "--central-epsilon", 1, "--shuffle-n", 10_000)
    assert auto.exit_code == 0, auto.output
    auto_json = plan_json("--k", 1024, "--central-epsilon", 1, "--shuffle-n", 10_000)
    grr = plan_json("--k", 1024, "--central-epsilon", 1, "--shuffle-n", 10_000, "--protocol", "grr")
    own = _planned_eps0(1, 10_000, 1024, "grr")
    assert auto_json["epsilon"] == _planned_eps0(1, 10_000, 1024) < own == grr["epsilon"]
    assert grr["shuffle"]["method"] == _tightest(own, 10_000, 1024, "grr").method
    assert grr["predicted_mse"] < auto_json["predicted_mse"]
    text = " ".join(auto.output.split())
    assert (f"up to epsilon {own:g}, where GRR's predicted MSE {grr['predicted_mse']:.4g} is below this plan's "
            f"{auto_json['predicted_mse']:.4g}") in text
