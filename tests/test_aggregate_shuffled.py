"""``mss aggregate --shuffled`` through a real Mosquitto: a shuffler's batches in, a store
that holds no device id, counts equal to an offline decode of the same reports, and the
central (eps_c, delta) beside the estimate (issue 29)."""
import sqlite3
import threading
import time

import numpy as np
import paho.mqtt.client as mqtt
import pytest
from click.testing import CliRunner

from brokers import mosquitto  # noqa: F401 (fixture)
from collect_helpers import AggregatorProcess, clocked, estimate_json, mss, wait_for
from loadgen import make_reports
from mss_aggregator.collect import central, scope
from collect_helpers import build_aggregator
from mss_aggregator.collect.shuffled import ShuffledIngest
from mss_aggregator.collect.store import DEVICES, SHUFFLER, StoreError, covered_epochs, open_store, slot
from mss_cli.main import main as mss_main
from mss_protocol.counts import Counts
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.wire import WireCodec
from mss_protocol.shuffled_batch import compact_body, encode_batch
from mss_protocol.shuffling import central_epsilon, compose
from postgres import location, pg_url, postgres_server  # noqa: F401 (fixtures)

CFG = MssConfig.build(16, 1.0, [13, 15])
OTHER = MssConfig.build(16, 2.0, [13, 15])
KEY = bytes(range(32))
SECRET = "devsecret"  # every device id starts so: the store file must not hold it
# (release epoch, first epoch, reports): epoch 8 is released in two batches (each device
# in one of them), epoch 9 in one; the clock's current epoch is 9 (clocked(9))
BATCHES = [(8, 8, 2000), (8, 8, 1500), (9, 9, 3000)]


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "cfg.json"
    CFG.save(path, clocked(9))
    return path


def fleet(seed=0):
    """[(batch id, epoch, first epoch, full frames)] of BATCHES, made by the host codec for
    devices named SECRET..., each device in one batch of an epoch."""
    out = []
    for b, (epoch, first, n) in enumerate(BATCHES):
        frames = [p for *_, p in make_reports(CFG, n, 1, prefix=f"{SECRET}{b}-", seed=seed + b)]
        out.append((bytes([b + 1]) * 16, epoch, first, frames))
    return out


def batch_bytes(batch_id, epoch, first, frames, key=KEY, cfg=CFG, extra=()):
    return encode_batch(key, cfg, batch_id, epoch, first, [compact_body(cfg, "full", f) for f in frames] + list(extra))


def publish(port, messages):
    """Publish (topic, payload) at QoS 1 and wait until the broker has each."""
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="test-shuffler")
    c.connect("127.0.0.1", port)
    c.loop_start()
    infos = [c.publish(topic, payload, qos=1) for topic, payload in messages]
    for info in infos:
        info.wait_for_publish(10)
    c.loop_stop()
    c.disconnect()


def test_shuffled_batches_end_to_end(tmp_path, mosquitto, config):
    store = tmp_path / "s.sqlite"
    (tmp_path / "key").write_text(KEY.hex())
    agg = AggregatorProcess(tmp_path, config, store, broker=f"mqtt://127.0.0.1:{mosquitto.port}",
                            extra=("--shuffled", "--shuffle-key-file", str(tmp_path / "key"))).start()
    agg.ready()
    batches = fleet()
    topic = "mss/v1/t/shuffled"
    bad_body = bytes([0x80 | ((CFG.config_id[0] + 1) & 0x3F)]) + compact_body(CFG, "full", batches[1][3][0])[1:]
    messages = [(topic, batch_bytes(*batches[0])),
                (topic, batch_bytes(*batches[1], extra=[bad_body])),  # a broken shuffler's body: alone out
                (topic, batch_bytes(*batches[2])),
                (topic, batch_bytes(*batches[0])),  # re-published after a shuffler crash: counted once
                (topic, batch_bytes(b"\x09" * 16, 9, 9, batches[2][3][:50], key=bytes(32))),  # another key
                (topic, batch_bytes(b"\x0a" * 16, 9, 9, batches[2][3][:50])[:60]),  # truncated
                (topic, batch_bytes(b"\x0b" * 16, 9, 9, batches[2][3][:50], cfg=OTHER)),  # another config
                (topic, b"MSSB junk"),
                ("mss/v1/t/dev1/report", batches[0][3][0])]  # a device's report: not subscribed, never seen
    publish(mosquitto.port, messages)
    reports = sum(len(b[3]) for b in batches)
    c = wait_for(store, lambda c: c["accepted"] == reports and c["rejected"] == 5 and c.get("duplicate_batches"))
    time.sleep(0.5)  # nothing else comes
    agg.stop()
    assert c == {"received": reports + 1 + len(batches[0][3]) + 4, "accepted": reports,
                 "duplicate": len(batches[0][3]), "rejected": 5, "rejected_batch_config": 1,
                 "rejected_batch_length": 2, "rejected_batch_mac": 1, "rejected_wire_config": 1,
                 "batches": 3, "duplicate_batches": 1}
    assert b"mss/v1/t/dev1/report" not in (tmp_path / "aggregator.log").read_bytes()

    codec = WireCodec(CFG)
    s = open_store(store)
    try:
        for epoch in (8, 9, None):  # each epoch's counts and all of them: the offline decode's
            frames = [f for _, e, _, fs in batches if epoch in (None, e) for f in fs]
            offline, online = Counts(CFG).add(codec.decode(f) for f in frames), s.counts(epoch)
            assert online.n.tolist() == offline.n.tolist() and online.c.tolist() == offline.c.tolist()
        assert sorted(s.shuffle_batches()) == [(8, 8, 1501, 1500, 0), (8, 8, 2000, 2000, 0), (9, 9, 3000, 3000, 0)]
        total, rows = s.quarantined()
        assert total == 5 and {r["reason"] for r in rows} == {"batch_mac", "batch_length", "batch_config",
                                                             "wire_config"}
        # two epochs covered: a device may be in both; at least the largest batch's devices (one body a device)
        assert s.tally() == (reports, 3000, 2 * reports, 2)
        assert s.devices_per_epoch() == [(8, 2000), (9, 3000)]  # never 3500 slots of epoch 8 as its devices
    finally:
        s.close()

    # the database holds no device id nor anything per device
    files = [p for p in tmp_path.iterdir() if p.name.startswith("s.sqlite")]
    assert all(SECRET.encode() not in p.read_bytes() for p in files)
    db = sqlite3.connect(store)
    slots = {slot(bid.hex(), pos) for bid, _, _, frames in batches for pos in range(len(frames))}
    assert {r[0] for r in db.execute("SELECT device_id FROM reports")} <= slots
    assert db.execute("SELECT COUNT(*), MIN(source), MAX(source), MAX(status) FROM reports").fetchone() == (
        reports, "shuffler", "shuffler", "accepted")
    assert db.execute("SELECT COUNT(*) FROM skips").fetchone() == (0,)
    assert [r[1] for r in db.execute("PRAGMA table_info(shuffle_batches)")] == [
        "batch_id", "config_id", "epoch", "first_epoch", "n", "reports", "received", "colluding"]
    assert dict(db.execute("SELECT key, value FROM meta"))["reports_from"] == SHUFFLER
    db.close()

    # the central guarantee beside the estimate: the default epoch is 8 (3500 reports against 9's
    # 3000), released in batches of 2000 and 1500: a device may be in both (a batch of epoch 8 also
    # takes late reports of earlier epochs), so the smaller one's bound composed over the two
    eps0 = CFG.eps_effective
    est = estimate_json(store)
    one = central_epsilon(eps0, 1500, 1e-6)
    two = compose(one, 2)
    assert est["epoch"] == 8 and est["n"] == 3500
    assert {k: v for k, v in est["central"].items() if k not in ("regime_why", "why")} == {
        "guarantee": "central", "regime": "fresh", "eps": two.eps, "delta": two.delta, "n": 1500, "devices": 1500,
        "colluding": 0, "eps0": eps0, "method": one.method, "epochs": 1, "batches": 2, "composition": two.method,
        "per_batch_eps": one.eps, "per_batch_delta": 1e-6}
    assert one.method == "feldman-numerical" and one.eps < eps0 / 2
    tight = estimate_json(store, "--epoch", "8", "--delta", "1e-9")["central"]
    assert tight["delta"] == pytest.approx(3e-9) and two.eps < tight["eps"] < 2 * eps0
    nine = estimate_json(store, "--epoch", "9")["central"]
    assert (nine["eps"], nine["delta"], nine["composition"]) == (central_epsilon(eps0, 3000, 1e-6).eps, 1e-6, None)
    pooled = estimate_json(store, "--all-epochs")
    total = compose(one, 3)  # three batches; 1500 devices is the worst
    assert pooled["central"]["epochs"] == 2 and pooled["central"]["batches"] == 3 and pooled["central"]["n"] == 1500
    assert (pooled["central"]["eps"], pooled["central"]["delta"]) == (total.eps, total.delta) == (total.eps, 4e-6)
    assert pooled["central"]["composition"] == total.method and one.eps < total.eps <= 3 * one.eps
    # a device may be in both epochs, but the config's boards draw afresh (no device.memoize): its two
    # reports are independent draws, so nothing is widened (memoized, sqrt(2): test_an_epoch_with_a_merged_batch...)
    assert pooled["memoized"] is False and pooled["stderr_factor"] == 1
    ran = mss("estimate", "--store", store)
    assert ran.returncode == 0, ran.stderr
    text = ran.stdout
    assert f"central guarantee of the shuffled release: ({two.eps:.4g}, 3e-06)-DP for each device (fresh" in text
    assert "smallest batch 1500 devices, 1500 counted: no device assumed colluding" in text


def test_batch_devices_colluding_and_epochs_covered():
    """A batch hides a device among its devices less the colluding ones; a batch of format 1
    merged over several epochs counted reports, not devices, and gets no central bound."""
    eps0 = CFG.eps_effective
    assert central.honest_devices((9, 9, 2000, 2000, 0)) == (2000, 0)
    assert central.honest_devices((9, 9, 2001, 2000, 30)) == (1970, 30)  # the stored reports less C
    assert central.honest_devices((9, 9, 2000, 2000, None)) == (2000, 0)  # format 1, one epoch: one a device
    assert central.honest_devices((9, 8, 2000, 2000, None)) == (None, 0)  # format 1, merged: unknown
    assert central.batch_guarantee(CFG, 1970, 1e-6) == central_epsilon(eps0, 1970, 1e-6)
    assert central.batch_guarantee(CFG, 1, 1e-6) is None and central.batch_guarantee(CFG, None, 1e-6) is None
    assert central.batch_guarantee(CFG, 3, 1e-6) is None  # no bound below eps0 at n = 3
    assert covered_epochs([(9, 9, 1, 1), (9, 8, 1, 1), (12, 11, 1, 1), (3, 0, 1, 1)]) == 2 + 2 + 4
    assert covered_epochs([]) == 0


def test_a_store_takes_device_reports_or_batches_not_both(tmp_path, config):
    broker = "mqtt://127.0.0.1:1"  # never connected: the refusals come first
    shuffled = build_aggregator(config, tmp_path / "a.sqlite", "t", broker, log=lambda m: None, shuffle_key=KEY)
    shuffled.stop()
    with pytest.raises(StoreError, match="shuffler's batches .* not device reports"):
        build_aggregator(config, tmp_path / "a.sqlite", "t", broker, log=lambda m: None)
    s = open_store(tmp_path / "b.sqlite", CFG)
    codec = WireCodec(CFG)
    frame = make_reports(CFG, 1, 1, seed=1)[0][3]
    s.write_batch([{"source": "x", "topic": None, "payload": frame, "device_id": "d1", "report": codec.decode(frame)}])
    s.close()  # a store of an older aggregator: reports, no mode recorded
    with pytest.raises(StoreError, match="holds reports of devices, not a shuffler's batches"):
        build_aggregator(config, tmp_path / "b.sqlite", "t", broker, log=lambda m: None, shuffle_key=KEY)
    s = open_store(tmp_path / "a.sqlite")
    with pytest.raises(StoreError, match="takes no report or status of a device"):
        s.write_batch([{"source": "x", "topic": None, "payload": frame, "device_id": "d1",
                        "report": codec.decode(frame)}])
    s.close()
    s = open_store(tmp_path / "b.sqlite")
    assert s.record_mode(DEVICES) == DEVICES
    s.close()
    assert "central" not in estimate_json(tmp_path / "b.sqlite")  # a device store's JSON is unchanged
    out = CliRunner().invoke(mss_main, ["estimate", "--store", str(tmp_path / "b.sqlite"), "--delta", "1e-6"])
    assert out.exit_code == 3 and "holds reports of devices, not a shuffler's batches" in out.output


@pytest.mark.parametrize("args, error", [
    (["--serial", "/dev/null"], "--serial and --lorawan are device links"),
    (["--broker", "mqtt://127.0.0.1:1", "--lorawan", "chirpstack:app"], "--serial and --lorawan"),
    ([], "--shuffled needs --broker"),
    (["--broker", "mqtt://127.0.0.1:1", "--fleet-key-file", "k"], "publishes no config"),
    (["--broker", "mqtt://127.0.0.1:1"], "no shuffle key: give --shuffle-key-file FILE or set $MSS_SHUFFLE_KEY"),
    (["--broker", "mqtt://127.0.0.1:1", "--shuffle-key-file", "SHORT"], "needs at least 32 bytes"),
])
def test_cli_refuses_what_shuffled_cannot_take(tmp_path, config, monkeypatch, args, error):
    monkeypatch.delenv("MSS_SHUFFLE_KEY", raising=False)
    (tmp_path / "SHORT").write_text("00" * 16)
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(mss_main, ["aggregate", "--shuffled", "--config", str(config),
                                        "--store", str(tmp_path / "s.sqlite"), *args])
    assert out.exit_code == 2 and error in out.output, out.output
    assert not (tmp_path / "s.sqlite").exists()


def test_shuffle_key_file_needs_shuffled(tmp_path, config):
    out = CliRunner().invoke(mss_main, ["aggregate", "--broker", "mqtt://127.0.0.1:1", "--config", str(config),
                                        "--store", str(tmp_path / "s.sqlite"), "--shuffle-key-file", "k"])
    assert out.exit_code == 2 and "--shuffle-key-file is for --shuffled" in out.output


def test_batches_on_both_backends_and_two_writers_store_a_batch_once(location):
    """The same outcomes on SQLite and PostgreSQL; two workers given the same batch at once
    (a shared subscription redelivering it) store it once, the other counts it duplicate."""
    ingest = ShuffledIngest(CFG, "t", KEY)
    batch_id, epoch, first, frames = fleet(seed=7)[1]
    items = ingest.decode_batch([ingest.receive_mqtt(b"mss/v1/t/shuffled", batch_bytes(batch_id, epoch, first, frames),
                                                     "mqtt:w")])
    stores = [open_store(location, CFG) for _ in range(2)]
    assert stores[0].record_mode(SHUFFLER) == stores[1].record_mode(SHUFFLER) == SHUFFLER
    start, outcomes = threading.Barrier(2), []

    def write(s):
        start.wait()
        outcomes.append(s.write_batch(items)[0])
    threads = [threading.Thread(target=write, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert sorted(outcomes) == ["accepted", "duplicate"]
        s = stores[0]
        n = len(frames)
        assert s.counters() == {"received": 2 * n, "accepted": n, "duplicate": n, "rejected": 0, "batches": 1,
                                "duplicate_batches": 1}
        offline = Counts(CFG).add(WireCodec(CFG).decode(f) for f in frames)
        assert s.counts().n.tolist() == offline.n.tolist() and s.counts().c.tolist() == offline.c.tolist()
        assert s.shuffle_batches() == [(epoch, first, n, n, 0)] and s.tally() == (n, n, n, 1)
        with pytest.raises(StoreError, match="not device reports"):
            s.record_mode(DEVICES)
    finally:
        for s in stores:
            s.close()


def test_an_epoch_with_a_merged_batch_is_widened(tmp_path):
    """A batch released in epoch 9 but merged over epochs 7..9 may hold three reports of one
    device: that epoch's standard errors are widened by sqrt(3), as pooled epochs are."""
    ingest = ShuffledIngest(CFG, "t", KEY)
    batch_id, _, _, frames = fleet(seed=3)[0]
    items = ingest.decode_batch([ingest.receive_mqtt(b"mss/v1/t/shuffled", batch_bytes(batch_id, 9, 7, frames),
                                                     "mqtt:w")])
    store = open_store(tmp_path / "s.sqlite", CFG)
    try:
        store.record_mode(SHUFFLER)
        store.write_batch(items)
        assert scope.select(store, epoch=9).stderr_factor == pytest.approx(np.sqrt(3))
    finally:
        store.close()
