"""The aggregator's ``/metrics`` against Prometheus's naming conventions
(prometheus.io/docs/practices/naming; issue 46, item 5), over real HTTP from the
aggregator's web server on a store of real reports: an ``mss_`` prefix and snake_case,
counters ending in ``_total``, base units (seconds, bytes) and no label that names a
device (per-device data belongs in the store).  And the Grafana dashboard in
docs/grafana: every metric its PromQL reads is one /metrics serves, on the datasource
its provisioning file declares."""
import json
import re
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.link_health import CAUSES
from mss_aggregator.collect.store import open_store
from mss_aggregator.web.live import LiveView
from mss_aggregator.web.server import WebServer
from mss_protocol.mss.config import MssConfig
from mss_protocol.oracle_config import OracleConfig
from mss_protocol.vectors import report_from_stream

ROOT = Path(__file__).resolve().parent.parent
GRAFANA = ROOT / "docs" / "grafana"
CFG = OracleConfig("grr", 12, 3.0)
DEVICES = [f"70b3d57ed00{i:05x}" for i in range(40)]  # DevEUI-like ids: what must never be a label value
NAME = re.compile(r"mss_[a-z0-9]+(_[a-z0-9]+)*")
# units not in base units (Prometheus: seconds, bytes, ratios 0..1), as a name's word
NOT_BASE = {"ms", "msec", "millis", "milliseconds", "us", "microseconds", "ns", "nanoseconds", "minutes",
            "hours", "days", "kb", "kib", "mb", "mib", "gb", "kilobytes", "megabytes", "bits", "percent"}
DEVICE_LABELS = {"device", "device_id", "dev_eui", "deveui", "dev_addr", "devaddr", "client_id", "slot", "board"}


def scrape(view):
    """The metric families a dashboard server over ``view`` serves at /metrics (the view closed after)."""
    web = WebServer(view, "127.0.0.1:0").start()
    try:
        with urllib.request.urlopen(web.url + "metrics", timeout=10) as r:
            return list(text_string_to_metric_families(r.read().decode()))
    finally:
        web.stop()
        view.close()


@pytest.fixture(scope="module")
def metrics(tmp_path_factory):
    """(families, served sample names) of /metrics for a store of 40 devices' reports, one
    quarantined message, a device that sent twice in an epoch, and a broker that failed once."""
    path = tmp_path_factory.mktemp("metrics") / "s.sqlite"
    store, ingest = open_store(path, CFG), Ingest(CFG, "t")
    rng = np.random.default_rng(5)
    msgs = []
    for epoch in (0, 1):
        for d in DEVICES:
            report, _ = report_from_stream(CFG.to_dict(), int(rng.integers(CFG.k)), rng.bytes(64), epoch, epoch, d)
            msgs.append(ingest.from_mqtt(f"mss/v1/t/{d}/report".encode(), report))
    again, _ = report_from_stream(CFG.to_dict(), 1, rng.bytes(64), 1, 2, DEVICES[0])  # same epoch, another body
    msgs.append(ingest.from_mqtt(f"mss/v1/t/{DEVICES[0]}/report".encode(), again))
    msgs.append(ingest.from_mqtt(f"mss/v1/t/{DEVICES[1]}/report".encode(), b"\xff junk"))
    store.write_batch(msgs)
    store.close()
    broker = {"broker": "127.0.0.1:1883", "tls": False, "connected": False, "connected_since": None,
              "failures": dict.fromkeys(CAUSES, 0) | {"refused": 2}, "last_error": "refused: no",
              "last_error_at": 1.7e9}
    families = scrape(LiveView(path, interval=60, brokers=lambda: [broker]))
    return families, {s.name for f in families for s in f.samples}


def test_the_store_shows_in_the_metrics(metrics):
    families, names = metrics
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}
    assert samples[("mss_reports_received_total", ())] == 2 * len(DEVICES) + 2
    assert samples[("mss_reports_total", (("outcome", "accepted"),))] == 2 * len(DEVICES)
    assert any(n == "mss_reports_total" and dict(lab)["outcome"].startswith("rejected_") for n, lab in samples)
    assert samples[("mss_broker_connect_failures_total", (("broker", "127.0.0.1:1883"), ("cause", "refused")))] == 2
    assert {"mss_config_info", "mss_decode_seconds", "mss_snapshot_timestamp_seconds", "mss_http_errors_total",
            "mss_broker_last_failure_timestamp_seconds", "mss_skipped_epochs_total"} <= names


def test_names_are_prefixed_snake_case_in_base_units(metrics):
    families, _ = metrics
    for fam in families:
        for s in fam.samples:
            assert NAME.fullmatch(s.name), f"{s.name}: not snake_case with the mss_ prefix"
            words = set(s.name.split("_"))
            assert not words & NOT_BASE, f"{s.name}: not in base units (seconds, bytes)"
            if fam.type == "counter":
                assert s.name.endswith(("_total", "_created")), f"counter {s.name} does not end in _total"
            else:
                assert not s.name.endswith("_total"), f"{fam.type} {s.name} ends in _total, a counter's suffix"
            if "timestamp" in words:
                assert s.name.endswith("_timestamp_seconds"), f"{s.name}: a timestamp is in seconds"
            if fam.type == "info":
                assert s.name.endswith("_info") and s.value == 1, s.name


def test_no_label_names_a_device(metrics):
    families, _ = metrics
    devices = {d.lower() for d in DEVICES}
    for fam in families:
        for s in fam.samples:
            assert not set(s.labels) & DEVICE_LABELS, f"{s.name}: a per-device label {sorted(s.labels)}"
            for label, value in s.labels.items():
                assert value.lower() not in devices and not any(d in value.lower() for d in devices), \
                    f"{s.name}{{{label}={value!r}}} names a device"
    series = sum(len(f.samples) for f in families)
    assert series < 60, f"{series} series for 40 devices: grows with the fleet?"  # bounded by causes and reasons


def shuffled_metrics(tmp_path):
    """/metrics' samples of a shuffled store that took one batch twice (a shuffler re-publishes)."""
    from loadgen import make_reports
    from mss_aggregator.collect.shuffled import ShuffledIngest
    from mss_aggregator.collect.store import SHUFFLER
    from mss_protocol.shuffled_batch import compact_body, encode_batch

    cfg = MssConfig.build(16, 1.0, [13, 15])
    key, frames = bytes(range(32)), [p for *_, p in make_reports(cfg, 30, 1, prefix="x", seed=1)]
    batch = encode_batch(key, cfg, b"\x01" * 16, 0, 0, [compact_body(cfg, "full", f) for f in frames])
    ingest = ShuffledIngest(cfg, "t", key)
    store = open_store(tmp_path / "s.sqlite", cfg)
    store.record_mode(SHUFFLER)
    for _ in range(2):
        store.write_batch(ingest.decode_batch([ingest.receive_mqtt(b"mss/v1/t/shuffled", batch, "mqtt:w")]))
    store.close()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in scrape(LiveView(tmp_path / "s.sqlite", interval=60)) for s in f.samples}


def test_a_shuffled_stores_outcomes_are_reports_and_its_batches_their_own_counter(tmp_path):
    """Before: the store's batch counters (batches, duplicate_batches) were two more outcomes of
    mss_reports_total, whose outcomes then no longer summed to received (a sum over a label must mean
    something, Prometheus's naming practice): a batch is no report."""
    samples = shuffled_metrics(tmp_path)
    outcomes = {dict(lab)["outcome"]: v for (name, lab), v in samples.items() if name == "mss_reports_total"}
    assert outcomes == {"accepted": 30, "duplicate": 30}
    assert sum(outcomes.values()) == samples[("mss_reports_received_total", ())] == 60
    batches = {dict(lab)["outcome"]: v for (name, lab), v in samples.items() if name == "mss_shuffled_batches_total"}
    assert batches == {"stored": 1, "duplicate": 1}


def dashboard_queries():
    doc = json.loads((GRAFANA / "mss-aggregator.json").read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", ())]
    exprs += [v["definition"] for v in doc["templating"]["list"] if v["type"] == "query"]
    return doc, exprs


def test_the_dashboard_reads_only_served_metrics(metrics):
    _, served = metrics
    doc, exprs = dashboard_queries()
    assert len(exprs) >= 15 and doc["uid"] == "mss-aggregator"
    used = {m.group(0) for e in exprs for m in NAME.finditer(e)}
    assert {"mss_reports_total", "mss_devices_last_epoch", "mss_broker_connected"} <= used
    assert not used - served, f"the dashboard queries metrics /metrics does not serve: {sorted(used - served)}"
    for e in exprs:  # balanced, and a counter is read only through rate() or increase() over a range
        assert e.count("(") == e.count(")") and e.count("{") == e.count("}") and e.count("[") == e.count("]"), e
        for m in NAME.finditer(e):
            if m.group(0).endswith("_total"):
                assert re.search(r"(rate|increase)\($", e[:m.start()]), f"a raw counter in {e}"
                assert re.match(r"\{[^}]*\}\[[^]]+\]", e[m.end():]), f"no range after {m.group(0)} in {e}"
        for m in re.finditer(r"(rate|increase)\((mss_[a-z0-9_]+)", e):
            assert m.group(2).endswith("_total"), f"{m.group(1)}() of {m.group(2)}, not a counter, in {e}"
    for p in doc["panels"]:  # every panel has a place and says what it shows
        assert p["title"] and p["description"] and set(p["gridPos"]) == {"x", "y", "w", "h"}, p["title"]
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, p["title"]
    assert len({p["id"] for p in doc["panels"]}) == len(doc["panels"])


def test_the_provisioning_files_name_the_dashboard_and_the_datasource():
    doc, _ = dashboard_queries()
    (source,) = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "mss-iot.yaml").read_text())["datasources"]
    assert source["type"] == "prometheus" and source["uid"] == "mss-prometheus"
    used = {json.dumps(p["datasource"], sort_keys=True) for p in doc["panels"]}
    used |= {json.dumps(t["datasource"], sort_keys=True) for p in doc["panels"] for t in p["targets"]}
    assert used == {json.dumps({"type": "prometheus", "uid": source["uid"]}, sort_keys=True)}
    (provider,) = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "mss-iot.yaml").read_text())["providers"]
    assert provider["type"] == "file" and provider["options"]["path"]
    scrape = yaml.safe_load((GRAFANA / "prometheus.yml").read_text())["scrape_configs"][0]
    assert scrape["metrics_path"] == "/metrics" and scrape["static_configs"][0]["targets"]
