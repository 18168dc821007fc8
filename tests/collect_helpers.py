"""Run the aggregator as a real process and wait on its store; build the collection services as
``mss aggregate`` and ``mss shuffle`` build them (:func:`build_aggregator`, :func:`build_shuffler`: from a
campaign file's path and the links as loose values, so that a test reads as the command line it
stands for); run ``mss ...`` in-process (:func:`mss`)."""
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections import namedtuple

from click.testing import CliRunner

from mss_aggregator.campaign import Campaign
from mss_aggregator.collect.links import Links, MqttEndpoint, TlsFiles
from mss_aggregator.collect.service import Aggregator
from mss_aggregator.collect.store import open_store
from mss_aggregator.shuffle.service import Batching, Shuffler
from mss_cli.main import main

PERIOD = 3600
Ran = namedtuple("Ran", "returncode stdout stderr")  # as subprocess.run names them


def mss(*args, unwrap=True):
    """(exit code, stdout, stderr) of ``mss ...``, run in-process, as a :data:`Ran`: what the
    command line gives, without the cost of a new interpreter.  An exception the command lets
    through ends it as the interpreter would, with exit code 1 and its traceback on stderr
    (CliRunner keeps it aside), so that a test's "no traceback" check holds in-process too.
    ``unwrap``: the stderr's line wrapping undone (its whitespace runs made one space); False
    for its lines as printed."""
    r = CliRunner().invoke(main, [str(a) for a in args], prog_name="mss")  # as python -m mss_cli names it
    err = r.stderr
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        err += "".join(traceback.format_exception(*r.exc_info))
    return Ran(r.exit_code, r.stdout, " ".join(err.split()) if unwrap else err)


def clocked(last_epoch=0, period=PERIOD):
    """The ``device`` (and ``aggregator``) sections of a campaign clock half a
    period into epoch ``last_epoch`` now, accepting every epoch from 0 on:
    what reports of epochs 0..last_epoch (tools/loadgen.py) need, since
    ``mss aggregate`` refuses a config without ``device.period_s``."""
    out = {"device": {"period_s": period, "epoch_origin": int(time.time()) - period // 2 - last_epoch * period}}
    if last_epoch > 32:  # the default window, device.queue_max's 32
        out["aggregator"] = {"accept_past_epochs": last_epoch}
    return out


LIVE = set()  # the service processes started here; tests/conftest.py kills those a failed test left running


def spawn(args, log):
    """Popen ``args`` with stdout and stderr to ``log``, remembered in :data:`LIVE`."""
    proc = subprocess.Popen(args, stdout=log, stderr=log)
    LIVE.add(proc)
    return proc


class AggregatorProcess:
    def __init__(self, tmp_path, config, store, broker=None, campaign="t", serial=(), extra=()):
        self.args = [sys.executable, "-m", "mss_cli", "aggregate", "--config", str(config),
                     "--store", str(store), "--campaign", campaign, "--quiet", *extra]
        if broker:
            self.args += ["--broker", broker]
        for s in serial:
            self.args += ["--serial", str(s)]
        self.store = store
        self.log_path = tmp_path / "aggregator.log"
        self.log = open(self.log_path, "ab")
        self.ready_line = b"subscribed to" if broker else b"serial: reading"
        self.proc = None

    def start(self):
        self.log_start = self.log.tell()
        self.proc = spawn(self.args, self.log)
        return self

    def ready(self, timeout=60):
        """Wait until this run has subscribed (MQTT) or opened its port (serial):
        reports sent before that would find no subscriber."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.ready_line in self.log_path.read_bytes()[self.log_start:]:
                return self
            assert self.proc.poll() is None, self.log_path.read_text()
            time.sleep(0.1)
        raise AssertionError(f"aggregator not ready after {timeout} s: {self.log_path.read_text()}")

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(20) == 0


def counters(store_path):
    s = open_store(store_path)
    try:
        return s.counters()
    finally:
        s.close()


def wait_for(store_path, predicate, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if "://" in str(store_path) or os.path.exists(store_path):
            try:
                c = counters(store_path)
                if predicate(c):
                    return c
            except Exception:  # the store may be mid-creation
                pass
        time.sleep(0.2)
    raise AssertionError(f"timed out; counters {counters(store_path)}")


def estimate_json(store_path, *args):
    """``mss estimate --store STORE_PATH --json ...``'s document (run in-process)."""
    out = mss("estimate", "--store", store_path, "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def build_aggregator(config_path, store_path, name=None, broker=None, *, serial_ports=(), lorawan=None,
                     client_id=None, tls=(), share_group=None, shuffle_key=None, fleet_key=None, log=print,
                     verbose=None):
    """An :class:`Aggregator` of the campaign file at ``config_path`` (``name``: its campaign name)."""
    links = Links.of(broker=broker, tls=tls, client_id=client_id, share_group=share_group, lorawan=lorawan,
                     serial=serial_ports, shuffled=shuffle_key is not None)
    return Aggregator(Campaign.read(config_path), store_path, links, name=name, fleet_key=fleet_key,
                      shuffle_key=shuffle_key, log=log, verbose=verbose)


def build_shuffler(config_path, queue_path, key, name, broker=None, *, serial_ports=(), lorawan=None,
                   forward_broker=None, tls_ca=None, client_id=None, batching=Batching(), log=print):
    """A :class:`Shuffler` of the campaign file at ``config_path``."""
    links = Links.of(broker=broker, tls=(tls_ca,), client_id=client_id, lorawan=lorawan, serial=serial_ports)
    forward = None if forward_broker is None else MqttEndpoint(forward_broker, TlsFiles(ca=tls_ca))
    return Shuffler(Campaign.read(config_path), queue_path, key, name, links=links, forward=forward, batching=batching,
                    log=log)
