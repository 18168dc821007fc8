"""The views of an estimate (mss estimate, its plot, /api/estimates): the sensor's own
order and names, top N everywhere, signal marks and captions, and no silent empty
answers (exit 3 naming what the store holds)."""
import json
import re

import numpy as np
import pytest

from mss_aggregator import plotting, view as views
from mss_aggregator.collect.ingest import Ingest
from collect_helpers import build_aggregator, mss
from mss_aggregator.collect.store import open_store
from mss_aggregator.web.live import LiveView
from mss_protocol import categories
from mss_protocol.config_file import ConfigError
from mss_protocol.oracle_config import OracleConfig
from mss_protocol.vectors import report_from_stream

CFG = OracleConfig("grr", 12, 3.0)
LABELS = [f"{t}..{t + 5} C" for t in range(-10, 50, 5)]
# a warm sensor: most readings in the upper buckets, none in the two coldest
PROBS = np.array([0, 0, 1, 2, 4, 6, 9, 12, 14, 10, 6, 3], float) / 67


def _config(path, **extra):
    path.write_text(json.dumps(dict(CFG.to_dict(), device={"period_s": 3600}, **extra)))
    return path


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    """600 devices in epoch 7 and 300 in epoch 8, real device reports."""
    path = tmp_path_factory.mktemp("views") / "s.sqlite"
    store, ingest = open_store(path, CFG), Ingest(CFG, "t")
    rng = np.random.default_rng(26)
    msgs = []
    for epoch, devices in ((7, 600), (8, 300)):
        for d in range(devices):
            value = int(rng.choice(CFG.k, p=PROBS))
            report, _ = report_from_stream(CFG.to_dict(), value, rng.bytes(256), epoch, epoch, f"d{d}")
            msgs.append(ingest.from_mqtt(f"mss/v1/t/d{d}/report".encode(), report))
    store.write_batch(msgs)
    store.close()
    return path


def _json(*args):
    out = mss("estimate", *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_labels_and_order_follow_the_config(store_path, tmp_path):
    cfg = _config(tmp_path / "c.json", labels=LABELS, ordinal=True)
    doc = _json("--store", store_path, "--config", cfg, "--epoch", 7)
    view = doc["view"]
    assert (view["order"], view["top"], view["intervals"]) == ("item", 12, "marginal")  # all 12, in order
    assert view["shown"] == list(range(12)) and view["labels"] == LABELS and view["ordinal"] is True
    assert [r["label"] for r in doc["estimates"]] == LABELS
    text = mss("estimate", "--store", store_path, "--config", cfg, "--epoch", 7).stdout
    rows = [line for line in text.splitlines() if " C " in line]  # the table's rows, top to bottom
    assert [next(label for label in LABELS if label in row) for row in rows] == LABELS
    ranked = _json("--store", store_path, "--config", cfg, "--epoch", 7, "--order", "estimate", "--top", 3)
    est = {r["item"]: r["estimate"] for r in ranked["estimates"]}
    assert ranked["view"]["shown"] == sorted(est, key=lambda i: -est[i])[:3]
    assert ranked["view"]["intervals"] == "simultaneous"  # 3 picked from 12
    marginal = _json("--store", store_path, "--config", cfg, "--epoch", 7, "--top", 3, "--marginal")
    assert marginal["view"]["intervals"] == "marginal" and marginal["view"]["order"] == "item"
    assert marginal["view"]["shown"] == sorted(ranked["view"]["shown"])  # the same 3, in item order


def test_without_labels_estimates_are_ranked_and_simultaneous_for_a_top(store_path):
    doc = _json("--store", store_path, "--epoch", 7)
    assert (doc["view"]["order"], doc["view"]["top"], doc["view"]["intervals"]) == ("estimate", 10, "simultaneous")
    assert doc["view"]["labels"] is None and "label" not in doc["estimates"][0]
    sig = doc["view"]["significance"]
    assert sig["expected_false"] == pytest.approx(12 * 0.05) and sig["simultaneous_method"] == "bonferroni"
    assert sig["detected"] == sum(r["detected"] for r in doc["estimates"])
    # the two coldest buckets hold no device: with 600 reports they are not signal, family-wise
    assert not doc["estimates"][0]["detected_simultaneous"] and not doc["estimates"][1]["detected_simultaneous"]
    assert doc["estimates"][8]["detected_simultaneous"]  # the fullest bucket (21%) is
    text = mss("estimate", "--store", store_path, "--epoch", 7).stdout
    assert "noise alone" in text and "95% simultaneous CI (all 12)" in text


def test_the_plot_shows_the_tables_items(store_path, tmp_path, monkeypatch):
    from mss_protocol import registry

    store = open_store(store_path)
    est = registry.from_config(CFG).decode(store.counts(7))
    store.close()
    figures = []
    monkeypatch.setattr(plotting.plt, "close", figures.append)
    cats = categories.Categories(12, tuple(LABELS), True)
    for top, order in ((3, None), (12, None), (5, "estimate")):
        view = views.make(est, cats, order, top)
        plotting.plot_estimates(view, tmp_path / "p.png", "t")
        ticks = [t.get_text() for t in figures[-1].axes[0].get_xticklabels()]
        assert ticks == [LABELS[i] for i in view.shown()] and len(ticks) == top


def test_aggregator_records_names_and_the_dashboard_shows_them(store_path, tmp_path):
    cfg = _config(tmp_path / "c.json", labels=LABELS, ordinal=True)
    agg = build_aggregator(cfg, store_path, broker="mqtt://127.0.0.1:1")  # never started: only its set-up
    agg.stop()
    assert open_store(store_path).categories() == categories.Categories(12, tuple(LABELS), True)
    live = LiveView(store_path)
    try:
        doc = live.estimates(top="4")
        assert doc["view"]["order"] == "item" and doc["view"]["intervals"] == "simultaneous"
        assert [r["label"] for r in doc["estimates"]] == [LABELS[i] for i in doc["view"]["shown"]]
        assert doc["view"]["shown"] == sorted(doc["view"]["shown"])
        ranked = live.estimates(top="4", order="estimate", simultaneous="false")
        assert ranked["view"]["intervals"] == "marginal" and sorted(ranked["view"]["shown"]) == doc["view"]["shown"]
        assert len(live.estimates()["estimates"]) == 12  # no top: every item, in item order
        with pytest.raises(ValueError, match="simultaneous must be true or false"):
            live.estimates(simultaneous="maybe")
    finally:
        live.close()
        agg_cfg = _config(tmp_path / "plain.json")  # names are display only: a config without them clears them
        build_aggregator(agg_cfg, store_path, broker="mqtt://127.0.0.1:1").stop()
    assert open_store(store_path).categories() == categories.Categories(12)


@pytest.mark.parametrize("labels,ordinal,error", [
    (LABELS[:11], False, "labels must be a list of k = 12 names, got 11 names"),
    (LABELS[:11] + [""], False, "labels[11] must be a printable string"),
    (LABELS[:11] + [LABELS[0]], False, "labels must be distinct; '-10..-5 C' names more than one item"),
    (LABELS, "yes", "ordinal must be true or false"),
    ("a,b", False, "labels must be a list of k = 12 names, got 'a,b'"),
])
def test_bad_names_are_refused_naming_the_field(tmp_path, store_path, labels, ordinal, error):
    with pytest.raises(ConfigError, match=re.escape(error)):
        categories.from_config({"labels": labels, "ordinal": ordinal}, 12, "c.json")
    out = mss("estimate", "--store", store_path, "--config", _config(tmp_path / "c.json", labels=labels,
                                                                       ordinal=ordinal))
    assert out.returncode == 3 and error in " ".join(out.stderr.split()), out.stderr


def test_nothing_to_estimate_exits_3_saying_what_exists(store_path, tmp_path):
    out = mss("estimate", "--store", store_path, "--epoch", 5)
    said = " ".join(out.stderr.split())
    assert out.returncode == 3 and out.stdout == ""
    assert "no accepted reports in epoch 5" in said and "900 accepted reports" in said
    assert "2 epochs; the latest: 7 (600 devices), 8 (300 devices); the fullest: 7 (600 devices)" in said
    empty = tmp_path / "empty.sqlite"
    open_store(empty, CFG).close()
    out = mss("estimate", "--store", empty)
    assert out.returncode == 3 and "holds no accepted reports (config" in out.stderr
    other = tmp_path / "other.json"
    other.write_text(json.dumps(dict(OracleConfig("grr", 12, 2.0).to_dict(), device={"period_s": 3600})))
    out = mss("estimate", "--store", store_path, "--config", other)
    said = " ".join(out.stderr.split())
    assert out.returncode == 3 and "another campaign's" in said and "900 accepted reports" in said
    counts = tmp_path / "counts.json"
    assert mss("estimate", "--store", store_path, "--epoch", 7, "--export-counts", counts).returncode == 0
    out = mss("estimate", "--counts", counts, "--config", other)
    assert out.returncode == 3 and f"{counts} holds counts of config" in " ".join(out.stderr.split())


def test_deploy_leaves_the_names_off_the_board(tmp_path):
    from mss_aggregator.campaign import Campaign
    from mss_aggregator.deploy.merge import merged_config

    cfg = _config(tmp_path / "c.json", labels=LABELS, ordinal=True)
    merged = merged_config(Campaign.read(cfg).document, str(cfg), [], require_budget=False)
    assert "labels" not in merged and "ordinal" not in merged and merged["config_id"] == CFG.config_id_hex
