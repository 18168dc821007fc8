"""``mss audit --learned``: a classifier on the metadata of simulated campaigns
(mss_aggregator.privacy.learned).

* a value that does not change, memoized: the metadata says nothing, and the learned
  attacker's success lands on the formal figure (the exact single-draw Bayes success
  plan and audit print) within its 95% interval; nothing is named;
* memoized reports of a value that follows a public signal when it changes: the epoch
  a body changes says which public value the device took, so the learned attacker
  beats the formal figure far beyond its interval and names "body changes";
* without scikit-learn the CLI says how to install it (exit 2); with it, --json
  carries the ``learned`` object.

Fixed seeds; small campaigns (GRR, k = 4 and 8, 2 days of hourly reports): a few
seconds each.
"""
import json
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from mss_protocol.oracle_config import OracleConfig

learned = pytest.importorskip("mss_aggregator.privacy.learned")
pytest.importorskip("sklearn")


def test_stable_value_lands_on_the_formal_figure():
    cfg = OracleConfig("grr", 4, 1.0)
    camp = learned.Campaign(devices=1500, days=2, change_days=1e4, seed=3)  # a change in 2 days: p < 0.0002
    out = learned.learned_attack(cfg, {"memoize": True, "period_s": 3600}, camp)
    formal = out["formal"]
    assert formal["exact"] and formal["fresh_draws"] == 1
    assert formal["success"] == pytest.approx(np.e / (np.e + 3), rel=1e-3)  # GRR's p: guess the report
    assert out["ci"][0] <= formal["success"] <= out["ci"][1], out  # 0.436 [0.389, 0.483]: the Bayes rule
    # (guess the report) scores 0.436 on the same 450 held-out devices
    assert out["leaked"] is None and not out["beats_formal"]
    assert out["observed"]["report_sizes"] and len(out["observed"]["report_sizes"]) == 1  # one size: constant
    drops = {r["name"]: r["drop_in_success"] for r in out["features"]}
    assert set(drops) == {"bodies", "body changes", "skipped epochs", "arrival times", "report sizes"}
    assert drops["bodies"] > 0.1  # the body is what it learns from
    for name in ("arrival times", "report sizes", "skipped epochs"):  # nothing value-dependent in them
        assert abs(drops[name]) < 0.05, (name, drops)


def test_body_changes_beside_a_public_signal_leak_and_are_named():
    k, days = 8, 2
    rng = np.random.default_rng(11)
    public = rng.integers(0, k, size=days * 24)  # a neighbour's value, drawn anew every hour
    cfg = OracleConfig("grr", k, 1.0)
    camp = learned.Campaign(devices=1000, days=days, change_days=0.5, public=public, follow=0.9, seed=5)
    out = learned.learned_attack(cfg, {"memoize": True, "period_s": 3600}, camp)
    formal = out["formal"]["success"]
    assert formal == pytest.approx(np.e / (np.e + 7), rel=1e-3)
    assert out["beats_formal"] and out["ci"][0] > formal + 0.2, out  # measured: 0.813 [0.765, 0.856] against 0.280
    assert out["public_only"] < formal  # the signal alone says little: the change epochs say which value
    assert out["leaked"] == "body changes"
    drops = {r["name"]: r["drop_in_success"] for r in out["features"]}
    assert drops["body changes"] == max(drops.values()) and drops["body changes"] > 0.3


def test_skips_under_a_tight_budget_follow_the_firmware_rule():
    # budget of one draw per window: a memoized device skips exactly when its value has no memo
    cfg = OracleConfig("grr", 4, 1.0)
    from mss_protocol import budget as budgets

    device = {"memoize": True, "period_s": 3600, "budget": budgets.budget_section(1.0, 1)}
    rec = learned.simulate(cfg, learned.Regime.of_device(device), learned.Campaign(devices=300, days=3,
                                                                                    change_days=0.25, seed=1))
    assert rec["draws_per_window"] == 1
    w = rec["window_epochs"]
    assert w == 25  # a day + a day / 64 of board time: live while t - s < 25 epochs of an hour
    fresh, skip = rec["fresh"], rec["skip"]
    for i in range(300):
        draws = np.flatnonzero(fresh[i])
        assert np.all(np.diff(draws) >= w)  # never two draws in one window
    assert skip.any() and not (skip & fresh).any() and not (skip & rec["sent"]).any()


def test_cli_without_sklearn_says_how_to_install(tmp_path, monkeypatch):
    from mss_cli.main import main  # through the group: its context settings (-h), as the tests of the CLI

    path = tmp_path / "cfg.json"
    raw = OracleConfig("grr", 4, 1.0).to_dict()
    raw["device"] = {"memoize": True, "period_s": 3600}
    path.write_text(json.dumps(raw))
    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn raises ImportError
    r = CliRunner().invoke(main, ["audit", "--config", str(path), "--learned", "--trials", "0"], prog_name="mss")
    assert r.exit_code == 2, r.output
    assert "pip install 'mss-iot[learned]'" in r.output
    monkeypatch.undo()
    r = CliRunner().invoke(main, ["audit", "--config", str(path), "--learned", "--trials", "0", "--json",
                                  "--learned-devices", "300", "--learned-days", "1"], prog_name="mss")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)["learned"]
    assert {"success", "ci", "ceiling", "formal", "features", "leaked"} <= set(doc)
    assert all({"name", "drop_in_success"} <= set(f) for f in doc["features"])
