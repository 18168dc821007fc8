"""A hostile device against the real aggregator (Mosquitto, `mss aggregate`,
SQLite, `mss estimate`): back-filled epochs and oversize payloads.

* One device id sends 2,001 reports, epochs 0..999 and C-1000..C, while 200
  honest devices report once in the current epoch C.  Only the window
  C-32..C+1 is accepted (the default, device.queue_max's 32): 1,968 reports are
  quarantined as ``epoch``.  The default estimate decodes epoch C with each
  device once, so against the estimate of the same honest reports without
  the attacker it moves by exactly one report, which for GRR bounds every
  item's change by 1/((n+1)(p-q)) (derived in ``test_back_filling``).
* Five 16 MB payloads cost the store a few pages: each quarantine row keeps
  the length, the SHA-256 and 4 KiB; past ``aggregator.quarantine_max_rows``
  rows are dropped and counted (``quarantine_dropped``), nothing else is lost.
"""
import base64
import hashlib
import json
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timezone

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from brokers import mosquitto  # noqa: F401 (fixture)
from collect_helpers import AggregatorProcess, counters, estimate_json, wait_for
from loadgen import publish
from mss_aggregator.collect.ingest import KEEP_BYTES, PAST_EPOCHS, Ingest
from mss_aggregator.collect.lorawan import parse_spec
from mss_aggregator.collect.store import open_store
from mss_aggregator.ports import free_port
from mss_protocol import registry
from mss_protocol.codec import codec
from mss_protocol.counts import Counts
from mss_protocol.oracle_config import OracleConfig

GRR = OracleConfig("grr", 16, 2.0, "full")  # a support oracle: its one-report bound has a closed form
PERIOD = 3600
HONEST = 200
ATTACKED_ITEM = 3  # every attacker report says 3


def clock_config(path, current=5000, **aggregator):
    """A config whose campaign clock is 30 minutes into epoch ``current`` now
    (the test cannot cross an epoch boundary), with an ``aggregator`` section."""
    origin = int(time.time()) - PERIOD // 2 - current * PERIOD
    extra = {"device": {"period_s": PERIOD, "epoch_origin": origin}}
    if aggregator:
        extra["aggregator"] = aggregator
    GRR.save(path, extra)
    return origin


def honest_reports(current, rng):
    values = rng.integers(0, GRR.k, size=HONEST)
    proto, c = registry.from_config(GRR), codec(GRR)
    reports = proto.perturb(values, rng)
    return [(f"h{i}", current, 1, c.encode(int(r), epoch=current, seq=1)) for i, r in enumerate(reports)]


def test_back_filling_1000_epochs_moves_the_default_estimate_by_one_report(tmp_path, mosquitto):
    cfg_path = tmp_path / "cfg.json"
    origin = clock_config(cfg_path)
    current = int(time.time() - origin) // PERIOD
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    clean, hostile = tmp_path / "clean.sqlite", tmp_path / "hostile.sqlite"
    for name in ("a", "b"):  # one log each: ready() looks for its own "subscribed to"
        (tmp_path / name).mkdir()
    aggs = [AggregatorProcess(tmp_path / "a", cfg_path, clean, broker=broker, campaign="clean").start(),
            AggregatorProcess(tmp_path / "b", cfg_path, hostile, broker=broker, campaign="t").start()]
    c = codec(GRR)
    epochs = list(range(1000)) + list(range(current - 1000, current + 1))
    attacker = [("evil", e, e & 0xFFFF, c.encode(ATTACKED_ITEM, epoch=e, seq=e & 0xFFFF)) for e in epochs]
    honest = honest_reports(current, np.random.default_rng(11))
    try:
        for a in aggs:
            a.ready()
        publish(honest, broker, "clean", client_id="pub-clean")
        publish(honest + attacker, broker, "t", client_id="pub-hostile")
        wait_for(clean, lambda k: k["received"] >= HONEST)
        got = wait_for(hostile, lambda k: k["received"] >= HONEST + len(attacker))
    finally:
        for a in aggs:
            a.stop()
    assert int(time.time() - origin) // PERIOD == current  # the clock did not move on meanwhile
    window = range(current - PAST_EPOCHS, current + 2)
    inside = sum(e in window for e in epochs)
    assert inside == PAST_EPOCHS + 1  # C-32..C; C+1 was not sent
    assert got["rejected_epoch"] == len(attacker) - inside == 1968
    assert (got["accepted"], got["rejected"], got["duplicate"]) == (HONEST + inside, 1968, 0)
    s = open_store(hostile)
    reasons = s.db.execute("SELECT COUNT(*) FROM quarantine WHERE reason LIKE 'epoch: %'").fetchone()[0]
    kept = {e for (e,) in s.db.execute("SELECT epoch FROM reports WHERE device_id='evil'")}
    s.close()
    assert reasons == 1968 and kept == set(range(current - PAST_EPOCHS, current + 1))

    before, after = estimate_json(clean), estimate_json(hostile)
    assert before["epoch"] == after["epoch"] == before["current_epoch"] == current
    assert not before["pooled"] and not after["pooled"]
    assert (before["n"], after["n"], after["devices"], after["stderr_factor"]) == (HONEST, HONEST + 1, HONEST + 1, 1)
    # GRR: fhat_i = (s_i/n - q)/(p - q) with s_i the reports of i.  One more report r:
    # fhat'_i - fhat_i = ([r = i] - s_i/n) / ((n + 1)(p - q)), so |change| <= 1/((n + 1)(p - q)).
    grr = registry.from_config(GRR)
    n = HONEST
    bound = 1 / ((n + 1) * (grr.p - grr.q))
    f0 = np.array([r["estimate"] for r in before["estimates"]])
    f1 = np.array([r["estimate"] for r in after["estimates"]])
    s_over_n = f0 * (grr.p - grr.q) + grr.q
    exact = ((np.arange(GRR.k) == ATTACKED_ITEM) - s_over_n) / ((n + 1) * (grr.p - grr.q))
    assert f1 - f0 == pytest.approx(exact, abs=1e-12)  # exactly one report more
    assert np.max(np.abs(f1 - f0)) <= bound + 1e-12

    pooled = estimate_json(hostile, "--all-epochs")  # every accepted report
    assert pooled["pooled"] and pooled["epoch"] is None and pooled["n"] == HONEST + inside
    assert pooled["epochs"] == inside and pooled["devices"] == HONEST + 1
    # the config's boards draw afresh (no device.memoize): honest reports are independent, so the pooled
    # errors are the decoder's own (a memoized fleet's widen by sqrt(sum R_d^2 / N), tests/test_pooled_scope.py);
    # the attacker's 33 copies are a bias, which no widening bounds: below
    assert pooled["memoized"] is False and pooled["stderr_factor"] == 1
    assert pooled["decoded"] == (f"{inside} epochs pooled: {HONEST + inside} reports from {HONEST + 1} devices, "
                                 f"fresh draws: standard errors not widened")
    fp = np.array([r["estimate"] for r in pooled["estimates"]])
    assert fp[ATTACKED_ITEM] - f0[ATTACKED_ITEM] > 10 * bound  # pooled, the 33 reports do move it: the bound bites
    se_one = np.array([r["stderr"] for r in estimate_json(hostile, "--epoch", current)["estimates"]])
    assert se_one == pytest.approx(np.array([r["stderr"] for r in after["estimates"]]), rel=1e-12)


def test_default_epoch_follows_the_fuller_of_the_last_two(tmp_path):
    """The rule of the default estimate, with the store's clock: the last
    complete epoch until the current one holds as many devices; a lone
    device in an otherwise empty epoch never takes over."""
    from mss_aggregator.collect import scope

    origin = clock_config(tmp_path / "cfg.json")
    current = int(time.time() - origin) // PERIOD
    store = open_store(tmp_path / "s.sqlite", GRR)
    store.set_clock({"period_s": PERIOD, "epoch_origin": origin, "accept_past_epochs": PAST_EPOCHS})
    ingest = Ingest(GRR, "t", PERIOD, origin)
    c = codec(GRR)

    def send(device, epoch):
        return store.write_batch([ingest.from_mqtt(f"mss/v1/t/{device}/report".encode(), c.encode(1, epoch=epoch))])

    def chosen():
        s = scope.select(store)
        assert s.counts.total == s.devices and s.stderr_factor == 1
        return s.epoch, s.devices

    assert chosen() == (current, 0)  # nothing yet: the current epoch, empty
    assert send("lone", current - 1) == ["accepted"]
    for i in range(5):
        send(f"d{i}", current)
    assert chosen() == (current, 5)  # the lone device's complete epoch has fewer devices
    for i in range(8):
        send(f"d{i}", current - 1)
    assert chosen() == (current - 1, 9)  # the last complete epoch: 9 devices, the current 5 so far
    for i in range(5, 9):
        send(f"d{i}", current)
    assert chosen() == (current, 9)  # as many in the current one: it is decoded
    assert send("ahead", current + 1) == ["accepted"]  # a clock a little ahead: kept, not yet decoded
    assert chosen() == (current, 9)
    store.close()


CRAFTED = (2 ** 32 - 1, 2 ** 32 - 2)  # the last two epochs a full frame can carry


@pytest.mark.parametrize("clocked", [True, False], ids=["clock", "no-clock"])
def test_two_crafted_epochs_do_not_make_the_default_estimate(tmp_path, clocked):
    """Issue 23 item 1: one device id's two reports dated 2^32-1 and 2^32-2
    against 200 honest devices in the current epoch, through the real ingest
    path.  With the clock they are outside the window; without one (an old
    store, a hand-written config) they are stored but the default is the
    epoch with the most devices.  ``mss estimate`` and the dashboard's
    /api/estimates decode the 200 (before: n = 1, item 3 = 2.17, without a clock)."""
    from mss_aggregator.web.live import LiveView

    origin = clock_config(tmp_path / "cfg.json")
    current = int(time.time() - origin) // PERIOD
    path = tmp_path / "s.sqlite"
    store = open_store(path, GRR)
    if clocked:
        store.set_clock({"period_s": PERIOD, "epoch_origin": origin, "accept_past_epochs": PAST_EPOCHS})
        ingest = Ingest(GRR, "t", PERIOD, origin)
    else:
        ingest = Ingest(GRR, "t")
    c = codec(GRR)
    attack = [("evil", e, 1, c.encode(ATTACKED_ITEM, epoch=e, seq=1)) for e in CRAFTED]
    reports = honest_reports(current, np.random.default_rng(23)) + attack
    outcomes = store.write_batch([ingest.from_mqtt(f"mss/v1/t/{d}/report".encode(), p) for d, _, _, p in reports])
    store.close()
    assert outcomes == ["accepted"] * HONEST + ["quarantined" if clocked else "accepted"] * 2
    got = estimate_json(path)
    assert (got["epoch"], got["n"], got["devices"]) == (current, HONEST, HONEST), got["selection"]
    view = LiveView(str(path), interval=60)
    try:
        api = view.estimates()
    finally:
        view.close()
    assert (api["epoch"], api["n"], api["devices"]) == (current, HONEST, HONEST), api["selection"]
    assert max(r["estimate"] for r in api["estimates"]) < 1  # not the lone report's 2.17


def test_one_device_moves_the_default_epoch_by_at_most_one_report():
    """The guarantee of :mod:`mss_aggregator.collect.scope`, over random honest
    epoch sets and a random set of epochs one attacker reports in (any of
    them, far ones included), with and without a clock: the epoch decoded
    with the attacker holds at least the no-attacker default's devices - 1
    honest devices, and at most one report of the attacker."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    from mss_aggregator.collect import scope

    C = 1000  # the clock's current epoch, when there is one
    epochs = st.one_of(st.integers(C - 5, C + 2), st.sampled_from([0, C - 40, C + 40, *CRAFTED]))
    c = codec(GRR)
    ingest = Ingest(GRR, "t")  # the store's contents are the point here, not the window

    def write(store, device, epoch):
        out = store.write_batch([ingest.from_mqtt(f"mss/v1/t/{device}/report".encode(), c.encode(1, epoch=epoch))])
        assert out == ["accepted"]

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(honest=st.dictionaries(epochs, st.integers(0, 6), max_size=6), attacker=st.sets(epochs, max_size=6),
           clocked=st.booleans())
    def check(honest, attacker, clocked):
        store = open_store(":memory:", GRR)
        if clocked:
            store.set_clock({"period_s": 1, "epoch_origin": 0, "accept_past_epochs": 32})
        now = C + 0.5
        for e, n in honest.items():
            for i in range(n):
                write(store, f"h{i}", e)
        before = scope.select(store, now=now)
        for e in attacker:
            write(store, "evil", e)
        after = scope.select(store, now=now)
        store.close()
        honest_there = honest.get(after.epoch, 0) if after.epoch is not None else 0
        assert honest_there >= before.devices - 1, (before.epoch, before.devices, after.epoch, after.selection)
        assert after.devices - honest_there <= 1 and after.counts.total == after.devices

    check()


def test_replayed_lorawan_event_is_outside_the_window(tmp_path):
    """A compact frame is dated by the network server's time: an old uplink
    event replayed today is quarantined as ``epoch``; one inside the window is
    accepted."""
    cfg = OracleConfig("grr", 16, 2.0, "compact")
    now = 1_700_000_000.0
    ingest = Ingest(cfg, "t", PERIOD, lorawan=parse_spec("chirpstack:app"), ports=(1, 3), clock=lambda: now)
    frame = codec(cfg).encode(4)

    def event(at, fcnt):
        t = datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        doc = {"deviceInfo": {"devEui": "0011223344556677"}, "fPort": 1, "fCnt": fcnt,
               "data": base64.b64encode(frame).decode(), "time": t}
        return b"application/app/device/0011223344556677/event/up", json.dumps(doc).encode()

    ok = ingest.from_lorawan(*event(now - PAST_EPOCHS * PERIOD, 1))
    assert ok["report"].epoch == int(now) // PERIOD - PAST_EPOCHS
    old = ingest.from_lorawan(*event(now - (PAST_EPOCHS + 1) * PERIOD, 2))
    assert old["reason"] == "epoch" and f"{int(now) // PERIOD - PAST_EPOCHS}.." in old["detail"]
    future = ingest.from_lorawan(*event(now + 2 * PERIOD, 3))
    assert future["reason"] == "epoch"


@pytest.mark.parametrize("aggregator,device,message", [
    ({"accept_past_epochs": -1}, {"period_s": PERIOD}, "aggregator.accept_past_epochs must be a non-negative"),
    ({"accept_past_epochs": 2}, {}, "aggregator.accept_past_epochs needs device.period_s"),
    ({"quarantine_max_rows": "many"}, {"period_s": PERIOD}, "aggregator.quarantine_max_rows must be"),
    ({"quarantine_rows": 5}, {"period_s": PERIOD}, "unknown field aggregator.quarantine_rows"),
    ({}, {"period_s": 0}, "device.period_s must be a whole number of seconds >= 1"),
])
def test_bad_aggregator_fields_are_named(tmp_path, aggregator, device, message):
    path = tmp_path / "cfg.json"
    GRR.save(path, {"device": device, "aggregator": aggregator})
    out = subprocess.run([sys.executable, "-m", "mss_cli", "aggregate", "--config", str(path), "--store",
                          str(tmp_path / "s.sqlite"), "--broker", "mqtt://127.0.0.1:1", "--quiet"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 3 and message in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "s.sqlite").exists()


def test_a_config_without_a_period_is_refused(tmp_path):
    """Issue 23 items 1 and 5: without device.period_s there is no epoch window
    (one device id could store a report in each of 2^32 epochs) and no clock
    for the default estimate, so ``mss aggregate`` refuses the config, before
    any store or broker (before: it ran, logging "no epoch window")."""
    path = tmp_path / "cfg.json"
    GRR.save(path)
    out = subprocess.run([sys.executable, "-m", "mss_cli", "aggregate", "--config", str(path), "--store",
                          str(tmp_path / "s.sqlite"), "--broker", "mqtt://127.0.0.1:1", "--quiet"],
                         capture_output=True, text=True, timeout=60)
    text = " ".join(out.stderr.split())
    assert out.returncode == 3 and "Traceback" not in text, text
    assert f"{path}: no device.period_s" in text and "--period S --device-config" in text
    assert not (tmp_path / "s.sqlite").exists()


BIG = 16 * 1024 * 1024


def test_sixteen_megabyte_payloads_keep_a_few_kilobytes_and_the_cap_counts_the_rest(tmp_path, mosquitto):
    cap = 3
    cfg_path = tmp_path / "cfg.json"
    origin = clock_config(cfg_path, quarantine_max_rows=cap)
    current = int(time.time() - origin) // PERIOD
    store = tmp_path / "s.sqlite"
    http = f"127.0.0.1:{free_port()}"
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    agg = AggregatorProcess(tmp_path, cfg_path, store, broker=broker, extra=("--http", http))
    honest = honest_reports(current, np.random.default_rng(5))
    big = [np.random.default_rng(i).bytes(BIG) for i in range(5)]
    junk = [(f"big{i}", current, 0, payload) for i, payload in enumerate(big)]
    agg.start().ready()
    try:
        publish(honest[:100] + junk + honest[100:], broker, "t")
        got = wait_for(store, lambda k: k["received"] >= HONEST + len(junk))
        deadline = time.time() + 20
        while True:  # the dashboard's snapshot follows the store within its refresh
            with urllib.request.urlopen(f"http://{http}/metrics", timeout=10) as r:
                samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                           for fam in text_string_to_metric_families(r.read().decode()) for s in fam.samples}
            if samples[("mss_reports_received_total", ())] >= HONEST + len(junk) or time.time() > deadline:
                break
            time.sleep(0.5)
    finally:
        agg.stop()
    assert (got["accepted"], got["rejected_payload"], got["rejected"]) == (HONEST, 5, 5)
    assert got["quarantine_dropped"] == len(junk) - cap
    assert samples[("mss_quarantine_dropped_total", ())] == len(junk) - cap
    outcomes = sum(v for (name, _), v in samples.items() if name == "mss_reports_total")
    assert outcomes == samples[("mss_reports_received_total", ())] == HONEST + len(junk)  # dropped is no outcome
    assert estimate_json(store)["counters"]["quarantine_dropped"] == len(junk) - cap

    s = open_store(store)
    rows = s.db.execute("SELECT topic, payload, length, sha256, reason FROM quarantine ORDER BY id").fetchall()
    keys = s.accepted_keys()
    counts = s.counts()
    s.close()
    assert keys == {(d, e, q) for d, e, q, _ in honest}  # nothing else lost
    assert counts.c.tolist() == Counts(GRR).add(codec(GRR).decode(p) for *_, p in honest).c.tolist()
    by_digest = {hashlib.sha256(p).hexdigest(): p for p in big}
    assert len(rows) == cap
    for topic, payload, length, digest, reason in rows:
        assert length == BIG and digest in by_digest and bytes(payload) == by_digest[digest][:KEEP_BYTES]
        assert reason.startswith("payload: ") and topic.startswith(b"mss/v1/t/big")

    # The size bound: the same honest reports stored in-process, plus at most 3 pages a row
    # (a row of ~4.3 kB is one leaf cell and one overflow page of a 4096-byte page), plus 2
    # pages for the counters and meta entries only this store has.
    base = open_store(tmp_path / "base.sqlite", GRR)
    base.set_clock(json.loads(cfg_path.read_text())["device"] | {"accept_past_epochs": PAST_EPOCHS})
    ingest = Ingest(GRR, "t", PERIOD, origin)
    base.write_batch([ingest.from_mqtt(f"mss/v1/t/{d}/report".encode(), p, source="mqtt:mss-agg-t")
                      for d, _, _, p in honest])
    page = base.db.execute("PRAGMA page_size").fetchone()[0]
    base.close()
    size = sum(p.stat().st_size for p in tmp_path.glob("s.sqlite*"))
    limit = (tmp_path / "base.sqlite").stat().st_size + (3 * cap + 2) * page
    assert size <= limit < 200_000, (size, limit)  # not 5 x 16 MB
    assert counters(store)["received"] == HONEST + len(junk)
