"""Serial end to end: the firmware under MicroPython writes report lines
(``$MSS2,<device id>,<report hex>,<crc>``) into a pty; the aggregator reads
the other end with pyserial and stores each report under the line's device
id (source ``serial:<port>``); OLH reports decode with the board's seed;
malformed lines are quarantined with their reason, console output ignored."""
import json
import sqlite3
import time

import numpy as np
import pytest

from collect_helpers import AggregatorProcess, clocked, counters, wait_for
from micropython_runner import run
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.store import open_store
from mss_device.framing import frame
from mss_device.olh import seed
from mss_protocol import serial_lines
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.wire import WireCodec
from mss_protocol.oracle_config import OracleConfig
from ptys import pty_pair  # noqa: F401 (fixture)

CFG = MssConfig.build(64, 2.0, [59, 61, 63])
NODE = r"""
import sys
from mss_node import app
app.run(sys.argv[1], sys.argv[2], sensor=lambda: 11, ticks=3)
"""
BOARD_CLOCK = {"device": {"period_s": 1}, "aggregator": {"accept_past_epochs": 3600}}  # the boards': see _board


def _board(tmp_path, cfg, device_id, dev):
    """Run the firmware (MicroPython) with ``cfg`` as ``device_id``, writing to ``dev``."""
    d = cfg.to_dict()
    d["device"] = {"device_id": device_id, "period_s": 1, "poll_s": 1, "transport": "serial",
                   "serial": {"path": str(dev)}}
    (tmp_path / "config.json").write_text(json.dumps(d))
    out = run(NODE, cwd=tmp_path, args=[str(tmp_path / "config.json"), str(tmp_path / f"state-{device_id}.json")])
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads((tmp_path / f"state-{device_id}.json").read_text())["queue"] == []


def _rows(store):
    with sqlite3.connect(store) as db:
        return db.execute("SELECT device_id, epoch, seq, subset, source, status FROM reports").fetchall()


def _quarantine(store):
    with sqlite3.connect(store) as db:
        return db.execute("SELECT source, payload, reason FROM quarantine ORDER BY id").fetchall()


def test_serial_reports_and_a_corrupted_line(tmp_path, pty_pair):
    dev, host = pty_pair
    cfg_path = tmp_path / "cfg.json"
    CFG.save(cfg_path, BOARD_CLOCK)
    store = tmp_path / "s.sqlite"
    agg = AggregatorProcess(tmp_path, cfg_path, store, serial=[host]).start().ready()
    _board(tmp_path, CFG, "s1", dev)
    good = WireCodec(CFG).encode(1, list(range(CFG.omegas[1])), epoch=5, seq=99)
    line = frame("s1", good)
    bad = line.replace(good.hex()[-2:] + ",", ("00" if good.hex()[-2:] != "00" else "01") + ",")
    with open(dev, "w") as fh:  # console noise, then a corrupted line
        fh.write("boot: hello\n" + bad)
    wait_for(store, lambda c: c["accepted"] >= 2 and c["rejected"] >= 1)
    time.sleep(0.5)
    agg.stop()
    c = counters(store)
    assert c["rejected_checksum"] == 1 and c["rejected"] == 1 and 2 <= c["accepted"] <= 3
    rows = _rows(store)
    assert {(r[0], r[4]) for r in rows} == {("s1", f"serial:{host}")}
    assert _quarantine(store) == [(f"serial:{host}", bad[:-1].encode(), "checksum: CRC mismatch")]


def test_olh_over_serial_decodes_with_the_boards_seed(tmp_path, pty_pair):
    """OLH's public seed (a, b) comes from the config id, the epoch and the device id: the
    stored (a, b) must be the ones the board derived from its own id (not the port's)."""
    dev, host = pty_pair
    cfg = OracleConfig("olh", 16, 2.0)
    cfg_path = tmp_path / "cfg.json"
    cfg.save(cfg_path, BOARD_CLOCK)
    store = tmp_path / "s.sqlite"
    agg = AggregatorProcess(tmp_path, cfg_path, store, serial=[host]).start().ready()
    _board(tmp_path, cfg, "olh-board.1", dev)
    wait_for(store, lambda c: c["accepted"] >= 2)
    time.sleep(0.5)
    agg.stop()
    rows = _rows(store)
    assert 2 <= len(rows) <= 3 and counters(store)["rejected"] == 0
    P, g = cfg.protocol.P, cfg.protocol.g
    for device_id, epoch, _, subset, source, status in rows:
        a, b, y = np.frombuffer(subset, dtype="<u4").tolist()
        assert (device_id, source, status) == ("olh-board.1", f"serial:{host}", "accepted")
        assert (a, b) == seed(cfg.config_id, epoch, "olh-board.1", P) != seed(cfg.config_id, epoch, f"serial:{host}", P)
        assert 0 <= y < g


def test_two_devices_on_one_port_and_every_rejected_line(tmp_path, pty_pair):
    """The same report bytes from two device ids on one port are two devices' reports
    (not a duplicate); each line of protocol/vectors/serial/lines.json's ``rejected`` is
    quarantined with its reason and the line it was; ``ignored`` lines are not counted."""
    dev, host = pty_pair
    cfg_path = tmp_path / "cfg.json"
    CFG.save(cfg_path, clocked(5))
    store = tmp_path / "s.sqlite"
    agg = AggregatorProcess(tmp_path, cfg_path, store, serial=[host]).start().ready()
    report = WireCodec(CFG).encode(1, list(range(CFG.omegas[1])), epoch=5, seq=99)
    vectors = json.loads(serial_lines.PATH.read_text())
    lines = [frame("s1", report), frame("s2", report)[:-1] + "\r\n", frame("s1", report)]  # the last: a copy
    lines += [v["line"] for v in vectors["rejected"]] + vectors["ignored"]
    with open(dev, "wb") as fh:
        fh.write("".join(lines).encode())
    n_bad = len(vectors["rejected"])
    wait_for(store, lambda c: c["received"] >= 3 + n_bad)
    time.sleep(0.5)
    agg.stop()
    c = counters(store)
    reasons = [v["reason"] for v in vectors["rejected"]]
    assert (c["received"], c["accepted"], c["duplicate"]) == (3 + n_bad, 2, 1)
    assert (c["rejected_frame"], c["rejected_checksum"]) == (reasons.count("frame"), reasons.count("checksum"))
    s = open_store(store)
    assert s.accepted_keys() == {("s1", 5, 99), ("s2", 5, 99)}
    assert s.tally()[:2] == (2, 2)  # two reports, two devices
    s.close()
    held = _quarantine(store)
    assert [(r[0], r[2].partition(":")[0]) for r in held] == [(f"serial:{host}", r) for r in reasons]
    assert [r[1] for r in held] == [v["line"].encode()[:-1] for v in vectors["rejected"]]  # the line, its LF cut
    mss1 = [r[2] for r in held if r[1].startswith(b"$MSS1,")]
    assert len(mss1) == 1 and "format 1" in mss1[0] and "no device id" in mss1[0] and "reflash" in mss1[0]


def test_ingest_from_serial():
    """Ingest.from_serial alone: a report under the line's device id, None for console
    output, a quarantine result keeping the line for each malformed one."""
    ingest = Ingest(CFG, "t")
    report = WireCodec(CFG).encode(0, list(range(CFG.omegas[0])), epoch=7, seq=1)
    for line in (frame("dev:1", report).encode(), frame("dev:1", report).encode()[:-1],
                 frame("dev:1", report).encode()[:-1] + b"\r"):
        out = ingest.from_serial("/dev/ttyUSB0", line)
        assert (out["device_id"], out["source"], out["payload"]) == ("dev:1", "serial:/dev/ttyUSB0", report)
        assert (out["report"].epoch, out["report"].seq) == (7, 1)
    assert ingest.from_serial("/dev/ttyUSB0", b"I (312) wifi: connected") is None
    for v in json.loads(serial_lines.PATH.read_text())["rejected"]:
        out = ingest.from_serial("p", v["line"].encode())
        assert (out["reason"], out["payload"], out["source"]) == (v["reason"], v["line"].encode(), "serial:p")
    bad = frame("dev:1", b"\x01" + report[1:5])  # a good line, a short report: the wire's reason
    assert ingest.from_serial("p", bad.encode())["reason"] == "wire_length"
