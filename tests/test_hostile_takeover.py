"""A device credential cannot take over the aggregator's MQTT session.

The broker is docs/mosquitto's example config as shipped (copied, with its
port and paths rewritten), with its ACL; the aggregator is the real
``mss aggregate`` process with its default client id.  A device logs in with
its own password and the aggregator's client id (the default one read from
the store, the guessable ``mss-agg-<campaign>`` and the aggregator's
username), clean session off: while the aggregator is down with reports
queued for it, and 5 times while it collects a stream of 300 reports.  Every
attempt must get the device's own client id (the broker log says which id
each connection got) and every published report must be accepted.

The ``pre-fix`` variant runs the same attack against the config without
``use_username_as_clientid`` and an aggregator under the old fixed id
``mss-agg-<campaign>``: it must lose reports, which shows this test can fail.
"""
import os
import re
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from brokers import Mosquitto, password_file
from postgres import pg_url, postgres_server  # noqa: F401 (fixtures)
from collect_helpers import AggregatorProcess, clocked, wait_for
from loadgen import make_reports, publish
from mss_aggregator.collect.service import default_client_id
from mss_aggregator.collect.store import open_store
from mss_aggregator.ports import free_port
from mss_protocol.mss.config import MssConfig

DOCS = Path(__file__).resolve().parent.parent / "docs" / "mosquitto"
CAMPAIGN = "greenhouse"  # the example ACL's campaign
CFG = MssConfig.build(64, 2.0, [59, 61, 63])
DEVICES = [f"dev{i}" for i in range(10)]  # make_reports(prefix="dev") names them so
ROGUE = "dev99"  # a provisioned device whose credential the attacker holds
LATE = "late0"  # sends the last report
GUESSED = f"mss-agg-{CAMPAIGN}"  # the pre-fix default client id
FORCE_LINE = "use_username_as_clientid true\n"
VARIANTS = {"shipped": [], "pre-fix": ["--client-id", GUESSED]}  # aggregator flags


class Setup:
    """The example broker with one user per device, ROGUE and the aggregator."""

    def __init__(self, tmp_path, variant):
        self.variant = variant
        port = free_port()
        password_file(tmp_path / "passwd", ["aggregator", ROGUE, LATE, *DEVICES])
        (tmp_path / "acl").write_text((DOCS / "acl").read_text())
        (tmp_path / "acl").chmod(0o644)
        self.connections = tmp_path / "connections.log"
        head, *listeners = re.split(r"(?m)^(?=listener )", (DOCS / "mosquitto.conf").read_text())
        # every listener of the shipped config ties client ids to usernames (a listener setting)
        assert listeners and all(FORCE_LINE in block for block in listeners)
        conf = head + listeners[0]  # the plain listener: the TLS ones need certificates
        if variant == "pre-fix":
            conf = conf.replace(FORCE_LINE, "")
        for key, value in (("listener", f"{port} 127.0.0.1"), ("password_file", tmp_path / "passwd"),
                           ("acl_file", tmp_path / "acl"), ("persistence_location", f"{tmp_path}/")):
            conf, n = re.subn(rf"^{key} .*$", f"{key} {value}", conf, flags=re.M)
            assert n == 1, key
        conf += f"log_dest file {self.connections}\n" + ("user root\n" if os.geteuid() == 0 else "")
        self.broker = Mosquitto(tmp_path, port=port, conf=conf).start()
        self.port = port
        self.config, self.store = tmp_path / "cfg.json", tmp_path / "store.sqlite"
        self.clock = clocked(29)  # the reports' epochs 0..29 (make_reports)
        CFG.save(self.config, self.clock)
        self.agg = AggregatorProcess(tmp_path, self.config, self.store,
                                     broker=f"mqtt://aggregator:pw-aggregator@127.0.0.1:{port}",
                                     campaign=CAMPAIGN, extra=VARIANTS[variant])
        self.published = []

    def targets(self):
        """The client ids an attacker would try: the aggregator's actual one first."""
        if self.variant == "pre-fix":
            return [GUESSED, "aggregator"]
        store = open_store(self.store)
        try:
            stored = default_client_id(store, CAMPAIGN)  # read back: the aggregator created it
        finally:
            store.close()
        assert re.fullmatch(rf"mss-agg-{CAMPAIGN}-[0-9a-f]{{16}}", stored), stored
        return [stored, GUESSED, "aggregator"]

    def publish(self, reports, rate=None):
        """Each device publishes its own reports with its own credential (the ACL
        drops a report under another device's id); several devices in parallel."""
        by_device = {}
        for r in reports:
            by_device.setdefault(r[0], []).append(r)
        threads = [threading.Thread(target=lambda d=d, rs=rs: self.published.extend(
                       publish(rs, f"mqtt://{d}:pw-{d}@127.0.0.1:{self.port}", CAMPAIGN, client_id=d,
                               rate=rate)))
                   for d, rs in by_device.items()]
        for t in threads:
            t.start()
        return threads

    def takeover(self, client_id, hold):
        """ROGUE connects as ``client_id`` with clean session off and holds the
        session for ``hold`` s; returns the client id the broker gave it (None:
        refused)."""
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False,
                        protocol=mqtt.MQTTv311)
        c.username_pw_set(ROGUE, f"pw-{ROGUE}")
        c.connect("127.0.0.1", self.port)
        local_port = c.socket().getsockname()[1]
        end = time.time() + hold
        while time.time() < end:
            c.loop(0.05)  # no loop thread: a kicked attacker does not come back
        c.disconnect()
        line = re.compile(rf"New client connected from 127\.0\.0\.1:{local_port} as (\S+) \(.*u'{ROGUE}'\)")
        for _ in range(50):
            found = line.search(self.connections.read_text())
            if found:
                return found.group(1)
            time.sleep(0.1)
        return None

    def lost(self):
        """(lost, published): published reports not accepted, once a last report
        (delivered after everything queued before it) is in the store."""
        last = make_reports(CFG, devices=1, epochs=1, prefix=LATE[:-1])
        self.publish(last)[0].join()
        sentinel = last[0][:3]
        deadline = time.time() + 60
        while True:
            store = open_store(self.store)
            try:
                accepted = store.accepted_keys()
            finally:
                store.close()
            if sentinel in accepted or time.time() > deadline:
                break
            time.sleep(0.2)
        assert sentinel in accepted, self.agg.log_path.read_text()
        published = {(d, e, s) for d, e, s, _ in self.published} - {sentinel}
        accepted -= {sentinel}
        assert accepted <= published  # nothing but what the devices sent
        return len(published - accepted), len(published)

    def close(self):
        if self.agg.proc is not None and self.agg.proc.poll() is None:
            self.agg.stop()
        self.broker.stop()


@pytest.fixture(params=list(VARIANTS))
def setup(request, tmp_path):
    s = Setup(tmp_path, request.param)
    yield s
    s.close()


def check(setup, got, lost, published):
    print(f"{setup.variant}: attempts connected as {got}; lost {lost} of {published}")
    if setup.variant == "shipped":
        assert [cid for _, cid in got] == [ROGUE] * len(got)  # the broker forced the device's own id
        assert lost == 0
    else:  # the same attack and checks catch the old config
        assert (GUESSED, GUESSED) in got and lost > 0


def test_takeover_while_aggregator_is_down(setup):
    setup.agg.start().ready()  # creates the persistent session and its subscription
    targets = setup.targets()
    setup.agg.stop()
    for t in setup.publish(make_reports(CFG, devices=len(DEVICES), epochs=10, prefix="dev")):
        t.join()  # 100 reports queued for the aggregator's session
    got = [(target, setup.takeover(target, hold=1.0)) for target in targets]
    setup.agg.start().ready()
    assert targets[0] == setup.targets()[0]  # the same id after the restart: the same session
    lost, published = setup.lost()
    assert published == 100
    check(setup, got, lost, published)


def test_takeover_while_aggregator_runs(setup):
    setup.agg.start().ready()
    targets = setup.targets()
    stream = setup.publish(make_reports(CFG, devices=len(DEVICES), epochs=30, prefix="dev"), rate=5)
    got = []
    for i in range(5):  # 300 reports over about 6 s, an attempt every second
        time.sleep(0.5)
        target = targets[i % len(targets)]
        got.append((target, setup.takeover(target, hold=0.5)))
    for t in stream:
        t.join()
    lost, published = setup.lost()
    assert published == 300
    check(setup, got, lost, published)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_generated_client_id_is_kept_in_the_store(request, tmp_path, backend):
    """Workers opening one store together get one id, and a reopened store the same."""
    location = str(tmp_path / "s.sqlite") if backend == "sqlite" else request.getfixturevalue("pg_url")
    open_store(location, CFG).close()
    ids = []

    def worker():
        store = open_store(location, CFG)
        ids.append(default_client_id(store, CAMPAIGN))
        store.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ids) == 4 and len(set(ids)) == 1
    assert re.fullmatch(rf"mss-agg-{CAMPAIGN}-[0-9a-f]{{16}}", ids[0])
    store = open_store(location)
    assert default_client_id(store, CAMPAIGN) == ids[0]
    assert default_client_id(store, "other") == f"mss-agg-other-{ids[0].rsplit('-', 1)[1]}"
    store.close()
    other = open_store(tmp_path / "other.sqlite", CFG)  # another store: another random id
    assert default_client_id(other, CAMPAIGN) != ids[0]
    other.close()


def test_firmware_device_reports_through_the_shipped_config(tmp_path):
    """A board provisioned as docs/deployment.md says (broker user = device id)
    runs the real firmware (MicroPython unix port) against the shipped config:
    the broker keeps its client id, the ACL lets its report through."""
    from mss_aggregator.devices.fleet import BoardRun, Boards, FleetClock, run_fleet

    setup = Setup(tmp_path, "shipped")
    try:
        setup.agg.start().ready()
        device = DEVICES[0]
        results = run_fleet(CFG, f"mqtt://{device}:pw-{device}@127.0.0.1:{setup.port}", CAMPAIGN, [5],
                            clock=FleetClock(epoch_origin=setup.clock["device"]["epoch_origin"]),
                            boards=Boards(id_prefix=device[:-1]), run=BoardRun(workdir=tmp_path))
        (_, rc, out), = results.values()
        assert list(results) == [device] and rc == 0, out
        wait_for(setup.store, lambda c: c["accepted"] == 1)
        store = open_store(setup.store)
        try:
            assert [key[0] for key in store.accepted_keys()] == [device]
        finally:
            store.close()
        assert re.search(rf"as {device} \(.*u'{device}'\)", setup.connections.read_text())
    finally:
        setup.close()
