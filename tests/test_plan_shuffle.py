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
    # the chosen protocol at its own largest eps0 (at least the generic bound's, rounded down), which meets C
    # under the bound of its device config (the aggregator's path)
    chosen = next(c for c in d["candidates"] if c["protocol"] == d["protocol"])
    assert (s["eps0"], s["eps_c"], s["method"]) == (chosen["eps0"], chosen["eps_c"], chosen["central_method"])
    assert s["eps0"] >= _planned_eps0(1.0, 100_000, None)
    assert _central_of(d["config"], s["eps0"], 100_000).eps == s["eps_c"] <= 1.0
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


def _central_of(config, eps0, n):
    """The central figure of a batch of ``config``'s reports at eps0, under its device config's bound."""
    from mss_protocol import configs

    bound = shuffling.bound_args(*shuffling.config_bound(configs.load_dict(config)))
    return shuffling.central_epsilon(eps0, n, 1e-6, *bound)


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
    # k = 16, n = 1e5, C = 0.5: --protocol grr plans at the largest epsilon its tightest proven bound allows
    # and states that bound; auto weighs GRR at that epsilon too (it used to plan it at the generic bound's
    # and only say, in a note, that GRR's own bound allowed more: the note is gone)
    auto = plan("--k", 16, "--central-epsilon", 0.5, "--shuffle-n", 100_000)
    assert auto.exit_code == 0 and "--protocol grr plans it there" not in auto.output
    grr = plan_json("--k", 16, "--central-epsilon", 0.5, "--shuffle-n", 100_000, "--protocol", "grr")
    generic = shuffling.largest_eps0(0.5, 100_000, 1e-6)
    assert grr["epsilon"] == _planned_eps0(0.5, 100_000, 16, "grr") > generic
    tightest = _tightest(grr["epsilon"], 100_000, 16, "grr")
    assert (grr["shuffle"]["method"], grr["shuffle"]["eps_c"]) == (tightest.method, tightest.eps)
    assert tightest.eps <= 0.5 and tightest.method not in ("feldman-closed-form", "feldman-numerical")
    auto_grr = next(c for c in plan_json("--k", 16, "--central-epsilon", 0.5, "--shuffle-n", 100_000)["candidates"]
                    if c["protocol"] == "grr")
    assert (auto_grr["eps0"], auto_grr["central_method"], auto_grr["predicted_mse"]) == \
        (grr["epsilon"], tightest.method, grr["predicted_mse"])


def test_auto_plans_grr_at_its_own_bound_when_it_beats_the_generic_plan():
    # k = 1024, n = 10,000, C = 1: at the generic bound's epsilon auto chose MSS; GRR's own bound allows a larger
    # epsilon, where GRR's predicted MSE is below that plan's: auto now plans GRR there itself (no note needed)
    auto = plan("--k", 1024, "--central-epsilon", 1, "--shuffle-n", 10_000)
    assert auto.exit_code == 0, auto.output
    assert "GRR's own bounds" not in auto.output
    auto_json = plan_json("--k", 1024, "--central-epsilon", 1, "--shuffle-n", 10_000)
    grr = plan_json("--k", 1024, "--central-epsilon", 1, "--shuffle-n", 10_000, "--protocol", "grr")
    generic = plan_json("--k", 1024, "--epsilon", _planned_eps0(1, 10_000, 1024), "--shuffle-n", 10_000)
    own = _planned_eps0(1, 10_000, 1024, "grr")
    assert own == grr["epsilon"] > generic["epsilon"]
    assert grr["shuffle"]["method"] == _tightest(own, 10_000, 1024, "grr").method
    assert grr["predicted_mse"] < generic["predicted_mse"]
    assert auto_json["predicted_mse"] <= grr["predicted_mse"] * (1 + auto_json["mse_slack"])
    assert auto_json["epsilon"] == auto_json["shuffle"]["eps0"] >= generic["epsilon"]


def test_auto_ranks_every_candidate_at_its_own_central_eps0():
    # --central-epsilon C: each candidate is planned at the largest eps0 its own bound (at the size it plans
    # there: SS's w, HR's b) allows; recomputed from the named plan's device config, its central eps is <= C;
    # auto picks within the slack of the lowest MSE of those
    args = ("--k", 1024, "--central-epsilon", 1, "--shuffle-n", 10_000)
    auto = plan_json(*args)
    rows = [c for c in auto["candidates"] if c["predicted_mse"] is not None and "excluded" not in c]
    generic = _planned_eps0(1, 10_000, 1024)
    assert {c["protocol"] for c in rows} == {"mss", "ss", "grr", "rappor", "sue", "hr", "pgr"}
    for c in rows:
        named = plan_json(*args, "--protocol", c["protocol"])
        recomputed = _central_of(named["config"], c["eps0"], 10_000)
        assert named["epsilon"] == c["eps0"] >= generic and named["predicted_mse"] == c["predicted_mse"]
        assert (recomputed.eps, recomputed.method) == (c["eps_c"], c["central_method"])
        assert c["eps_c"] <= 1.0
        assert (named["shuffle"]["eps_c"], named["shuffle"]["method"]) == (c["eps_c"], c["central_method"])
    own = {c["protocol"] for c in rows if c["eps0"] > generic}
    assert {"ss", "grr", "rappor", "sue", "hr"} <= own  # the per-protocol bounds, SS and HR at their sizes
    least = min(rows, key=lambda c: c["predicted_mse"])
    assert auto["predicted_mse"] <= least["predicted_mse"] * (1 + auto["mse_slack"])
    assert auto["epsilon"] == next(c["eps0"] for c in rows if c["protocol"] == auto["protocol"])


def _grr_at(eps):
    from mss_protocol.oracle_config import OracleConfig

    return (OracleConfig("grr", 1024, eps),)


def test_central_eps0_falls_back_to_the_generic_eps0_when_its_answer_fails_the_check(monkeypatch):
    # the eps0 a search returns is checked at its own plan; were the check to fail, the generic bound's eps0
    # (valid for every randomiser) is planned instead, so the stated guarantee holds whatever the search did
    from mss_protocol.choose import CentralTarget, central_eps0

    target = CentralTarget(1.0, 10_000)
    generic = target.generic_eps0()
    real = CentralTarget.central

    def failing(self, eps0, cfg):  # GRR's search does not call central(): only the check and the fallback do
        c = real(self, eps0, cfg)
        return c if eps0 == generic else shuffling.Central(self.eps_c * 2, c.delta, c.n, eps0, "failed")

    monkeypatch.setattr(CentralTarget, "central", failing)
    eps0, planned, central = central_eps0(target, _grr_at)
    assert eps0 == generic == float(planned[0].epsilon) and central.eps <= 1.0
    assert _planned_eps0(1.0, 10_000, 1024, "grr") > generic  # without the failure it would have been larger


def test_a_cached_eps0_is_checked_before_it_is_used(tmp_path, monkeypatch):
    from mss_protocol.choose import CentralTarget, central_eps0

    monkeypatch.setenv("MSS_CACHE_DIR", str(tmp_path))
    target = CentralTarget(1.0, 10_000)
    eps0, _, _ = central_eps0(target, _grr_at, cache_key=["grr", 1024])
    assert eps0 == _planned_eps0(1.0, 10_000, 1024, "grr")
    (path,) = tmp_path.glob("eps0-*.json")
    path.write_text('{"eps0": 10.0}')  # a cache that no longer holds (10 is not amplified below 1 at n = 1e4)
    again, _, central = central_eps0(target, _grr_at, cache_key=["grr", 1024])
    assert again == eps0 and central.eps <= 1.0
    path.write_text('{"eps0": 2.5}')  # one that holds is used as it is (read, checked, not searched)
    assert central_eps0(target, _grr_at, cache_key=["grr", 1024])[0] == 2.5
