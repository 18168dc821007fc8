"""Device state in flash: one fresh report per epoch per config, a bounded queue."""
from mss_node.state import State


def test_one_report_per_epoch_and_config(tmp_path):
    s = State(str(tmp_path / "state.json"), queue_max=8)
    assert s.due("aa", 5)
    s.add("aa", 5, b"\x01")
    assert not s.due("aa", 5) and not s.due("aa", 4) and s.due("aa", 6) and s.due("bb", 5)
    again = State(str(tmp_path / "state.json"), queue_max=8)  # after a reboot
    assert not again.due("aa", 5) and again.seq == 1 and again.queue == ["01"]


def test_full_queue_drops_oldest_and_counts(tmp_path):
    s = State(str(tmp_path / "state.json"), queue_max=2)
    for epoch in range(5):
        s.add("aa", epoch, bytes([epoch]))
    assert s.queue == ["03", "04"] and s.dropped == 3
    s.sent()
    back = State(str(tmp_path / "state.json"), queue_max=2)
    assert back.queue == ["04"] and back.dropped == 3 and back.seq == 5


def test_corrupt_state_file_starts_fresh(tmp_path):
    (tmp_path / "state.json").write_text("{broken")
    s = State(str(tmp_path / "state.json"), queue_max=2)
    assert s.seq == 0 and s.queue == [] and s.due("aa", 0)


import json  # noqa: E402

import pytest  # noqa: E402


@pytest.mark.parametrize("content", ['{"last": []}', '{"queue": "zz"}', '{"queue": ["zz"]}',
                                     '{"seq": "1"}', '{"last": {"a": "x"}}', "[1, 2]"])
def test_tampered_state_starts_fresh(tmp_path, content):
    (tmp_path / "state.json").write_text(content)
    s = State(str(tmp_path / "state.json"), queue_max=2)
    assert s.seq == 0 and s.queue == [] and s.last == {}


def test_power_cut_between_remove_and_rename_keeps_state(tmp_path):
    path = tmp_path / "state.json"
    s = State(str(path), queue_max=4)
    s.add("aa", 7, b"\x05")
    path.rename(tmp_path / "state.json.tmp")  # what save() leaves if power fails mid-way
    back = State(str(path), queue_max=4)
    assert not back.due("aa", 7) and back.queue == ["05"]
    assert json.loads((tmp_path / "state.json.tmp").read_text())["seq"] == 1


def test_unset_clock_sends_nothing(tmp_path):
    from mss_node.app import Node
    from mss_protocol.mss.config import MssConfig

    d = MssConfig.build(64, 2.0, [59, 61, 63]).to_dict()
    d["device"] = {"device_id": "c1", "transport": "serial", "serial": {"path": str(tmp_path / "out")}}
    (tmp_path / "config.json").write_text(json.dumps(d))
    node = Node(str(tmp_path / "config.json"), str(tmp_path / "state.json"), lambda: 3,
                clock=lambda: 1000)  # seconds after boot, never set by NTP
    node.tick()
    assert node.state.queue == [] and node.state.last == {}
    assert (tmp_path / "out").read_text() == "$MSS2,c1,!no-clock,25cd\n"  # a status line, no report
