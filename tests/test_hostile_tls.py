"""Transport security and visible connection failures, against a real Mosquitto
with TLS listeners whose CA this test makes (openssl, in a temp folder).

Devices (the firmware under the MicroPython unix port with umqtt.simple 1.3.4,
and under CPython with the umqtt shim) publish over server-only and mutual
TLS, refuse a broker certificate from another CA or for another name with a
clear log line, and refuse at load a TLS setting they cannot honour.  The
aggregator connects with --tls-ca and with --tls-cert/--tls-key; a closed
port, TLS to a plain port, a wrong CA, a wrong name and a missing client
certificate are each logged with their cause, retried with back-off and
counted in /metrics and the API, and once the broker is reachable it connects.
"""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import paho.mqtt.client as mqtt
import pytest
from prometheus_client.parser import text_string_to_metric_families

from brokers import Mosquitto
from collect_helpers import AggregatorProcess, clocked, wait_for
from loadgen import make_reports, publish
from micropython_runner import require_micropython
from mss_aggregator.collect.collectors import MqttCollector
from mss_aggregator.collect.links import MqttEndpoint, TlsFiles
from mss_aggregator.collect.link_health import CAUSES
from mss_aggregator.devices.runtime import command, ensure_umqtt
from mss_aggregator.ports import free_port, free_ports
from mss_aggregator.web.server import broker_metrics
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.wire import WireCodec

CFG = MssConfig.build(64, 2.0, [59, 61, 63])
EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
LEAVES = {"server": ("127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth"),
          "wrong-name": ("wrong.example", "subjectAltName=DNS:wrong.example\nextendedKeyUsage=serverAuth"),
          "client": ("dev1", "extendedKeyUsage=clientAuth")}


def _openssl(cwd, *args):
    exe = shutil.which("openssl")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("openssl is missing under CI")
        pytest.skip("openssl not installed")
    subprocess.run([exe, *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Two CAs (ca, other-ca); signed by ca: a server certificate for
    127.0.0.1/localhost, one for wrong.example, a client certificate; ca also in DER."""
    d = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "other-ca"):
        _openssl(d, "req", "-x509", *EC, "-days", "2", "-subj", f"/CN=mss test {ca}", "-keyout", f"{ca}.key",
                 "-out", f"{ca}.pem", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    for name, (cn, ext) in LEAVES.items():
        (d / f"{name}.ext").write_text(ext + "\n")
        _openssl(d, "req", *EC, "-subj", f"/CN={cn}", "-keyout", f"{name}.key", "-out", f"{name}.csr")
        _openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext")
    _openssl(d, "x509", "-in", "ca.pem", "-outform", "DER", "-out", "ca.der")
    return d


def tls_listener(port, pki, cert="server", mutual=False):
    lines = f"listener {port} 127.0.0.1\ncertfile {pki}/{cert}.pem\nkeyfile {pki}/{cert}.key\n"
    return lines + (f"cafile {pki}/ca.pem\nrequire_certificate true\n" if mutual else "")


class Broker:
    """One Mosquitto: a plain listener (``port``) and TLS ones: ``tls``
    (server only), ``mutual`` (require_certificate), ``wrong`` (a server
    certificate for wrong.example)."""

    def __init__(self, workdir, pki):
        plain, self.tls, self.mutual, self.wrong = free_ports(4)
        self.m = Mosquitto(workdir, port=plain, extra=tls_listener(self.tls, pki) + tls_listener(self.mutual, pki, mutual=True)
                           + tls_listener(self.wrong, pki, cert="wrong-name")).start()
        self.port = self.m.port


@pytest.fixture(scope="module")
def broker(tmp_path_factory, pki):
    b = Broker(tmp_path_factory.mktemp("broker"), pki)
    yield b
    b.m.stop()


class Reports:
    """Everything published on the campaign's report topics, read on the plain listener."""

    def __init__(self, port):
        self.msgs = []
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"tls-listener-{port}-{time.time()}")
        self.client.on_message = lambda c, u, m: self.msgs.append((m.topic, bytes(m.payload)))
        self.client.connect("127.0.0.1", port)
        self.client.subscribe("mss/v1/t/+/report", qos=1)
        self.client.loop_start()
        time.sleep(0.3)

    def close(self):
        time.sleep(0.3)
        self.client.loop_stop()
        self.client.disconnect()


def run_device(runtime, tmp_path, mqtt_settings, ticks):
    """The emulator (``python -m mss_node.app``): report once, exit 0 when sent, 1 if never."""
    if runtime == "micropython":
        require_micropython()
        ensure_umqtt()
    d = CFG.to_dict()
    d["device"] = {"campaign": "t", "device_id": "dev1", "period_s": 3600, "poll_s": 1, "transport": "mqtt",
                   "mqtt": dict({"host": "127.0.0.1", "timeout_s": 3, "backoff_max_s": 1}, **mqtt_settings)}
    config, state = tmp_path / "config.json", tmp_path / "state.json"
    config.write_text(json.dumps(d))
    argv, env = command(runtime, "mss_node.app", [config, state, 5, ticks])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    return out, json.loads(state.read_text())["queue"] if state.exists() else None


RUNTIMES = ["micropython", "cpython"]


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("case", ["server-only", "mutual", "server-hostname"])
def test_device_publishes_over_tls(tmp_path, broker, pki, runtime, case):
    settings = {"server-only": {"port": broker.tls, "ca": str(pki / "ca.der")},  # DER CA
                "mutual": {"port": broker.mutual, "ca": str(pki / "ca.pem"),  # PEM CA, cert and key
                           "cert": str(pki / "client.pem"), "key": str(pki / "client.key")},
                # connect by address, check the name the certificate carries
                "server-hostname": {"port": broker.wrong, "ca": str(pki / "ca.pem"),
                                    "server_hostname": "wrong.example"}}[case]
    reports = Reports(broker.port)
    try:
        out, queue = run_device(runtime, tmp_path, dict(settings, tls=True), ticks=5)
    finally:
        reports.close()
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"mqtt connected to 127.0.0.1:{settings['port']} over TLS" in out.stdout
    assert [t for t, _ in reports.msgs] == ["mss/v1/t/dev1/report"]
    report = WireCodec(CFG).decode(reports.msgs[0][1])
    assert report.seq == 0 and queue == []


HANDSHAKE = "TLS handshake with 127.0.0.1 refused: "
ENDED = "(the broker ended the handshake: not a TLS port, or no client certificate it accepts)"
# A listener that wants a client certificate rejects its absence after the client's side of a
# TLS 1.3 handshake is done: the client then sees a closed connection or the alert, as it happens.
NO_CERT_CPYTHON = ("connection closed before CONNACK", "alert certificate required")
AS_UMQTT_18 = r"""
import json, socket
from mss_node.settings import Settings
from mss_node.tls import Tls
d = json.load(open("device.json"))
d["device"]["mqtt"] = json.load(open("cases.json"))
tls = Tls(Settings(d).device["mqtt"])
sock = socket.socket()
sock.connect(socket.getaddrinfo("127.0.0.1", d["device"]["mqtt"]["port"])[0][-1])
s = tls.wrap_socket(sock, server_hostname="127.0.0.1")  # as umqtt.simple >= 1.4 calls it
s.write(b"\x10\x12\x00\x04MQTT\x04\x02\x00\x1e\x00\x06mp-raw")  # CONNECT, client id mp-raw
print("CONNACK", s.read(4))
"""


def test_tls_as_umqtt_14_and_later_call_it(tmp_path, broker, pki):
    """umqtt.simple 1.4+ (not on PyPI) calls the ssl object's wrap_socket with its server
    name; under MicroPython that call gives a verified TLS connection (checked with a
    hand-made CONNECT), and the name checked is server_hostname's, not the caller's."""
    require_micropython()
    argv, env = command("micropython", "mss_node.app", [])
    (tmp_path / "device.json").write_text(json.dumps(_device_doc()))
    results = []
    for hostname in ("wrong.example", None):  # the certificate is for wrong.example
        mqtt_settings = {"tls": True, "ca": str(pki / "ca.pem"), "port": broker.wrong, "server_hostname": hostname}
        (tmp_path / "cases.json").write_text(json.dumps(mqtt_settings))
        out = subprocess.run(argv[:argv.index("-m")] + ["-c", AS_UMQTT_18], capture_output=True, text=True,
                             timeout=60, env=env, cwd=tmp_path)
        results.append((out.returncode, out.stdout.strip() + out.stderr))  # tracebacks go to stdout
    assert results[0] == (0, r"CONNACK b' \x02\x00\x00'"), results[0]
    assert results[1][0] == 1 and "OSError: TLS handshake with 127.0.0.1 refused: The certificate Common Name (CN) " \
        "does not match with the expected CN" in results[1][1], results[1]


REFUSALS = {  # case: (listener, settings, what the log says on micropython, on cpython: any of)
    "wrong CA": ("tls", {"ca": "other-ca.pem"},
                 [HANDSHAKE + "The certificate is not correctly signed by the trusted CA"],
                 [HANDSHAKE + "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                              "unable to get local issuer certificate"]),
    "wrong name": ("wrong", {"ca": "ca.pem"},
                   [HANDSHAKE + "The certificate Common Name (CN) does not match with the expected CN"],
                   [HANDSHAKE + "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                                "IP address mismatch, certificate is not valid for '127.0.0.1'"]),
    "no client certificate": ("mutual", {"ca": "ca.pem"}, [ENDED], NO_CERT_CPYTHON),
}


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("case", REFUSALS)
def test_device_refuses_a_broker_it_cannot_verify(tmp_path, broker, pki, runtime, case):
    listener, settings, mp_text, cpy_text = REFUSALS[case]
    port = getattr(broker, listener)
    settings = dict(settings, ca=str(pki / settings["ca"]), port=port, tls=True)
    reports = Reports(broker.port)
    try:
        out, queue = run_device(runtime, tmp_path, settings, ticks=2)
    finally:
        reports.close()
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr, out.stdout + out.stderr
    down = [line for line in out.stdout.splitlines() if "mqtt down (connect failed" in line]
    assert len(down) == 2, out.stdout  # one line per attempt: the first and its retry after the back-off
    texts = mp_text if runtime == "micropython" else cpy_text
    assert all(any(text in line for text in texts) for line in down), out.stdout
    assert reports.msgs == [] and len(queue) == 1  # nothing went out; the report waits in flash


LOAD_ERRORS = {  # device.mqtt settings -> the error at load (the board idles, saying it)
    "ca missing": ({"tls": True, "ca": "nope.der"}, "device.mqtt.ca: cannot read nope.der"),
    "ca not a certificate": ({"tls": True, "ca": "{pki}/ca.key"}, "device.mqtt.ca: {pki}/ca.key is not a CA certificate"),
    "key not a key": ({"tls": True, "ca": "{pki}/ca.pem", "cert": "{pki}/client.pem", "key": "{pki}/client.pem"},
                      "device.mqtt.cert, key: {pki}/client.pem and {pki}/client.pem are not a certificate and its key"),
    "cert without key": ({"tls": True, "ca": "{pki}/ca.pem", "cert": "{pki}/client.pem"},
                         "device.mqtt.cert and device.mqtt.key go together"),
    "ca without tls": ({"ca": "{pki}/ca.pem"}, "device.mqtt.ca is set but device.mqtt.tls is false"),
    "server_hostname without tls": ({"server_hostname": "x"},
                                    "device.mqtt.server_hostname is set but device.mqtt.tls is false"),
    "tls without ca": ({"tls": True}, "device.mqtt.tls needs device.mqtt.ca"),
    "tls not a bool": ({"tls": "yes", "ca": "{pki}/ca.pem"}, "device.mqtt.tls must be true or false"),
    "keepalive a string": ({"keepalive": "broker-Pw-7"}, "device.mqtt.keepalive must be an integer, 0 to 65535"),
    "keepalive above u16": ({"keepalive": 70000}, "device.mqtt.keepalive must be an integer, 0 to 65535"),
    "timeout_s zero": ({"timeout_s": 0}, "device.mqtt.timeout_s must be an integer, 1 to 3600"),
}

IDLE = r"""
import json
from mss_node import app
cases = json.load(open("cases.json"))
for name in sorted(cases):
    d = json.load(open("device.json"))
    d["device"]["mqtt"] = cases[name]
    open("c.json", "w").write(json.dumps(d))
    print("case", name)
    print("built", app.run("c.json", "s.json", sensor=lambda: 1, ticks=1, sleep=lambda s: None))
"""


def _idle_lines(stdout):
    got, name = {}, None
    for line in stdout.splitlines():
        if line.startswith("case "):
            name = line[5:]
        elif "[error] idle: " in line:
            got[name] = line.split("[error] idle: ", 1)[1]
    return got


def _device_doc():
    d = CFG.to_dict()
    d["device"] = {"campaign": "t", "device_id": "dev1", "transport": "mqtt"}
    return d


def run_idle(runtime, tmp_path, cases, micropypath=None):
    """IDLE on ``runtime`` in tmp_path (the unix port dies on a long argv: files, not arguments)."""
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    (tmp_path / "device.json").write_text(json.dumps(_device_doc()))
    ensure_umqtt()  # the MQTT link imports it at load: not only after another test fetched it
    argv, env = command(runtime, "mss_node.app", [])
    if micropypath:
        env["MICROPYPATH"] = f"{micropypath}{os.pathsep}{env['MICROPYPATH']}"
    out = subprocess.run(argv[:argv.index("-m")] + ["-c", IDLE], capture_output=True, text=True, timeout=60,
                         env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    return _idle_lines(out.stdout), out.stdout


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_tls_setting_it_cannot_honour_is_an_error_at_load(tmp_path, pki, runtime):
    cases = {name: {k: v.format(pki=pki) if isinstance(v, str) else v for k, v in s.items()}
             for name, (s, _) in LOAD_ERRORS.items()}
    if runtime == "micropython":
        require_micropython()
    got, stdout = run_idle(runtime, tmp_path, cases)
    assert set(got) == set(LOAD_ERRORS), stdout
    for name, (_, message) in LOAD_ERRORS.items():
        assert got[name].startswith(message.format(pki=pki)), (name, got[name])
    assert stdout.count("built None") == len(LOAD_ERRORS)  # idle: no node, nothing sent


def test_a_port_without_ssl_context_refuses_tls_at_load(tmp_path, pki):
    """An ssl module with wrap_socket only (MicroPython before 1.23) cannot pin a CA: refused."""
    require_micropython()
    old = tmp_path / "oldport"
    old.mkdir()
    (old / "ssl.py").write_text("def wrap_socket(sock, **kw):\n    raise OSError('not this one')\n")
    got, stdout = run_idle("micropython", tmp_path, {"old": {"tls": True, "ca": str(pki / "ca.der")}},
                           micropypath=old)  # before .frozen: shadows the real ssl
    assert got == {"old": "device.mqtt.tls: this port has no ssl.SSLContext (MicroPython 1.23 or later)"}, stdout


def test_port_defaults_to_8883_with_tls():
    from mss_node.settings import Settings

    d = _device_doc()
    assert Settings(d).device["mqtt"]["port"] == 1883
    d["device"]["mqtt"] = {"tls": True, "ca": "ca.der"}
    assert Settings(d).device["mqtt"]["port"] == 8883
    d["device"]["mqtt"]["port"] = 18883
    assert Settings(d).device["mqtt"]["port"] == 18883


# -- the aggregator ---------------------------------------------------------

@pytest.mark.parametrize("mutual", [False, True], ids=["server-only", "mutual"])
def test_aggregator_receives_reports_over_tls(tmp_path, broker, pki, mutual):
    config = tmp_path / "cfg.json"
    CFG.save(config, clocked())  # the reports' epoch 0 is the current one
    port = broker.mutual if mutual else broker.tls
    extra = ["--tls-ca", str(pki / "ca.pem")]
    if mutual:
        extra += ["--tls-cert", str(pki / "client.pem"), "--tls-key", str(pki / "client.key")]
    agg = AggregatorProcess(tmp_path, config, tmp_path / "s.sqlite", broker=f"mqtts://127.0.0.1:{port}",
                            extra=["--client-id", f"agg-{port}", *extra]).start().ready()
    try:
        publish(make_reports(CFG, devices=100, epochs=1, prefix=f"m{int(mutual)}"), f"mqtt://127.0.0.1:{broker.port}",
                "t", client_id=f"load-{port}")
        c = wait_for(tmp_path / "s.sqlite", lambda c: c["accepted"] >= 100)
    finally:
        agg.stop()
    assert c["accepted"] == 100 and c["received"] == 100
    assert f"mqtt: connected to 127.0.0.1:{port} over TLS" in agg.log_path.read_text()


def test_aggregator_tls_flags_are_checked(tmp_path, pki):
    config = tmp_path / "cfg.json"
    CFG.save(config, clocked())  # the reports' epoch 0 is the current one
    base = [sys.executable, "-m", "mss_cli", "aggregate", "--config", str(config), "--store",
            str(tmp_path / "s.sqlite"), "--broker", f"mqtts://127.0.0.1:{free_port()}", "--quiet"]
    for extra, code, message in [
            (["--tls-key", str(pki / "client.key")], 2, "--tls-key needs --tls-cert"),
            (["--tls-ca", str(pki / "ca.key")], 3, f"--tls-ca {pki / 'ca.key'}: not a CA certificate file"),
            (["--tls-ca", str(pki / "ca.pem"), "--tls-cert", str(pki / "client.pem"), "--tls-key",
              str(pki / "server.key")], 3, f"--tls-cert {pki / 'client.pem'} / --tls-key {pki / 'server.key'}: "
                                           "not a certificate and its key")]:
        out = subprocess.run(base + extra, capture_output=True, text=True, timeout=60)
        assert out.returncode == code and message in " ".join(out.stderr.split()), out.stderr
        assert "Traceback" not in out.stderr


def _collector(url, log, **tls):
    files = TlsFiles(**{k.removeprefix("tls_"): v for k, v in tls.items()})
    return MqttCollector(MqttEndpoint(url, files, f"probe-{time.time()}"), None, ("mss/v1/t/+/report", None, 1),
                         log=log)


FAILURES = {  # case: (listener, or None for a closed port; TLS flags; [(cause, text in the log line)], any of)
    "closed port": (None, {}, [("refused", "[Errno 111] Connection refused")]),
    "TLS to a plain port": ("port", {"tls_ca": "ca.pem"},
                            [("tls", "during the TLS handshake (not a TLS port, or it wants a client certificate?)")]),
    "wrong CA": ("tls", {"tls_ca": "other-ca.pem"},
                 [("certificate", "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                                  "unable to get local issuer certificate")]),
    "wrong name": ("wrong", {"tls_ca": "ca.pem"},
                   [("certificate", "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                                    "IP address mismatch, certificate is not valid for '127.0.0.1'")]),
    # TLS 1.3: the missing certificate is refused after the client's handshake (see NO_CERT_CPYTHON)
    "no client certificate": ("mutual", {"tls_ca": "ca.pem"},
                              [("closed", "connection closed before CONNACK (Unspecified error) (with TLS: does "
                                          "the listener want a client certificate? --tls-cert)"),
                               ("tls", "alert certificate required")]),
}


@pytest.mark.parametrize("case", FAILURES)
def test_aggregator_logs_counts_and_retries_each_failure(broker, pki, case):
    listener, tls, outcomes = FAILURES[case]
    port = getattr(broker, listener) if listener else free_port()
    lines = []
    c = _collector(f"mqtts://127.0.0.1:{port}", lines.append, **{k: str(pki / v) for k, v in tls.items()})
    c.start()
    try:
        deadline = time.time() + 15
        while sum(c.health.status()["failures"].values()) < 2:  # the first attempt and the retry 1 s later
            assert time.time() < deadline, lines
            time.sleep(0.05)
        status = c.health.status()
    finally:
        c.stop()

    def expected(text, head):
        return any(text.startswith(head.format(cause)) and t in text for cause, t in outcomes)

    assert status["connected"] is False and expected(status["last_error"], "{}: ")
    assert {k for k, n in status["failures"].items() if n} <= {cause for cause, _ in outcomes}
    assert len(lines) == sum(status["failures"].values())  # each failure logged once, nothing else
    assert all(expected(line, f"mqtt: cannot connect to 127.0.0.1:{port} ({{}}): ") for line in lines), lines
    assert lines[0].endswith("retrying in 1 s") and lines[1].endswith("retrying in 2 s")  # the back-off doubles
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in broker_metrics([status]) for s in fam.samples}
    label = ("broker", f"127.0.0.1:{port}")
    assert samples[("mss_broker_connected", (label,))] == 0
    assert {k: samples[("mss_broker_connect_failures_total", (label, ("cause", k)))] for k in CAUSES} == \
        status["failures"]
    assert samples[("mss_broker_last_failure_timestamp_seconds", (label,))] == status["last_error_at"]


def _metrics(url):
    with urllib.request.urlopen(url + "metrics", timeout=10) as r:
        body = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(body) for s in fam.samples}


def _api(url, path):
    with urllib.request.urlopen(url + path, timeout=10) as r:
        return json.loads(r.read())


def test_aggregator_keeps_retrying_until_the_broker_is_up(tmp_path, pki):
    """mss aggregate --http against a TLS port nobody listens on: each refusal
    is logged and counted in /metrics and the API; once Mosquitto listens
    there, the aggregator connects on its next try and stores reports."""
    config = tmp_path / "cfg.json"
    CFG.save(config, clocked())  # the reports' epoch 0 is the current one
    tls_port, http = free_ports(2)
    agg = AggregatorProcess(tmp_path, config, tmp_path / "s.sqlite", broker=f"mqtts://127.0.0.1:{tls_port}",
                            extra=["--tls-ca", str(pki / "ca.pem"), "--http", f"127.0.0.1:{http}"]).start()
    url = f"http://127.0.0.1:{http}/"
    label = ("broker", f"127.0.0.1:{tls_port}")
    m = None
    try:
        deadline = time.time() + 30
        while True:
            try:
                m = _metrics(url)
                if m[("mss_broker_connect_failures_total", (label, ("cause", "refused")))] >= 2:
                    break
            except OSError:  # the web server is not up yet
                pass
            assert time.time() < deadline and agg.proc.poll() is None, agg.log_path.read_text()
            time.sleep(0.1)
        assert m[("mss_broker_connected", (label,))] == 0
        down = _api(url, "api/counters")["brokers"]
        assert down[0]["connected"] is False and down[0]["last_error"].startswith("refused: ")
        workdir = tmp_path / "broker"
        workdir.mkdir()
        mosq = Mosquitto(workdir, extra=tls_listener(tls_port, pki)).start()
        try:
            deadline = time.time() + 20  # the next try comes within the back-off (1, 2, 4 s ...)
            while _metrics(url)[("mss_broker_connected", (label,))] != 1:
                assert time.time() < deadline, agg.log_path.read_text()
                time.sleep(0.1)
            agg.ready(10)
            publish(make_reports(CFG, devices=50, epochs=1, prefix="late"), f"mqtt://127.0.0.1:{mosq.port}", "t")
            c = wait_for(tmp_path / "s.sqlite", lambda c: c["accepted"] >= 50)
            up = _api(url, "api/counters")["brokers"][0]
        finally:
            mosq.stop()
    finally:
        agg.stop()
    assert c["accepted"] == 50
    assert up["connected"] is True and up["failures"]["refused"] >= 2 and up["last_error"].startswith("refused: ")
    log = agg.log_path.read_text().splitlines()
    refused = [line for line in log if line.startswith(f"mqtt: cannot connect to 127.0.0.1:{tls_port} (refused): ")]
    assert len(refused) == up["failures"]["refused"]  # every failure logged once
    assert any(line.startswith(f"mqtt: connected to 127.0.0.1:{tls_port} over TLS") for line in log)
