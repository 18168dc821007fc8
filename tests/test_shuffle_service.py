"""mss shuffle end to end through a real Mosquitto: reports in, identity checks, authenticated
batches of permuted compact frames out; its queue file, its crash safety, its permutation."""
import collections
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace

import numpy as np
import paho.mqtt.client as mqtt
import pytest
from click.testing import CliRunner
from scipy.stats import chi2

from brokers import Mosquitto, mosquitto  # noqa: F401 (fixture)
from collect_helpers import AggregatorProcess, spawn, wait_for
from loadgen import publish
from mss_aggregator.collect.store import open_store
from mss_aggregator.shuffle.queue import QueueError, ShuffleQueue
from mss_cli.common import flag_message
from mss_cli.main import main
from mss_protocol.counts import Counts
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.sampler import sample_reports
from mss_protocol.mss.wire import WireCodec
from mss_protocol.oracle_config import OracleConfig
from mss_protocol.shuffled_batch import BatchError, compact_body, decode_batch, encode_batch

CFG = MssConfig.build(64, 2.0, [59, 61, 63])
CODEC = WireCodec(CFG)
PERIOD = 3  # seconds: epochs close within a test
GRACE = 0.3
KEY = bytes(range(32))


@pytest.fixture
def setup(tmp_path):
    """(config path, key file, epoch origin): the campaign clock started a period ago, so that
    it is in epoch 1 however fast the test gets to a fleet of two epochs (mss fleet --epochs 2
    ends one period back, and refuses epochs before 0)."""
    origin = int(time.time()) - PERIOD
    path = tmp_path / "cfg.json"
    CFG.save(path, {"device": {"period_s": PERIOD, "epoch_origin": origin}, "aggregator": {"accept_past_epochs": 100}})
    key = tmp_path / "shuffle.key"
    key.write_text(KEY.hex() + "\n")
    return path, key, origin


def epoch_now(origin):
    return int((time.time() - origin) // PERIOD)


def reports(devices, epoch, prefix, seed=0):
    """[(device_id, epoch, seq, full frame)]: one fresh MSS report per device, for ``epoch``."""
    rng = np.random.default_rng(seed)
    j, subsets = sample_reports(CFG, rng.integers(0, CFG.k, size=devices), rng)
    return [(f"{prefix}{d}", epoch, 7, CODEC.encode(int(j[d]), subsets[d], epoch=epoch, seq=7)) for d in range(devices)]


def bodies(sent):
    """The multiset of the batch bodies the reports ``sent`` must become."""
    return collections.Counter(compact_body(CFG, "full", frame) for *_, frame in sent)


class ShufflerProcess:
    def __init__(self, tmp_path, config, key, broker, forward=None, min_batch=50, campaign="t"):
        self.args = [sys.executable, "-m", "mss_cli", "shuffle", "--config", str(config), "--campaign", campaign,
                     "--broker", broker, "--queue", str(tmp_path / "queue.sqlite"), "--shuffle-key-file", str(key),
                     "--min-batch", str(min_batch), "--grace", str(GRACE), "--quiet"]
        if forward:
            self.args += ["--forward-broker", forward]
        self.queue = tmp_path / "queue.sqlite"
        self.log_path = tmp_path / "shuffler.log"
        self.log = open(self.log_path, "ab")

    def start(self):
        self.log_start = self.log.tell()
        self.proc = spawn(self.args, self.log)
        deadline = time.time() + 30
        while b"subscribed to" not in self.log_path.read_bytes()[self.log_start:]:
            assert self.proc.poll() is None and time.time() < deadline, self.log_path.read_text()
            time.sleep(0.05)
        return self

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(20) == 0, self.log_path.read_text()

    def query(self, sql):
        with sqlite3.connect(self.queue, timeout=10) as db:
            return db.execute(sql).fetchall()

    def counter(self, name):
        """A counter of the queue; ``rejected``: the sum of the ``rejected_<reason>`` ones."""
        where = "name LIKE 'rejected_%'" if name == "rejected" else f"name = '{name}'"
        return self.query(f"SELECT COALESCE(SUM(value), 0) FROM counters WHERE {where}")[0][0]

    def wait(self, predicate, timeout=30):
        deadline = time.time() + timeout
        while not predicate():
            assert time.time() < deadline, self.log_path.read_text()
            time.sleep(0.1)


class Batches:
    """Every message on mss/v1/<campaign>/shuffled of the broker at ``port``."""

    def __init__(self, port, campaign="t"):
        self.raw = []
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"batches-{port}")
        self.c.on_message = lambda c, u, m: self.raw.append(bytes(m.payload))
        self.c.connect("127.0.0.1", port)
        self.c.subscribe(f"mss/v1/{campaign}/shuffled", qos=1)
        self.c.loop_start()
        time.sleep(0.3)

    def decoded(self):
        return [decode_batch(KEY, data, CFG) for data in self.raw]

    def wait(self, reports, timeout=30):
        """The distinct batches (by batch id) once they hold ``reports`` bodies in all."""
        deadline = time.time() + timeout
        while True:
            unique = {b.batch_id: b for b in self.decoded()}
            if sum(len(b.bodies) for b in unique.values()) >= reports or time.time() > deadline:
                return unique

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


def wait_closed(origin, epoch):
    """Sleep until ``epoch`` is closed (its end + GRACE) and the forwarder had a round."""
    time.sleep(max(0.0, origin + (epoch + 1) * PERIOD + GRACE + 1.2 - time.time()))


def test_fleet_to_batches_checks_identity_and_keeps_no_device_id(tmp_path, mosquitto, setup):
    """Reports, redeliveries and a second report in an epoch in; one authenticated batch of exactly
    the accepted reports' compact frames out; the queue file never holds a device id."""
    config, key, origin = setup
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    shuf = ShufflerProcess(tmp_path, config, key, broker).start()
    out = Batches(mosquitto.port)
    e = epoch_now(origin) + 1  # not closed before everything is in
    sent = reports(60, e, "sensor-node-")
    extra = [("sensor-node-3", e, 8, CODEC.encode(0, list(range(CFG.omegas[0])), epoch=e, seq=8))]
    publish(sent + sent[:10] + extra, broker, "t")
    shuf.wait(lambda: shuf.counter("received") == 71)
    assert (shuf.counter("accepted"), shuf.counter("duplicate"), shuf.counter("rejected_extra_in_epoch")) == (60, 10, 1)
    wait_closed(origin, e)
    batches = out.wait(60)
    shuf.wait(lambda: shuf.counter("reports_forwarded") == 60)  # its PUBACK seen, the batch deleted
    shuf.stop()
    out.close()
    assert len(batches) == 1
    (batch,) = batches.values()
    assert (batch.epoch, batch.first_epoch) == (e, e)
    assert collections.Counter(batch.bodies) == bodies(sent)  # exactly the accepted reports, once each
    compact = WireCodec(CFG.with_frame("compact"))
    assert [compact.decode(b, None, e) for b in batch.bodies]  # the aggregator's decode
    files = b"".join(p.read_bytes() for p in tmp_path.glob("queue.sqlite*"))
    assert b"sensor-node" not in files and "sensor-node".encode("utf-16-le") not in files
    assert shuf.query("SELECT COUNT(*) FROM held") == [(0,)] and shuf.query("SELECT COUNT(*) FROM batches") == [(0,)]
    # no device id: held's dev is a keyed digest under another label than seen's (one body a device a batch)
    assert [c[1] for c in shuf.query("PRAGMA table_info(held)")] == ["k", "epoch", "dev", "body"]
    log = shuf.log_path.read_text()
    assert "sensor-node" not in log


def test_batch_mac_and_format_are_checked():
    batch = encode_batch(KEY, CFG, os.urandom(16), 9, 7, [b"\x81ab", b"\x81cd"])
    assert decode_batch(KEY, batch).bodies == (b"\x81ab", b"\x81cd")
    with pytest.raises(BatchError) as bad:
        decode_batch(bytes(32), batch)  # another key
    assert bad.value.reason == "mac"
    for i in (0, 5, 40, len(batch) - 1):  # any flipped bit of the header, a body or the MAC
        with pytest.raises(BatchError) as bad:
            decode_batch(KEY, batch[:i] + bytes([batch[i] ^ 1]) + batch[i + 1:])
        assert bad.value.reason == "mac"
    with pytest.raises(BatchError) as bad:
        decode_batch(KEY, batch, b"\0\0\0\0")
    assert bad.value.reason == "config"


def test_small_epochs_are_held_and_merged(tmp_path, mosquitto, setup):
    """30 reports of a closed epoch stay held under --min-batch 50; with 30 of a later epoch they
    leave as one batch of 60 spanning both epochs."""
    config, key, origin = setup
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    shuf = ShufflerProcess(tmp_path, config, key, broker, min_batch=50).start()
    out = Batches(mosquitto.port)
    first = epoch_now(origin) + 1
    early = reports(30, first, "a", seed=1)
    publish(early, broker, "t")
    wait_closed(origin, first)
    assert out.raw == [] and shuf.query("SELECT COUNT(*) FROM held") == [(30,)]
    late = epoch_now(origin) + 1
    later = reports(30, late, "b", seed=2)
    publish(later, broker, "t")
    wait_closed(origin, late)
    batches = out.wait(60)
    shuf.stop()
    out.close()
    (batch,) = batches.values()
    assert (batch.first_epoch, batch.epoch) == (first, late)
    assert collections.Counter(batch.bodies) == bodies(early + later)


def test_kill_9_loses_nothing_and_forwards_each_batch_once(tmp_path, mosquitto, setup):
    """kill -9 mid-epoch while reports stream in, and again once a batch is made but its broker is
    down: every report sent is in exactly one batch, and the batch made before the crash leaves
    with its batch id."""
    config, key, origin = setup
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    (tmp_path / "fwd").mkdir()
    fwd = Mosquitto(tmp_path / "fwd").start()
    forward = f"mqtt://127.0.0.1:{fwd.port}"
    # --min-batch 1: the 4 s stream may outlast epoch e (its late reports join a later batch)
    shuf = ShufflerProcess(tmp_path, config, key, broker, forward=forward, min_batch=1).start()
    e = epoch_now(origin) + 1
    sent = reports(400, e, "k")
    pub = threading.Thread(target=publish, args=(sent, broker, "t"), kwargs={"rate": 100})
    pub.start()
    shuf.wait(lambda: shuf.counter("accepted") >= 50)
    shuf.kill9()  # mid-epoch, mid-stream
    assert shuf.counter("accepted") < 400
    pub.join()
    fwd.stop()  # the next batch is made but cannot leave
    shuf.start()
    shuf.wait(lambda: shuf.counter("accepted") == 400)
    wait_closed(origin, epoch_now(origin) - 1)
    shuf.wait(lambda: shuf.query("SELECT COUNT(*) FROM held") == [(0,)])
    made = {batch_id for (batch_id,) in shuf.query("SELECT batch_id FROM batches")}
    shuf.kill9()
    fwd.start()
    out = Batches(fwd.port)
    shuf.start()
    batches = out.wait(400)
    shuf.wait(lambda: shuf.counter("reports_forwarded") == 400)
    time.sleep(1.0)  # a second copy, if any, would come now
    shuf.stop()
    out.close()
    fwd.stop()
    assert made and set(batches) == made  # the ids made before the crash, and no other
    assert collections.Counter(b for batch in batches.values() for b in batch.bodies) == bodies(sent)
    assert shuf.counter("accepted") == 400 and shuf.query("SELECT COUNT(*) FROM batches") == [(0,)]


def test_permutation_is_uniform(tmp_path):
    """B = 1000 batches of n = 8 reports, always written in one order: X[i, p] counts report i at
    position p.  A uniform permutation matrix P has Cov(P) = M (x) M / (n - 1), M = I - J/n
    (Var P_ip = (n - 1)/n^2, Cov in a row or column -1/n^2, elsewhere 1/(n^2 (n - 1))), so Pearson's
    statistic sum (X - B/n)^2 / (B/n) tends to n/(n - 1) chi2 with (n - 1)^2 degrees of freedom
    (mean n(n - 1) = 56, checked by simulation: 56.1).  The test fails above the 0.999 quantile:
    a false alarm once in 1000 runs (the permutations draw from os.urandom: no seed).  Each round
    goes through the queue as the service does: write_batch, make_batch, the encoded batch.  A
    sorted (identity) permutation fails it."""
    n, rounds = 8, 1000
    queue = ShuffleQueue(tmp_path / "q.sqlite", CFG, "t", KEY)
    queue.db.execute("PRAGMA synchronous=OFF")  # durability is the other tests'; this one wants rounds
    frames = [frame for *_, frame in reports(n, 0, "p", seed=5)]
    marks = {compact_body(CFG, "full", f): i for i, f in enumerate(frames)}
    assert len(marks) == n  # distinct bodies: each one's position is seen
    table = np.zeros((n, n))
    for r in range(rounds):
        items = [{"device_id": f"p{i}", "payload": f, "report": replace(CODEC.decode(f), epoch=r)}
                 for i, f in enumerate(frames)]
        assert queue.write_batch(items) == ["accepted"] * n
        batch_id, _ = queue.make_batch(r, n)
        data = queue.batch(batch_id)
        queue.forwarded(batch_id)
        for pos, body in enumerate(decode_batch(KEY, data).bodies):
            table[marks[body], pos] += 1
    queue.close()
    expected = rounds / n
    stat = ((table - expected) ** 2 / expected).sum() * (n - 1) / n
    assert stat < chi2.ppf(0.999, (n - 1) ** 2), (stat, table)


def test_refuses_olh_a_missing_or_short_key_and_another_key_on_the_queue(tmp_path, setup):
    config, key, _ = setup
    ShuffleQueue(tmp_path / "q", CFG, "t", KEY).close()
    assert os.stat(tmp_path / "q").st_mode & 0o777 == 0o600
    with pytest.raises(QueueError, match="queue of another shuffle key; use another queue") as refused:
        ShuffleQueue(tmp_path / "q", CFG, "t", bytes(32))
    assert flag_message(refused.value).endswith("queue of another shuffle key; use another --queue")  # mss shuffle's
    with pytest.raises(QueueError, match="queue of another campaign 't', not 'u'"):
        ShuffleQueue(tmp_path / "q", CFG, "u", KEY)
    olh = tmp_path / "olh.json"
    OracleConfig("olh", 16, 2.0).save(olh, {"device": {"period_s": PERIOD}})
    args = ["shuffle", "--campaign", "t", "--broker", "mqtt://127.0.0.1:1", "--queue", str(tmp_path / "q")]
    run = CliRunner().invoke(main, args + ["--config", str(olh), "--shuffle-key-file", str(key)])
    assert run.exit_code != 0 and "olh cannot be shuffled" in run.output
    run = CliRunner(env={"MSS_SHUFFLE_KEY": None}).invoke(main, args + ["--config", str(config)])
    assert run.exit_code == 2 and "no shuffle key" in run.output
    short = tmp_path / "short.key"
    short.write_text("ab" * 16)
    run = CliRunner().invoke(main, args + ["--config", str(config), "--shuffle-key-file", str(short)])
    assert run.exit_code == 2 and "at least 32 bytes" in run.output


def test_boards_to_shuffler_to_aggregator(tmp_path, mosquitto, setup):
    """Firmware boards -> mss shuffle -> mss aggregate --shuffled, one broker: the aggregator's counts
    equal an offline decode of the reports the boards published (recorded by a tap on their topic),
    and neither the queue nor the store file holds a device id."""
    config, key, origin = setup
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    store = tmp_path / "s.sqlite"
    agg = AggregatorProcess(tmp_path, config, store, broker=broker,
                            extra=("--shuffled", "--shuffle-key-file", str(key))).start().ready()
    shuf = ShufflerProcess(tmp_path, config, key, broker, min_batch=1).start()  # a slow fleet's last reports
    tap = []
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="tap")
    c.on_message = lambda cl, u, m: tap.append(bytes(m.payload))
    c.connect("127.0.0.1", mosquitto.port)
    c.subscribe("mss/v1/t/+/report", qos=1)
    c.loop_start()
    time.sleep(0.3)
    run = subprocess.run([sys.executable, "-m", "mss_cli", "fleet", "--broker", broker, "--campaign", "t",
                          "--config", str(config), "--devices", "16", "--epochs", "2", "--id-prefix", "board-",
                          "--seed", "9"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    time.sleep(0.5)  # the tap has what the broker acknowledged to the boards
    sent = len(tap)  # 32, or more when a slow run crossed an epoch (period 3 s): each board once an epoch
    assert sent >= 32
    shuf.wait(lambda: shuf.counter("accepted") == sent)
    wait_closed(origin, epoch_now(origin))
    wait_for(store, lambda counters: counters["accepted"] == sent)
    shuf.stop()
    agg.stop()
    c.loop_stop()
    c.disconnect()
    assert len(tap) == sent and shuf.counter("duplicate") == 0 and shuf.counter("rejected") == 0
    s = open_store(store)
    online = s.counts(None)
    s.close()
    offline = Counts(CFG).add(CODEC.decode(f) for f in tap)
    assert online.n.tolist() == offline.n.tolist() and online.c.tolist() == offline.c.tolist()
    for name in ("s.sqlite*", "queue.sqlite*"):
        assert b"board-" not in b"".join(p.read_bytes() for p in tmp_path.glob(name)), name
