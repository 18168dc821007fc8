"""The mss CLI: documented JSON fields, config files, exit codes."""
import json
import subprocess
import sys

import pytest

from mss_protocol import configs, registry
from mss_protocol.choose import COST_TIE
from mss_protocol.mss.config import MssConfig

PLAN_FIELDS = {"k", "epsilon", "eps_effective", "moduli", "omegas", "bits_per_report",
               "predicted_mse", "ss_variance", "variance_ratio_vs_ss", "config_id", "config",
               "protocol", "frame", "frame_bytes", "body_bits", "candidates"}
SIM_FIELDS = {"protocol", "k", "epsilon", "n", "trials", "mse", "mse_std", "predicted_mse",
              "decode_seconds", "bits_per_report", "config_id"}


def mss(*args):
    return subprocess.run([sys.executable, "-m", "mss_cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("protocol", ["mss", "auto", "pgr"])
def test_plan_json_and_device_config(tmp_path, protocol):
    out = mss("plan", "--k", 64, "--epsilon", 1, "--protocol", protocol, "--json",
              "--device-config", tmp_path / "cfg.json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert PLAN_FIELDS <= set(d)
    assert set(d["bits_per_report"]) == {"max", "mean"}
    assert d["eps_effective"] <= d["epsilon"] == 1.0
    cfg = configs.load(tmp_path / "cfg.json")
    assert cfg.config_id_hex == d["config_id"] and cfg.name == d["protocol"]
    assert d["frame"] == "full" and d["frame_bytes"] == 11 + (d["body_bits"] + 7) // 8
    assert {c["protocol"] for c in d["candidates"]} == ({protocol} if protocol != "auto" else
                                                       set(registry.AVAILABLE))
    if protocol == "mss":
        assert list(cfg.moduli) == d["moduli"]
    if protocol == "auto":  # of those within --mse-slack of the most accurate, the fastest on the device
        ok = [c for c in d["candidates"] if "excluded" not in c]  # (device times within 1%: the most robust)
        best = min(c["predicted_mse"] for c in ok)
        near = [c for c in ok if c["predicted_mse"] <= best * (1 + d["mse_slack"])]
        assert d["mse_slack"] == 0.02 and d["predicted_mse"] <= best * 1.02
        fastest = min(c["device_ms"] for c in near)
        tied = [c for c in near if c["device_ms"] <= fastest * (1 + COST_TIE)]
        assert d["device_ms"] <= fastest * (1 + COST_TIE)
        assert d["shift_per_report"] == min(c["shift_per_report"] for c in tied)


def test_plan_trades_two_percent_of_mse_for_device_time_within_the_budget():
    """k = 1024, eps = 1: SS is the most accurate (48 ms a report on an RP2040), OLH within 0.5% of
    it at 1.5 ms; --mse-slack 0 gives SS back, --max-device-ms 20 then leaves it out."""
    def plan(*args):
        out = mss("plan", "--k", 1024, "--epsilon", 1, "--json", *args)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    d = plan()
    rows = {c["protocol"]: c for c in d["candidates"]}
    assert d["protocol"] == "olh" and d["device_ok"] and d["max_device_ms"] == 100
    assert rows["olh"]["predicted_mse"] < 1.02 * rows["ss"]["predicted_mse"]
    assert rows["ss"]["device_ms"] > 20 * rows["olh"]["device_ms"]
    assert plan("--mse-slack", 0)["protocol"] == "ss"
    tight = plan("--mse-slack", 0, "--max-device-ms", 20)
    rows = {c["protocol"]: c for c in tight["candidates"]}
    assert tight["device_ms"] <= 20 and "--max-device-ms 20" in rows["ss"]["excluded"]


def test_plan_warns_about_a_named_protocol_above_the_device_budget():
    out = mss("plan", "--k", 1024, "--epsilon", 1, "--protocol", "ss", "--max-device-ms", 10)
    assert out.returncode == 0, out.stderr
    assert "warning:" in out.stdout and "above --max-device-ms 10" in " ".join(out.stdout.split())
    d = json.loads(mss("plan", "--k", 1024, "--epsilon", 1, "--protocol", "ss", "--max-device-ms", 10,
                       "--json").stdout)
    assert d["protocol"] == "ss" and d["device_ok"] is False and d["device_ms"] > 10


def test_plan_table():
    out = mss("plan", "--k", 64, "--epsilon", 2)
    assert out.returncode == 0 and "vs SS" in out.stdout and "chosen" in out.stdout


def test_simulate_json_and_plot(tmp_path):
    out = mss("simulate", "--k", 64, "--epsilon", 2, "--n", 5000, "--dist", "spike", "--seed", 1,
              "--protocol", "mss", "--trials", 3, "--json", "--plot", tmp_path / "p.png")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert SIM_FIELDS <= set(d)
    assert d["trials"] == 3 and d["protocol"] == "mss" and d["mse"] > 0 and d["mse_std"] > 0
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulate_from_config_and_file_distribution(tmp_path):
    mss("plan", "--k", 16, "--epsilon", 1, "--device-config", tmp_path / "cfg.json")
    (tmp_path / "counts.csv").write_text("item,count\n0,5\n3,10\n")
    out = mss("simulate", "--config", tmp_path / "cfg.json", "--n", 2000,
              "--dist", f"file:{tmp_path / 'counts.csv'}", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["k"] == 16


@pytest.mark.parametrize("args,code,message", [
    (["plan", "--k", 1024, "--epsilon", 4, "--max-bits", 3], 3, "no protocol fits"),
    (["plan", "--k", 1024, "--epsilon", 4, "--max-bytes", 11], 3, "no room for a body"),
    (["simulate", "--k", 64, "--epsilon", 1, "--n", 10, "--dist", "zipf:x"], 3, "zipf needs"),
    (["simulate", "--k", 64, "--epsilon", 1, "--n", 10, "--dist", "file:/nonexistent.csv"], 3,
     "nonexistent"),
    (["plan", "--k", 1, "--epsilon", 1], 2, "--k"),
    (["plan", "--k", 64, "--epsilon", -1], 2, "--epsilon"),
])
def test_errors_name_the_problem(args, code, message):
    out = mss(*args)
    assert out.returncode == code
    assert message in out.stderr


def test_device_sim_runtimes_agree_and_decode(tmp_path):
    mss("plan", "--k", 64, "--epsilon", 2, "--device-config", tmp_path / "cfg.json")
    seed = bytes(range(256)).hex() * 4
    outs = {}
    for runtime in ("micropython", "cpython"):
        out = mss("device-sim", "--config", tmp_path / "cfg.json", "--value", 9, "--count", 3,
                  "--runtime", runtime, "--seed-bytes", seed, "--epoch", 7, "--json")  # one epoch for both
        assert out.returncode == 0, out.stderr
        outs[runtime] = [json.loads(line) for line in out.stdout.splitlines()]
    assert outs["micropython"] == outs["cpython"] and len(outs["cpython"]) == 3
    assert set(outs["cpython"][0]) == {"hex", "protocol", "frame", "j", "subset"}


@pytest.mark.parametrize("runtime", ["micropython", "cpython"])
def test_device_sim_check_only_runs_the_boards_checks(tmp_path, runtime):
    """--check-only: the board's loader alone (no --value), its verdict printed; a refusal
    exits 1 with the board's message naming the field, whatever the host would say."""
    from hostile import retag
    from mss_protocol.privacy import cap

    cfg = MssConfig.build(64, 2.0, [59, 61, 63])
    good = tmp_path / "good.json"
    cfg.save(good)
    check = ("device-sim", "--check-only", "--runtime", runtime, "--config")
    out = mss(*check, good, "--json")
    assert out.returncode == 0, out.stderr
    v = json.loads(out.stdout)
    assert {k: v[k] for k in ("ok", "protocol", "k", "config_id", "frame", "transport", "device_id", "cap")} == \
        {"ok": True, "protocol": "mss", "k": 64, "config_id": cfg.config_id_hex, "frame": "full",
         "transport": "serial", "device_id": "sim", "cap": None}
    assert v["epsilon"] == pytest.approx(cfg.eps_effective, abs=1e-6)
    out = mss(*check, good, "--device-id", "b7")
    assert out.returncode == 0 and "accepted by the board" in out.stdout and "device id b7" in out.stdout
    assert f"config id {cfg.config_id_hex}" in out.stdout and "cap none" in out.stdout
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(retag(dict(cfg.to_dict(), moduli=[59.0, 61, 63]))))
    out = mss(*check, bad)
    assert out.returncode == 1 and "config field moduli must be an integer" in out.stderr, out.stderr
    out = mss(*check, bad, "--json")
    assert out.returncode == 1 and json.loads(out.stdout) == {
        "ok": False, "error": "config field moduli must be an integer in [2, 63]"}
    capped = tmp_path / "capped.json"
    capped.write_text(json.dumps(dict(cfg.to_dict(), device={"max_epsilon": 1.0, "max_ratio": cap(1.0)})))
    out = mss(*check, capped, "--json")
    assert out.returncode == 1 and "above device.max_epsilon 1" in json.loads(out.stdout)["error"]
    capped.write_text(json.dumps(dict(cfg.to_dict(), device={"max_epsilon": 2.0, "max_ratio": cap(2.0)})))
    out = mss(*check, capped, "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["cap"] == 2.0
    out = mss("device-sim", "--config", good)
    assert out.returncode == 2 and "--value is required" in out.stderr


def test_device_sim_missing_runtime_is_an_error(tmp_path, monkeypatch):
    mss("plan", "--k", 64, "--epsilon", 2, "--device-config", tmp_path / "cfg.json")
    monkeypatch.setenv("MSS_MICROPYTHON", str(tmp_path / "no-such-micropython"))
    out = mss("device-sim", "--config", tmp_path / "cfg.json", "--value", 1)
    assert out.returncode == 3 and "not installed" in out.stderr and out.stdout == ""


def test_estimate_csv_plot_and_errors(tmp_path):
    from loadgen import make_reports
    from mss_aggregator.collect.ingest import Ingest
    from mss_aggregator.collect.store import open_store

    cfg = MssConfig.build(64, 2.0, [59, 61, 63])
    store = open_store(tmp_path / "s.sqlite", cfg)
    ingest = Ingest(cfg, "t")
    store.write_batch([ingest.from_mqtt(f"mss/v1/t/{d}/report".encode(), p)
                       for d, _, _, p in make_reports(cfg, 50, 2)])
    store.close()
    out = mss("estimate", "--store", tmp_path / "s.sqlite", "--csv", tmp_path / "e.csv",
              "--plot", tmp_path / "e.png", "--post", "simplex")
    assert out.returncode == 0, out.stderr
    lines = (tmp_path / "e.csv").read_text().splitlines()
    assert len(lines) == 65 and lines[0] == ("item,estimate,stderr,ci_low,ci_high,detected,sim_low,sim_high,"
                                             "detected_simultaneous")
    assert (tmp_path / "e.png").read_bytes()[:4] == b"\x89PNG"
    out = mss("estimate", "--store", tmp_path / "s.sqlite", "--json", "--epoch", 1)
    assert out.returncode == 0, out.stderr
    one = json.loads(out.stdout)
    assert one["n"] == 50 and one["epoch"] == 1  # 50 devices x 2 epochs in the store
    default = json.loads(mss("estimate", "--store", tmp_path / "s.sqlite", "--json").stdout)
    assert (default["n"], default["epoch"], default["pooled"]) == (50, 1, False)  # no clock: the later of a tie
    assert [r["stderr"] for r in default["estimates"]] == [r["stderr"] for r in one["estimates"]]
    pooled = json.loads(mss("estimate", "--store", tmp_path / "s.sqlite", "--json", "--all-epochs").stdout)
    assert (pooled["n"], pooled["epoch"], pooled["epochs"], pooled["devices"]) == (100, None, 2, 50)
    assert pooled["stderr_factor"] == pytest.approx(2 ** 0.5, rel=1e-12)  # every device twice
    out = mss("estimate", "--store", tmp_path / "s.sqlite", "--epoch", 1, "--all-epochs")
    assert out.returncode == 2 and "not both" in out.stderr
    out = mss("estimate", "--store", tmp_path / "s.sqlite")
    assert out.returncode == 0 and ("epoch 1: 50 reports from 50 devices; the epoch with the most devices (50;"
                                    in " ".join(out.stdout.split()))
    out = mss("estimate", "--store", tmp_path / "s.sqlite", "--all-epochs")  # no memoize recorded: widened as if
    assert out.returncode == 0 and ("2 epochs pooled: 100 reports from 50 devices, standard errors widened x1.41 "
                                    "for repeated reports" in " ".join(out.stdout.split())), out.stdout
    other = tmp_path / "other.json"
    MssConfig.build(64, 1.0, [59, 61, 63]).save(other, {"device": {"period_s": 3600}})
    out = mss("aggregate", "--config", other, "--store", tmp_path / "s.sqlite", "--broker",
              "mqtt://127.0.0.1:1")
    assert out.returncode == 3 and "holds reports of config" in out.stderr
    out = mss("aggregate", "--config", other, "--store", tmp_path / "x.sqlite")
    assert out.returncode == 2 and "--broker" in out.stderr
    out = mss("aggregate", "--config", other, "--store", tmp_path / "x.sqlite", "--broker", "http://x")
    assert out.returncode == 2 and "--broker" in out.stderr and "broker URL" in out.stderr  # a usage error


BENCH_FIELDS = {"protocol", "k", "epsilon", "dist", "n", "trials", "mse", "mse_std", "mse_ratio_vs_ss",
                "bits_max", "bits_mean", "client_seconds_per_report", "decode_seconds"}


def test_bench_json_and_plots(tmp_path):
    out = mss("bench", "--k", 64, "--epsilon", "1,4", "--n", 3000, "--dist", "zipf:1.1,spike",
              "--trials", 2, "--protocols", "mss,ss,pgr,grr,rappor,sue,olh,hr", "--output", tmp_path / "b.json",
              "--plot-dir", tmp_path / "p")
    assert out.returncode == 0, out.stderr
    rows = json.loads((tmp_path / "b.json").read_text())["rows"]
    assert len(rows) == 2 * 2 * 8 and all(BENCH_FIELDS <= set(r) for r in rows)
    assert all(r["mse_ratio_vs_ss"] == 1.0 for r in rows if r["protocol"] == "ss")
    assert sorted(p.name for p in (tmp_path / "p").glob("*.png")) == [
        "bench-bits-k64.png", "bench-decode-k64.png", "bench-mse-k64-spike.png", "bench-mse-k64-zipf1.1.png"]


def test_bench_names_unknown_protocols():
    out = mss("bench", "--k", 64, "--epsilon", 1, "--trials", 1, "--protocols", "mss,nope")
    assert out.returncode == 2 and "nope" in out.stderr


def test_merge_counts_of_two_sites(tmp_path):
    """Sites export counts; mss merge sums them; the merged file decodes like
    one store holding every report; another config is refused by name."""
    from mss_aggregator.collect.ingest import Ingest
    from loadgen import make_reports
    from mss_aggregator.collect.store import open_store

    cfg = MssConfig.build(64, 2.0, [59, 61, 63])
    ingest = Ingest(cfg, "t")
    everything = open_store(tmp_path / "all.sqlite", cfg)
    for site in ("a", "b"):
        items = [ingest.from_mqtt(f"mss/v1/t/{d}/report".encode(), p)
                 for d, _, _, p in make_reports(cfg, 40, 2, prefix=site, seed=ord(site))]
        store = open_store(tmp_path / f"{site}.sqlite", cfg)
        store.write_batch(items)
        store.close()
        everything.write_batch(items)
        out = mss("estimate", "--store", tmp_path / f"{site}.sqlite", "--all-epochs",
                  "--export-counts", tmp_path / f"{site}.json")
        assert out.returncode == 0, out.stderr
    everything.close()
    out = mss("merge", tmp_path / "a.json", tmp_path / "b.json", "-o", tmp_path / "ab.json")
    assert out.returncode == 0, out.stderr
    merged = json.loads(mss("estimate", "--counts", tmp_path / "ab.json", "--json").stdout)
    whole = json.loads(mss("estimate", "--store", tmp_path / "all.sqlite", "--json", "--all-epochs").stdout)
    assert merged["n"] == whole["n"] == 160 and whole["epochs"] == 2 and whole["devices"] == 80
    assert [r["estimate"] for r in merged["estimates"]] == pytest.approx(
        [r["estimate"] for r in whole["estimates"]], abs=1e-12)
    from mss_protocol.counts import Counts

    Counts(MssConfig.build(64, 1.0, [59, 61, 63])).save(tmp_path / "other.json")
    out = mss("merge", tmp_path / "a.json", tmp_path / "other.json", "-o", tmp_path / "x.json")
    assert out.returncode == 3 and "other.json" in out.stderr and not (tmp_path / "x.json").exists()
    out = mss("estimate", "--counts", tmp_path / "ab.json", "--store", tmp_path / "all.sqlite")
    assert out.returncode == 2


def test_version_and_shell_completion():
    from importlib.metadata import version

    out = mss("--version")
    assert out.returncode == 0 and version("mss-iot") in out.stdout
    out = mss("completion", "bash")
    assert out.returncode == 0 and "_MSS_COMPLETE" in out.stdout
    import os

    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "mss")], capture_output=True, text=True,
                          env=dict(os.environ, _MSS_COMPLETE="bash_complete", COMP_WORDS="mss au", COMP_CWORD="1"))
    assert "plain,audit" in done.stdout.split()  # bash completion protocol: type,value


def test_deploy_dry_run(tmp_path):
    """mss deploy as users run it (tests/firmware/test_deploy.py runs it in-process): the dry run's
    mpremote steps end in the board's reset, exit 0; a bad --set is one error line, exit 3, no step."""
    from mss_protocol.budget import budget_section

    cfg = tmp_path / "cfg.json"
    MssConfig.build(64, 1.0, [59, 61, 63]).save(cfg, {"device": {"budget": budget_section(4.0, 30), "period_s": 3600}})
    out = mss("deploy", "--config", cfg, "--dry-run")
    assert out.returncode == 0, out.stderr
    steps = [line for line in out.stdout.splitlines() if not line.startswith("#")]
    assert steps[-1] == "mpremote connect auto reset" and any(line.endswith(" :config.json") for line in steps)
    out = mss("deploy", "--config", cfg, "--set", "period_s=-5", "--dry-run")
    assert out.returncode == 3 and "mpremote" not in out.stdout, out.stderr
    assert out.stderr.startswith("error: ") and "period_s" in out.stderr and len(out.stderr.splitlines()) == 1


@pytest.mark.parametrize("args,code,named", [
    (["plan", "--k", 1, "--epsilon", 1], 2, "--k"),
    (["plan", "--k", 64, "--epsilon", 1, "--bogus"], 2, "--bogus"),
    (["simulate", "--config", "{tmp}/missing.json", "--n", 10], 2, "missing.json"),
    (["simulate", "--config", "{tmp}/bad.json", "--n", 10], 3, "bad.json"),
    (["estimate", "--store", "{tmp}/missing.sqlite"], 3, "missing.sqlite"),
    (["estimate", "--counts", "{tmp}/bad.json"], 3, "bad.json"),
    (["merge", "{tmp}/bad.json", "-o", "{tmp}/x.json"], 3, "bad.json"),
    (["audit", "--k", 16, "--epsilon", 1, "--prior", "file:{tmp}/missing.csv", "--trials", 0], 3, "missing.csv"),
    (["audit", "--config", "{tmp}/bad.json"], 3, "bad.json"),
    (["device-sim", "--config", "{tmp}/bad.json", "--value", 1], 3, "bad.json"),
    (["bench", "--protocols", "mss,nope"], 2, "nope"),
])
def test_errors_exit_2_for_usage_3_for_data_and_name_the_culprit(tmp_path, args, code, named):
    (tmp_path / "bad.json").write_text("{not json")
    out = mss(*[str(a).format(tmp=tmp_path) for a in args])
    assert out.returncode == code, out.stderr
    assert named in out.stderr and "Traceback" not in out.stderr


def test_json_everywhere(tmp_path):
    """Every command that reports has machine-readable output on stdout."""
    out = mss("bench", "--k", 64, "--epsilon", 2, "--n", 1000, "--dist", "spike", "--trials", 1,
              "--protocols", "mss,grr", "--json")
    assert out.returncode == 0, out.stderr
    assert [r["protocol"] for r in json.loads(out.stdout)["rows"]] == ["mss", "grr"]
    from mss_protocol.counts import Counts

    cfg = MssConfig.build(64, 2.0, [59, 61, 63])
    Counts(cfg).save(tmp_path / "a.json")
    out = mss("merge", tmp_path / "a.json", tmp_path / "a.json", "-o", tmp_path / "m.json", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["config_id"] == cfg.config_id_hex
