"""Serial end to end: the firmware under MicroPython writes framed reports into
a pty; the aggregator reads the other end with pyserial; a corrupted frame
is rejected by its checksum and counted."""
import json
import time

import pytest

from collect_helpers import AggregatorProcess, counters, wait_for
from micropython_runner import run
from mss_aggregator.collect.store import open_store
from mss_device.framing import frame
from mss_device.gateway import parse
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.wire import WireCodec
from ptys import pty_pair  # noqa: F401 (fixture)

CFG = MssConfig.build(64, 2.0, [59, 61, 63])
NODE = r"""
import sys
from mss_node import app
app.run(sys.argv[1], sys.argv[2], sensor=lambda: 11, ticks=3)
"""


def test_serial_reports_and_a_corrupted_frame(tmp_path, pty_pair):
    dev, host = pty_pair
    cfg_path = tmp_path / "cfg.json"
    CFG.save(cfg_path)
    d = CFG.to_dict()
    d["device"] = {"device_id": "s1", "period_s": 1, "poll_s": 1, "transport": "serial",
                   "serial": {"path": str(dev)}}
    (tmp_path / "config.json").write_text(json.dumps(d))
    store = tmp_path / "s.sqlite"
    agg = AggregatorProcess(tmp_path, cfg_path, store, serial=[host]).start().ready()
    out = run(NODE, cwd=tmp_path, args=[str(tmp_path / "config.json"), str(tmp_path / "state.json")])
    assert out.returncode == 0, out.stdout + out.stderr
    queue_empty = json.loads((tmp_path / "state.json").read_text())["queue"] == []
    good = WireCodec(CFG).encode(1, list(range(CFG.omegas[1])), epoch=5, seq=99)
    bad = frame(good).replace(good.hex()[-2:] + ",", ("00" if good.hex()[-2:] != "00" else "01") + ",")
    with open(dev, "w") as fh:  # a corrupted frame and some console noise on the same line
        fh.write("boot: hello\n" + bad)
    with pytest.raises(ValueError, match="checksum"):
        parse(bad)
    wait_for(store, lambda c: c["accepted"] >= 2 and c["rejected"] >= 1)
    time.sleep(0.5)
    agg.stop()
    c = counters(store)
    assert queue_empty
    assert c["rejected_checksum"] == 1 and 2 <= c["accepted"] <= 3
    s = open_store(store)
    assert {k[0] for k in s.accepted_keys()} == {f"serial:{host}"}
    s.close()
