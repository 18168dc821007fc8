"""The certified interval (issue 47, item 2): every estimate states what ``compromised`` untrusted
devices can do to it, ``max_shift = M * shift_per_report(1) / n``, and widens each item's interval
by exactly that; crafted reports of the right shape (built with the protocol's own wire encoder to
support a target item as much as one report can) in place of M honest devices' reports never move
the target further; ``mss estimate --compromised`` takes a count or a share (about 5 s in all)."""
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.store import open_store
from mss_aggregator.estimates import EstimateRequest, estimate_store, integrity_of, with_certified
from mss_cli.main import main
from mss_protocol import registry
from mss_protocol.codec import codec
from mss_protocol.integrity import Compromised
from mss_protocol.mss.config import MssConfig
from mss_protocol.vectors import build, report_from_stream

CAMPAIGN = "certified"
EPOCH = 5
DEVICES = 300
TARGET = 11  # a rare item under Zipf(1.5) mod k
M = 6  # compromised devices (2%)

CONFIGS = {"grr": build("grr", 16, 2.0, None, "full"), "oue": build("rappor", 16, 2.0, None, "full"),
           "ss": MssConfig.build(16, 2.0, [16]), "mss": MssConfig.build(16, 2.0, [13, 15])}


def honest_frames(cfg, seed=47):
    """One real report (the device client's bytes) of each of ``DEVICES`` devices, in epoch ``EPOCH``."""
    rng = np.random.default_rng(seed)
    return [report_from_stream(cfg.to_dict(), int(rng.zipf(1.5) % cfg.k), rng.bytes(256), EPOCH, EPOCH,
                               f"d{d}")[0] for d in range(DEVICES)]


def crafted_frames(cfg, target):
    """Wire reports, one per choice, that support ``target`` as much as one report can: GRR's point
    on it; OUE's bits with only its bit set (any other bit moves other items, not it); for a subset
    protocol a subset of one block holding its residue (one list of ``M`` copies per block)."""
    wire = codec(cfg)
    if isinstance(cfg, MssConfig):
        out = []
        for j, (m, omega) in enumerate(zip(cfg.moduli, cfg.omegas)):
            residue = target % m
            subset = [residue] + [r for r in range(m) if r != residue][:omega - 1]
            out.append([wire.encode(j, subset, EPOCH, EPOCH)] * M)
        return out
    value = 1 << (cfg.k - 1 - target) if cfg.protocol.unary_body else target  # unary: item 0 most significant
    return [[wire.encode(value, EPOCH, EPOCH)] * M]


def stored(path, cfg, frames):
    """A store at ``path`` holding ``frames``, the i-th from device ``d<i>``."""
    store, ingest = open_store(str(path), cfg), Ingest(cfg, CAMPAIGN)
    store.record_campaign(CAMPAIGN)
    store.write_batch([ingest.from_mqtt(f"mss/v1/{CAMPAIGN}/d{i}/report".encode(), f) for i, f in enumerate(frames)])
    return store


def decoded(path, cfg, frames, compromised=Compromised(count=M)):
    store = stored(path, cfg, frames)
    try:
        return estimate_store(store, EstimateRequest(epoch=EPOCH, compromised=compromised))
    finally:
        store.close()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_crafted_reports_never_move_the_target_beyond_max_shift(tmp_path, name):
    cfg = CONFIGS[name]
    honest = honest_frames(cfg)
    base = decoded(tmp_path / "honest.sqlite", cfg, honest)
    bound = base.integrity.max_shift
    assert bound == pytest.approx(M * registry.from_config(cfg).shift_per_report(1) / DEVICES, rel=1e-12)
    assert base.integrity.compromised == M
    realised = []
    for i, crafted in enumerate(crafted_frames(cfg, TARGET)):  # devices d0 .. d(M-1) compromised
        attacked = decoded(tmp_path / f"attacked{i}.sqlite", cfg, crafted + honest[M:])
        assert attacked.n == base.n == DEVICES
        assert attacked.integrity.max_shift == pytest.approx(bound, rel=1e-12)  # the same n, M, protocol
        shift = attacked.estimate.raw - base.estimate.raw
        realised.append(shift[TARGET])
        assert np.all(np.abs(shift) <= bound * (1 + 1e-9)), (name, i, np.abs(shift).max(), bound)
    assert max(realised) > 0  # the crafted reports do push the target up
    if name == "grr":  # one report per target: the bound is attained but for replaced reports of the target
        assert max(realised) >= 0.5 * bound


def test_certified_ci_contains_the_ci_widened_by_exactly_max_shift(tmp_path):
    cfg = CONFIGS["mss"]
    est = decoded(tmp_path / "s.sqlite", cfg, honest_frames(cfg))
    doc = est.to_dict()
    s = doc["integrity"]["max_shift"]
    assert doc["integrity"] == {"compromised": M, "max_shift": est.integrity.max_shift} and s > 0
    for row in doc["estimates"]:
        low, high = row["certified_ci"]
        assert low <= row["ci_low"] <= row["ci_high"] <= high
        assert row["ci_low"] - low == pytest.approx(s, abs=1e-15) and high - row["ci_high"] == pytest.approx(s, abs=1e-15)
    assert list(est.to_frame()["certified_ci"]) == [r["certified_ci"] for r in doc["estimates"]]
    assert "6 compromised boards can move any item by at most +-" in est.integrity.headline()


def test_compromised_count_or_share():
    assert Compromised(count=3).devices(1000) == 3
    assert Compromised(share=0.01).devices(150) == 2  # a share of the devices, rounded up
    assert Compromised(share=0.01).devices(300) == 3
    assert Compromised(share=0.0).devices(300) == 0
    for bad in (dict(), dict(count=1, share=0.1), dict(count=-1), dict(count=1.5), dict(share=1.0),
                dict(share=float("nan"))):
        with pytest.raises(ValueError):
            Compromised(**bad)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("certified") / "s.sqlite"
    stored(path, CONFIGS["mss"], honest_frames(CONFIGS["mss"])).close()
    return str(path)


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="mss")


@pytest.mark.parametrize("flag, devices", [("3", 3), ("1%", 3), ("0.5%", 2), ("0", 0), (None, 1)])
def test_cli_compromised_count_and_share(store_path, flag, devices):
    given = () if flag is None else ("--compromised", flag)
    out = run("estimate", "--store", store_path, "--epoch", EPOCH, "--json", *given)
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    shift = registry.from_config(CONFIGS["mss"]).shift_per_report(1)
    assert doc["integrity"] == {"compromised": devices, "max_shift": pytest.approx(devices * shift / DEVICES)}
    for row in doc["estimates"]:
        assert row["certified_ci"] == pytest.approx([row["ci_low"] - doc["integrity"]["max_shift"],
                                                     row["ci_high"] + doc["integrity"]["max_shift"]])
    text = run("estimate", "--store", store_path, "--epoch", EPOCH, *given)
    assert text.exit_code == 0, text.output
    boards = "1 compromised board " if devices == 1 else f"{devices} compromised boards "
    assert f"{boards}can move any item by at most +-{devices * shift / DEVICES:.4f}" in text.output


@pytest.mark.parametrize("bad", ["-1", "100%", "x", "nan%", "2.5", "%"])
def test_cli_refuses_a_bad_compromised(store_path, bad):
    out = run("estimate", "--store", store_path, "--compromised", bad)
    assert out.exit_code == 2 and "--compromised" in out.output


def test_counts_file_states_the_bound(store_path, tmp_path):
    counts = tmp_path / "c.json"
    assert run("estimate", "--store", store_path, "--epoch", EPOCH, "--export-counts", counts).exit_code == 0
    doc = json.loads(run("estimate", "--counts", counts, "--compromised", "2", "--json").stdout)
    shift = registry.from_config(CONFIGS["mss"]).shift_per_report(1)
    assert doc["integrity"] == {"compromised": 2, "max_shift": pytest.approx(2 * shift / DEVICES)}
    assert all(len(r["certified_ci"]) == 2 for r in doc["estimates"])
    assert math.isfinite(doc["integrity"]["max_shift"])


def test_no_coefficient_no_certified_interval():
    """A protocol that refuses to compute its coefficient (MSS above k = 2048) gives no certified
    interval, saying why, rather than a made-up one."""
    class Refusing:
        def shift_per_report(self, r=1):
            raise ValueError("not computed at k = 4096")

    integrity = integrity_of(Refusing(), 500, 3)
    assert integrity.max_shift is None and integrity.document() == {"compromised": 3, "max_shift": None}
    assert with_certified([{"ci_low": 0.1, "ci_high": 0.2}], integrity)[0]["certified_ci"] is None
    assert integrity.headline() == "no certified interval: not computed at k = 4096"
