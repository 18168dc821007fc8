"""A device whose state went back (issue 44, item 6; SPEC.md section 10, "State resets"): a full
frame's sequence number counts the reports a board queued and starts again at 0 with a new state
file, so a newer report whose sequence moved back (or further than its epochs allow) counts a
state reset, per device: in the store, ``mss quarantine``, /api/counters and /metrics."""
import json

import pytest

from collect_helpers import mss
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.store import open_store, went_back
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.wire import WireCodec
from postgres import location, pg_url, postgres_server  # noqa: F401 (fixtures)

CFG = MssConfig.build(64, 2.0, [59, 61, 63])


@pytest.mark.parametrize("before,after,back", [
    ((0, 0), (1, 1), False),  # the next epoch, the next report
    ((0, 0), (5, 3), False),  # reports lost on the way
    ((10, 65535), (11, 0), False),  # the u16 wraps
    ((3, 3), (4, 0), True),  # a new state file: 0 again
    ((0, 0), (4, 0), True),  # ... after its first report too
    ((3, 3), (3, 0), True),  # ... in the same epoch (its report again, with seq 0)
    ((3, 3), (3, 7), False),  # a second report in an epoch, forward: an extra, not a reset
    ((0, 5), (2, 9), True),  # further forward than 2 epochs allow
])
def test_went_back(before, after, back):
    assert went_back(*before, *after) is back


def frames(reports):
    """Ingest items of (device, epoch, seq) full frames."""
    codec, ingest = WireCodec(CFG), Ingest(CFG, "t")
    return [ingest.from_mqtt(f"mss/v1/t/{d}/report".encode(),
                             codec.encode(0, list(range(CFG.omegas[0])), epoch=e, seq=s)) for d, e, s in reports]


def test_a_sequence_that_goes_back_is_counted_per_device_and_shown(location, monkeypatch):
    """Device b's state file is deleted twice (its sequence starts again at 0): two resets of one
    device; a, c (reports lost, one delivered late) and w (the u16 wrap) none; a redelivery counts
    nothing; shown by mss quarantine (JSON and table), /api/counters and /metrics.  (On
    PostgreSQL the device's row is locked for the batch: SELECT ... FOR UPDATE.)"""
    from mss_aggregator.web.live import LiveView
    from mss_aggregator.web.server import MetricsCollector

    path = location
    store = open_store(path, CFG)
    try:
        first = store.write_batch(frames([("a", e, e) for e in range(5)] + [("b", 0, 0), ("b", 1, 1), ("b", 2, 2)]
                                         + [("c", 0, 0), ("c", 5, 3), ("w", 10, 65535), ("w", 11, 0)]))
        assert set(first) == {"accepted"}
        store.write_batch(frames([("c", 1, 1), ("b", 3, 0), ("b", 4, 1)]))  # c's late one; b's state lost
        again = store.write_batch(frames([("b", 3, 0), ("b", 6, 0)]))  # a redelivery; b's state lost again
        assert again == ["duplicate", "accepted"]
        resets = store.state_resets()
        assert (resets["events"], resets["devices"]) == (2, 1)
        assert [(r["device_id"], r["resets"], r["epoch"]) for r in resets["newest"]] == [("b", 2, 6)]
        assert "state_resets" not in store.counters()  # no outcome: the reports are accepted
    finally:
        store.close()

    doc = json.loads(mss("quarantine", "--store", path, "--json").stdout)
    assert doc["state_resets"]["devices"] == 1 and doc["state_resets"]["newest"][0]["device_id"] == "b"
    monkeypatch.setenv("COLUMNS", "160")
    table = mss("quarantine", "--store", path).stdout
    assert "devices whose state went back: 1 (2 resets), newest 1" in " ".join(table.split())
    assert "│ b " in table

    view = LiveView(path)
    try:
        view.refresh()
        counted = view.counters()["state_resets"]
        assert (counted["events"], counted["devices"], counted["newest"][0]["device_id"]) == (2, 1, "b")
        fams = {f.name: f for f in MetricsCollector(view).collect()}
        assert fams["mss_state_resets"].samples[0].value == 2
        assert fams["mss_state_reset_devices"].samples[0].value == 1
    finally:
        view.close()


def test_a_board_whose_state_file_is_deleted_is_seen(tmp_path):
    """The firmware (in-process) reports three epochs, its state.json is deleted, it reports two
    more: the aggregator, given its frames, counts one state reset of that device."""
    from mss_node.app import Node
    from mss_protocol.oracle_config import OracleConfig

    cfg = OracleConfig("grr", 8, 1.0)
    d = cfg.to_dict()
    d["device"] = {"device_id": "b1", "transport": "serial", "period_s": 3600}
    (tmp_path / "config.json").write_text(json.dumps(d))
    wall, sent = [1704067200], []

    class Link:
        def send(self, b):
            sent.append(bytes(b))
            return True

        def poll(self):
            pass

    def board():
        return Node(str(tmp_path / "config.json"), str(tmp_path / "state.json"), lambda: 1,
                    clock=lambda: wall[0], link=Link())

    node = board()
    for i in range(5):
        if i == 3:
            (tmp_path / "state.json").unlink()
            node = board()
        wall[0] += 3600
        node.tick()
    assert len(sent) == 5
    ingest = Ingest(cfg, "t")
    store = open_store(tmp_path / "s.sqlite", cfg)
    try:
        assert store.write_batch([ingest.from_mqtt(b"mss/v1/t/b1/report", f) for f in sent]) == ["accepted"] * 5
        resets = store.state_resets()
        assert (resets["events"], resets["devices"], resets["newest"][0]["device_id"]) == (1, 1, "b1")
    finally:
        store.close()
