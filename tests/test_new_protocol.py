"""A new protocol needs its own files and one registration, nothing else (README, "Adding a protocol").

The toy protocol of ``tests/toy_protocol/`` (host module ``mss_toy.protocol``, device
module ``mss_toy.device``, vectors ``vectors/toy/``) is registered the way an
installed package registers one: its entry point in the group ``mss_iot.protocols``
(``mss_toy-0.1.dist-info``), here found by putting the folder on PYTHONPATH.  Every
step then runs as a separate process, as an operator runs it: ``mss plan`` writes
its device config, ``mss simulate`` and ``mss bench`` decode it, ``mss audit``
attacks it, its own device client's reports go through the aggregator's ingest
into a store, and ``mss estimate`` reads them back.  Everything the project needs
of a protocol is asked of the protocol object (``mss_protocol.base``): a
protocol-specific branch elsewhere that the toy missed would fail here.
About 10 s (seven processes).
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOY = Path(__file__).resolve().parent / "toy_protocol"
VECTORS = TOY / "vectors"
K, EPS = 8, 2.0


def run(*args, module="mss_cli"):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(TOY), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    """``mss plan --protocol toy``'s device config."""
    path = tmp_path_factory.mktemp("toy") / "toy.json"
    plan = json.loads(run("plan", "--k", K, "--epsilon", EPS, "--protocol", "toy", "--json",
                          "--device-config", path))
    assert plan["protocol"] == "toy" and plan["config"]["protocol"] == "toy"
    assert plan["device_ms"] > 0 and plan["decode_s"] > 0  # its cost models, asked of the protocol
    return path


# The toy at its threshold is GRR's channel (the same ratio between y = x and y != x):
# P[y = x] = e^eps / (e^eps + k - 1), the Bayes attacker's success at a uniform prior
KEEP = math.exp(EPS) / (math.exp(EPS) + K - 1)


def test_plan_auto_considers_it():
    """``auto`` plans every registered protocol: the toy's MSE is GRR's (the same channel)."""
    plan = json.loads(run("plan", "--k", K, "--epsilon", EPS, "--json"))
    rows = {row["protocol"]: row for row in plan["candidates"]}
    assert rows["toy"]["predicted_mse"] == pytest.approx(rows["grr"]["predicted_mse"], rel=1e-6)


def test_simulate_and_bench(config):
    """The decoder is unbiased at its predicted MSE: 5 trials of k = 8 items, a mean of 40
    squared errors, whose ratio to the prediction has a standard deviation near
    sqrt(2 / 40) = 0.22; [0.4, 1.9] is beyond 2.5 of them either side."""
    sim = json.loads(run("simulate", "--config", config, "--n", 2000, "--trials", 5, "--seed", 1, "--json"))
    assert sim["protocol"] == "toy" and 0.4 < sim["mse"] / sim["predicted_mse"] < 1.9
    bench = json.loads(run("bench", "--k", K, "--epsilon", EPS, "--n", 2000, "--trials", 1, "--dist", "uniform",
                           "--protocols", "toy,grr", "--json"))
    assert {row["protocol"] for row in bench["rows"]} == {"toy", "grr"}


def test_audit(config):
    """The measured Bayes attacker's interval holds the exact P[y = x], and nothing conflicts."""
    audit = json.loads(run("audit", "--config", config, "--trials", 2000, "--json"))
    (row,) = audit["rows"]
    assert row["protocol"] == "toy" and not row["empirical_conflict"]
    assert row["empirical_ci"][0] <= KEEP <= row["empirical_ci"][1]


def test_vectors_and_ingest_then_estimate(config, tmp_path):
    """The toy's vectors reproduce from its device client; its reports, ingested, estimate."""
    store = tmp_path / "s.sqlite"
    run(str(VECTORS), str(config), str(store), module="mss_toy.drive")
    est = json.loads(run("estimate", "--store", store, "--config", config, "--epoch", 7, "--json"))
    assert est["n"] == 400 and len(est["estimates"]) == K
    # uniform values: sum of squared z-scores below the chi-square(8) 0.999 quantile, 26.1
    assert sum(((e["estimate"] - 1 / K) / e["stderr"]) ** 2 for e in est["estimates"]) < 26.1


def test_a_missing_method_names_the_protocol_and_the_method():
    """What a protocol lacks fails loudly, never as another protocol's branch."""
    from mss_protocol.base import Protocol

    class Bare(Protocol):
        name = "bare"

    for ask in (lambda p: p.cost_family, lambda p: p.device_features(), lambda p: p.decode_cells(10),
                lambda p: p.ingest_us(), lambda p: p.simulated_report_us(), lambda p: p.channel()):
        with pytest.raises(NotImplementedError, match=r"protocol 'bare' \(Bare\) does not define"):
            ask(Bare())
