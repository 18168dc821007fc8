"""``mss provision`` (a fleet CSV -> board configs, Mosquitto passwd and ACL, LoRaWAN device
lists) with a real Mosquitto enforcing what it wrote, and ``mss switch-config``'s
``--devices-file`` and ``--all-seen --store`` with a real Mosquitto and SQLite store.
"""
import base64
import json
import stat
import threading
import time

import paho.mqtt.client as mqtt
import pytest

from brokers import Mosquitto, mosquitto, mqtt_client  # noqa: F401 (fixture)
from collect_helpers import mss
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.lorawan import parse_spec
from mss_aggregator.collect.store import open_store
from mss_aggregator.devices.network_server import chirpstack_uplink
from mss_node.settings import Settings
from mss_protocol.choose import Limits, choose
from mss_protocol.codec import codec
from mss_protocol.configs import load_dict

CAMPAIGN = "gh-2026"
EUI = "70B3D57ED0000001"
WIFI = "wifi.ssid,wifi.password,mqtt.host"
FLEET = (f"device_id,dev_eui,transport,{WIFI},period_s,lorawan.uart\n"
         "gh-01,,mqtt,greenhouse,12345678,127.0.0.1,,\n"
         "gh-02,,mqtt,greenhouse,12345678,127.0.0.1,600,\n"
         "\n"  # a blank line is no board
         "gh-03,,mqtt,greenhouse,12345678,127.0.0.1,,\n"
         f",{EUI},lorawan,,,,,1\n")


@pytest.fixture
def campaign(tmp_path):
    path = tmp_path / "campaign.json"
    cfg = choose(16, 2.0, "grr")["config"]
    path.write_text(json.dumps(dict(cfg, device={"period_s": 3600})))
    return path


def provision(tmp_path, campaign, fleet=FLEET, *extra):
    (tmp_path / "fleet.csv").write_text(fleet)
    return mss("provision", tmp_path / "fleet.csv", "--config", campaign, "--campaign", CAMPAIGN,
               "--out", tmp_path / "out", *extra)


def board(out, name):
    return json.loads((out / "boards" / f"{name}.json").read_text())


def test_provision_writes_configs_the_firmware_loads(tmp_path, campaign):
    code, out, err = provision(tmp_path, campaign, FLEET, "--frequency-plan", "EU_863_870_TTN",
                               "--application", "app-uuid", "--device-profile", "profile-uuid")
    assert code == 0, err
    d = tmp_path / "out"
    assert sorted(p.name for p in (d / "boards").iterdir()) == [f"{EUI.lower()}.json", "gh-01.json",
                                                                "gh-02.json", "gh-03.json"]
    passwords = set()
    for name in ("gh-01", "gh-02", "gh-03"):
        cfg = board(d, name)
        s = Settings(cfg)  # the firmware's own loader
        assert (s.device_id, s.campaign, s.device["transport"]) == (name, CAMPAIGN, "mqtt")
        assert s.device["mqtt"]["user"] == name and s.device["wifi"]["password"] == "12345678"  # text, not 12345678
        passwords.add(s.device["mqtt"]["password"])
        assert stat.S_IMODE((d / "boards" / f"{name}.json").stat().st_mode) == 0o600
    assert Settings(board(d, "gh-02")).device["period_s"] == 600 and len(passwords) == 3
    lw = Settings(board(d, EUI.lower()))
    assert lw.device_id is None and lw.device["lorawan"]["uart"] == 1  # it reports under its modem's DevEUI
    for secret in passwords:
        assert secret not in out + err  # never printed
    assert "password generated" in err and "AppKey generated" in err
    # the LoRaWAN device lists: one AppKey in both, never printed
    cs = json.loads((d / "lorawan" / "chirpstack-devices.json").read_text())
    key = cs[0]["deviceKeys"]["nwkKey"]
    assert cs == [{"device": {"devEui": EUI.lower(), "name": f"eui-{EUI.lower()}", "joinEui": "0" * 16,
                              "description": f"mss-iot campaign {CAMPAIGN}", "tags": {"campaign": CAMPAIGN},
                              "applicationId": "app-uuid", "deviceProfileId": "profile-uuid"},
                   "deviceKeys": {"nwkKey": key}}]
    tts = json.loads((d / "lorawan" / "tts-devices.json").read_text())
    assert tts["ids"] == {"device_id": f"eui-{EUI.lower()}", "dev_eui": EUI, "join_eui": "0" * 16}
    assert tts["root_keys"]["app_key"]["key"] == key.upper() and tts["supports_join"] is True
    assert tts["frequency_plan_id"] == "EU_863_870_TTN" and key not in out + err
    acl = (d / "mosquitto" / "acl").read_text()
    assert "user gh-01\ntopic write mss/v1/gh-2026/gh-01/report\ntopic write mss/v1/gh-2026/gh-01/status\n" in acl
    assert "pattern" not in acl and EUI.lower() not in acl


def test_rerun_keeps_secrets_and_rotate_replaces_them(tmp_path, campaign):
    assert provision(tmp_path, campaign)[0] == 0
    d = tmp_path / "out"

    def secrets():
        return ([board(d, n)["device"]["mqtt"]["password"] for n in ("gh-01", "gh-02")]
                + [(d / "mosquitto" / "aggregator.password").read_text()]
                + [json.loads((d / "lorawan" / "tts-devices.json").read_text())["root_keys"]["app_key"]["key"]])

    first = secrets()
    code, _, err = provision(tmp_path, campaign)
    assert code == 0 and secrets() == first and "password kept" in err and "AppKey kept" in err
    given = (f"device_id,dev_eui,transport,{WIFI},mqtt.password,lorawan.uart\n"
             "gh-01,,mqtt,greenhouse,12345678,127.0.0.1,given-pw,\n"
             "gh-02,,mqtt,greenhouse,12345678,127.0.0.1,,\n"
             f",{EUI},lorawan,,,,,1\n")
    code, _, err = provision(tmp_path, campaign, given, "--rotate")
    assert code == 0, err
    now = secrets()
    assert now[0] == "given-pw" and all(a != b for a, b in zip(now[1:], first[1:]))


def test_mosquitto_enforces_the_written_passwd_and_acl(tmp_path, campaign):
    assert provision(tmp_path, campaign)[0] == 0
    d = tmp_path / "out"
    (tmp_path / "broker").mkdir()
    broker = Mosquitto(tmp_path / "broker", anonymous=False, extra=(
        f"use_username_as_clientid true\npassword_file {d}/mosquitto/passwd\nacl_file {d}/mosquitto/acl\n")).start()
    try:
        log = (tmp_path / "broker" / "mosquitto.log").read_text()
        complaints = [line for line in log.splitlines() if ("Warning" in line or "Error" in line)
                      and "run as root" not in line]  # the test broker runs as root where the tests do
        assert complaints == [], log
        got, subscribed = [], threading.Event()
        agg = mqtt_client(broker.port, "aggregator", (d / "mosquitto" / "aggregator.password").read_text().strip())
        agg.on_message = lambda c, u, m: got.append((m.topic, m.payload))
        agg.on_subscribe = lambda *a: subscribed.set()
        agg.subscribe(f"mss/v1/{CAMPAIGN}/+/report", qos=1)
        assert subscribed.wait(5)
        a = mqtt_client(broker.port, "gh-01", board(d, "gh-01")["device"]["mqtt"]["password"])
        b = mqtt_client(broker.port, "gh-02", board(d, "gh-02")["device"]["mqtt"]["password"])
        for c, topic, payload in [(a, "gh-01", b"a's own"), (a, "gh-02", b"a as b"), (b, "gh-02", b"b's own")]:
            c.publish(f"mss/v1/{CAMPAIGN}/{topic}/report", payload, qos=1).wait_for_publish(5)
        time.sleep(0.5)
        assert sorted(got) == [(f"mss/v1/{CAMPAIGN}/gh-01/report", b"a's own"),
                               (f"mss/v1/{CAMPAIGN}/gh-02/report", b"b's own")]
        assert refused(broker.port, "gh-01", board(d, "gh-02")["device"]["mqtt"]["password"])
        for c in (agg, a, b):
            c.loop_stop()
            c.disconnect()
    finally:
        broker.stop()


SHUFFLE = ("--shuffler-user", "shuffler", "--shuffled-aggregator-user", "shuffled-agg")


def test_shuffle_accounts_read_and_write_only_their_topics(tmp_path, campaign):
    """The shuffler reads reports, its forwarder writes batches, the shuffled aggregator reads batches
    and never a report (issue 44: no account could write the batches, and the one used read reports)."""
    code, _, err = provision(tmp_path, campaign, FLEET, *SHUFFLE)
    assert code == 0, err
    d = tmp_path / "out" / "mosquitto"
    for user in ("shuffler", "shuffler-forward", "shuffled-agg"):
        assert stat.S_IMODE((d / f"{user}.password").stat().st_mode) == 0o600
    assert ("shuffler account shuffler: password generated shuffler's forwarder account shuffler-forward: "
            "password generated shuffled aggregator account shuffled-agg: password generated") in err
    (tmp_path / "broker").mkdir()
    broker = Mosquitto(tmp_path / "broker", anonymous=False, extra=(
        f"use_username_as_clientid true\npassword_file {d}/passwd\nacl_file {d}/acl\n")).start()
    clients = []
    try:
        def login(user, protocol=None):
            password = (d / f"{user}.password").read_text().strip() if "shuff" in user else \
                board(tmp_path / "out", user)["device"]["mqtt"]["password"]
            clients.append(mqtt_client(broker.port, user, password, protocol=protocol))
            return clients[-1]
        shuffler, agg = login("shuffler"), login("shuffled-agg")
        for c, topic in [(shuffler, "+/report"), (agg, "+/report"), (agg, "shuffled")]:
            c.subscribe(f"mss/v1/{CAMPAIGN}/{topic}", qos=1)
        forward, acks = login("shuffler-forward", mqtt.MQTTv5), []
        forward.on_publish = lambda cl, u, mid, reason, p: acks.append(reason.value)
        time.sleep(0.3)
        login("gh-01").publish(f"mss/v1/{CAMPAIGN}/gh-01/report", b"report", qos=1).wait_for_publish(5)
        for topic in ("shuffled", "gh-02/report"):
            forward.publish(f"mss/v1/{CAMPAIGN}/{topic}", b"batch", qos=1).wait_for_publish(5)
        time.sleep(0.5)
        assert acks == [0, 0x87]  # MQTT 5: the forbidden publish is refused, not silently dropped
        assert shuffler.received == [(f"mss/v1/{CAMPAIGN}/gh-01/report", b"report")]
        assert agg.received == [(f"mss/v1/{CAMPAIGN}/shuffled", b"batch")]  # never a report
    finally:
        for c in clients:
            c.disconnect()
            c.loop_stop()
        broker.stop()
    code, _, err = provision(tmp_path, campaign, FLEET, "--shuffler-user", "aggregator")
    assert code == 2 and "--shuffler-user" in err and "'aggregator'" in err
    code, _, err = provision(tmp_path, campaign, FLEET, "--shuffled-aggregator-user", "gh-02")
    assert code == 3 and "row 3: column device_id: gh-02 is also the account of --shuffled-aggregator-user" in err
    code, _, _ = provision(tmp_path, campaign, FLEET)
    acl = (tmp_path / "out" / "mosquitto" / "acl").read_text()
    assert code == 0 and "shuff" not in acl  # without the flags: the ACL as before


def refused(port, user, password):
    try:
        mqtt_client(port, user, password).loop_stop()
    except ConnectionRefusedError:
        return True
    return False


HEADER = f"device_id,dev_eui,transport,{WIFI}"


@pytest.mark.parametrize("row, column, says", [
    ("gh-01,,wifi,net,pw,h", "transport", "not mqtt, serial or lorawan"),
    ("gh-01,,mqtt,,pw,h", "wifi.ssid", "device.wifi.ssid is not set"),
    ("gh-01,,mqtt,net,pw,", "mqtt.host", "device.mqtt.host is not set"),
    (",,mqtt,net,pw,h", "device_id", "needs its id"),
    ("gh 01,,mqtt,net,pw,h", "device_id", "device.device_id must be 1-64"),
    ("gh-00,,mqtt,net,pw,h", "device_id", "also the id of row 2"),
    (",70b3d57ed00000,lorawan,,,", "dev_eui", "not 16 hex digits"),
    ("gh-01,70b3d57ed0000001,mqtt,net,pw,h", "dev_eui", "only a LoRaWAN board"),
    (",70b3d57ed0000001,lorawan,,,", "(campaign config)", "needs the modem's uart"),
])
def test_bad_rows_exit_3_naming_row_and_column(tmp_path, campaign, row, column, says):
    code, _, err = provision(tmp_path, campaign, f"{HEADER}\ngh-00,,mqtt,net,pw,h\n{row}\n")
    assert code == 3 and f"fleet.csv row 3: column {column}: " in err and says in err, err
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.parametrize("column, value, says", [
    ("period_s", "0", "device.period_s must be at least 1"),
    ("mqtt.port", "70000", "device.mqtt.port must be a port number"),
    ("mqtt.user", "someone", "is not device_id"),
    ("colour", "red", "unknown field device.colour"),
])
def test_bad_settings_name_their_column(tmp_path, campaign, column, value, says):
    code, _, err = provision(tmp_path, campaign, f"{HEADER},{column}\ngh-01,,mqtt,net,pw,h,{value}\n")
    assert code == 3 and f"fleet.csv row 2: column {column}: " in err and says in err, err


def test_usage_errors_name_the_flag(tmp_path, campaign):
    code, _, err = provision(tmp_path, campaign, FLEET, "--aggregator-user", "a:b")
    assert code == 2 and "--aggregator-user" in err
    code, _, err = mss("provision", tmp_path / "none.csv", "--config", campaign, "--campaign", "x", "--out", tmp_path)
    assert code == 2 and "none.csv" in err
    code, _, err = provision(tmp_path, campaign, FLEET.replace("transport", "link", 1))
    assert code == 3 and "no transport column" in err


# -- mss switch-config --devices-file / --all-seen -------------------------------------------

APP = "mss-app"
GRR = load_dict(choose(16, 2.0, "grr", limits=Limits(frame="compact", max_bytes=11))["config"])


def eui(i):
    return f"70b3d57ed005{i:04x}"


def listen(port):
    got = []
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    sub.on_message = lambda cl, u, m: got.append((m.topic, json.loads(m.payload)))
    sub.connect("127.0.0.1", port)
    sub.subscribe([("application/+/device/+/command/down", 1), ("v3/+/devices/+/down/push", 1)])
    sub.loop_start()
    time.sleep(0.3)
    return sub, got


def test_switch_config_devices_file_and_all_seen(tmp_path, mosquitto):
    to = tmp_path / "to.json"
    GRR.save(to, {"device": {"period_s": 3600, "lorawan": {"fport": 1}}})
    # a store where eui(1) and eui(2) have accepted reports (eui(1) in two epochs); eui(3) only a rejected one
    ingest = Ingest(GRR, "t", 3600, lorawan=parse_spec(f"chirpstack:{APP}"), ports=(1, 3))
    frame, now = codec(GRR).encode(3), time.time()
    events = [chirpstack_uplink(APP, eui(1), 1, 1, frame, now - 3600, 0),
              chirpstack_uplink(APP, eui(1), 1, 2, frame, now, 0),
              chirpstack_uplink(APP, eui(2), 1, 1, frame, now, 0),
              chirpstack_uplink(APP, eui(3), 9, 1, frame, now, 0)]  # wrong FPort: quarantined
    store = open_store(tmp_path / "s.sqlite", GRR)
    store.write_batch([ingest.from_lorawan(t.encode(), json.dumps(doc).encode()) for t, doc in events])
    assert store.counters()["accepted"] == 3 and store.counters()["rejected"] == 1
    store.close()
    listed = tmp_path / "devices.txt"
    listed.write_text(f"# greenhouse row 1\n{eui(4).upper()}\n\n{eui(5)}  # by the door\n{eui(4)}\n")
    sub, got = listen(mosquitto.port)
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    try:
        code, out, err = mss("switch-config", "--lorawan", f"chirpstack:{APP}", "--broker", broker, "--to-config", to,
                             "--device", eui(5), "--devices-file", listed, "--all-seen", "--store", tmp_path / "s.sqlite")
        assert code == 0, err
        assert [line.split(":")[0] for line in out.splitlines()] == [eui(5), eui(4), eui(1), eui(2)]  # each once
        code, out, err = mss("switch-config", "--lorawan", f"tts:{APP}@ttn", "--broker", broker, "--to-config", to,
                             "--all-seen", "--store", tmp_path / "s.sqlite")
        assert code == 0, err
        time.sleep(0.5)
    finally:
        sub.loop_stop()
        sub.disconnect()
    b64 = base64.b64encode(GRR.config_id[:2]).decode()
    assert [t for t, _ in got] == [f"application/{APP}/device/{e}/command/down" for e in (eui(5), eui(4), eui(1), eui(2))] + [
        f"v3/{APP}@ttn/devices/eui-{e}/down/push" for e in (eui(1), eui(2))]
    assert all(doc.get("data", b64) == b64 for _, doc in got)


def test_switch_config_device_sources_errors(tmp_path):
    to = tmp_path / "to.json"
    GRR.save(to, {"device": {"period_s": 3600}})
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{eui(1)}\n# fine\n12345\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing yet\n")
    base = ("switch-config", "--lorawan", f"chirpstack:{APP}", "--broker", "mqtt://127.0.0.1:1", "--to-config", to)
    for args, code, text in [
        ((), 2, "give --device, --devices-file or --all-seen --store"),
        (("--all-seen",), 2, "--all-seen reads the devices of --store"),
        (("--store", tmp_path / "s.sqlite"), 2, "--store is read by --all-seen"),
        (("--devices-file", bad), 3, "bad.txt line 3: a DevEUI is 16 hex digits"),
        (("--devices-file", empty), 3, "no device in it"),
        (("--all-seen", "--store", tmp_path / "none.sqlite"), 3, "no such store"),
    ]:
        got, _, err = mss(*base, *args)
        assert got == code and text in err, (args, err)
