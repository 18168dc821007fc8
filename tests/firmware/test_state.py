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
