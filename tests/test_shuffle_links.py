"""mss shuffle's other two inputs end to end: ``$MSS2`` lines on a real pty (``--serial``) and a
network server's uplink events on a real Mosquitto (``--lorawan``, ChirpStack v4 and The Things
Stack v3 JSON).  Each run ends with one HMAC-authenticated batch on ``mss/v1/<campaign>/shuffled``
whose bodies are, as a multiset, exactly the compact bodies of the distinct reports sent: a repeated
line or uplink counts once.  Every check is an exact equality (no statistical test, no false alarm)."""
import collections
import json
import sqlite3
import subprocess
import sys
import time

import numpy as np
import paho.mqtt.client as mqtt
import pytest

from brokers import mosquitto  # noqa: F401 (fixture)
from mss_aggregator.devices.network_server import chirpstack_uplink, tts_uplink
from mss_device.framing import frame as serial_line
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.sampler import sample_reports
from mss_protocol.mss.wire import WireCodec
from mss_protocol.shuffled_batch import compact_body, decode_batch
from ptys import pty_pair  # noqa: F401 (fixture)

SS = MssConfig.build(16, 2.0, [16])  # one modulus m = k: subset selection
PERIOD, GRACE = 3, 0.3  # seconds: the epoch closes within the test
KEY = bytes(range(32))
CAMPAIGN = "t"
APP, TENANT = "mss-demo", "ttn"
SPECS = {"chirpstack": f"chirpstack:{APP}", "tts": f"tts:{APP}@{TENANT}"}
QOS = {"chirpstack": 1, "tts": 0}  # as each network server publishes
UPLINK = {"chirpstack": lambda eui, fcnt, data, t: chirpstack_uplink(APP, eui, 1, fcnt, data, t),  # FPort 1
          "tts": lambda eui, fcnt, data, t: tts_uplink(APP, TENANT, eui, 1, fcnt, data, t)}


def campaign(tmp_path, cfg):
    """(config path, key file, epoch origin): the campaign clock starts now, in epoch 0."""
    origin = int(time.time())
    path = tmp_path / "cfg.json"
    cfg.save(path, {"device": {"period_s": PERIOD, "epoch_origin": origin}, "aggregator": {"accept_past_epochs": 100}})
    key = tmp_path / "shuffle.key"
    key.write_text(KEY.hex() + "\n")
    return path, key, origin


def reports(cfg, devices, epoch, seed):
    """One fresh report frame of ``cfg`` per device, for ``epoch`` (dropped by a compact frame)."""
    rng = np.random.default_rng(seed)
    j, subsets = sample_reports(cfg, rng.integers(0, cfg.k, size=devices), rng)
    codec = WireCodec(cfg)
    return [codec.encode(int(j[d]), subsets[d], epoch=epoch) for d in range(devices)]


class Shuffler:
    """``mss shuffle`` in a subprocess with ``links`` (its input and forward flags); its queue's counters."""

    def __init__(self, tmp_path, config, key, links, min_batch):
        self.queue, self.log_path = tmp_path / "queue.sqlite", tmp_path / "shuffler.log"
        args = [sys.executable, "-m", "mss_cli", "shuffle", "--config", str(config), "--campaign", CAMPAIGN,
                "--queue", str(self.queue), "--shuffle-key-file", str(key), "--min-batch", str(min_batch),
                "--grace", str(GRACE), "--quiet", *links]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=log)

    def ready(self, *markers):
        """Wait for its inputs' ``markers`` and its forwarder's in its log."""
        self.wait(lambda: all(marker in self.log() for marker in markers + ("forwarding batches to",)))
        return self

    def log(self):
        return self.log_path.read_text()

    def counters(self):
        """The queue's counters, ``rejected`` the sum of the ``rejected_<reason>`` ones."""
        with sqlite3.connect(self.queue, timeout=10) as db:
            c = collections.Counter(dict(db.execute("SELECT name, value FROM counters").fetchall()))
        c["rejected"] = sum(v for name, v in c.items() if name.startswith("rejected_"))
        return c

    def wait(self, predicate, timeout=20):
        deadline = time.time() + timeout
        while not predicate():
            assert self.proc.poll() is None and time.time() < deadline, self.log()
            time.sleep(0.1)

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(20) == 0, self.log()


@pytest.fixture
def shufflers():
    """Start a :class:`Shuffler`; one a failed test left running is killed at teardown."""
    made = []

    def start(*args):
        made.append(Shuffler(*args))
        return made[-1]
    yield start
    for shuf in made:
        if shuf.proc.poll() is None:
            shuf.proc.kill()
            shuf.proc.wait(10)


class Batches:
    """Every batch on mss/v1/<campaign>/shuffled at ``port``, decoded (MAC checked) with KEY."""

    def __init__(self, port, cfg):
        self.raw, self.cfg = [], cfg
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"batches-{port}")
        self.c.on_message = lambda c, u, m: self.raw.append(bytes(m.payload))
        self.c.connect("127.0.0.1", port)
        self.c.subscribe(f"mss/v1/{CAMPAIGN}/shuffled", qos=1)
        self.c.loop_start()
        time.sleep(0.3)

    def decoded(self):
        """{batch id: batch}: a batch published again (no PUBACK seen) counts once."""
        return {b.batch_id: b for b in (decode_batch(KEY, data, self.cfg) for data in self.raw)}

    def close(self):
        self.c.loop_stop()
        self.c.disconnect()


def one_batch(shuf, out, origin, epoch, n):
    """The only batch, once epoch ``epoch`` closed and ``n`` reports were forwarded (PUBACK seen)."""
    time.sleep(max(0.0, origin + (epoch + 1) * PERIOD + GRACE - time.time()))
    shuf.wait(lambda: shuf.counters()["reports_forwarded"] >= n)
    time.sleep(0.5)  # a second batch, if any, would come now
    shuf.stop()
    out.close()
    batches = out.decoded()
    assert len(batches) == 1, batches
    (batch,) = batches.values()
    assert (batch.first_epoch, batch.epoch) == (epoch, epoch)
    return batch


def test_serial_lines_to_one_batch(tmp_path, mosquitto, pty_pair, shufflers):
    """48 boards' ``$MSS2`` lines (SS, k = 16, compact-epoch frames), 8 of them written twice, and
    console noise on a pty -> mss shuffle --serial -> one batch of the 48 reports' compact bodies."""
    dev, host = pty_pair
    cfg = SS.with_frame("compact-epoch")
    config, key, origin = campaign(tmp_path, cfg)
    forward = ["--forward-broker", f"mqtt://127.0.0.1:{mosquitto.port}"]
    shuf = shufflers(tmp_path, config, key, ["--serial", f"{host},115200", *forward], 48).ready("serial: reading")
    out = Batches(mosquitto.port, cfg)
    e = (int(time.time()) - origin) // PERIOD + 1  # not closed before every line is read
    frames = reports(cfg, 48, e, seed=3)
    lines = [serial_line(f"board-{d:02d}", f) for d, f in enumerate(frames)]
    with open(dev, "w") as fh:
        fh.write("boot: hello\n" + "".join(lines + lines[:8]))
    shuf.wait(lambda: shuf.counters()["received"] == 56)
    c = shuf.counters()
    assert (c["accepted"], c["duplicate"], c["rejected"]) == (48, 8, 0)
    batch = one_batch(shuf, out, origin, e, 48)
    assert collections.Counter(batch.bodies) == collections.Counter(compact_body(cfg, "compact-epoch", f)
                                                                    for f in frames)
    assert "board-" not in shuf.log()


@pytest.mark.parametrize("server", ["chirpstack", "tts"])
def test_lorawan_uplinks_to_one_batch(tmp_path, mosquitto, server, shufflers):
    """40 DevEUIs' uplinks (SS, k = 16, compact frames) dated by the network server in the epoch,
    6 of them delivered twice (the same event), -> mss shuffle --lorawan -> one batch of the 40
    reports' compact bodies."""
    cfg = SS.with_frame("compact")
    config, key, origin = campaign(tmp_path, cfg)
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    links = ["--broker", broker, "--lorawan", SPECS[server]]
    shuf = shufflers(tmp_path, config, key, links, 40).ready("subscribed to")
    out = Batches(mosquitto.port, cfg)
    e = (int(time.time()) - origin) // PERIOD + 1  # the window's last epoch: not closed before every uplink is in
    frames = reports(cfg, 40, e, seed=4)
    times = origin + e * PERIOD + np.random.default_rng(5).uniform(0, PERIOD, size=len(frames))
    events = [UPLINK[server](f"70b3d57ed005{d:04x}", 10 + d, f, float(t))
              for d, (f, t) in enumerate(zip(frames, times))]
    ns = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"ns-{server}")
    ns.max_inflight_messages_set(100)
    ns.connect("127.0.0.1", mosquitto.port)
    ns.loop_start()
    for info in [ns.publish(topic, json.dumps(doc), qos=QOS[server]) for topic, doc in events + events[:6]]:
        info.wait_for_publish(10)
    ns.loop_stop()
    ns.disconnect()
    shuf.wait(lambda: shuf.counters()["received"] == 46)
    c = shuf.counters()
    assert (c["accepted"], c["duplicate"], c["rejected"]) == (40, 6, 0)
    batch = one_batch(shuf, out, origin, e, 40)
    assert collections.Counter(batch.bodies) == collections.Counter(compact_body(cfg, "compact", f) for f in frames)
