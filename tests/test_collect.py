"""The aggregator service end to end with real parts: Mosquitto, the firmware
under MicroPython, pyserial on a socat pty pair, SQLite; and its faults."""
import json
import subprocess
import sys
import threading
import time

import numpy as np
import paho.mqtt.client as mqtt
import pytest

from brokers import Mosquitto, any_broker, mosquitto  # noqa: F401 (fixtures)
from collect_helpers import AggregatorProcess, clocked, counters, estimate_json, wait_for
from loadgen import make_reports, publish
from mss_aggregator.collect.store import open_store
from mss_protocol.counts import Counts
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.decoder import Decoder
from mss_protocol.mss.wire import WireCodec

CFG = MssConfig.build(64, 2.0, [59, 61, 63])


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "cfg.json"
    CFG.save(path, clocked(9))  # the reports' epochs 0..9 (make_reports), and mss fleet's: the current one, 9
    return path


class Tap:
    """An independent subscriber recording every report the broker delivers."""

    def __init__(self, port, campaign="t"):
        self.payloads = []
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"tap-{port}")
        self.c.on_message = lambda c, u, m: self.payloads.append(bytes(m.payload))
        self.c.connect("127.0.0.1", port)
        self.c.subscribe(f"mss/v1/{campaign}/+/report", qos=1)
        self.c.loop_start()
        time.sleep(0.3)

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


def test_fleet_end_to_end_counts_equal_offline(tmp_path, any_broker, config):
    store = tmp_path / "s.sqlite"
    agg = AggregatorProcess(tmp_path, config, store, broker=f"mqtt://127.0.0.1:{any_broker.port}").start()
    tap = Tap(any_broker.port)
    agg.ready()
    out = subprocess.run([sys.executable, "-m", "mss_cli", "fleet", "--broker",
                          f"mqtt://127.0.0.1:{any_broker.port}", "--campaign", "t", "--config",
                          str(config), "--devices", "60", "--seed", "3", "--truth",
                          str(tmp_path / "truth.json")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    wait_for(store, lambda c: c["accepted"] >= 60)
    agg.stop()
    tap.close()
    assert len(tap.payloads) == 60
    offline = Counts(CFG).add(WireCodec(CFG).decode(p) for p in tap.payloads)
    s = open_store(store)
    online = s.counts()
    s.close()
    assert online.n.tolist() == offline.n.tolist() and online.c.tolist() == offline.c.tolist()
    est = estimate_json(store, "--all-epochs")  # the fleet's 60 reports, in one epoch or (an hour boundary) two
    assert est["n"] == 60 and est["counters"]["accepted"] == 60 and est["counters"]["rejected"] == 0
    assert est["pooled"] and est["devices"] == 60 and est["stderr_factor"] == 1.0  # each device once
    want = Decoder(CFG).decode(offline).rows()
    assert [r["estimate"] for r in est["estimates"]] == pytest.approx([r["estimate"] for r in want], abs=1e-12)
    assert set(est["estimates"][0]) == {"item", "estimate", "stderr", "ci_low", "ci_high", "detected", "sim_low",
                                        "sim_high", "detected_simultaneous", "certified_ci"}  # issue 47: + certified
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert sorted(truth["values"]) == sorted(f"dev{i}" for i in range(60))


def test_duplicates_and_extra_reports(tmp_path, any_broker, config):
    """Copies are duplicates; a device's further reports in an epoch (new
    sequence numbers) are extras, at most EXTRA_MAX of them stored (issue 23
    item 5: 100 new ones stored 100 rows before the cap)."""
    from mss_aggregator.collect.store import EXTRA_MAX

    store = tmp_path / "s.sqlite"
    agg = AggregatorProcess(tmp_path, config, store, broker=f"mqtt://127.0.0.1:{any_broker.port}").start().ready()
    reports = make_reports(CFG, devices=5, epochs=1, prefix="d")
    codec = WireCodec(CFG)
    extras = [("d0", 0, q, codec.encode(0, list(range(CFG.omegas[0])), epoch=0, seq=q))  # same epoch, new seq
              for q in range(7, 107)]
    publish(reports + reports + reports + extras, f"mqtt://127.0.0.1:{any_broker.port}", "t")
    c = wait_for(store, lambda c: c["received"] >= 115)
    agg.stop()
    assert c["accepted"] == 5 and c["duplicate"] == 10 and c["rejected_extra_in_epoch"] == 100
    assert c["extra_dropped"] == 100 - EXTRA_MAX and c["received"] == 115
    s = open_store(store)
    stored = s._query("SELECT seq FROM reports WHERE status = 'extra'")
    s.close()
    assert len(stored) == EXTRA_MAX and {q for (q,) in stored} <= set(range(7, 107))
    assert estimate_json(store, "--epoch", "0")["counters"]["extra_dropped"] == 100 - EXTRA_MAX


def test_kill_9_mid_stream_loses_nothing_counts_nothing_twice(tmp_path, mosquitto, config):
    store = tmp_path / "s.sqlite"
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    agg = AggregatorProcess(tmp_path, config, store, broker=broker).start().ready()
    reports = make_reports(CFG, devices=500, epochs=10, prefix="k")
    pub = threading.Thread(target=publish, args=(reports, broker, "t"))
    pub.start()
    wait_for(store, lambda c: c["accepted"] >= 1000)
    agg.kill9()
    killed_at = counters(store)["accepted"]
    pub.join()
    again = AggregatorProcess(tmp_path, config, store, broker=broker).start().ready()
    wait_for(store, lambda c: c["accepted"] >= 5000, timeout=120)
    time.sleep(1.0)
    again.stop()
    s = open_store(store)
    keys = s.accepted_keys()
    online = s.counts()
    final = s.counters()
    s.close()
    assert killed_at < 5000
    assert keys == {(d, e, q) for d, e, q, _ in reports}  # nothing lost
    assert final["accepted"] == 5000 and final["rejected"] == 0  # nothing counted twice
    codec = WireCodec(CFG)  # once: in the generator it was built again for every report
    offline = Counts(CFG).add(codec.decode(p) for *_, p in reports)
    assert online.c.tolist() == offline.c.tolist()


def test_broker_restart_mid_stream(tmp_path, config):
    broker_proc = Mosquitto(tmp_path, persistence=True).start()
    broker = f"mqtt://127.0.0.1:{broker_proc.port}"
    store = tmp_path / "s.sqlite"
    agg = AggregatorProcess(tmp_path, config, store, broker=broker).start()
    try:
        agg.ready()
        first = make_reports(CFG, devices=200, epochs=5, prefix="a")
        second = make_reports(CFG, devices=200, epochs=5, prefix="b", seed=1)
        publish(first, broker, "t")
        wait_for(store, lambda c: c["accepted"] >= 1000)
        broker_proc.stop()
        time.sleep(1.0)
        broker_proc.start()
        time.sleep(0.5)
        publish(second, broker, "t")  # the aggregator reconnects by itself
        wait_for(store, lambda c: c["accepted"] >= 2000, timeout=90)
        time.sleep(1.0)
        s = open_store(store)
        keys = s.accepted_keys()
        s.close()
        assert keys == {(d, e, q) for d, e, q, _ in first + second}
        assert counters(store)["accepted"] == 2000
    finally:
        agg.stop()
        broker_proc.stop()


def test_fuzzed_payloads_are_quarantined(tmp_path, any_broker, config):
    store = tmp_path / "s.sqlite"
    agg = AggregatorProcess(tmp_path, config, store, broker=f"mqtt://127.0.0.1:{any_broker.port}").start().ready()
    rng = np.random.default_rng(0)
    good = make_reports(CFG, devices=3, epochs=1, prefix="g")
    junk = []
    for i in range(2000):
        size = int(rng.integers(0, 40))
        payload = rng.integers(0, 256, size=size, dtype=np.uint8).tobytes()
        if i % 4 == 0 and good:  # near-misses: a valid report with one byte changed
            base = bytearray(good[i % 3][3])
            base[int(rng.integers(0, len(base)))] ^= 1 << int(rng.integers(0, 8))
            payload = bytes(base)
        junk.append((f"fuzz{i}", 0, 0, payload))
    junk.append(("big", 0, 0, bytes(100_000)))
    publish(good + junk, f"mqtt://127.0.0.1:{any_broker.port}", "t")
    c = wait_for(store, lambda c: c["received"] >= len(good) + len(junk))
    agg.stop()
    assert c["accepted"] + c["rejected"] + c["duplicate"] == c["received"]
    s = open_store(store)
    assert s.accepted_keys() >= {(d, e, q) for d, e, q, _ in good}
    quarantined = s.db.execute("SELECT COUNT(*) FROM quarantine").fetchone()[0]
    s.close()
    assert quarantined == c["rejected"] - c.get("rejected_extra_in_epoch", 0) > 1500


@pytest.mark.parametrize("name,frame", [("olh", "full"), ("pgr", "compact-epoch"), ("rappor", "full")])
def test_fleet_of_any_protocol_end_to_end(tmp_path, any_broker, name, frame):
    """MicroPython devices of a one-output protocol -> broker -> aggregator ->
    store -> estimate: the stored counts equal an offline decode of what the
    broker delivered (OLH's seeds from each topic's device id; the
    compact-epoch frame's epoch from the campaign clock, device.period_s)."""
    from mss_protocol.codec import codec
    from mss_protocol.oracle_config import OracleConfig

    cfg = OracleConfig(name, 32, 2.0, frame)
    path = tmp_path / "cfg.json"
    cfg.save(path, {"device": {"period_s": 3600}})
    store = tmp_path / "s.sqlite"
    agg = AggregatorProcess(tmp_path, path, store, broker=f"mqtt://127.0.0.1:{any_broker.port}").start()
    tap = Tap(any_broker.port)
    topics = []
    tap.c.on_message = lambda c, u, m: topics.append((m.topic.split("/")[3], bytes(m.payload)))
    agg.ready()
    out = subprocess.run([sys.executable, "-m", "mss_cli", "fleet", "--broker", f"mqtt://127.0.0.1:{any_broker.port}",
                          "--campaign", "t", "--config", str(path), "--devices", "30", "--seed", "4"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    wait_for(store, lambda c: c["accepted"] >= 30)
    agg.stop()
    tap.close()
    c = codec(cfg)
    epoch = int(time.time()) // 3600
    offline = Counts(cfg).add(c.decode(p, dev, epoch) for dev, p in topics)
    s = open_store(store)
    online = s.counts()
    s.close()
    assert len(topics) == 30 and online.c.tolist() == offline.c.tolist() and online.total == 30
    assert all(len(p) == {"full": 11, "compact-epoch": 3}[frame] + min(c.body_lengths) for _, p in topics)
    est = estimate_json(store)
    assert est["n"] == 30 and est["counters"]["rejected"] == 0 and len(est["estimates"]) == 32
    assert all(r["ci_low"] <= r["estimate"] <= r["ci_high"] and r["stderr"] > 0 for r in est["estimates"])
