"""A value that changes (issue 45): every figure of mss_aggregator.privacy.changing checked against a
fleet that runs the firmware's own memo and ledger code epoch by epoch.

The reference fleet below calls ``mss_node.memo.report`` (the node's memo lookup, LRU and fresh
draw) and ``mss_node.ledger.live`` / ``fits`` / ``window_ms`` (the budget's check, exact integers)
under CPython, one device and one epoch at a time, its values on a chain sampled with
``random.Random`` (independent of the library's NumPy sampler), its bodies drawn by the real
client.  Its attacker is written per epoch (the library's jumps over runs of epochs).

Tolerances: two independent estimates of one quantity differ by at most Z = 4.5 of their combined
standard error (binomial for success rates and for dating rates, batch means over devices for the
skip rate and the bias).  A correct implementation fails one comparison with probability about
7e-6; the file makes about 60, so a false alarm about once in 2,400 runs (the seeds are fixed, so a
run either passes or fails for good).  Each case runs in about a second.
"""
import math
import random

import numpy as np
import pytest

from mss_aggregator.privacy import audit, changing, model
from mss_aggregator.privacy.over_time import Device, Effort, change_setup, over_time
from mss_device.rng import ByteRng
from mss_node import ledger as fw_ledger
from mss_node import memo as fw_memo
from mss_protocol import budget as budgets
from mss_protocol.config_file import make_checked
from mss_protocol.oracle_config import OracleConfig

Z = 4.5
DAY_S = 86400


class _State:
    """What mss_node.memo reads and writes of the node's State."""

    def __init__(self, memo_max):
        self.memo, self.memo_max, self.seq = {}, memo_max, 0


class _Rep:
    """A Reporter whose fresh draw is the real client's (the body: the report's key)."""

    def __init__(self, ch, device):
        self.ch, self.device, self.reports = ch, device, {}

    def fresh(self, value, epoch, seq):
        r = self.ch.client(int(value), self.device)
        body = repr(self.ch.key(r)).encode()
        self.reports[body] = r
        return body, body

    def replay(self, body, epoch, seq):
        return body


def firmware_fleet(cfg, matrix, period_s, reports, devices, memo_max, section, horizons, seed, memoize=True):
    """The reference: per horizon hits of the per-epoch attacker, change dating counts, skips and
    the category counts of reporters and of all devices (per device, for batch means)."""
    ch = model.prr_channel(cfg.name, cfg.k, cfg.epsilon, cfg)[0]
    k = cfg.k
    rnd = random.Random(seed)
    device = ByteRng(random.Random(seed + 1).randbytes)
    pi = np.full(k, 1.0 / k)
    for _ in range(5000):  # the stationary law, by power iteration (not the library's eigenvector)
        pi = pi @ matrix
    worst = budgets.worst_ratio(cfg)
    ratio = (worst.numerator, worst.denominator)
    if section is not None:
        cap = budgets.ratio_fraction(section)
        num, den, w = cap.numerator, cap.denominator, fw_ledger.window_ms(section["days"])
    off = matrix.copy()
    np.fill_diagonal(off, 0.0)
    stay = np.diag(matrix)
    H = len(horizons)
    out = {"hits": np.zeros(H), "tp": np.zeros(H), "chg": np.zeros(H), "fp": np.zeros(H), "quiet": np.zeros(H),
           "skips": np.zeros((devices, H)), "rep": np.zeros((devices, H, k)), "all": np.zeros((devices, H, k))}
    for i in range(devices):
        x = rnd.choices(range(k), weights=pi)[0]
        st, spent, rep = _State(memo_max), [], _Rep(ch, device)
        prev, alpha = None, pi.copy()
        skips, rc, ac = 0, np.zeros(k), np.zeros(k)
        tp = fp = n_chg = quiet = 0
        h = 0
        for t in range(1, reports + 1):
            changed = False
            if t > 1:
                y = rnd.choices(range(k), weights=matrix[x])[0]
                changed, x = y != x, y

            def may_draw():
                nonlocal spent
                if section is None:
                    return True
                spent = fw_ledger.live(spent, t * period_s * 1000, w)
                return fw_ledger.fits(spent, ratio, num, den)

            if memoize:
                body, new_memo = fw_memo.report(rep, st, "c", x, t, may_draw)
            else:
                body = rep.fresh(x, t, 0)[0] if may_draw() else None
                new_memo = body
            if new_memo is not None:  # a fresh draw: the ledger's spend, the memo
                if section is not None:
                    g = [g for g in spent if g[:2] == list(ratio)]
                    if g:
                        g[0].append(t * period_s * 1000)
                    else:
                        spent.append(list(ratio) + [t * period_s * 1000])
                if memoize:
                    st.memo = new_memo
            # the attacker, epoch by epoch
            if t == 1:
                a = alpha
            elif body is not None and body == prev:
                a = alpha * stay
            elif body is not None and prev is not None:
                a = alpha @ off
            else:
                a = alpha @ matrix
            if body is not None and body != prev:  # a body that appears: a draw of the current value
                ll = ch.loglik(rep.reports[body])
                a = a * np.exp(ll - ll.max())
            alpha = a / a.sum()
            if t > 1:
                flag = body != prev
                if changed:
                    n_chg += 1
                    tp += flag
                else:
                    quiet += 1
                    fp += flag
            prev = body
            skips += body is None
            ac[x] += 1
            if body is not None:
                rc[x] += 1
            if t == horizons[h]:
                out["hits"][h] += int(np.argmax(alpha)) == x
                out["tp"][h] += tp
                out["chg"][h] += n_chg
                out["fp"][h] += fp
                out["quiet"][h] += quiet
                out["skips"][i, h], out["rep"][i, h], out["all"][i, h] = skips, rc, ac
                h += 1
    return out


def _library(cfg, change, period_s, reports, devices, trials, memo_max, section, seed, mode="budgeted"):
    setup = change_setup(cfg, period_s, True, section, memo_max)
    days = [max(1, r * period_s // DAY_S) for r in reports]
    return changing.figures(setup, change.chain(cfg.k, period_s), days, reports, [mode], devices, trials, seed)[mode]


def _close(a, b, se, what):
    assert abs(a - b) <= Z * se + 1e-12, f"{what}: library {a:.4g} vs firmware {b:.4g} (|diff| > {Z} x {se:.3g})"


def _binom_se(p1, n1, p2, n2):
    p = (p1 * n1 + p2 * n2) / (n1 + n2)
    return math.sqrt(max(p * (1 - p), 1e-4) * (1 / n1 + 1 / n2))


def _batch_se(per_device):
    """The standard error of a pooled ratio's numerator share, from 20 batches of devices."""
    batches = np.array_split(per_device, 20)
    return float(np.std([b.mean() for b in batches], ddof=1) / math.sqrt(20))


def _compare(lib, ref, horizons, devices_ref, trials_lib, k):
    for h, t in enumerate(horizons):
        f = lib[h]
        assert f["success"] <= f["ceiling"] * (1 + 1e-9) and not f["conflict"]
        assert f["ci"][0] <= f["measured"] <= f["ci"][1]
        _close(f["measured"], ref["hits"][h] / devices_ref,
               _binom_se(f["measured"], trials_lib, ref["hits"][h] / devices_ref, devices_ref), f"success at {t}")
        if ref["chg"][h] and f["changes_seen"]:
            tpr = ref["tp"][h] / ref["chg"][h]
            _close(f["change_time_tpr"], tpr, _binom_se(f["change_time_tpr"], f["changes_seen"], tpr, ref["chg"][h]),
                   f"dated changes at {t}")
        fpr = ref["fp"][h] / ref["quiet"][h]
        _close(f["change_time_fpr"], fpr, _binom_se(f["change_time_fpr"], trials_lib * (t - 1), fpr,
                                                    ref["quiet"][h]) + 1e-4, f"false dates at {t}")
        skip_ref = ref["skips"][:, h].sum() / (devices_ref * t)
        se_lib = (f["skip_rate_ci"][1] - f["skip_rate_ci"][0]) / (2 * 1.96)
        _close(f["skip_rate"], skip_ref, math.hypot(se_lib, _batch_se(ref["skips"][:, h] / t)), f"skip rate at {t}")
        rep, alls = ref["rep"][:, h], ref["all"][:, h]
        bias_ref = rep.sum(axis=0) / rep.sum() - alls.sum(axis=0) / alls.sum()
        for x in range(k):
            per = rep[:, x] / max(rep.sum() / len(rep), 1) - alls[:, x] / (alls.sum() / len(alls))
            se = math.hypot(f["bias_ci"][x] / 1.96, _batch_se(per))
            _close(f["bias"][x], bias_ref[x], se + 1e-4, f"bias of category {x} at {t}")


def _ss(k, epsilon):
    return make_checked("ss", k, epsilon).channel().cfg


@pytest.fixture(autouse=True)
def _quiet_memo(monkeypatch):
    monkeypatch.setattr(fw_memo.log, "warn", lambda *a, **kw: None)  # "memo full": once an eviction


def test_k2_grr_high_epsilon_one_memo():
    """k = 2, GRR at epsilon 6 (bodies of two values coincide often), memo_max 1 so every change
    re-draws, 2 draws a 30-day window: skips, the attacker near the ceiling."""
    cfg = OracleConfig("grr", 2, 6.0)
    section = budgets.budget_section(2 * 6.0, 30)
    change = changing.Change(every_days=5)
    period, horizons = DAY_S, [30, 120]
    lib = _library(cfg, change, period, horizons, 2000, 400, 1, section, seed=3)
    ref = firmware_fleet(cfg, change.chain(2, period).p, period, horizons[-1], 400, 1, section, horizons, seed=4)
    assert lib[-1]["skip_rate"] > 0.2  # the budget bites: the test measures skips
    _compare(lib, ref, horizons, 400, 400, 2)


def test_k4_ss_transitions_bias():
    """k = 4, SS at epsilon 2, a chain in which category 0 changes 10x faster than the rest: the
    budget's skips (memo_max 1, one draw a 30-day window) under-represent it (a bias the library
    must find, with the firmware's)."""
    cfg = _ss(4, 2.0)
    section = budgets.budget_section(2.0, 30)  # one fresh draw a window
    m = np.array([[0.7, 0.1, 0.1, 0.1], [0.01, 0.97, 0.01, 0.01], [0.01, 0.01, 0.97, 0.01],
                  [0.01, 0.01, 0.01, 0.97]])
    change = changing.Change(matrix=tuple(map(tuple, m)))
    period, horizons = DAY_S, [60, 150]
    lib = _library(cfg, change, period, horizons, 2000, 400, 1, section, seed=5)
    ref = firmware_fleet(cfg, m, period, horizons[-1], 400, 1, section, horizons, seed=6)
    assert lib[-1]["bias"][0] < -3 * lib[-1]["bias_ci"][0]  # under-represented beyond noise
    assert not lib[-1]["ceiling_holds"]  # the pattern can tell the value: no epsilon ceiling claimed
    _compare(lib, ref, horizons, 400, 400, 4)


def test_k16_ss_memoized_fleet_like():
    """k = 16, SS at epsilon 2, changing every 30 days, memoized without a budget (the fleet's
    chain): change times dated with advantage near 1, no skips, no bias."""
    cfg = _ss(16, 2.0)
    change = changing.Change(every_days=30)
    period, horizons = DAY_S // 2, [60, 240]
    lib = _library(cfg, change, period, horizons, 1000, 300, 16, None, seed=7, mode="memoized")
    ref = firmware_fleet(cfg, change.chain(16, period).p, period, horizons[-1], 300, 16, None, horizons, seed=8)
    assert lib[-1]["change_time_advantage"] > 0.95 and lib[-1]["skip_rate"] == 0
    _compare(lib, ref, horizons, 300, 300, 16)


def test_over_time_json_fields_and_consistency():
    """over_time with a change model: every horizon and mode has "changing" with the issue's
    fields, consistent (success within [0, 1] and at most its bound, the advantage tpr - fpr,
    no skips without a budget, fresh reports date nothing but bodies)."""
    cfg = OracleConfig("grr", 4, 2.0)
    ot = over_time(cfg, Device(6 * 3600, True, (8.0, 30)), None, 40, change=changing.Change(every_days=10),
                   effort=Effort(trials=50, change_devices=300, change_trials=100, max_draws=50))
    assert ot["change"]["every_days"] == 10 and abs(sum(ot["change"]["stationary"]) - 1) < 1e-9
    for h in ot["horizons"]:
        for mode in ot["modes"]:
            c = h[mode]["changing"]
            for key in ("success", "ci", "ceiling", "change_time_advantage", "skip_rate", "bias"):
                assert key in c, key
            assert 0 <= c["success"] <= c["bound"] + 1e-12 and len(c["bias"]) == 4
            assert c["ci"][0] <= c["measured"] <= c["ci"][1]
            if c["change_time_tpr"] is not None:
                assert c["change_time_advantage"] == pytest.approx(c["change_time_tpr"] - c["change_time_fpr"])
            if mode != "budgeted":
                assert c["skip_rate"] == 0 and all(b == 0 for b in c["bias"])
        assert h["memoized"]["changing"]["change_time_advantage"] > 0.5  # visible under memoization
        # fresh GRR: two draws of one value are equal with p^2 + (k-1) q^2, across a change 2pq + (k-2) q^2
        p = math.exp(2.0) / (math.exp(2.0) + 3)
        q = (1 - p) / 3
        exact = (p * p + 3 * q * q) - (2 * p * q + 2 * q * q)
        assert h["fresh"]["changing"]["change_time_advantage"] == pytest.approx(exact, abs=Z * math.sqrt(0.5 / 2000))


def _cli(*args):
    from click.testing import CliRunner

    from mss_cli.main import main

    return CliRunner(env={"COLUMNS": "250"}).invoke(main, [*map(str, args)])


def test_plan_json_changing_and_hiding_options(tmp_path):
    """mss plan --change-every: privacy_over_time's every horizon and mode carries "changing", and
    hiding_options compares the plan with the options that hide change times, each with its
    detectable frequency at --n, an option above the threshold not serving (never suggested)."""
    r = _cli("plan", "--k", 4, "--epsilon", 2, "--period", DAY_S, "--n", 300, "--campaign-days", 60,
             "--change-every", 7, "--json")
    assert r.exit_code == 0, r.output
    import json

    plan = json.loads(r.output)
    ot = plan["privacy_over_time"]
    assert ot["change"]["every_days"] == 7
    for h in ot["horizons"]:
        for mode in ot["modes"]:
            fields = set(h[mode]["changing"])
            assert {"success", "ci", "ceiling", "change_time_advantage", "skip_rate", "bias"} <= fields
    hid = plan["hiding_options"]
    assert hid["options"][0]["this"] and hid["options"][0]["detectable_frequency"] == plan["detectable_frequency"]
    names = [o["option"] for o in hid["options"]]
    assert any("fresh draws under the budget" in o for o in names) and any("shuffler" in o for o in names)
    assert sum("instantaneous layer" in o for o in names) == 4  # grr, olh, hr, pgr
    for o in hid["options"]:
        d = o["detectable_frequency"]
        assert o["serves"] == (o["why"] is None)
        if d is not None and d > hid["threshold"]:
            assert not o["serves"]
            assert hid["suggested"] is None or not hid["suggested"].startswith(o["option"])
    bad = _cli("plan", "--k", 4, "--epsilon", 2, "--change-every", 7, "--transitions", tmp_path / "x.json")
    assert bad.exit_code == 2
    (tmp_path / "t.csv").write_text("0.5,0.5\n0.5,0.5\n")
    bad = _cli("plan", "--k", 4, "--epsilon", 2, "--transitions", tmp_path / "t.csv")
    assert bad.exit_code == 2 and "4 x 4" in bad.output


def test_irr_change_dating_exact():
    """GRR k = 4 with an instantaneous layer at epsilon 1, memoized, no budget: every quiet epoch
    re-sends one draw, so the false dates are exactly 1 - (p1^2 + (1 - p1)^2 / 3); at a change two
    draws of different values coincide with 2pq + 2q^2, so the dated changes are
    1 - (c same + (1 - c) diff) up to the coincidences' sampling noise."""
    cfg = OracleConfig("grr", 4, 2.0, irr_epsilon=1.0)
    ot = over_time(cfg, Device(DAY_S, True, None), None, 90, change=changing.Change(every_days=5),
                   effort=Effort(trials=30, change_devices=400, change_trials=400, max_draws=30))
    layer = model.prr_channel("grr", 4, 2.0, cfg)[1]
    same = layer.p1 ** 2 + (1 - layer.p1) ** 2 / 3
    diff = 2 * layer.p1 * layer.q1 + 2 * layer.q1 ** 2
    o = model.prr_channel("grr", 4, 2.0, cfg)[0].oracle
    c = 2 * o.p * o.q + 2 * o.q ** 2
    m = ot["horizons"][-1]["memoized"]["changing"]
    assert m["change_time_fpr"] == pytest.approx(1 - same, rel=1e-9)
    tpr = 1 - (c * same + (1 - c) * diff)
    assert m["change_time_tpr"] == pytest.approx(tpr, abs=Z * math.sqrt(c * (1 - c) / m["changes_seen"]))
    assert m["change_time_advantage"] < 0.9  # the layer blurs the dates (without it: about 1 - c)
    for h in ot["horizons"]:  # the attacker on the draws is held to the draws' ceiling, not the reports'
        for mode in ot["modes"]:
            c = h[mode]["changing"]
            assert not c["conflict"] and c["success"] <= c["bound"] + 1e-12


@pytest.mark.parametrize("name,irr", [("grr", None), ("olh", 2.0), ("hr", None), ("pgr", 2.0), ("sue", None),
                                      ("ss", None)])
def test_every_protocol_under_its_ceiling(name, irr):
    """Every protocol (with a layer where it takes one): each changing figure at most its bound,
    no conflict, its interval around the measurement (k = 8, epsilon 3, a budget that bites)."""
    cfg = _ss(8, 3.0) if name == "ss" else OracleConfig(name, 8, 3.0, seed="device" if name == "olh" else "epoch",
                                                         irr_epsilon=irr)
    ot = over_time(cfg, Device(DAY_S, True, (6.0, 30)), None, 45, change=changing.Change(every_days=3),
                   effort=Effort(trials=20, change_devices=200, change_trials=150, max_draws=20))
    for h in ot["horizons"]:
        for mode in ot["modes"]:
            c = h[mode]["changing"]
            assert not c["conflict"], (mode, h["days"], c["measured"], c["bound"])
            assert c["success"] <= c["bound"] + 1e-12 and c["ci"][0] <= c["measured"] <= c["ci"][1]
            assert c["view"] == ("draws" if irr and mode != "fresh" else "reports")


def test_audit_deployment_carries_the_change_model():
    """mss audit --config --longitudinal --change-every: the deployment's over_time has the
    changing figures for the config as deployed, and a changing figure above its ceiling beyond
    noise is an audit problem."""
    cfg = OracleConfig("grr", 4, 2.0)
    device = {"period_s": DAY_S, "memoize": True, "budget": budgets.budget_section(4.0, 30)}
    dep = audit.deployment(audit.Target(4, 2.0, np.full(4, 0.25), cfg), ["grr"], device, campaign_days=40, trials=20,
                           change=changing.Change(every_days=4))
    ot = dep["over_time"]
    assert ot["deployment"] == "budgeted" and ot["change"]["every_days"] == 4
    c = ot["horizons"][-1]["budgeted"]["changing"]
    assert c["skip_rate"] > 0 and c["change_time_advantage"] > 0.5
    report = {"rows": [], "deployment": dep}
    assert audit.conflicts(report) == []
    c.update(conflict=True)
    assert any("a changing value" in p for p in audit.conflicts(report))


def test_transitions_file_json_and_csv(tmp_path):
    """--transitions reads JSON rows, {"matrix": rows} or CSV; a chain whose categories change at
    different rates claims no epsilon ceiling (ceiling_holds false, printed "(ε part)")."""
    rows = [[0.5, 0.5, 0, 0], [0.01, 0.97, 0.01, 0.01], [0.01, 0.01, 0.97, 0.01], [0.01, 0.01, 0.01, 0.97]]
    (tmp_path / "m.json").write_text(__import__("json").dumps({"matrix": rows}))
    (tmp_path / "m.csv").write_text("\n".join(",".join(map(str, r)) for r in rows) + "\n")
    assert np.allclose(changing.load_matrix(tmp_path / "m.json", 4), changing.load_matrix(tmp_path / "m.csv", 4))
    with pytest.raises(ValueError, match="row 1"):
        changing.check_matrix([[1, 0], [0.5, 0.6]], 2)
    r = _cli("plan", "--k", 4, "--epsilon", 2, "--period", DAY_S, "--n", 300, "--campaign-days", 40,
             "--transitions", tmp_path / "m.json")
    assert r.exit_code == 0, r.output
    assert "(ε part)" in r.output and "what hides the change times" in r.output


def test_audit_cli_change_every(tmp_path):
    """mss audit --config CFG --longitudinal --change-every D: the deployment's over_time carries
    the changing figures in --json and the table in the text output; without --longitudinal
    (or --config) it is a usage error naming the flag."""
    cfg = tmp_path / "c.json"
    r = _cli("plan", "--k", 4, "--epsilon", 2, "--protocol", "grr", "--period", DAY_S, "--device-config", cfg)
    assert r.exit_code == 0, r.output
    common = ("audit", "--config", cfg, "--trials", 0, "--long-trials", 20, "--horizons", "1,2", "--link-pairs", 10,
              "--campaign-days", 40, "--change-every", 5)
    r = _cli(*common, "--longitudinal", "--json")
    assert r.exit_code == 0, r.output
    import json

    ot = json.loads(r.output)["deployment"]["over_time"]
    assert ot["change"]["every_days"] == 5
    assert all("changing" in h[m] for h in ot["horizons"] for m in ot["modes"])
    r = _cli(*common, "--longitudinal")
    assert r.exit_code == 0 and "a value that changes" in r.output and "change times are visible" in r.output
    r = _cli(*common)
    assert r.exit_code == 2 and "--change-every" in r.output
