"""mss shuffle and mss aggregate --shuffled on a broker that enforces passwords and an ACL (issue 44,
item 3): every batch reaches the aggregator through exactly what mss provision wrote, and a batch the
broker refuses is logged, counted and kept until it can be forwarded (under MQTT 3.1.1 Mosquitto
acknowledged a denied publish, and the shuffler deleted a batch nobody received)."""
import json
import signal
import time

import pytest
from click.testing import CliRunner

from brokers import Mosquitto, mqtt_client, password_file
from collect_helpers import AggregatorProcess, wait_for
from mss_aggregator.collect.store import open_store
from mss_cli.main import main
from mss_protocol.counts import Counts
from mss_protocol.shuffled_batch import decode_batch
from test_shuffle_service import CFG, CODEC, KEY, PERIOD, ShufflerProcess, bodies, reports

CAMPAIGN = "t"
BOARDS = [f"b{i}" for i in range(6)]


@pytest.fixture
def setup(tmp_path):
    """(config path, key file, epochs 10 and 11): the clock started 20 periods ago, so both are closed."""
    path = tmp_path / "cfg.json"
    CFG.save(path, {"device": {"period_s": PERIOD, "epoch_origin": int(time.time()) - 20 * PERIOD},
                    "aggregator": {"accept_past_epochs": 100}})
    key = tmp_path / "shuffle.key"
    key.write_text(KEY.hex() + "\n")
    return path, key, (10, 11)


def broker_with(tmp_path, passwd, acl):
    """A Mosquitto with exactly ``passwd`` and ``acl``, client id = username (docs/mosquitto)."""
    (tmp_path / "broker").mkdir()
    return Mosquitto(tmp_path / "broker", anonymous=False, extra=(
        f"use_username_as_clientid true\npassword_file {passwd}\nacl_file {acl}\n")).start()


def publish_as_boards(port, sent, passwords):
    """Each report of ``sent`` (reports()' tuples) published at QoS 1 by its board's own login."""
    clients = [(mqtt_client(port, device, passwords[device]), device, frame) for device, _, _, frame in sent]
    for info in [c.publish(f"mss/v1/{CAMPAIGN}/{device}/report", frame, qos=1) for c, device, frame in clients]:
        info.wait_for_publish(5)
    for c, _, _ in clients:
        c.disconnect()  # before loop_stop: wakes the loop's select (else up to a second each)
        c.loop_stop()


def test_provisioned_accounts_carry_every_batch(tmp_path, setup):
    config, key, epochs = setup
    fleet = tmp_path / "fleet.csv"
    fleet.write_text("device_id,transport,wifi.ssid,wifi.password,mqtt.host\n"
                     + "".join(f"{b},mqtt,net,12345678,127.0.0.1\n" for b in BOARDS))
    out = tmp_path / "out"
    run = CliRunner().invoke(main, ["provision", str(fleet), "--config", str(config), "--campaign", CAMPAIGN,
                                    "--out", str(out), "--shuffler-user", "shuffler",
                                    "--shuffled-aggregator-user", "shuffled-agg"])
    assert run.exit_code == 0, run.output
    assert "shuffler's forwarder account shuffler-forward: password generated" in run.stderr
    m = out / "mosquitto"
    acl = m.joinpath("acl").read_text()
    assert ("\nuser shuffler\ntopic read mss/v1/t/+/report\n\n"
            "user shuffler-forward\ntopic write mss/v1/t/shuffled\n") in acl
    assert "\nuser shuffled-agg\ntopic read mss/v1/t/shuffled\n\n" in acl  # the batches, nothing else
    broker = broker_with(tmp_path, m / "passwd", m / "acl")
    url = f"mqtt://{{}}@127.0.0.1:{broker.port}"
    store = tmp_path / "s.sqlite"
    agg = shuf = None
    try:
        agg = AggregatorProcess(tmp_path, config, store, broker=url.format("shuffled-agg"), campaign=CAMPAIGN,
                                extra=("--broker-password-file", str(m / "shuffled-agg.password"), "--shuffled",
                                       "--shuffle-key-file", str(key))).start().ready()
        shuf = ShufflerProcess(tmp_path, config, key, url.format("shuffler"), url.format("shuffler-forward"),
                               min_batch=len(BOARDS), campaign=CAMPAIGN)
        shuf.args += ["--broker-password-file", str(m / "shuffler.password"),
                      "--forward-broker-password-file", str(m / "shuffler-forward.password")]
        shuf.start()
        passwords = {b: json.loads((out / "boards" / f"{b}.json").read_text())["device"]["mqtt"]["password"]
                     for b in BOARDS}
        sent = []
        for i, epoch in enumerate(epochs):  # two batches: the second epoch's reports after the first batch
            batch = reports(len(BOARDS), epoch, "b", seed=i)
            publish_as_boards(broker.port, batch, passwords)
            sent += batch
            shuf.wait(lambda: shuf.counter("batches_made") == i + 1)
        shuf.wait(lambda: shuf.counter("batches_forwarded") == 2)
        got = wait_for(store, lambda c: c["accepted"] == len(sent), timeout=30)
        shuf.stop()
        agg.stop()
    finally:
        for p in (shuf, agg):
            if p is not None and p.proc.poll() is None:
                p.kill9()
        broker.stop()
    assert shuf.counter("accepted") == len(sent) and shuf.counter("forwards_refused") == 0
    assert shuf.query("SELECT COUNT(*) FROM batches") == [(0,)]  # nothing left unforwarded
    assert got["batches"] == 2 and got["rejected"] == 0
    s = open_store(store)
    online = s.counts(None)
    s.close()
    offline = Counts(CFG).add(CODEC.decode(frame) for *_, frame in sent)
    assert online.n.tolist() == offline.n.tolist() and online.c.tolist() == offline.c.tolist()


def test_a_refused_batch_is_logged_counted_kept_and_forwarded_once_allowed(tmp_path, setup):
    config, key, (epoch, _) = setup
    users = ["shuffler", "shuffler-forward", "reader", *BOARDS]
    passwd = password_file(tmp_path / "passwd", users)  # each password: pw-<user>
    acl = tmp_path / "acl"
    grants = ("user shuffler\ntopic read mss/v1/t/+/report\n\nuser reader\ntopic read mss/v1/t/shuffled\n\n"
              + "".join(f"user {b}\ntopic write mss/v1/t/{b}/report\n\n" for b in BOARDS))
    acl.write_text(grants + "user shuffler-forward\ntopic read mss/v1/t/shuffled\n")  # no write: refused
    acl.chmod(0o644)
    broker = broker_with(tmp_path, passwd, acl)
    url = f"mqtt://{{0}}:pw-{{0}}@127.0.0.1:{broker.port}"  # passwords in the URL: the old CLI takes it too
    reader = mqtt_client(broker.port, "reader", "pw-reader")
    got = []
    reader.on_message = lambda c, u, msg: got.append(bytes(msg.payload))
    reader.subscribe("mss/v1/t/shuffled", qos=1)
    shuf = ShufflerProcess(tmp_path, config, key, url.format("shuffler"), url.format("shuffler-forward"),
                           min_batch=len(BOARDS), campaign=CAMPAIGN)
    try:
        shuf.start()
        sent = reports(len(BOARDS), epoch, "b")
        publish_as_boards(broker.port, sent, {b: f"pw-{b}" for b in BOARDS})
        shuf.wait(lambda: shuf.counter("batches_made") == 1)
        deadline = time.time() + 5  # the old forwarder (MQTT 3.1.1) counted it forwarded and deleted it
        while shuf.counter("forwards_refused") < 2 and shuf.counter("batches_forwarded") == 0 \
                and time.time() < deadline:
            time.sleep(0.1)
        assert shuf.counter("batches_forwarded") == 0 and shuf.counter("forwards_refused") >= 2
        assert shuf.query("SELECT COUNT(*), SUM(n) FROM batches") == [(1, len(BOARDS))]  # kept
        log = shuf.log_path.read_text()
        assert log.count("refused it on mss/v1/t/shuffled: Not authorized (0x87)") == 1, log  # once a batch
        assert got == []
        acl.write_text(grants + "user shuffler-forward\ntopic write mss/v1/t/shuffled\n")
        broker.proc.send_signal(signal.SIGHUP)  # Mosquitto reloads its ACL
        shuf.wait(lambda: shuf.counter("batches_forwarded") == 1, timeout=10)
        deadline = time.time() + 5
        while not got and time.time() < deadline:
            time.sleep(0.05)
        shuf.stop()
    finally:
        if shuf.proc.poll() is None:
            shuf.kill9()
        reader.loop_stop()
        reader.disconnect()
        broker.stop()
    assert shuf.query("SELECT COUNT(*) FROM batches") == [(0,)]
    assert "forwarded to mss/v1/t/shuffled" in shuf.log_path.read_text()
    assert len(got) == 1 and sorted(decode_batch(KEY, got[0], CFG).bodies) == sorted(bodies(sent).elements())


def test_forward_broker_password_file_is_the_forwarders(tmp_path, setup):
    config, key, _ = setup
    pw = tmp_path / "pw"
    pw.write_text("secret\n")
    base = ["shuffle", "--config", str(config), "--campaign", CAMPAIGN, "--queue", str(tmp_path / "q.sqlite"),
            "--shuffle-key-file", str(key), "--broker", "mqtt://shuffler@127.0.0.1:1"]
    for forward, says in [(["--forward-broker", "mqtt://127.0.0.1:1"], "a password needs a user in the "
                                                                         "--forward-broker URL"),
                          ([], "the password is for the --forward-broker connection; give --forward-broker")]:
        run = CliRunner(env={"MSS_BROKER_PASSWORD": "other"}).invoke(
            main, base + forward + ["--forward-broker-password-file", str(pw)])
        assert run.exit_code == 2 and f"--forward-broker-password-file {pw}: {says}" in " ".join(
            run.stderr.split()), run.stderr
