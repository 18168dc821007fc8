"""mss plan --board (issue 28 item 6): device_ms and --max-device-ms on the board chosen, with or without --link."""
import math

import pytest

from mss_protocol import device_cost
from mss_protocol.configs import load_dict
from test_plan_link import plan, plan_json  # the plan tests' CLI helpers


@pytest.mark.parametrize("board", ["rp2040", "rp2350", "esp32c3"])
def test_device_ms_is_the_boards_model(board):
    """device_ms is the board's instruction set's model at its CPI and clock; rp2040_ms stays the RP2040's."""
    d = plan_json("--k", 1024, "--epsilon", 1, "--board", board)
    cfg = load_dict(d["config"])
    isa, cpi, hz = device_cost.CORES[board]
    assert d["board"] == board
    assert d["device_ms"] == pytest.approx(device_cost.instructions(cfg, isa) * cpi / hz * 1e3, rel=1e-12)
    assert d["rp2040_ms"] == pytest.approx(device_cost.device_ms(cfg), rel=1e-12)
    chosen = next(c for c in d["candidates"] if c["protocol"] == d["protocol"])
    assert (chosen["device_ms"], chosen["rp2040_ms"]) == (d["device_ms"], d["rp2040_ms"])
    text = " ".join(plan("--k", 1024, "--epsilon", 1, "--board", board).stdout.split())
    assert f"device time per report on {board} ({hz / 1e6:g} MHz) from {isa.upper()} instruction counts" in text


def test_max_device_ms_applies_to_the_chosen_board():
    """A budget between SubsetSelection's time on an RP2040 and on an ESP32-C3 (k = 1024, eps = 1) leaves it
    out on the slower board only: the budget is of the board asked for."""
    times = {b: {c["protocol"]: c["device_ms"] for c in plan_json("--k", 1024, "--epsilon", 1, "--board", b)
                 ["candidates"] if c["device_ms"] is not None} for b in ("rp2040", "esp32c3")}
    slow, fast = sorted(times, key=lambda b: times[b]["ss"], reverse=True)
    assert times[slow]["ss"] > 1.2 * times[fast]["ss"]
    budget = math.sqrt(times[slow]["ss"] * times[fast]["ss"])
    for board, left_out in ((slow, True), (fast, False)):
        d = plan_json("--k", 1024, "--epsilon", 1, "--board", board, "--max-device-ms", budget)
        ss = next(c for c in d["candidates"] if c["protocol"] == "ss")
        assert ("excluded" in ss) == left_out, ss
        if left_out:
            assert f"on {board} > --max-device-ms" in ss["excluded"]
    named = plan_json("--k", 1024, "--epsilon", 1, "--protocol", "ss", "--board", slow, "--max-device-ms", budget)
    assert named["device_ok"] is False and named["board"] == slow


def test_the_energy_model_takes_the_boards_own_device_time():
    """With --link the energy's device time is the plan's device_ms on that board."""
    d = plan_json("--k", 1024, "--epsilon", 1, "--protocol", "ss", "--link", "lorawan:eu868:5", "--board",
                  "esp32c3")
    assert d["energy_times_s"]["device"] == pytest.approx(d["device_ms"] / 1e3, rel=1e-12)
    assert d["board"] == "esp32c3" and d["device_ms"] != pytest.approx(d["rp2040_ms"], rel=1e-3)


def test_a_board_without_energy_figures_is_refused_with_a_link():
    out = plan("--k", 12, "--epsilon", 2, "--link", "lorawan:eu868:0", "--board", "rp2350")
    assert out.exit_code == 2 and "--board" in out.output and "no figures for rp2350" in " ".join(out.output.split())
