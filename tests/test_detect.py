"""Detection (issue 47 item 4, :mod:`mss_aggregator.integrity.detect`): on simulated honest fleets
(fixed seeds; values held or changing every epoch) the devices flagged stay within the false-alarm
bound, the Maximal Gain Attack's devices are flagged, each protocol's support rates bound what its
honest reports do, what a stored report supports is what its device sent, and ``mss suspects`` /
``mss estimate --exclude-suspects`` work end to end on a small SQLite store (about 4 s in all).

The false-alarm tolerance: every test bounds an honest device's chance of a flag by alpha, so the
flags of D independent honest devices are at most Binomial(D, alpha) in law; D = 600, alpha = 0.01:
mean 6, sd 2.4, and P[Binomial(600, 0.01) > 16] < 1e-3 (16 = mean + 4 sd), the bound asserted."""
import json

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.store import open_store
from mss_aggregator.integrity.detect import DEFAULT_ALPHA, DeviceTest, scan, suspects
from mss_cli.main import main
from mss_protocol import registry
from mss_protocol.codec import codec
from mss_protocol.mss.config import MssConfig
from mss_protocol.vectors import build, report_from_stream

D, E = 600, 30
FLEETS = [("grr", 16, 4.0), ("rappor", 16, 1.0), ("sue", 16, 4.0), ("olh", 16, 2.0), ("hr", 16, 2.0),
          ("pgr", 16, 2.0), ("ss", 16, 2.0), ("mss", 16, 2.0)]
MOST = 16  # flags of D honest devices allowed (module docstring)


def test_the_tolerance_is_what_the_docstring_says():
    assert stats.binom.sf(MOST, D, DEFAULT_ALPHA) < 1e-3


def fleet(proto, changing, seed):
    """bool (D, E, k): D honest devices' reports over E epochs, values Zipf(1.1) mod k held, or drawn
    afresh every epoch (changing)."""
    rng = np.random.default_rng(seed)
    held = rng.zipf(1.1, D) % proto.k
    return np.stack([proto.sample_supports(rng.integers(0, proto.k, D) if changing else held, rng)
                     for _ in range(E)], axis=1)


@pytest.mark.parametrize("name,k,eps", FLEETS)
@pytest.mark.parametrize("changing", [False, True])
def test_honest_fleets_stay_within_the_false_alarm_bound(name, k, eps, changing):
    proto = registry.make(name, k, eps)
    honest = fleet(proto, changing, seed=[47, k, int(eps)])
    found = scan(proto, [(i, s) for i, s in enumerate(honest)])
    assert len(found.flagged) <= MOST, (name, len(found.flagged), found.flagged)


@pytest.mark.parametrize("name,k,eps", FLEETS)
def test_the_maximal_gain_attack_is_flagged(name, k, eps):
    proto = registry.make(name, k, eps)
    rng = np.random.default_rng(5)
    honest = fleet(proto, False, seed=6)[:200]
    targets = np.array([13, 14, 15])
    mga = [np.asarray(proto.support(proto.crafted_counts(np.roll(targets, i), 1, rng))) > 0 for i in range(3)]
    fakes = [np.repeat(mga[d % 3][None], E, axis=0) for d in range(10)]
    found = scan(proto, [(("h", i), s) for i, s in enumerate(honest)] + [(("c", i), s) for i, s in enumerate(fakes)])
    caught = [d for d in found.flagged if d[0] == "c"]
    assert len(caught) == 10, (name, found.flagged)
    for evidence in found.flagged[("c", 0)]:
        assert evidence.p_value <= evidence.alpha and evidence.test in DeviceTest(proto).fires + ("two-items",)


@pytest.mark.parametrize("name", ["grr", "rappor", "sue", "olh", "hr", "pgr", "ss", "mss"])
def test_support_rates_bound_the_honest_reports(name):
    """One item supported at most support_rate(1) (its own value), another item at most
    other_item_rate(), two at most support_rate(2): 20,000 reports of value 3, 4 sd of slack."""
    proto = registry.make(name, 64, 2.0)
    s = proto.sample_supports(np.full(20_000, 3), np.random.default_rng(1))
    slack = 4 * np.sqrt(0.25 / 20_000)
    assert s[:, 3].mean() <= proto.support_rate(1) + slack
    assert s[:, np.arange(64) != 3].mean(axis=0).max() <= proto.other_item_rate() + slack
    pairs = (s[:, 3] & s[:, 40]).mean(), (s[:, 17] & s[:, 40]).mean()
    assert max(pairs) <= proto.support_rate(2) + slack


CONFIGS = {"grr": build("grr", 16, 2.0, None, "full"), "oue": build("rappor", 16, 1.0, None, "full"),
           "olh": build("olh", 16, 2.0, None, "full"), "mss": MssConfig.build(16, 2.0, [13, 15])}
CAMPAIGN, DEVICES, EPOCHS, CRAFTED = "detect", 40, 12, 3


def campaign_store(path, cfg, seed=3):
    """A store of DEVICES honest devices over EPOCHS epochs (the device client's bytes) and CRAFTED
    devices ``evil<i>`` whose every report supports items 13, 14 and 15 as one report can (GRR: 13)."""
    rng = np.random.default_rng(seed)
    store, ingest = open_store(str(path), cfg), Ingest(cfg, CAMPAIGN)
    store.record_campaign(CAMPAIGN)
    wire, items = codec(cfg), []
    for epoch in range(1, EPOCHS + 1):
        for d in range(DEVICES):
            frame = report_from_stream(cfg.to_dict(), int(rng.zipf(1.5) % cfg.k), rng.bytes(256), epoch, epoch,
                                       f"d{d}")[0]
            items.append(ingest.from_mqtt(f"mss/v1/{CAMPAIGN}/d{d}/report".encode(), frame))
        for c in range(CRAFTED):
            if isinstance(cfg, MssConfig):
                m, omega = cfg.moduli[0], cfg.omegas[0]
                held = list(dict.fromkeys(t % m for t in (13, 14, 15)))
                frame = wire.encode(0, sorted((held + [r for r in range(m) if r not in held])[:omega]), epoch, epoch)
            elif cfg.protocol.unary_body:
                frame = wire.encode((1 << 2) | (1 << 1) | 1, epoch, epoch)  # items 13, 14, 15 of 16
            else:
                frame = wire.encode(13, epoch, epoch)  # GRR's point; OLH: the output the seed gives
            items.append(ingest.from_mqtt(f"mss/v1/{CAMPAIGN}/evil{c}/report".encode(), frame))
    store.write_batch(items)
    return store


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_stored_reports_support_what_their_device_sent(tmp_path, name):
    """supported_items of the store's rows is the channel's support of the report each device sent."""
    cfg = CONFIGS[name]
    store = campaign_store(tmp_path / "s.sqlite", cfg)
    try:
        proto = registry.from_config(cfg)
        rows = store.accepted_reports()
        assert len(rows) == (DEVICES + CRAFTED) * EPOCHS
        j = np.array([r[2] for r in rows])
        blobs = [bytes(r[3]) for r in rows]
        members = np.frombuffer(b"".join(blobs), dtype="<u4").astype(np.int64)
        got = proto.supported_items(j, members, np.array([len(b) // 4 for b in blobs]))
        if name in ("grr", "mss"):  # a point, a subset: never empty (OLH's output may hash no item)
            assert got.sum(axis=1).min() >= 1
        from mss_protocol.counts import Counts
        counts = Counts(cfg).add_tally(j, members, np.array([len(b) // 4 for b in blobs]))
        assert np.array_equal(np.asarray(proto.support(counts.c if not isinstance(cfg, MssConfig) else counts)),
                              got.sum(axis=0))
        if name != "olh":  # the crafted OLH point supports what the device's derived seed hashes to it
            found = suspects(store)
            assert {d for d in found.flagged if d.startswith("evil")} == {f"evil{c}" for c in range(CRAFTED)}
            assert len([d for d in found.flagged if d.startswith("d")]) <= 2
    finally:
        store.close()


def test_mss_suspects_and_estimate_exclude_suspects_end_to_end(tmp_path):
    cfg = CONFIGS["oue"]
    path = tmp_path / "s.sqlite"
    campaign_store(path, cfg).close()
    runner = CliRunner()
    out = runner.invoke(main, ["suspects", "--store", str(path), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    flagged = {s["device_id"] for s in doc["suspects"]}
    assert {f"evil{c}" for c in range(CRAFTED)} <= flagged and doc["alpha"] == DEFAULT_ALPHA
    ev = doc["suspects"][0]["evidence"][0]
    assert {"test", "statistic", "threshold", "p_value", "alpha", "items"} <= set(ev)
    text = runner.invoke(main, ["suspects", "--store", str(path), "--alpha", "0.001"])
    assert text.exit_code == 0 and "evil0" in text.output, text.output
    plain = json.loads(runner.invoke(main, ["estimate", "--store", str(path), "--all-epochs", "--json"]).output)
    res = runner.invoke(main, ["estimate", "--store", str(path), "--all-epochs", "--json", "--exclude-suspects"])
    assert res.exit_code == 0, res.output
    cut = json.loads(res.output)
    assert cut["integrity"]["excluded_suspects"] == len(flagged)
    assert cut["n"] == plain["n"] - EPOCHS * len(flagged)
    line = runner.invoke(main, ["estimate", "--store", str(path), "--all-epochs", "--exclude-suspects"])
    assert line.exit_code == 0 and f"excluded {len(flagged)} suspect" in line.output, line.output
