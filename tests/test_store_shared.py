"""Stores for one or several workers: SQLite and PostgreSQL (real servers)
give the same outcomes; concurrent writers never count a report twice; the
schema migrates; two aggregator workers on a Mosquitto shared subscription,
one killed with SIGKILL mid-stream and restarted, count exactly the truth."""
import json
import random
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from brokers import mosquitto  # noqa: F401 (fixture)
from collect_helpers import AggregatorProcess, clocked, counters, wait_for
from loadgen import make_reports, publish
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.store import SCHEMA_VERSION, StoreError, open_store
from mss_protocol.config_file import ConfigError
from mss_protocol.counts import Counts
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.wire import WireCodec
from postgres import location, pg_url, postgres_server  # noqa: F401 (fixtures)

CFG = MssConfig.build(64, 2.0, [59, 61, 63])


def _write_at_once(location, item_lists, batch):
    """The sorted outcomes of writing each of ``item_lists`` through its own
    connection, in batches of ``batch``, all starting together."""
    start, results = threading.Barrier(len(item_lists)), []

    def worker(items):
        store = open_store(location, CFG)
        start.wait()
        for lo in range(0, len(items), batch):
            results.extend(store.write_batch(items[lo:lo + batch]))
        store.close()

    threads = [threading.Thread(target=worker, args=(items,)) for items in item_lists]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(results)


def _items(reports):
    ingest = Ingest(CFG, "t")
    return [ingest.from_mqtt(f"mss/v1/t/{d}/report".encode(), p) for d, _, _, p in reports]


def test_outcomes_are_the_same_on_both_backends(location):
    reports = make_reports(CFG, devices=20, epochs=3, prefix="d")
    codec = WireCodec(CFG)
    extra = ("d0", 1, 9, codec.encode(0, list(range(CFG.omegas[0])), epoch=1, seq=9))
    store = open_store(location, CFG)
    first = store.write_batch(_items(reports))
    again = store.write_batch(_items(reports[:10] + [extra]) + [
        {"source": "mqtt", "topic": b"x", "payload": b"junk", "reason": "bad_topic", "detail": "x"}])
    assert first == ["accepted"] * 60
    assert again == ["duplicate"] * 10 + ["extra", "quarantined"]
    store.close()
    back = open_store(location)  # re-opened: the config and every count come back
    assert back.cfg == CFG
    assert back.counters() == {"received": 72, "accepted": 60, "duplicate": 10, "rejected": 2,
                               "rejected_bad_topic": 1, "rejected_extra_in_epoch": 1}
    assert back.counts().total == 60 and back.counts(epoch=2).total == 20
    offline = Counts(CFG).add(codec.decode(p) for *_, p in reports)
    assert back.counts().c.tolist() == offline.c.tolist()
    assert len(back.accepted_keys()) == 60
    back.close()
    other = MssConfig.build(64, 1.0, [59, 61, 63])
    with pytest.raises(ConfigError, match="holds reports of config"):
        open_store(location, other)


def test_concurrent_writers_count_each_report_once(pg_url):
    """Four connections write the same 2,000 reports (each in its own shuffled
    order, in batches) at once: the database lets exactly one count each."""
    reports = make_reports(CFG, devices=200, epochs=10, prefix="c")
    open_store(pg_url, CFG).close()
    orders = []
    for seed in range(4):
        orders.append(_items(reports))
        random.Random(seed).shuffle(orders[-1])
    outcomes = _write_at_once(pg_url, orders, 100)
    assert outcomes.count("accepted") == 2000 and outcomes.count("duplicate") == 6000
    store = open_store(pg_url)
    assert store.counters()["accepted"] == 2000 and store.counters()["duplicate"] == 6000
    assert store.accepted_keys() == {(d, e, q) for d, e, q, _ in reports}
    store.close()


def test_quarantine_cap_clock_and_pooled_tally_on_both_backends(location):
    """The quarantine cap keeps exactly ``quarantine_max_rows`` rows (with
    length and SHA-256) and counts the rest; rows deleted make room again;
    the clock round-trips; the default scope decodes one epoch and the pooled
    one widens by sqrt(sum R_d^2 / N)."""
    import hashlib

    from mss_aggregator.collect import scope

    store = open_store(location, CFG)
    store.quarantine_max_rows = 4
    ingest = Ingest(CFG, "t")
    junk = [ingest.from_mqtt(b"mss/v1/t/x/report", bytes([i]) * (5000 + i)) for i in range(6)]
    assert store.write_batch(junk[:3]) == ["quarantined"] * 3
    assert store.write_batch(junk[3:] + _items(make_reports(CFG, 5, 3))) == ["quarantined"] * 3 + ["accepted"] * 15
    rows = store._query("SELECT length, sha256, payload FROM quarantine ORDER BY id")
    assert [(r[0], r[1], len(bytes(r[2]))) for r in rows] == [
        (5000 + i, hashlib.sha256(bytes([i]) * (5000 + i)).hexdigest(), 4096) for i in range(4)]
    c = store.counters()
    assert (c["rejected_payload"], c["quarantine_dropped"], c["received"]) == (6, 2, 21)
    with store._transaction() as cur:
        store._exec(cur, "DELETE FROM quarantine WHERE length = 5000")
    store.write_batch(junk[:2])  # one row of room again: one kept, one dropped
    assert store.counters()["quarantine_dropped"] == 3 and len(store._query("SELECT id FROM quarantine")) == 4
    assert store.clock() is None
    store.set_clock({"period_s": 60, "epoch_origin": 0, "accept_past_epochs": 2})
    assert store.clock() == {"period_s": 60, "epoch_origin": 0, "accept_past_epochs": 2}
    store.set_clock(None)  # the last aggregator to start had no period
    one = scope.select(store)
    assert (one.epoch, one.counts.total, one.devices, one.stderr_factor) == (2, 5, 5, 1.0)
    assert store.tally() == (15, 5, 5 * 3 ** 2, 3)
    pooled = scope.select(store, all_epochs=True)
    assert pooled.counts.total == 15 and pooled.stderr_factor == pytest.approx(3 ** 0.5, rel=1e-12)
    store.close()


def test_sqlite_schema_v1_is_migrated(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE reports (id INTEGER PRIMARY KEY, config_id TEXT NOT NULL, device_id TEXT NOT NULL,
            epoch INTEGER NOT NULL, seq INTEGER NOT NULL, j INTEGER NOT NULL, subset BLOB NOT NULL,
            payload BLOB NOT NULL, source TEXT NOT NULL, received REAL NOT NULL, status TEXT NOT NULL,
            UNIQUE (config_id, device_id, epoch, seq));
        CREATE UNIQUE INDEX one_per_epoch ON reports (config_id, device_id, epoch) WHERE status = 'accepted';
        CREATE TABLE quarantine (id INTEGER PRIMARY KEY, received REAL NOT NULL, source TEXT NOT NULL,
            topic BLOB, payload BLOB, reason TEXT NOT NULL);
        CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);""")
    db.execute("INSERT INTO meta VALUES ('schema', '1'), ('config', ?)", (json.dumps(CFG.to_dict()),))
    db.commit()
    db.close()
    store = open_store(path)
    assert store.write_batch(_items(make_reports(CFG, 3, 1))) == ["accepted"] * 3
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key='schema'").fetchone() == (str(SCHEMA_VERSION),)
    assert db.execute("SELECT 1 FROM sqlite_master WHERE name='accepted_by_epoch'").fetchone()
    db.execute("UPDATE meta SET value='99' WHERE key='schema'")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer"):
        open_store(path)


def test_store_errors_name_the_problem(tmp_path):
    with pytest.raises(StoreError, match="no such store"):
        open_store(tmp_path / "missing.sqlite")
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL at 127.0.0.1:1/x"):
        open_store("postgresql://u:secret@127.0.0.1:1/x")
    out = subprocess.run([sys.executable, "-m", "mss_cli", "estimate", "--store",
                          "postgresql://u:secret@127.0.0.1:1/x"], capture_output=True, text=True)
    assert out.returncode == 3 and "cannot connect" in out.stderr and "secret" not in out.stderr


def test_two_workers_share_the_stream_and_survive_kill_9(tmp_path, mosquitto, pg_url):
    """200 devices x 100 epochs = 20,000 reports plus 2,000 deliberate
    duplicates, through a $share subscription to two workers on one database;
    worker 1 is killed with SIGKILL mid-stream and restarted with its session."""
    config = tmp_path / "cfg.json"
    CFG.save(config, clocked(99))  # the reports' epochs 0..99
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    reports = make_reports(CFG, devices=200, epochs=100, prefix="w")
    dupes = random.Random(1).sample(reports, 2000)
    stream = reports + dupes
    random.Random(2).shuffle(stream)

    def worker(n):
        return AggregatorProcess(tmp_path, config, pg_url, broker=broker,
                                 extra=["--share-group", "workers", "--client-id", f"w{n}"]).start()

    w1, w2 = worker(1).ready(), worker(2).ready()  # a $share group drops what arrives before it subscribed
    pub = threading.Thread(target=publish, args=(stream, broker, "t"))
    pub.start()
    wait_for(pg_url, lambda c: c["received"] >= 3000, timeout=120)
    w1.kill9()
    killed_at = counters(pg_url)["received"]
    pub.join()
    w1 = worker(1)
    final = wait_for(pg_url, lambda c: c["received"] >= len(stream), timeout=300)
    time.sleep(1.0)
    w1.stop()
    w2.stop()
    store = open_store(pg_url)
    keys, online, final = store.accepted_keys(), store.counts(), store.counters()
    store.close()
    assert killed_at < len(stream)
    assert keys == {(d, e, q) for d, e, q, _ in reports}  # nothing lost
    assert final["accepted"] == 20000 and final["rejected"] == 0  # nothing counted twice
    assert final["duplicate"] == final["received"] - 20000 >= 2000  # redeliveries are duplicates
    codec = WireCodec(CFG)  # once: in the generator it was built again for every report
    offline = Counts(CFG).add(codec.decode(p) for *_, p in reports)
    assert online.n.tolist() == offline.n.tolist() and online.c.tolist() == offline.c.tolist()
    import psycopg

    with psycopg.connect(pg_url) as db:  # both workers took part
        share = dict(db.execute("SELECT source, count(*) FROM reports GROUP BY source").fetchall())
    assert set(share) == {"mqtt:w1", "mqtt:w2"} and min(share.values()) > 1000, share


def test_first_arrival_counts_within_a_batch_and_large_epochs(location):
    """Within one batch the report that arrived first is the counted one (as
    across batches), and any u32 epoch is stored (PostgreSQL: BIGINT)."""
    codec = WireCodec(CFG)
    ingest = Ingest(CFG, "t")
    late = (1 << 31) + 5
    reports = [("d0", 3, 9), ("d0", 3, 3), ("d1", late, 1), ("d2", (1 << 32) - 1, 0)]
    items = [ingest.from_mqtt(f"mss/v1/t/{d}/report".encode(),
                              codec.encode(0, list(range(CFG.omegas[0])), epoch=e, seq=q))
             for d, e, q in reports]
    store = open_store(location, CFG)
    assert store.write_batch(items) == ["accepted", "extra", "accepted", "accepted"]
    assert store.counts(epoch=late).total == 1
    store.close()


def test_readers_need_no_write_rights(pg_url):
    """mss estimate and the dashboard open an up-to-date store read-only."""
    import psycopg

    open_store(pg_url, CFG).write_batch(_items(make_reports(CFG, 5, 1)))
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute("CREATE ROLE reader LOGIN")
        db.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader")
    reader = open_store(pg_url.replace("//mss@", "//reader@"))
    assert reader.counts().total == 5 and reader.counters()["accepted"] == 5
    reader.close()


def _flood(device, epoch, seqs):
    """Reports of one device id in one epoch, each with a new sequence number (full frames)."""
    codec = WireCodec(CFG)
    return [(device, epoch, q, codec.encode(q % 3, list(range(CFG.omegas[q % 3])), epoch=epoch, seq=q)) for q in seqs]


def _extras(store, device=None):
    sql, args = "SELECT COUNT(*) FROM reports WHERE status='extra'", ()
    if device:
        sql, args = sql + " AND device_id=?", (device,)
    return store._query(sql, args)[0][0]


def test_extras_are_capped_per_device_and_epoch(location):
    """Issue 23 item 5: one device id sending 100 new sequence numbers in one
    epoch (in two batches) stores its accepted report and EXTRA_MAX extras;
    the other 95 are counted as rejected_extra_in_epoch and extra_dropped, not
    stored (before: 99 extra rows, ~130 B each, without bound).  A redelivered
    stored extra stays a duplicate; another epoch has its own cap; the
    counters still sum up, and /metrics shows extra_dropped beside the outcomes."""
    from prometheus_client.core import CollectorRegistry
    from prometheus_client.exposition import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from mss_aggregator.collect.store import EXTRA_MAX
    from mss_aggregator.web.live import LiveView
    from mss_aggregator.web.server import MetricsCollector

    assert EXTRA_MAX == 4
    store = open_store(location, CFG)
    flood = _flood("flood", 7, range(100))
    assert store.write_batch(_items(flood[:50])) == ["accepted"] + ["extra"] * 49
    assert store.write_batch(_items(flood[50:])) == ["extra"] * 50
    assert _extras(store) == EXTRA_MAX
    kept = {q for (q,) in store._query("SELECT seq FROM reports WHERE status='extra'")}
    assert kept == set(range(1, 1 + EXTRA_MAX))  # the first ones to arrive
    c = store.counters()
    assert (c["received"], c["accepted"], c["rejected_extra_in_epoch"], c["extra_dropped"]) == (100, 1, 99, 95)
    assert store.write_batch(_items(flood[1:2] + flood[60:61])) == ["duplicate", "extra"]
    assert store.write_batch(_items(_flood("flood", 8, range(10)) + _flood("other", 7, range(3)))) == (
        ["accepted"] + ["extra"] * 9 + ["accepted", "extra", "extra"])
    assert (_extras(store, "flood"), _extras(store, "other")) == (2 * EXTRA_MAX, 2)
    c = store.counters()
    assert (c["received"], c["duplicate"], c["rejected_extra_in_epoch"], c["extra_dropped"]) == (115, 1, 111, 101)
    assert c["received"] == c["accepted"] + c["duplicate"] + c["rejected"]
    store.close()
    view = LiveView(location, interval=60)
    try:
        registry = CollectorRegistry()
        registry.register(MetricsCollector(view))
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for fam in text_string_to_metric_families(generate_latest(registry).decode()) for s in fam.samples}
        assert view.counters()["counters"]["extra_dropped"] == 101
    finally:
        view.close()
    assert samples[("mss_extra_dropped_total", ())] == 101
    assert sum(v for (name, _), v in samples.items() if name == "mss_reports_total") == 115  # dropped is no outcome


def test_the_extras_cap_holds_with_concurrent_writers(location):
    """Four connections write 25 new sequence numbers each of one device and
    epoch at once, in batches of 5: exactly EXTRA_MAX extras are stored (the
    cap is exact: each worker locks the epoch's accepted row, or SQLite's write
    transaction, before it counts)."""
    from mss_aggregator.collect.store import EXTRA_MAX

    store = open_store(location, CFG)
    assert store.write_batch(_items(_flood("flood", 3, [0]))) == ["accepted"]
    store.close()
    floods = [_items(_flood("flood", 3, range(1 + 25 * w, 26 + 25 * w))) for w in range(4)]
    assert _write_at_once(location, floods, 5) == ["extra"] * 100
    store = open_store(location)
    c = store.counters()
    assert _extras(store) == EXTRA_MAX
    assert (c["rejected_extra_in_epoch"], c["extra_dropped"], c["received"]) == (100, 100 - EXTRA_MAX, 101)
    store.close()
