"""Seeing what happens (issue 27): the store's campaign, ``mss aggregate -v`` and
--warn-idle, ``mss quarantine``, ``mss decode``, and the aggregate flags that are
usage errors; a real Mosquitto, real SQLite and PostgreSQL, the CLI as a process."""
import json
import subprocess
import sys
import time

import pytest

from brokers import mosquitto  # noqa: F401 (fixture)
from collect_helpers import AggregatorProcess, clocked, wait_for
from loadgen import make_reports, publish
from postgres import pg_url, postgres_server  # noqa: F401 (fixtures)
from mss_aggregator.collect.store import StoreError, open_store
from mss_protocol.config_file import ConfigError
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.wire import WireCodec

CFG = MssConfig.build(64, 2.0, [59, 61, 63])
OTHER = MssConfig.build(128, 2.0, [59, 61, 63])


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "cfg.json"
    CFG.save(path, clocked(9))  # epochs 0..9 accepted
    return path


def mss(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "mss_cli", *map(str, args)], capture_output=True, text=True,
                          input=stdin, timeout=120)


def wait_log(agg, text, timeout=30):
    """The aggregator's log (stdout and stderr) once it holds ``text``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        log = agg.log_path.read_text()
        if text in log:
            return log
        assert agg.proc.poll() is None, log
        time.sleep(0.1)
    raise AssertionError(f"no {text!r} after {timeout} s: {agg.log_path.read_text()}")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_store_records_its_campaign_and_refuses_another(request, tmp_path, backend):
    location = str(tmp_path / "s.sqlite") if backend == "sqlite" else request.getfixturevalue("pg_url")
    store = open_store(location, CFG, "gh")
    assert store.campaign() is None  # a new store: nothing recorded until an aggregator says
    assert store.record_campaign("gh") == "gh" and store.record_campaign("gh") == "gh"
    with pytest.raises(StoreError) as refused:
        store.record_campaign("gx")
    store.close()
    assert "'gh'" in str(refused.value) and "'gx'" in str(refused.value)
    assert str(refused.value).count(CFG.config_id_hex) == 2
    reader = open_store(location)  # what the dashboard reads
    assert reader.campaign() == "gh"
    reader.close()
    with pytest.raises(ConfigError) as other:
        open_store(location, OTHER, "gx")
    for name in (CFG.config_id_hex, OTHER.config_id_hex, "'gh'", "'gx'"):
        assert name in str(other.value)


def test_aggregate_resumes_the_recorded_campaign_and_refuses_another(tmp_path, mosquitto, config):
    broker, store = f"mqtt://127.0.0.1:{mosquitto.port}", tmp_path / "gh.sqlite"
    agg = AggregatorProcess(tmp_path, config, store, broker=broker, campaign="gh").start().ready()
    agg.stop()
    typo = mss("aggregate", "--config", config, "--store", store, "--broker", broker, "--quiet",
               "--campaign", "greenhous")
    assert typo.returncode == 3, typo.stderr
    assert "holds campaign 'gh'" in typo.stderr and "not campaign 'greenhous'" in typo.stderr
    assert typo.stderr.count(CFG.config_id_hex) == 2 and "subscribed" not in typo.stderr
    other = tmp_path / "other.json"
    OTHER.save(other, clocked(9))
    wrong = mss("aggregate", "--config", other, "--store", store, "--broker", broker, "--quiet")
    assert wrong.returncode == 3
    assert "holds reports of config" in wrong.stderr and "'gh'" in wrong.stderr
    assert CFG.config_id_hex in wrong.stderr and OTHER.config_id_hex in wrong.stderr
    resumed = AggregatorProcess(tmp_path, config, store, broker=broker, campaign="gh")
    resumed.args.remove("--campaign")
    resumed.args.remove("gh")
    resumed.start().ready()
    log = wait_log(resumed, "subscribed to")
    resumed.stop()
    assert "campaign 'gh': recorded in" in log and "subscribed to mss/v1/gh/+/report" in log
    fresh = AggregatorProcess(tmp_path, config, tmp_path / "new.sqlite", broker=broker)
    fresh.args[fresh.args.index("--campaign"):fresh.args.index("--campaign") + 2] = []
    fresh.start().ready()
    log = wait_log(fresh, "subscribed to")
    fresh.stop()
    assert "campaign 'default': no --campaign given" in log and "subscribed to mss/v1/default/+/report" in log
    assert open_store(tmp_path / "new.sqlite").campaign() == "default"


def test_verbose_lines_quarantine_listing_and_decode_agree(tmp_path, mosquitto, config):
    """-v prints one line per stored message (metadata, never the body); mss quarantine
    lists the rejected ones; mss decode refuses a garbled frame with the reason stored."""
    broker, store = f"mqtt://127.0.0.1:{mosquitto.port}", tmp_path / "s.sqlite"
    agg = AggregatorProcess(tmp_path, config, store, broker=broker, extra=("-v", "--warn-idle", "0.05"))
    started = time.time()
    agg.start().ready()
    (device, epoch, seq, good), = make_reports(CFG, devices=1, epochs=1, prefix="d")
    extra = WireCodec(CFG).encode(0, list(range(CFG.omegas[0])), epoch=epoch, seq=7)
    garbled = good[:1] + bytes([good[1] ^ 0xFF]) + good[2:]  # another config id
    publish([(device, epoch, seq, good), (device, epoch, seq, good), (device, epoch, 7, extra),
             ("d1", 0, 0, garbled), ("bad id", 0, 0, b"\x00" * 40)], broker, "t")
    wait_for(store, lambda c: c["received"] >= 5)
    time.sleep(max(0.0, started + 5 - time.time()))  # past --warn-idle's 3 s: reports came, no warning
    agg.stop()
    log = agg.log_path.read_text()
    assert f"mss/v1/t/d0/report accepted d0 epoch {epoch} seq {seq} ({len(good)} bytes, full)" in log
    assert f"mss/v1/t/d0/report duplicate d0 epoch {epoch} seq {seq}" in log
    assert f"mss/v1/t/d0/report extra d0 epoch {epoch} seq 7" in log
    assert f"mss/v1/t/d1/report quarantined wire_config: config: config id {garbled[1:5].hex()}" in log
    assert "mss/v1/t/bad id/report quarantined topic: not a report topic of this campaign (40 bytes)" in log
    assert good.hex() not in log and good[11:].hex() not in log and "warning: no report" not in log

    listed = mss("quarantine", "--store", store, "--json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert doc["total"] == 2 and doc["shown"] == 2
    newest, oldest = doc["messages"]
    assert (newest["reason"], newest["topic"], newest["length"], newest["hex"]) == (
        "topic", "mss/v1/t/bad id/report", 40, "00" * 16)
    assert (oldest["reason"], oldest["topic"], oldest["length"], oldest["hex"]) == (
        "wire_config", "mss/v1/t/d1/report", len(garbled), garbled[:16].hex())
    table = mss("quarantine", "--store", store, "--reason", "wire_config")
    assert table.returncode == 0 and "wire_config" in table.stdout and "bad id" not in table.stdout
    assert garbled[:16].hex() in table.stdout and "mss/v1/t/d1/report" in table.stdout
    none = mss("quarantine", "--store", store, "--reason", "epoch")
    assert none.returncode == 0 and "no quarantined reason epoch" in none.stderr
    assert mss("quarantine", "--store", tmp_path / "missing.sqlite").returncode == 3

    refused = mss("decode", "--config", config, "--json", garbled.hex())
    assert refused.returncode == 3
    out = json.loads(refused.stdout)
    assert not out["accepted"] and f"{out['reason']}: {out['detail']}" == (
        f"{oldest['reason']}: {oldest['detail']}")
    assert out["frame"] == {"length": len(garbled), "kind": "full", "config_id": garbled[1:5].hex(),
                            "epoch": epoch, "seq": seq}
    assert "error: the aggregator would quarantine it: wire_config" in refused.stderr


def test_decode_a_real_frame(tmp_path, config):
    (device, epoch, seq, frame), = make_reports(CFG, devices=1, epochs=1, prefix="d", seed=5)
    report = WireCodec(CFG).decode(frame)
    out = mss("decode", "--config", config, "--json", frame.hex())
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["accepted"] and doc["frame"] == {"length": len(frame), "kind": "full",
                                                "config_id": CFG.config_id_hex, "epoch": epoch, "seq": seq}
    assert doc["report"] == {"epoch": epoch, "seq": seq, "frame": "full", "protocol": "mss", "block": report.j,
                             "modulus": CFG.moduli[report.j], "support": list(report.subset)}
    text = mss("decode", "--config", config, "-", stdin=" ".join(f"{b:02x}" for b in frame) + "\n")
    assert text.returncode == 0, text.stderr
    assert f"config id {CFG.config_id_hex}, epoch {epoch}, seq {seq}" in text.stdout
    assert f"support set {{{', '.join(map(str, report.subset))}}}" in text.stdout
    short = mss("decode", "--config", config, frame[:8].hex())
    assert short.returncode == 3 and "wire_length" in short.stderr and "kind full" in short.stdout
    assert mss("decode", "--config", config, "0g").returncode == 2


def test_idle_warning_names_the_campaign_and_topic(tmp_path, mosquitto, config):
    broker = f"mqtt://127.0.0.1:{mosquitto.port}"
    agg = AggregatorProcess(tmp_path, config, tmp_path / "s.sqlite", broker=broker, campaign="greenhous",
                            extra=("--warn-idle", "0.05")).start().ready()
    log = wait_log(agg, "warning: no report", timeout=20)
    agg.stop()
    line, = [x for x in log.splitlines() if "warning: no report" in x]
    assert "0.05 min" in line and "campaign 'greenhous'" in line
    assert f"mss/v1/greenhous/+/report at 127.0.0.1:{mosquitto.port}" in line


@pytest.mark.parametrize("flag, value, named", [
    ("--broker", "mqtt://127.0.0.1:99999", "--broker"),
    ("--broker", "http://u:secret@127.0.0.1", "--broker"),
    ("--serial", "/dev/ttyUSB1,abc", "--serial"),
    ("--warn-idle", "-1", "--warn-idle"),
])
def test_bad_aggregate_flags_are_usage_errors(tmp_path, config, flag, value, named):
    store = tmp_path / "s.sqlite"
    out = mss("aggregate", "--config", config, "--store", store, "--quiet", flag, value)
    assert out.returncode == 2, out.stderr
    assert named in out.stderr and "secret" not in out.stderr
    assert "fleet key" not in out.stderr and not store.exists()  # checked before anything starts
