"""``mss audit``: the JSON contract, priors from estimates, the plot, exit
codes, and the empirical epsilon audit's verdicts.

Statistical assertions: each empirical epsilon bound is a one-sided
Clopper-Pearson bound at alpha = 0.001, so an honest client is flagged with
probability <= 0.1%; the CLI run checks 9 honest clients (false-alarm rate
<= 0.9%, fixed seed, so a given run is reproducible).
"""
import json
import random

import numpy as np
import pytest

from collect_helpers import mss
from mss_aggregator.distributions import DistributionError, parse
from mss_aggregator.privacy import audit, empirical
from mss_aggregator.privacy.model import channel
from mss_cli import audit as audit_cli
from mss_device.rng import ByteRng
from mss_protocol.mss.config import MssConfig

AUDIT_FIELDS = {"k", "epsilon", "prior", "ceiling", "rows"}
ROW_FIELDS = {"protocol", "paper_rule", "bayes_exact", "empirical", "empirical_ci"}


def test_cli_defaults_list_every_protocol():
    assert audit_cli.AUDIT_PROTOCOLS.split(",") == list(audit.PROTOCOLS)
    assert tuple(map(int, audit_cli.AUDIT_HORIZONS.split(","))) == audit.HORIZONS


def test_audit_json_contract_and_plot(tmp_path):
    out = mss("audit", "--k", 32, "--epsilon", 2, "--prior", "zipf:1.1", "--trials", 3000,
              "--json", "--plot", tmp_path / "a.png", "--plot-epsilons", "1,3")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert AUDIT_FIELDS <= set(d) and d["k"] == 32 and d["epsilon"] == 2.0 and d["prior"] == "zipf:1.1"
    assert [r["protocol"] for r in d["rows"]] == list(audit.PROTOCOLS)
    for r in d["rows"]:
        assert ROW_FIELDS <= set(r)
        lo, hi = r["empirical_ci"]
        assert lo <= r["empirical"] <= hi
        if r["bayes_exact"] is not None:
            assert r["bayes_exact"] <= d["ceiling"]
            assert r["paper_rule"] <= r["bayes_exact"] + 1e-12
    olh = d["rows"][audit.PROTOCOLS.index("olh")]
    assert olh["bayes_exact"] is None and olh["paper_rule_method"] == "closed form (approximation)"
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


def test_audit_table_longitudinal_and_config(tmp_path):
    cfg = MssConfig.build(16, 1.0, [11, 13, 15])
    cfg.save(tmp_path / "cfg.json")
    out = mss("audit", "--config", tmp_path / "cfg.json", "--protocols", "mss,grr", "--trials", 500,
              "--longitudinal", "--horizons", "1,10,100", "--long-trials", 20, "--link-pairs", 100,
              "--campaign-days", 7)
    assert out.returncode == 0, out.stderr
    assert "single-report reconstruction: k=16" in out.stdout and "repeated reports" in out.stdout
    assert "linkability of a memoized device" in out.stdout and "the deployment over 7 days" in out.stdout
    assert "firmware default (no device.period_s)" in out.stdout
    out = mss("audit", "--config", tmp_path / "cfg.json", "--k", 32)
    assert out.returncode == 3 and "disagree" in out.stderr
    out = mss("audit", "--k", 16, "--epsilon", 1, "--protocols", "mss,nope")
    assert out.returncode == 2 and "nope" in out.stderr
    out = mss("audit", "--k", 16, "--epsilon", 1, "--prior", "zipf:x")
    assert out.returncode == 3 and "zipf" in out.stderr


def test_prior_from_an_estimate(tmp_path):
    rows = [{"item": i, "estimate": v} for i, v in enumerate([0.5, 0.4, -0.05, 0.15])]
    (tmp_path / "est.json").write_text(json.dumps({"n": 10, "estimates": rows}))
    prior = parse(f"file:{tmp_path / 'est.json'}", 4)
    assert prior.sum() == pytest.approx(1) and prior.min() >= 0 and prior[2] == 0
    assert np.argmax(prior) == 0
    with pytest.raises(DistributionError, match="expected items 0..4"):
        parse(f"file:{tmp_path / 'est.json'}", 5)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(DistributionError, match="not an estimates document, the JSON output of `mss estimate`"):
        parse(f"file:{tmp_path / 'bad.json'}", 4)


def test_empirical_audit_passes_honest_clients_and_catches_the_control():
    """Every host client at k = 16, eps = 1 stays within epsilon; the MSS control
    built for 2 eps (its true epsilon) is caught."""
    d = audit.empirical_epsilon(audit.Target(16, 1.0), audit.PROTOCOLS, 20000, seed=4, firmware=False)
    honest = [r for r in d["rows"] if not r["control"]]
    assert len(honest) == 8 and all(r["within_epsilon"] for r in honest)
    (control,) = [r for r in d["rows"] if r["control"]]
    assert not control["within_epsilon"] and control["eps_lower_bound"] > 1.0
    assert audit.problems({"rows": [], "epsilon_audit": d}) == []


def test_the_audit_statistic_catches_a_biased_client():
    """A GRR client that answers the truth a little too often (threshold of
    1.5 eps) is flagged; the honest one with the same reports count is not."""
    rng = ByteRng(random.Random(9).randbytes)
    honest = channel("grr", 8, 1.0)
    biased = channel("grr", 8, 1.5)
    for ch, expect in ((honest, True), (biased, False)):
        reports = [empirical.host_reports(ch, x, 30000, rng) for x in (empirical.X1, empirical.X2)]
        assert empirical.audit_client(honest, *reports, 1.0)["within_epsilon"] is expect


def test_audit_fails_when_the_control_is_not_caught():
    """Too few reports to see the 2 eps control: exit status 1 and a reason."""
    out = mss("audit", "--k", 16, "--epsilon", 1, "--protocols", "grr", "--trials", 0,
              "--empirical", "--audit-trials", 100, "--no-firmware")
    assert out.returncode == 1 and "not caught" in out.stderr


def test_firmware_under_micropython_is_audited():
    """The CLI's firmware path: reports from ``mss_node.emit`` under the MicroPython
    unix port with its own os.urandom, parsed from their bytes."""
    from micropython_runner import require_micropython

    require_micropython()
    ch = channel("mss", 64, 1.0)
    cfg = ch.cfg
    reports = [empirical.firmware_reports(cfg, x, 20000) for x in (empirical.X1, empirical.X2)]
    assert all(len(r) == 20000 for r in reports)
    row = empirical.audit_client(ch, *reports, 1.0)
    assert row["within_epsilon"] and row["tp"] > row["fp"]


def _deployment_config(path, device, **kw):
    from mss_protocol.oracle_config import OracleConfig

    OracleConfig("grr", 12, 2.0, **kw).save(path, {"device": device})
    return path


def test_audit_of_a_deployment_config(tmp_path):
    """--config audits that deployment: its protocol only, its device section over
    --campaign-days (fresh draws 1 with memoize; the budget's B per window without),
    linkability with its instantaneous layer, and every existing field kept."""
    from mss_protocol.budget import budget_section

    cfg = _deployment_config(tmp_path / "c.json", {"period_s": 3456, "memoize": True,
                                                   "budget": budget_section(8.0, 30)}, irr_epsilon=1.0)
    out = mss("audit", "--config", cfg, "--trials", 300, "--longitudinal", "--horizons", "1,10,100",
              "--long-trials", 40, "--link-pairs", 300, "--campaign-days", 60, "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert AUDIT_FIELDS <= set(d) and [r["protocol"] for r in d["rows"]] == ["grr"] and d["skipped"] == []
    assert [(r["protocol"], r["mode"]) for r in d["longitudinal"]["rows"]] == [("grr", "fresh"), ("grr", "memoize")]
    dep = d["deployment"]
    assert (dep["period_s"], dep["memoize"], dep["campaign_days"]) == (3456, True, 60)
    assert dep["budget"]["days"] == 30 and dep["irr"]["epsilon"] == 1.0 and dep["horizons_days"] == [1, 7, 30, 60]
    assert dep["reports"] == [25, 175, 750, 1500]
    configured, fresh = dep["rows"]
    assert configured["mode"] == "configured" and configured["fresh_draws"] == [1, 1, 1, 1]
    assert configured["epsilon_spent"] == pytest.approx([2.0] * 4, abs=1e-6)
    assert fresh["mode"] == "fresh" and fresh["fresh_draws"] == dep["reports"]
    assert all(s == "weak" for s in fresh["strength"]) and configured["draws_per_window"] == 4
    link = {r["mode"]: r for r in d["linkability"]["rows"]}
    assert link["memoize+irr"]["irr"]["configured"] and link["memoize+irr"]["irr"]["epsilon"] == 1.0
    assert link["memoize"]["advantage"] > 0.8 > 0.2 > link["memoize+irr"]["exact"]["advantage"]
    ot = dep["over_time"]  # mss plan's figures for this config agree on the draws
    assert ot["deployment"] == "budgeted" and [h["days"] for h in ot["horizons"]] == [1, 30, 60]
    for h in ot["horizons"]:
        i = dep["horizons_days"].index(h["days"])
        assert h["budgeted"]["fresh_draws"] == configured["fresh_draws"][i] and h["reports"] == dep["reports"][i]
    budgeted = _deployment_config(tmp_path / "b.json", {"period_s": 3456, "budget": budget_section(8.0, 30)})
    d = json.loads(mss("audit", "--config", budgeted, "--trials", 0, "--longitudinal", "--horizons", "1",
                       "--long-trials", 20, "--link-pairs", 50, "--json").stdout)
    assert d["deployment"]["rows"][0]["fresh_draws"] == [4, 4, 4, 52]  # 4 a 30-day window over a year


def test_audit_k2_leaves_mss_out_and_protocols_narrow_longitudinal():
    """--k accepts 2 like plan: MSS (k >= 4) is left out with its reason, the rest run;
    --longitudinal follows --protocols."""
    out = mss("audit", "--k", 2, "--epsilon", 1, "--trials", 200, "--json", "--longitudinal", "--horizons", "1,5",
              "--long-trials", 20, "--link-pairs", 50, "--protocols", "mss,grr,ss")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert [r["protocol"] for r in d["rows"]] == ["grr", "ss"]
    assert d["skipped"][0]["protocol"] == "mss" and "k >= 4" in d["skipped"][0]["reason"]
    assert {r["protocol"] for r in d["longitudinal"]["rows"]} == {"grr", "ss"}
    out = mss("audit", "--k", 3, "--epsilon", 1, "--protocols", "mss")
    assert out.returncode == 2 and "k >= 4" in out.stderr


def test_empirical_firmware_row_is_the_configs_protocol(tmp_path):
    """--empirical with a grr config runs grr's firmware under MicroPython (reports decoded
    by the aggregator's codec), not MSS's; the control is still caught."""
    from micropython_runner import require_micropython

    require_micropython()
    cfg = _deployment_config(tmp_path / "c.json", {"period_s": 600})
    out = mss("audit", "--config", cfg, "--trials", 0, "--empirical", "--audit-trials", 6000, "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["client"]: r for r in json.loads(out.stdout)["epsilon_audit"]["rows"]}
    assert set(rows) == {"grr", "grr firmware", "control: mss at 2 eps"}
    fw = rows["grr firmware"]
    assert fw["runtime"] == "micropython" and fw["within_epsilon"] and fw["tp"] > fw["fp"]


@pytest.mark.parametrize("name", ["olh", "hr", "rappor"])
def test_firmware_reports_of_every_protocol_are_audited(name):
    """The firmware path for the other device modules: olh (a device id whose seed
    separates the inputs), hr, a unary encoding."""
    from micropython_runner import require_micropython

    from mss_protocol.oracle_config import OracleConfig

    require_micropython()
    cfg = OracleConfig(name, 16, 1.0)
    ch = channel(name, 16, 1.0)
    reports = [empirical.firmware_channel_reports(ch, cfg, x, 3000) for x in (empirical.X1, empirical.X2)]
    row = empirical.audit_client(ch, *reports, 1.0)
    assert row["within_epsilon"] and row["tp"] > 1.5 * row["fp"]
