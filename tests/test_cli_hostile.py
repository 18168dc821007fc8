"""Hostile command lines and HTTP clients (issue 23, items 6-9).

* Fuzzed flags: every bad value is refused before anything starts, exit 2 (or 3
  for a file that cannot be written) with one error line naming the flag, no
  traceback.  Before: ``mss aggregate --serial PORT,-5``, ``--share-group '#'``,
  ``--campaign +`` and ``--campaign '#'`` kept running with a dead collector
  thread (a traceback in the log, nothing collected); ``mss estimate --epoch
  99999999999999999999`` and ``--csv/--plot/--export-counts`` into a missing
  folder ended in a traceback (exit 1).
* A collector thread that dies for any other reason (a fault injected into the
  real ``mss aggregate`` process: the MQTT collector, a serial collector, the
  writer, the HTTP server) stops the process with exit 3 and one line ``error:
  <thread>: <cause>``.  Before: three of the four kept running, the writer's
  ended in a traceback (exit 1).
* HTTP tokens: an empty or blank ``--http-token`` (or ``$MSS_HTTP_TOKEN``,
  ``--http-token-file``) is refused on every address, and the Host check
  (DNS rebinding) holds with a token too.  Before: ``--http-token ""`` on
  loopback served without auth to any Host; ``" "`` was accepted on 0.0.0.0.
* Connection resets: counted (``/metrics``, ``/api/counters``), not logged.
  Before: 200 resets wrote 5,000 traceback lines to the aggregator's log.
* Issue 49: every numeric option of every command has a range (inf, nan, 0, 1e-300, 1e300 refused
  where out of it, exit 2 naming the flag), an empty --broker/--lorawan/--serial/--http is a usage
  error, the dashboard's refresh thread that dies stops the process (exit 3), the dashboard answers
  to its own address, API errors name the query parameter.
* Secrets off the command line: ``--broker-password-file`` /
  ``$MSS_BROKER_PASSWORD`` and ``--http-token-file`` / ``$MSS_HTTP_TOKEN``;
  neither secret shows in ``/proc/<pid>/cmdline``.  Before: no such flags.
"""
import json
import math
import os
import re
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import paho.mqtt.client as mqtt
import click
import pytest
from click.testing import CliRunner

from brokers import Mosquitto, password_file
from collect_helpers import AggregatorProcess, clocked
from mss_aggregator.collect.store import open_store
from mss_aggregator.ports import free_port
from mss_cli.common import FloatRange
from mss_cli.main import main
from mss_protocol.counts import Counts
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.sampler import sample_counts

CFG = MssConfig.build(64, 2.0, [59, 61, 63])


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = Mosquitto(tmp_path_factory.mktemp("mosquitto")).start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def auth_broker(tmp_path_factory):
    """Mosquitto with a password file (users aggregator, ns, fleet; password pw-<user>), no anonymous."""
    tmp = tmp_path_factory.mktemp("auth-mosquitto")
    passwd = password_file(tmp / "passwd", ["aggregator", "ns", "fleet"])
    b = Mosquitto(tmp, anonymous=False, extra=f"password_file {passwd}\n").start()
    yield b
    b.stop()


@pytest.fixture
def cfg_path(tmp_path):
    path = tmp_path / "cfg.json"
    CFG.save(path, clocked())
    return path


def mss_process(*args, env=None, timeout=20):
    """``mss ARGS`` as a real process; a run still going after ``timeout`` s fails the test."""
    try:
        return subprocess.run([sys.executable, "-m", "mss_cli", *map(str, args)], capture_output=True,
                              text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        err = (exc.stderr or b"").decode(errors="replace")
        pytest.fail(f"still running after {timeout} s ({err.count('Traceback')} tracebacks): {err[-400:]}")


def invoke(*args, env=None):
    """(exit code, stderr) of ``mss ARGS`` run in-process."""
    r = CliRunner().invoke(main, [str(a) for a in args], env=env)
    return r.exit_code, r.stderr


def error_lines(stderr):
    return [line for line in stderr.splitlines() if line.lower().startswith("error:")]


def assert_refused(code, stderr, flag, codes=(2,), why=None):
    """Exit code in ``codes``, no traceback, exactly one error line, naming ``flag`` (and ``why``)."""
    assert code in codes and "Traceback" not in stderr, (code, stderr[-2000:])
    lines = error_lines(stderr)
    assert len(lines) == 1 and flag in lines[0], stderr
    if why:
        assert re.search(why, lines[0]), lines[0]


def env_without(*names, **extra):
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.update(extra)
    return env


# -- item 6: fuzzed flags ------------------------------------------------------------------

AGGREGATE_FUZZ = [  # (flags, the flag named); the first four kept `mss aggregate` running, dead inside
    (["--serial", "/dev/null,-5"], "--serial"),
    (["--mqtt", "--share-group", "#", "--client-id", "w1"], "--share-group"),
    (["--mqtt", "--campaign", "+"], "--campaign"),
    (["--mqtt", "--campaign", "#"], "--campaign"),
    (["--serial", "/dev/null,0"], "--serial"),
    (["--serial", "/dev/null,fast"], "--serial"),
    (["--serial", "/dev/null,4294967296"], "--serial"),
    (["--serial", ",9600"], "--serial"),
    (["--mqtt", "--share-group", "a/b", "--client-id", "w1"], "--share-group"),
    (["--mqtt", "--share-group", "+", "--client-id", "w1"], "--share-group"),
    (["--mqtt", "--share-group", "", "--client-id", "w1"], "--share-group"),
    (["--mqtt", "--campaign", "a/b"], "--campaign"),
    (["--mqtt", "--campaign", "green+house"], "--campaign"),
    (["--mqtt", "--campaign", ""], "--campaign"),
    (["--mqtt", "--campaign", "x" * 65], "--campaign"),
    (["--mqtt", "--campaign", "tab\there"], "--campaign"),
    (["--mqtt", "--client-id", "a\x01b"], "--client-id"),
]


@pytest.mark.parametrize("flags,flag", AGGREGATE_FUZZ, ids=[" ".join(f)[:40] for f, _ in AGGREGATE_FUZZ])
def test_aggregate_refuses_bad_flags_before_starting(tmp_path, cfg_path, broker, flags, flag):
    flags = [a for f in flags for a in (["--broker", f"mqtt://127.0.0.1:{broker.port}"] if f == "--mqtt" else [f])]
    out = mss_process("aggregate", "--config", cfg_path, "--store", tmp_path / "s.sqlite", "--quiet", *flags)
    assert_refused(out.returncode, out.stderr, flag)
    assert not (tmp_path / "s.sqlite").exists()  # refused before the store was even created


def test_topic_levels_refuse_nul_and_surrogates(tmp_path, cfg_path):
    """Values argv cannot carry (NUL) or that are not UTF-8 (a byte that is no character, as
    Python decodes it): refused in-process with the flag named."""
    for flag, value in [("--campaign", "a\x00b"), ("--campaign", "caf\udce9"), ("--share-group", "g\x00")]:
        extra = ["--client-id", "w1"] if flag == "--share-group" else []
        code, err = invoke("aggregate", "--config", cfg_path, "--store", tmp_path / "s.sqlite", "--quiet",
                           "--broker", "mqtt://127.0.0.1:1", flag, value, *extra)
        assert_refused(code, err, flag)


@pytest.fixture
def counts_and_store(tmp_path):
    counts, store = tmp_path / "c.json", tmp_path / "e.sqlite"
    values = np.arange(40) % CFG.k  # reports to decode: an empty file exits 3 before any output
    Counts(CFG, *sample_counts(CFG, values, np.random.default_rng(0))).save(counts)
    open_store(store, CFG).close()
    return counts, store


@pytest.mark.parametrize("args,flag", [
    (["--store", "{store}", "--epoch", "99999999999999999999"], "--epoch"),
    (["--store", "{store}", "--epoch", "4294967296"], "--epoch"),  # epochs are u32 (SPEC.md section 4)
    (["--store", "{store}", "--epoch", "-1"], "--epoch"),
    (["--counts", "{counts}", "--csv", "{tmp}/missing/x.csv"], "--csv"),
    (["--counts", "{counts}", "--plot", "{tmp}/missing/x.png"], "--plot"),
    (["--counts", "{counts}", "--export-counts", "{tmp}/missing/x.json"], "--export-counts"),
])
def test_estimate_refuses_bad_flags(tmp_path, counts_and_store, args, flag):
    counts, store = counts_and_store
    args = [a.format(store=store, counts=counts, tmp=tmp_path) for a in args]
    code, err = invoke("estimate", *args)
    assert_refused(code, err, flag)


def test_estimate_takes_the_largest_u32_epoch(counts_and_store):
    code, err = invoke("estimate", "--store", counts_and_store[1], "--epoch", 2**32 - 1, "--json")
    assert code == 3 and "holds no accepted reports" in err, err  # a valid epoch (else 2), in an empty store


def test_output_files_that_cannot_be_written_name_their_flag(tmp_path, counts_and_store):
    """A missing folder is a usage error (2) checked before any work; a folder that refuses the
    write (here /proc) a data error (3); both one line naming the flag."""
    counts, _ = counts_and_store
    for args, flag in [(["estimate", "--counts", counts, "--csv", "/proc/x.csv"], "--csv"),
                       (["estimate", "--counts", counts, "--plot", "/proc/x.png"], "--plot"),
                       (["estimate", "--counts", counts, "--export-counts", "/proc/x.json"], "--export-counts"),
                       (["merge", counts, "-o", "/proc/x.json"], "--output")]:
        code, err = invoke(*args)
        assert_refused(code, err, flag, codes=(3,))
    for args, flag in [(["merge", counts, "-o", tmp_path / "missing" / "x.json"], "--output"),
                       (["simulate", "--k", 16, "--epsilon", 1, "--n", 100, "--plot", tmp_path / "no/x.png"],
                        "--plot"),
                       (["audit", "--k", 16, "--epsilon", 1, "--plot", tmp_path / "no/x.png"], "--plot"),
                       (["demo", "--plot", tmp_path / "no/x.png"], "--plot"),
                       (["fleet", "--broker", "mqtt://127.0.0.1:1", "--config", counts, "--devices", 1,
                         "--truth", tmp_path / "no/t.json"], "--truth")]:
        code, err = invoke(*args)
        assert_refused(code, err, flag)


# -- item 6: a collector thread that dies stops the process ----------------------------------

BOOM = "def boom(*a, **k):\n    raise RuntimeError('injected fault')\n"
INJECTED = {  # thread -> (code run before `mss`, extra flags, the thread named in the error line)
    "mqtt": ("from mss_aggregator.collect import collectors\ncollectors.MqttCollector._on_connect = boom\n",
             [], r"mqtt collector 127\.0\.0\.1:\d+"),
    "serial": ("import serial\nserial.Serial = boom\n", ["--serial", "/dev/null"], r"serial collector /dev/null"),
    "writer": ("from mss_aggregator.collect import collectors\ncollectors.Writer._next_batch = boom\n",
               [], "writer"),
    "http": ("import http.server\nhttp.server.ThreadingHTTPServer.serve_forever = boom\n",
             ["--http", "127.0.0.1:{port}"], "http server"),
    # issue 49: the dashboard's refresh loop itself (its wait; --refresh inf made it an OverflowError) kept
    # the process running, exit 0 at the end, serving the start-up figures as if current
    "dashboard": ("from mss_aggregator.web import live\n_init = live.LiveView.__init__\n"
                  "def init(self, *a, **k):\n    _init(self, *a, **k)\n    self.stop_event.wait = boom\n"
                  "live.LiveView.__init__ = init\n", ["--http", "127.0.0.1:{port}"], "dashboard refresh"),
}


@pytest.mark.parametrize("thread", list(INJECTED))
def test_a_dead_thread_stops_the_process_with_exit_3(tmp_path, cfg_path, broker, thread):
    code, flags, name = INJECTED[thread]
    flags = [f.format(port=free_port()) for f in flags]
    script = BOOM + code + "from mss_cli.main import main\nmain(prog_name='mss')\n"
    try:
        out = subprocess.run([sys.executable, "-c", script, "aggregate", "--config", str(cfg_path), "--store",
                              str(tmp_path / "s.sqlite"), "--quiet", "--broker",
                              f"mqtt://127.0.0.1:{broker.port}", *flags],
                             capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired as exc:
        err = (exc.stderr or b"").decode(errors="replace")
        pytest.fail(f"still running after 30 s ({err.count('Traceback')} tracebacks): {err[-400:]}")
    assert out.returncode == 3 and "Traceback" not in out.stderr, (out.returncode, out.stderr[-2000:])
    lines = error_lines(out.stderr)
    assert len(lines) == 1 and re.fullmatch(rf"error: {name}: RuntimeError: injected fault", lines[0]), out.stderr


# -- item 7: tokens ----------------------------------------------------------------------------

class StubLive:
    """What the HTTP handler reads, without a store."""

    def estimates(self, top=None):
        return {"n": 0}

    def counters(self):
        return {"counters": {}}

    def config_doc(self):
        return {"k": 64}


def status(url, host=None, token=None):
    req = urllib.request.Request(url)
    if host:
        req.add_header("Host", host)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


BLANK = ["", " ", "\t", " \n ", "\u00a0"]


@pytest.mark.parametrize("bind", ["127.0.0.1:8080", "localhost:8080", "0.0.0.0:8080"])
def test_blank_tokens_are_refused_on_every_address(bind):
    from mss_aggregator.web.server import HttpError, WebServer, check_bind

    for token in BLANK:
        with pytest.raises(HttpError, match="the token is empty or blank"):
            check_bind(bind, token)
        with pytest.raises(HttpError, match="the token is empty or blank"):
            WebServer(StubLive(), bind.rsplit(":", 1)[0] + ":0", token)


def test_blank_tokens_are_refused_by_the_commands(tmp_path, cfg_path, broker):
    base = ["aggregate", "--config", cfg_path, "--store", tmp_path / "s.sqlite", "--quiet",
            "--broker", f"mqtt://127.0.0.1:{broker.port}"]
    loopback, anywhere = f"127.0.0.1:{free_port()}", f"0.0.0.0:{free_port()}"
    out = mss_process(*base, "--http", loopback, "--http-token", "", env=env_without("MSS_HTTP_TOKEN"))
    assert_refused(out.returncode, out.stderr, "--http-token")
    out = mss_process(*base, "--http", anywhere, env=env_without("MSS_HTTP_TOKEN", MSS_HTTP_TOKEN=" "))
    assert_refused(out.returncode, out.stderr, "MSS_HTTP_TOKEN")
    (tmp_path / "blank").write_text(" \n")
    code, err = invoke(*base, "--http", anywhere, "--http-token-file", tmp_path / "blank",
                       env={"MSS_HTTP_TOKEN": None})
    assert_refused(code, err, "--http-token-file")
    code, err = invoke(*base, "--http", anywhere, "--http-token", "a b", env={"MSS_HTTP_TOKEN": None})
    assert_refused(code, err, "--http-token")


def test_the_host_check_does_not_depend_on_the_token():
    """A DNS-rebinding Host is refused on a loopback server with or without a token; off
    loopback, only IP literals, loopback names, this machine's name and --http-host names."""
    from mss_aggregator.web.server import WebServer

    for token in (None, "s3cret"):
        web = WebServer(StubLive(), "127.0.0.1:0", token).start()
        try:
            url = web.url + "api/config"
            assert status(url, token=token) == 200
            assert status(url, host="evil.example", token=token) == 403
            assert status(url, host=f"LocalHost:{web.httpd.server_address[1]}", token=token) == 200
        finally:
            web.stop()
    web = WebServer(StubLive(), "0.0.0.0:0", "s3cret", hosts=["dash.example.org"]).start()
    try:
        url = f"http://127.0.0.1:{web.httpd.server_address[1]}/api/config"
        assert status(url) == 401
        assert status(url, token="s3cret") == 200  # Host 127.0.0.1:<port>
        for host in ("evil.example", "dash.example.org.evil.example"):
            assert status(url, host=host, token="s3cret") == 403, host
        for host in ("192.0.2.7:8080", "DASH.example.org", socket.gethostname()):
            assert status(url, host=host, token="s3cret") == 200, host
    finally:
        web.stop()


# -- item 8: connection resets -------------------------------------------------------------------

def accepted(pid, port):
    """How many established TCP connections to local ``port`` process ``pid`` holds (accepted)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # ESTABLISHED
                    inodes.add(f"socket:[{fields[9]}]")
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}") in inodes
        except OSError:
            pass
    return n


def test_connection_resets_are_counted_not_logged(tmp_path, cfg_path, broker):
    port = free_port()
    agg = AggregatorProcess(tmp_path, cfg_path, tmp_path / "s.sqlite", broker=f"mqtt://127.0.0.1:{broker.port}",
                            extra=["--http", f"127.0.0.1:{port}"])
    agg.proc = subprocess.Popen(agg.args, stdout=agg.log, stderr=agg.log,
                                env=env_without("MSS_HTTP_TOKEN", MSS_HTTP_TOKEN="s3cret"))
    agg.log_start = 0
    url = f"http://127.0.0.1:{port}/"
    try:
        agg.ready()
        deadline = time.time() + 30
        while status(url + "api/config", token="s3cret") != 200:
            assert time.time() < deadline
            time.sleep(0.2)
        before = len(agg.log_path.read_text().splitlines())
        for batch in range(10):  # 20 at a time, half before sending anything, half inside the headers
            socks = []
            for i in range(20):
                s = socket.create_connection(("127.0.0.1", port))
                if i % 2:
                    s.sendall(b"GET /api/config HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                socks.append(s)
            deadline = time.time() + 20
            while accepted(agg.proc.pid, port) < len(socks):  # accepted, so the handler is reading
                assert time.time() < deadline, accepted(agg.proc.pid, port)
                time.sleep(0.05)
            time.sleep(0.1)
            for s in socks:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()  # RST
        deadline = time.time() + 30
        while True:
            with urllib.request.urlopen(urllib.request.Request(
                    url + "metrics", headers={"Authorization": "Bearer s3cret"}), timeout=10) as r:
                metrics = r.read().decode()
            found = re.search(r"^mss_http_connection_resets_total (\S+)$", metrics, re.M)
            if found and float(found.group(1)) >= 200 or time.time() > deadline:
                break
            time.sleep(0.2)
        log = agg.log_path.read_text().splitlines()[before:]
        assert log == [], f"{len(log)} log lines: {log[:30]}"
        assert found and float(found.group(1)) == 200, metrics
        with urllib.request.urlopen(urllib.request.Request(
                url + "api/counters", headers={"Authorization": "Bearer s3cret"}), timeout=10) as r:
            assert json.loads(r.read())["http"]["connection_resets"] == 200
    finally:
        agg.stop()


def test_handler_errors_are_classified():
    """Resets, broken pipes, TLS errors and timeouts are counted as resets; anything else as an
    error, logged in one line."""
    import ssl

    from mss_aggregator.web.server import WebServer

    logged = []
    web = WebServer(StubLive(), "127.0.0.1:0", log=logged.append)
    try:
        for exc in (ConnectionResetError(104, "reset"), BrokenPipeError(32, "pipe"), ssl.SSLError("bad record"),
                    ConnectionAbortedError(), TimeoutError(), KeyError("bug")):
            try:
                raise exc
            except Exception:
                web.httpd.handle_error(None, ("127.0.0.1", 5555))
        assert web.stats() == {"connection_resets": 5, "errors": 1}
        assert logged == ["http: 127.0.0.1:5555: KeyError: 'bug'"]
    finally:
        web.stop()


# -- item 9: secrets from files and the environment --------------------------------------------

BROKER_COMMANDS = ["aggregate", "fleet", "demo", "switch-config"]


@pytest.mark.parametrize("command", BROKER_COMMANDS)
def test_every_broker_command_takes_the_password_from_a_file_or_the_environment(command):
    r = CliRunner().invoke(main, [command, "--help"])
    assert r.exit_code == 0 and "--broker-password-file" in r.stdout and "MSS_BROKER_PASSWORD" in r.stdout


def test_secrets_from_files_stay_out_of_the_command_line(tmp_path, cfg_path, auth_broker):
    (tmp_path / "pw").write_text("pw-aggregator\n")
    (tmp_path / "token").write_text("t0ken-from-a-file\n")
    port = free_port()
    agg = AggregatorProcess(tmp_path, cfg_path, tmp_path / "s.sqlite",
                            broker=f"mqtt://aggregator@127.0.0.1:{auth_broker.port}",
                            extra=["--broker-password-file", tmp_path / "pw", "--http", f"127.0.0.1:{port}",
                                   "--http-token-file", tmp_path / "token"])
    agg.proc = subprocess.Popen(agg.args, stdout=agg.log, stderr=agg.log,
                                env=env_without("MSS_HTTP_TOKEN", "MSS_BROKER_PASSWORD"))
    agg.log_start = 0
    try:
        agg.ready(30)  # subscribed: the broker took the password
        cmdline = open(f"/proc/{agg.proc.pid}/cmdline", "rb").read()
        assert b"pw-aggregator" not in cmdline and b"t0ken" not in cmdline
        url = f"http://127.0.0.1:{port}/api/config"
        deadline = time.time() + 30
        while status(url, token="t0ken-from-a-file") != 200:
            assert time.time() < deadline, agg.log_path.read_text()
            time.sleep(0.2)
        assert status(url) == 401 and status(url, token="t0ken-from-a") == 401
    finally:
        agg.stop()
    # the environment, for the password and the token
    agg = AggregatorProcess(tmp_path, cfg_path, tmp_path / "s.sqlite",
                            broker=f"mqtt://aggregator@127.0.0.1:{auth_broker.port}")
    agg.proc = subprocess.Popen(agg.args, stdout=agg.log, stderr=agg.log,
                                env=env_without("MSS_HTTP_TOKEN", MSS_BROKER_PASSWORD="pw-aggregator"))
    agg.log_start = agg.log.tell()
    try:
        agg.ready(30)
    finally:
        agg.stop()


def test_the_password_is_given_once(tmp_path, cfg_path):
    (tmp_path / "pw").write_text("secret\n")
    (tmp_path / "empty").write_text("")
    base = ["aggregate", "--config", cfg_path, "--store", tmp_path / "s.sqlite", "--quiet"]
    clean = {"MSS_BROKER_PASSWORD": None}
    for args, env, flag, why in [
        (["--broker", "mqtt://u:p@127.0.0.1:1", "--broker-password-file", tmp_path / "pw"], clean,
         "--broker-password-file", "also in the --broker URL"),
        (["--broker", "mqtt://u:p@127.0.0.1:1"], {"MSS_BROKER_PASSWORD": "x"}, "MSS_BROKER_PASSWORD",
         "also in the --broker URL"),
        (["--broker", "mqtt://127.0.0.1:1", "--broker-password-file", tmp_path / "pw"], clean,
         "--broker-password-file", "needs a user"),
        (["--broker", "mqtt://u@127.0.0.1:1", "--broker-password-file", tmp_path / "empty"], clean,
         "--broker-password-file", "empty"),
        (["--broker", "mqtt://u@127.0.0.1:1", "--broker-password-file", tmp_path / "missing"], clean,
         "--broker-password-file", "missing"),
        (["--serial", "/dev/null", "--broker-password-file", tmp_path / "pw"], clean,
         "--broker-password-file", "--broker"),
        (["--serial", "/dev/null", "--http", "127.0.0.1:1", "--http-token", "a",
          "--http-token-file", tmp_path / "pw"], {"MSS_HTTP_TOKEN": None}, "--http-token-file", "--http-token"),
    ]:
        code, err = invoke(*base, *args, env=env)
        assert_refused(code, err, flag, why=re.escape(why))


def test_switch_config_and_fleet_read_the_password_file(tmp_path, cfg_path, auth_broker):
    from mss_protocol.choose import Limits, choose
    from mss_protocol.configs import load_dict

    got = []
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    sub.username_pw_set("ns", "pw-ns")
    sub.on_message = lambda cl, u, m: got.append(m.topic)
    sub.connect("127.0.0.1", auth_broker.port)
    sub.subscribe([("application/+/device/+/command/down", 1), ("mss/v1/fl/+/report", 1)])
    sub.loop_start()
    try:
        time.sleep(0.3)
        (tmp_path / "pw").write_text("pw-fleet\n")
        compact = tmp_path / "compact.json"
        load_dict(choose(16, 2.0, "grr", limits=Limits(frame="compact", max_bytes=11))["config"]).save(compact)
        code, err = invoke("switch-config", "--lorawan", "chirpstack:app", "--broker",
                           f"mqtt://fleet@127.0.0.1:{auth_broker.port}", "--broker-password-file", tmp_path / "pw",
                           "--to-config", compact, "--device", "70b3d57ed0000001", env={"MSS_BROKER_PASSWORD": None})
        assert code == 0, err
        code, err = invoke("fleet", "--broker", f"mqtt://fleet@127.0.0.1:{auth_broker.port}", "--campaign", "fl",
                           "--config", cfg_path, "--devices", 2, "--runtime", "cpython",
                           env={"MSS_BROKER_PASSWORD": "pw-fleet"})
        assert code == 0, err
        deadline = time.time() + 10
        while len(got) < 3 and time.time() < deadline:
            time.sleep(0.1)
        assert sorted(got) == ["application/app/device/70b3d57ed0000001/command/down",
                               "mss/v1/fl/dev0/report", "mss/v1/fl/dev1/report"]
    finally:
        sub.loop_stop()
        sub.disconnect()


# -- issue 49: every number in range, empty modes refused, the dashboard's last misreadings ----------

def commands(group=main, path=()):
    """(path, command) of every command of ``group``, subcommands of subgroups too."""
    for name in group.list_commands(None):
        cmd = group.get_command(None, name)
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def number_type(param):
    """The click number type of ``param`` (a list's item type for a NumberList), or None."""
    kind = getattr(param.type, "item", param.type)
    return kind if isinstance(kind, (click.types.IntParamType, click.types.FloatParamType)) else None


NUMERIC = [(path, param) for path, cmd in commands() for param in cmd.params if number_type(param)]
EXEMPT = {}  # (command, flag) -> why it has no upper or lower bound: none so far, keep it so


def test_every_numeric_option_is_bounded():
    """A new numeric option comes with its range (mss_cli.common.FloatRange, click.IntRange):
    inf, nan and values whose memory or time cannot be had are refused at the edge."""
    assert len(NUMERIC) > 50 and {"plan", "aggregate", "shuffle"} <= {p[0] for p, _ in NUMERIC}
    unbounded = [(" ".join(path), param.opts[-1]) for path, param in NUMERIC
                 if (getattr(number_type(param), "min", None) is None or getattr(number_type(param), "max", None)
                     is None) and (" ".join(path), param.opts[-1]) not in EXEMPT]
    assert not unbounded, f"numeric options without both bounds: {unbounded}"
    floats = [(" ".join(path), param.opts[-1]) for path, param in NUMERIC
              if isinstance(number_type(param), click.types.FloatParamType)
              and not isinstance(number_type(param), FloatRange)]
    assert not floats, f"float options that let nan through (not mss_cli.common.FloatRange): {floats}"


def inside(kind, value):
    low = kind.min is None or (value > kind.min if kind.min_open else value >= kind.min)
    high = kind.max is None or (value < kind.max if kind.max_open else value <= kind.max)
    return low and high


def outside(kind):
    """Values ``kind`` must refuse: its bounds' neighbours outside, non-finite and huge ones, and
    0 and 1e-300 where the lower bound leaves them out."""
    values = ["inf", "-inf", "nan", "1e300", "-1e300"]
    if isinstance(kind, click.types.IntParamType):
        values += [str(kind.min if kind.min_open else kind.min - 1), str(kind.max if kind.max_open else kind.max + 1),
                   "1e-300"]  # not a whole number
    else:
        values += [repr(kind.min if kind.min_open else math.nextafter(kind.min, -math.inf)),
                   repr(kind.max if kind.max_open else math.nextafter(kind.max, math.inf))]
        values += [] if inside(kind, 1e-300) else ["1e-300"]
    return values + ([] if inside(kind, 0) else ["0"])


@pytest.fixture
def never_run(monkeypatch):
    """Every command's callback replaced: a value that passes validation must not start a job."""
    ran = []
    for path, cmd in commands():
        monkeypatch.setattr(cmd, "callback", lambda *a, _path=path, **k: ran.append(_path))
    return ran


@pytest.mark.parametrize("path,param", NUMERIC, ids=[f"{' '.join(p)} {q.opts[-1]}" for p, q in NUMERIC])
def test_numbers_out_of_range_are_usage_errors(never_run, path, param):
    """Before: --refresh inf or 1e10 killed the dashboard's refresh (stale figures, exit 0), --refresh nan
    spun a core, --epsilon 1e-300 (<= 1e-8) a ZeroDivisionError, bench --k 0 and audit --horizons
    99999999999 tracebacks."""
    flag = param.opts[-1]
    for value in outside(number_type(param)):
        code, err = invoke(*path, flag, value)
        assert_refused(code, err, flag)
    assert never_run == []


MODES = ("--broker", "--lorawan", "--serial", "--http", "--forward-broker")
EMPTY_MODES = [(path, flag) for path, cmd in commands() for param in cmd.params for flag in param.opts
               if flag in MODES]


@pytest.mark.parametrize("path,flag", EMPTY_MODES, ids=[f"{' '.join(p)} {f}" for p, f in EMPTY_MODES])
def test_an_empty_mode_is_a_usage_error(never_run, path, flag):
    """Before: --lorawan '' (an unset shell variable) was no --lorawan: mss aggregate and mss shuffle
    collected MQTT device reports instead of uplinks, and --http '' served no dashboard, silently."""
    assert len(EMPTY_MODES) >= 10
    code, err = invoke(*path, flag, "")
    assert_refused(code, err, flag)
    assert never_run == []


@pytest.mark.parametrize("eps", [1e-300, 1e-9, 1e-8, 1e-5, 0.009999])
def test_the_planner_refuses_a_budget_too_small_to_plan(eps):
    """Before: choose and plan ended in ZeroDivisionError at epsilon <= 1e-8 (a 30-bit threshold
    that no longer moves); a clear ValueError now, and the CLI's --epsilon refuses the same."""
    from mss_protocol.choose import Question, Reporting, Search, choose
    from mss_protocol.mss.planner import plan
    from mss_protocol.privacy import MIN_PLAN_EPSILON

    for call in (lambda: choose(16, eps, search=Search(use_cache=False)),
                 lambda: plan(16, eps, how=Search(use_cache=False)),
                 lambda: choose(16, 1.0, "grr", reporting=Reporting(irr_epsilon=eps), search=Search(use_cache=False)),
                 lambda: choose(16, eps, question=Question(n=None, detect=0.1), search=Search(use_cache=False))):
        with pytest.raises(ValueError, match=rf"below {MIN_PLAN_EPSILON}, the smallest planned for"):
            call()
    assert math.isfinite(choose(16, MIN_PLAN_EPSILON, search=Search(use_cache=False))["predicted_mse"])


def test_the_dashboard_answers_to_its_own_loopback_address():
    """Before: a dashboard on 127.0.0.2 refused Host 127.0.0.2 (403); other names still are."""
    from mss_aggregator.web.server import WebServer

    web = WebServer(StubLive(), "127.0.0.2:0").start()
    try:
        url = f"http://127.0.0.2:{web.httpd.server_address[1]}/api/config"
        assert status(url) == 200
        assert status(url, host="evil.example") == 403
    finally:
        web.stop()


def api_error(url):
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url, timeout=10)
    assert err.value.code == 400
    return json.loads(err.value.read())["error"]


def test_api_errors_name_the_query_parameter(tmp_path):
    """Before: ?bogus=1 said "LiveView.estimates() got an unexpected keyword argument 'bogus'",
    ?top=zero "invalid literal for int() with base 10"."""
    from mss_aggregator.web.live import LiveView
    from mss_aggregator.web.server import WebServer

    open_store(tmp_path / "s.sqlite", CFG).close()
    view = LiveView(tmp_path / "s.sqlite")
    web = WebServer(view, "127.0.0.1:0").start()
    try:
        for query, want in [("api/estimates?bogus=1", "unknown parameter 'bogus'; /api/estimates takes top, order, "
                                                        "simultaneous, post"),
                            ("api/counters?top=1", "unknown parameter 'top'; /api/counters takes none"),
                            ("api/estimates?top=zero", "top must be a whole number, got 'zero'"),
                            ("api/estimates?order=size", "order must be one of"),
                            ("api/estimates?simultaneous=yes", "simultaneous must be true or false")]:
            error = api_error(web.url + query)
            assert error.startswith("bad query: " + want), error
            assert not re.search(r"\w\(\)|keyword argument|literal|base 10", error), error
    finally:
        web.stop()
        view.close()


def test_an_oversized_protobuf_uplink_is_quarantined_as_protobuf():
    """Before: every event over 64 KiB was lorawan_json, whichever marshaler wrote it."""
    from mss_aggregator.collect.lorawan import MAX_DOCUMENT, UplinkError, parse_spec

    server, topic = parse_spec("chirpstack:app"), "application/app/device/70b3d57ed0000001/event/up"
    for document, reason in [(b"\x0a" + b"\x00" * MAX_DOCUMENT, "lorawan_protobuf"),
                             (b"{" + b" " * MAX_DOCUMENT, "lorawan_json")]:
        with pytest.raises(UplinkError) as err:
            server.uplink(topic, document, 1)
        assert err.value.reason == reason and "too long" in err.value.detail
    tts = parse_spec("tts:app@ttn")
    with pytest.raises(UplinkError) as err:
        tts.uplink("v3/app@ttn/devices/d1/up", b"{" + b" " * MAX_DOCUMENT, 1)
    assert err.value.reason == "lorawan_json"
