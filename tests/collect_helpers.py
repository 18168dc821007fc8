"""Run the aggregator as a real process and wait on its store."""
import json
import os
import signal
import subprocess
import sys
import time

from mss_aggregator.collect.store import open_store

PERIOD = 3600


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
    out = subprocess.run([sys.executable, "-m", "mss_cli", "estimate", "--store", str(store_path),
                          "--json", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)
