"""mss fleet's logins and TLS, and mss switch-config's TLS (issue 48's smaller findings): the
fleet runs the boards mss provision wrote (--provisioned DIR: their ids, passwords and
campaign), counts {n} from 1 in --user-template, and takes an mqtts:// broker with --tls-ca,
refusing one without at once; switch-config hands its downlink over TLS with --tls-ca.
The end-to-end runs: 2 CPython boards of a provisioned fleet, over TLS, against a Mosquitto
with provision's own password file and ACL (about 2-4 s); one downlink over TLS (< 0.5 s); the
rest is option checking (< 0.5 s)."""
import json
import subprocess
import sys
import threading

import paho.mqtt.client as mqtt
import pytest

from brokers import Mosquitto
from collect_helpers import mss
from mss_cli.fleet import device_logins
from mss_protocol.choose import choose
from test_hostile_tls import pki, tls_listener  # noqa: F401 (a fixture)
from mss_aggregator.ports import free_port

CAMPAIGN = "gh-2026"
FLEET = ("device_id,transport,wifi.ssid,wifi.password,mqtt.host\n"
         + "".join(f"gh-{i},mqtt,greenhouse,12345678,127.0.0.1\n" for i in (1, 2, 10)))


@pytest.fixture
def campaign(tmp_path):
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps(dict(choose(16, 2.0, "grr")["config"], device={"period_s": 3600})))
    return path


@pytest.fixture
def provisioned(tmp_path, campaign):
    (tmp_path / "fleet.csv").write_text(FLEET)
    code, _, err = mss("provision", tmp_path / "fleet.csv", "--config", campaign, "--campaign", CAMPAIGN,
                       "--out", tmp_path / "out")
    assert code == 0, err
    return tmp_path / "out"


def test_user_template_counts_from_1_with_n():
    assert [u for u, _ in device_logins("dev{n}", 3, "mqtt://127.0.0.1", None, None)] == ["dev1", "dev2", "dev3"]
    assert [u for u, _ in device_logins("dev{i}", 2, "mqtt://127.0.0.1", None, None)] == ["dev0", "dev1"]


@pytest.mark.parametrize("args, says", [
    (["--broker", "mqtts://127.0.0.1:8883", "-n", 1], "an mqtts:// --broker needs --tls-ca"),
    (["--broker", "mqtt://127.0.0.1", "-n", 1, "--tls-ca", "{campaign}"], "--tls-ca is for an mqtts:// --broker"),
    (["--broker", "mqtt://127.0.0.1"], "Missing option '-n' / '--devices' (or give --provisioned DIR"),
    (["--broker", "mqtt://127.0.0.1", "--provisioned", "{out}", "--user-template", "d{{n}}"],
     "--user-template and --provisioned both name the devices' logins"),
    (["--broker", "mqtt://127.0.0.1", "--provisioned", "{out}", "-n", 4], "4 devices, and"),
])
def test_bad_logins_and_tls_are_refused_before_any_device_runs(provisioned, campaign, args, says):
    args = [str(a).format(campaign=campaign, out=provisioned) for a in args]
    code, _, err = mss("fleet", "--config", campaign, *args)
    assert code == 2 and says in err, err


def test_no_mqtt_board_in_the_folder_is_a_data_error(tmp_path, campaign):
    (tmp_path / "boards").mkdir()
    code, _, err = mss("fleet", "--config", campaign, "--broker", "mqtt://127.0.0.1", "--provisioned", tmp_path)
    assert code == 3 and "no MQTT board config in it" in err, err


def test_a_provisioned_fleet_reports_over_tls(tmp_path, provisioned, campaign, pki):  # noqa: F811
    port = free_port()
    broker = Mosquitto(tmp_path, anonymous=False, extra=(
        f"use_username_as_clientid true\npassword_file {provisioned}/mosquitto/passwd\n"
        f"acl_file {provisioned}/mosquitto/acl\n" + tls_listener(port, pki))).start()
    try:
        out = subprocess.run([sys.executable, "-m", "mss_cli", "fleet", "--broker", f"mqtts://127.0.0.1:{port}",
                              "--tls-ca", str(pki / "ca.pem"), "--config", str(campaign), "--provisioned", str(provisioned),
                              "-n", "2", "--runtime", "cpython", "--json",
                              "--truth", str(tmp_path / "truth.json")],
                             capture_output=True, text=True, timeout=120)
    finally:
        broker.stop()
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["campaign"], doc["published"], doc["failed"], doc["retained_left"]) == (CAMPAIGN, 2, [], [])
    assert sorted(json.loads((tmp_path / "truth.json").read_text())["values"]) == ["gh-1", "gh-2"]  # not gh-10


def test_switch_config_hands_its_downlink_over_tls(tmp_path, campaign, pki):  # noqa: F811
    port, device = free_port(), "70b3d57ed0000001"
    broker = Mosquitto(tmp_path, extra=tls_listener(port, pki)).start()
    got, subscribed = threading.Event(), threading.Event()
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    sub.on_subscribe = lambda *a: subscribed.set()
    sub.on_message = lambda cl, u, m: got.set()
    sub.connect("127.0.0.1", broker.port)  # the plain listener
    sub.subscribe(f"application/app-1/device/{device}/command/down", qos=1)
    sub.loop_start()
    try:
        assert subscribed.wait(5)
        code, out, err = mss("switch-config", "--lorawan", "chirpstack:app-1", "--broker", f"mqtt://127.0.0.1:{port}",
                             "--tls-ca", pki / "ca.pem", "--to-config", campaign, "--device", device)
        assert code == 0, err
        assert got.wait(5)
        code, _, err = mss("switch-config", "--lorawan", "chirpstack:app-1", "--broker", f"mqtt://127.0.0.1:{port}",
                           "--tls-ca", campaign, "--to-config", campaign, "--device", device)
        assert code == 3 and f"CA certificate {campaign}" in err, err
    finally:
        sub.loop_stop()
        sub.disconnect()
        broker.stop()
