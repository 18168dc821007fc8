"""Issue 25 items 1 and 3: mss plan states the privacy loss over time (fresh, memoized,
budgeted) and writes safe defaults (device.memoize, device.budget; olh seed device).

The attacker's figures are seeded simulations (mss_aggregator.privacy.over_time); they are
compared with the ceiling through their 95% Clopper-Pearson interval's lower end, so a
correct channel fails a comparison with probability <= 2.5% per figure, and with the fixed
seeds here the outcome is deterministic.  Exact figures (one draw, no IRR) are compared
with the ceiling to 1e-9 relative (GRR attains it exactly)."""
import json
import math
import re
import sys
from decimal import Decimal, localcontext
from fractions import Fraction

import pytest
from click.testing import CliRunner

from mss_aggregator.privacy import ceilings
from mss_aggregator.privacy.over_time import Device, over_time
from mss_cli.main import main
from mss_cli.plan import attacker_cell
from mss_protocol import budget, lorawan
from mss_protocol.configs import load_dict
from mss_protocol.oracle_config import OracleConfig

# the issue's example at the link's shortest period for its 2-byte report, the plan's default when the
# issue was written (now --estimate-every's, one estimate a day: issue 48 item 1); 3600 s since the
# budget holds a day with a join (24 reports a day)
SHORTEST = lorawan.budget(lorawan.parse_link("lorawan:eu868:0"), 2)["min_period_s"]
PER_DAY = 86400 // SHORTEST
ISSUE = ["--k", "12", "--epsilon", "2", "--link", "lorawan:eu868:0", "--n", "500", "--period", str(SHORTEST)]


def plan(*args, env=None):
    return CliRunner(env=env).invoke(main, ["plan", *map(str, args)])


def plan_json(*args):
    out = plan(*args, "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def flat(text):
    return " ".join(text.split())


# -- device.budget ------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [2, 8.0, 0.1, 1e-9, 7.999999, 83.16, 200, 4 * 20.79])
def test_budget_ratio_is_e_to_the_epsilon_rounded_down_to_60_digits(eps):
    """ratio <= e^eps < ratio (1 + 10^-59), exactly 60 significant digits, a plain decimal the
    board's parser (mss_node.cap.exact, the cap's style) reads as the same fraction."""
    sys.path.insert(0, "firmware/lib")
    from mss_node.cap import exact

    section = budget.budget_section(eps, 30)
    r = section["ratio"]
    assert set(r) <= set("0123456789.") and r.count(".") <= 1
    digits = r.replace(".", "").lstrip("0")
    assert len(digits.rstrip("0")) <= 60 and len(r.split(".")[0]) + len(r.partition(".")[2]) >= 60
    with localcontext() as ctx:
        ctx.prec = 300
        e = Decimal(eps).exp()  # 300 digits: far below the 10^-59 margin
        value = Decimal(r)
        assert value <= e < value * (1 + Decimal(10) ** -59)
        assert e - value < value * Decimal(10) ** -59
    num, den = exact(section["epsilon"], r, "device.budget.epsilon", "device.budget.ratio", "test")
    assert Fraction(num, den) == Fraction(Decimal(r)) == budget.ratio_fraction(section)
    assert section == {"epsilon": float(eps), "ratio": r, "days": 30}


def test_budget_ratio_never_rounds_up_where_nearest_would():
    """The cap's ratio (mss_protocol.privacy.cap) is e^eps rounded to nearest; the budget's is
    never above e^eps: over many epsilons both agree or the budget's is one unit lower."""
    from mss_protocol.privacy import cap

    lower = 0
    for i in range(1, 200):
        eps = i / 37
        down, near = Decimal(budget.ratio(eps)), Decimal(cap(eps))
        assert down <= near
        lower += down < near
    assert 40 < lower < 160  # about half round up to nearest: the two rules really differ


@pytest.mark.parametrize("text,named", [
    ("4", "EPS/DAYS"), ("4/", "EPS/DAYS"), ("/30", "EPS/DAYS"), ("x/30", "'x' is not a number"),
    ("0/30", "positive"), ("-1/30", "positive"), ("nan/30", "positive"), ("inf/30", "positive"),
    ("201/30", "up to 200"), ("4/0", "days"), ("4/2.5", "days"), ("4/-3", "days"), ("4/10001", "days"),
])
def test_parse_budget_names_what_is_wrong(text, named):
    with pytest.raises(ValueError, match=named):
        budget.parse_budget(text)


def test_parse_budget_and_the_boards_limits():
    assert budget.parse_budget("4/30") == (4.0, 30) and budget.parse_budget(" 0.5 / 7 ") == (0.5, 7)
    sys.path.insert(0, "firmware/lib")
    from mss_node import ledger, state

    assert budget.SPENT_MAX == state.SPENT_MAX and budget.MAX_DAYS == ledger.MAX_DAYS
    for bad in ((True, 30), ("4", 30), (4, 0), (4, 2.5), (4, True), (0, 30)):
        with pytest.raises(ValueError):
            budget.budget_section(*bad)


def test_draws_per_window_is_exact():
    cfg = OracleConfig("grr", 12, 2.0)
    worst = budget.worst_ratio(cfg)
    assert 2 - 1e-6 < math.log(worst) <= 2  # the board's (hi, lo): just under e^2
    for eps, n in ((8.0, 4), (2.0, 1), (1.99, 0), (7.99, 3), (11.0, 5)):
        section = budget.budget_section(eps, 30)
        assert budget.draws_per_window(section, worst) == n
        assert worst ** n <= budget.ratio_fraction(section) < worst ** (n + 1)


# -- mss plan: the issue's example -------------------------------------------------------
def test_the_issues_example_writes_memoize_and_a_budget_and_prints_the_table(tmp_path):
    """mss plan --k 12 --epsilon 2 --link lorawan:eu868:0 --n 500 --device-config lora12.json:
    device.memoize true and device.budget (4 x epsilon per 30 days), which the board's loader
    takes; the table's printed figures are privacy_over_time's, which is over_time's."""
    sys.path.insert(0, "firmware/lib")
    from mss_node.settings import Settings

    path = tmp_path / "lora12.json"
    out = plan(*ISSUE, "--device-config", path)
    assert out.exit_code == 0, out.output
    written = json.loads(path.read_text())
    assert written["device"]["memoize"] is True and written["device"]["period_s"] == SHORTEST
    assert written["device"]["budget"] == budget.budget_section(8.0, 30)
    dev = dict(written["device"], transport="lorawan", lorawan={"path": "/dev/x"})
    s = Settings(dict(written, device=dev))
    assert s.budget["draws"] == 4 and s.device["memoize"] is True
    text = flat(out.stdout)
    assert f"privacy over time: ss, a report every {SHORTEST} s ({PER_DAY}/day)" in text  # GRR ties on MSE and energy; SS is the more robust
    assert f"wrote {path} (device.period_s {SHORTEST}), device.sleep light, device.memoize true, device.budget 8 per 30 " \
           "days" in text
    d = plan_json(*ISSUE)
    ot = d["privacy_over_time"]
    assert (d["device_memoize"], d["device_budget"]) == (True, budget.budget_section(8.0, 30))
    device = Device(SHORTEST, True, d["device_budget"])
    assert ot == json.loads(json.dumps(over_time(load_dict(d["config"]), device, None, 365, prior_label="uniform")))
    assert ot["deployment"] == "budgeted" and ot["modes"] == ["fresh", "memoized", "budgeted"]
    assert [(h["days"], h["reports"]) for h in ot["horizons"]] == [(1, PER_DAY), (30, 30 * PER_DAY),
                                                                  (365, 365 * PER_DAY)]
    for mode in ot["modes"]:
        for h in ot["horizons"]:
            m = h[mode]
            row = (f"{h['days']} │ {h['reports']} │ {m['epsilon']:.3g} │ ≤ {m['epsilon_worst']:.3g} │ "
                   f"{attacker_cell(m)} │ {m['bound']:.3g} │")
            assert row in text, (mode, row)
    # what the issue measured: fresh reports give a stable value away within a day
    assert ot["horizons"][0]["fresh"]["success"] >= 0.9 and ot["horizons"][0]["memoized"]["exact"]


def test_fresh_reports_write_neither_and_warn_in_red(tmp_path):
    path = tmp_path / "fresh.json"
    out = plan(*ISSUE, "--fresh-reports", "--device-config", path, env={"FORCE_COLOR": "1", "COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    device = json.loads(path.read_text())["device"]
    assert device == {"period_s": SHORTEST, "sleep": "light"}
    d = plan_json(*ISSUE, "--fresh-reports")
    ot = d["privacy_over_time"]
    assert ot["deployment"] == "fresh" and ot["budget"] is None and d["device_budget"] is None
    day = ot["horizons"][0]["fresh"]
    red = out.stdout.split("\x1b[31m--fresh-reports: every report is a fresh draw")
    assert len(red) == 2, out.stdout
    red = flat(red[1].split("\x1b[0m")[0])  # the red text, up to its end
    assert f"the best attacker recovers a stable value with probability {attacker_cell(day)}" in red
    assert f"after one day ({PER_DAY} reports, epsilon {day['epsilon']:.3g})" in red
    assert "no device.memoize, no device.budget (--fresh-reports)" in flat(re.sub("\x1b\\[[0-9;]*m", "", out.stdout))
    assert "--fresh-reports" not in plan(*ISSUE).stdout


# -- the figures --------------------------------------------------------------------------
def _check_bounds(ot, k, memo_max=16):
    """epsilon: fresh = reports x eps_report; memoized stable = one draw; the worst cases;
    the budget's bound; the attacker never above the ceiling at the horizon's epsilon."""
    b = ot["budget"]
    for h in ot["horizons"]:
        t, days = h["reports"], h["days"]
        assert t == max(1, days * 86400 // ot["period_s"])
        fresh = h["fresh"]
        assert fresh["epsilon"] == pytest.approx(t * ot["eps_report"], rel=1e-12)
        assert fresh["fresh_draws"] == t
        for mode in ot["modes"]:
            m = h[mode]
            assert m["epsilon"] <= m["epsilon_worst"] * (1 + 1e-12) <= fresh["epsilon"] * (1 + 1e-9)
            assert m["ceiling"] == ceilings.ldp_prior([1 / k] * k, m["epsilon"])
            if m["exact"]:
                assert m["success"] <= m["ceiling"] * (1 + 1e-9), (mode, h)
            else:
                assert m["ci"][0] <= m["ceiling"], (mode, h)
            assert 0 <= m["success"] <= 1 and m["simulated_reports"] <= t
        memo = h["memoized"]
        if ot["memoize"]:
            assert memo["fresh_draws"] == 1
            assert memo["epsilon"] == pytest.approx(min(t * ot["eps_report"], ot["eps_draw"]), rel=1e-12)
            distinct = min(t, k) if memo_max >= k else t
            assert memo["epsilon_worst"] == pytest.approx(min(t * ot["eps_report"], distinct * ot["eps_draw"]),
                                                          rel=1e-12)
        if b:
            bound = b["epsilon"] * math.ceil(days / b["days"])
            assert h["budgeted"]["epsilon_worst"] <= bound * (1 + 1e-12)
            assert h["budgeted"]["fresh_draws"] <= b["draws_per_window"] * math.ceil(days / b["days"])


def test_fresh_memoized_and_budgeted_bounds_grr():
    d = plan_json(*ISSUE)
    ot = d["privacy_over_time"]
    assert ot["eps_draw"] == ot["eps_report"] == d["eps_effective"]
    _check_bounds(ot, 12)
    year = ot["horizons"][-1]
    assert year["memoized"]["epsilon_worst"] == pytest.approx(12 * d["eps_effective"])  # k = 12 <= memo_max
    assert year["budgeted"]["epsilon_worst"] == pytest.approx(12 * d["eps_effective"])  # 8 x 13 windows > that
    month = ot["horizons"][1]
    assert month["budgeted"]["epsilon_worst"] == 8.0  # one window
    assert year["fresh"]["lower_bound"] and year["fresh"]["simulated_reports"] == ot["attacker"]["max_draws"]


def test_bounds_with_an_irr_a_device_seed_and_a_budget_without_memo():
    """olh seed device with an instantaneous layer (memoized): one report costs less than a
    draw; hr fresh reports under a budget that binds (4 draws a day, hourly reports)."""
    cfg = OracleConfig("olh", 64, 2.0, "compact", "device", 3.0)
    ot = over_time(cfg, Device(3600, True, (8.0, 30)), None, 60, prior_label="uniform")
    assert ot["irr"]["epsilon"] == 3.0 and ot["eps_report"] < ot["eps_draw"] == cfg.eps_effective
    assert [h["days"] for h in ot["horizons"]] == [1, 30, 60]
    _check_bounds(ot, 64)
    ot2 = over_time(cfg, Device(3600, True, (8.0, 30)), None, 60, prior_label="uniform")
    assert ot2 == ot  # seeded: reproducible
    cfg = OracleConfig("hr", 32, 1.0)
    ot = over_time(cfg, Device(3600, False, (4.0, 1)), None, 30)
    assert ot["deployment"] == "budgeted" and ot["budget"]["draws_per_window"] == 4
    _check_bounds(ot, 32)
    day, month = ot["horizons"]
    assert day["budgeted"]["fresh_draws"] == 4 and month["budgeted"]["fresh_draws"] <= 4 * 30
    assert day["budgeted"]["epsilon"] == pytest.approx(4 * cfg.eps_effective)
    assert day["fresh"]["epsilon"] == pytest.approx(24 * cfg.eps_effective)
    with pytest.raises(ValueError, match="below one fresh draw"):
        over_time(cfg, Device(3600, True, (0.99, 30)), None, 30)


def test_mss_plan_with_a_period_and_a_campaign():
    d = plan_json("--k", 16, "--epsilon", 1, "--protocol", "mss", "--period", 7200, "--campaign-days", 60)
    ot = d["privacy_over_time"]
    assert ot["protocol"] == "mss" and [(h["days"], h["reports"]) for h in ot["horizons"]] == [(1, 12), (30, 360),
                                                                                           (60, 720)]
    _check_bounds(ot, 16)
    assert "privacy_over_time" not in plan_json("--k", 16, "--epsilon", 1)  # no period: no deployment


# -- safe defaults: olh, the instantaneous layer, refusals -----------------------------------
def test_olh_memoized_uses_a_device_seed_and_compact_frames(tmp_path):
    path = tmp_path / "olh.json"
    d = plan_json("--k", 64, "--epsilon", 2, "--protocol", "olh", "--link", "lorawan:us915:0", "--device-config",
                  path)
    assert (d["protocol"], d["frame"], d["config"]["seed"]) == ("olh", "compact", "device")
    written = json.loads(path.read_text())
    assert written["seed"] == "device" and written["device"]["memoize"] is True
    assert load_dict(written).config_id_hex == d["config_id"]
    fresh = plan_json("--k", 64, "--epsilon", 2, "--protocol", "olh", "--link", "lorawan:us915:0",
                      "--fresh-reports")
    assert fresh["frame"] == "compact-epoch" and "seed" not in fresh["config"]


def test_irr_epsilon_for_one_output_protocols_only():
    d = plan_json("--k", 12, "--epsilon", 2, "--protocol", "grr", "--irr-epsilon", 1, "--period", 3600)
    assert d["config"]["irr"]["epsilon"] == 1.0
    ot = d["privacy_over_time"]
    assert ot["irr"]["epsilon"] == 1.0 and ot["eps_report"] < ot["eps_draw"]
    auto = plan_json("--k", 12, "--epsilon", 2, "--irr-epsilon", 1)
    assert auto["protocol"] in ("grr", "olh", "hr", "pgr") and auto["config"]["irr"]["epsilon"] == 1.0
    excluded = {c["protocol"]: c.get("excluded", "") for c in auto["candidates"]}
    assert "no instantaneous layer" in excluded["mss"] and "no instantaneous layer" in excluded["sue"]
    for name in ("mss", "ss", "rappor", "sue"):
        out = plan("--k", 12, "--epsilon", 2, "--protocol", name, "--irr-epsilon", 1)
        assert out.exit_code == 2 and "--irr-epsilon" in out.output and f"{name} has no instantaneous" in \
            flat(out.output)


def test_an_irr_that_costs_more_than_tenfold_in_mse_is_warned_about():
    """The factor is the composed channel's predicted MSE over the permanent layer's alone; on hr every
    output supports half the domain, so GRR over its K outputs costs far more than on grr's k."""
    for name, k, eps, warned in (("hr", 64, 3, True), ("grr", 64, 3, True), ("olh", 1024, 2, False),
                                 ("grr", 4, 2, False)):
        args = ("--k", k, "--epsilon", eps, "--irr-epsilon", 3 if eps == 2 else 2, "--period", 3600,
                "--protocol", name)
        d = plan_json(*args)
        cfg = load_dict(d["config"])
        factor = cfg.protocol.variance(10000) / cfg.protocol.prr.variance(10000)
        assert d["irr_mse_factor"] == pytest.approx(factor, rel=1e-12)
        assert (factor > 10) is warned
        if k != 64 or name == "hr":  # the printed warning: one case each way
            out = flat(plan(*args).output)
            assert ("multiplies %s's predicted MSE by %.3g" % (name, factor) in out) is warned
    assert "irr_mse_factor" not in plan_json("--k", 64, "--epsilon", 3, "--protocol", "hr")


@pytest.mark.parametrize("args,named", [
    (["--budget", "4"], "EPS/DAYS"), (["--budget", "x/30"], "not a number"), (["--budget", "4/0"], "days"),
    (["--budget", "4/2.5"], "days"), (["--budget", "-1/30"], "positive"), (["--budget", "nan/30"], "positive"),
    (["--budget", "1/30"], "below one fresh draw"),  # epsilon 2: no fresh draw could ever be made
    (["--epsilon", "0.5", "--budget", "200/30"], "256"),  # more draws than the board's ledger holds
    (["--budget", "8/30", "--fresh-reports"], "not both"),
    (["--campaign-days", "0"], "--campaign-days"),
])
def test_bad_budget_values_exit_2(tmp_path, args, named):
    base = ["--k", "12", "--epsilon", "2"] if "--epsilon" not in args else ["--k", "12"]
    path = tmp_path / "cfg.json"
    out = plan(*base, *args, "--device-config", path)
    assert out.exit_code == 2, out.output
    assert named in flat(out.output) and ("--budget" in out.output or "--campaign-days" in out.output)
    assert not path.exists()


def test_aggregate_says_what_the_device_section_bounds():
    """``mss aggregate``'s start line (budget.describe): weak exactly when no budget bounds the campaign."""
    cfg = OracleConfig("grr", 12, 2.0)
    line, weak = budget.describe(cfg, {"period_s": 3456})
    assert weak and "50 a day per device" in line  # 2 x 86400 / 3456 = 25 reports a day
    line, weak = budget.describe(cfg, {"period_s": 3456, "memoize": True})
    assert weak and "no bound over the campaign" in line
    line, weak = budget.describe(cfg, {"period_s": 3456, **budget.default_device(2.0)})
    assert not weak and "device.budget 8 per 30 days (4 fresh draws" in line


@pytest.mark.parametrize("device,named", [
    ({"budget": {"epsilon": 4, "days": 30}}, "device.budget must be an object"),
    ({"budget": "4/30"}, "device.budget must be an object"),
    ({"memoize": "false"}, "device.memoize must be true or false"),
    ({"budget": {"epsilon": 4.0, "ratio": "7.3", "days": 30}}, "device.budget.ratio"),
    ({"budget": budget.budget_section(1.0, 30)}, "0 fresh draws"),  # below one draw at epsilon 2
])
def test_aggregate_refuses_a_device_section_the_boards_would(tmp_path, device, named):
    """A memoize or budget the boards refuse is refused before the aggregator starts (exit 3,
    naming the field), not a traceback in its start line or every dashboard refresh."""
    cfg = OracleConfig("grr", 12, 2.0)
    path = tmp_path / "cfg.json"
    cfg.save(path, {"device": dict({"period_s": 3600}, **device)})
    out = CliRunner().invoke(main, ["aggregate", "--config", str(path), "--store", str(tmp_path / "s.sqlite"),
                                    "--serial", str(tmp_path / "no-such-port")])
    assert out.exit_code == 3 and named in flat(out.output) and "Traceback" not in out.output
