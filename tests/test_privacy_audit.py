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
from test_cli import mss

from mss_aggregator.distributions import DistributionError, parse
from mss_aggregator.privacy import audit, empirical
from mss_aggregator.privacy.audit import channel
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
              "--longitudinal", "--horizons", "1,10,100", "--long-trials", 20)
    assert out.returncode == 0, out.stderr
    assert "single-report reconstruction: k=16" in out.stdout and "repeated reports" in out.stdout
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
    with pytest.raises(DistributionError, match="mss estimate --json"):
        parse(f"file:{tmp_path / 'bad.json'}", 4)


def test_empirical_audit_passes_honest_clients_and_catches_the_control():
    """Every host client at k = 16, eps = 1 stays within epsilon; the MSS control
    built for 2 eps (its true epsilon) is caught."""
    d = audit.empirical_epsilon(16, 1.0, audit.PROTOCOLS, 20000, seed=4, firmware=False)
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
