"""A forged network time (issue 44 item 5; SPEC.md section 11, "A time that contradicts the
record").

A clockless board (MicroPython, an emulated RAK3172 or Wio-E5 on a pty, a budget) takes
its clock from the network's DeviceTimeAns, which the first boot's network forges a year
ahead or a year behind; a power cycle (the modem forgets its time), then the network answers
with the true time.  Every report is dated at the emulated network server by its true receive
time, as ChirpStack dates compact frames.  Each forged session has a control: the same boots
with the true time throughout.  All sessions run at once, ~20 s.
"""
import json

import pytest

from test_clockless import MARGIN_MS, STARTUP_S, Session, check_none_lost, run_sessions
from mss_protocol.budget import budget_section

YEAR = 365 * 86400  # s; a whole number of epochs
BUDGET = budget_section(80.0, 30)  # 40 fresh draws of the config a window: never spent here
PERIOD = {"ahead": 2, "behind": 4}  # s: period_s
SIGN = {"ahead": 1, "behind": -1}
CASES = [("ahead", "rak3172"), ("ahead", "wio-e5"), ("behind", "rak3172")]


def boots(case, offset):
    """Boot 1 with the network's time ``offset`` s off, then a power cycle, then boot 2 with the
    true time.  A year ahead: cut at 7 s.  A year behind: cut 0.2 s after boot 1's second report
    arrived, with 4-second epochs, so that boot 2's first report, right after its time probe,
    would arrive in the true epoch of that report."""
    if case == "ahead":
        return [{"kind": "power", "at": 7, "net_offset": offset, "off": 0.3}, {"kind": "last", "at": 8}]
    return [{"kind": "power", "at": 14, "net_offset": offset, "kill_after": [2, 0.2], "off": 0.1},
            {"kind": "last", "at": 9}]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    base = tmp_path_factory.mktemp("forged")
    made = {}
    for case, dialect in CASES:
        for run, offset in (("forged", SIGN[case] * YEAR), ("control", 0)):
            made[(case, dialect, run)] = Session(base / f"{case}-{dialect}-{run}", dialect, boots(case, offset),
                                                 device={"budget": BUDGET, "period_s": PERIOD[case]})
    return run_sessions(made)


def boot_reports(s, i):
    start, end, _, _ = s.runs[i]
    return [t for t, _ in s.arrivals if start <= t <= end]


def spent(s):
    """Fresh draws in the ledger (state.json ``spent``)."""
    return sum(len(g) - 2 for g in json.loads((s.folder / "state.json").read_text())["spent"])


def check_once_per_epoch(s, period):
    """No two reports arrived in one epoch of the network's (true) clock."""
    epochs = [int(t // period) for t, _ in s.arrivals]
    assert len(set(epochs)) == len(epochs), f"two reports in one true epoch: {epochs}\n{s.log()}"


@pytest.mark.parametrize("case, dialect", CASES)
def test_a_forged_network_time_costs_at_most_one_report_never_budget(sessions, case, dialect):
    forged, control = sessions[(case, dialect, "forged")], sessions[(case, dialect, "control")]
    years, period = SIGN[case], PERIOD[case]
    for s in (forged, control):
        check_once_per_epoch(s, period)
        queued, _ = check_none_lost(s)
        assert spent(s) == len(queued), "every fresh draw is in the ledger: none refunded, none twice"
        assert s.log().count("lorawan: clock set from the network (DeviceTimeAns)") == 2, s.log()
    # boot 1 ran on the forged clock: the reports it sent left dated a year off.  Its sends are the UP
    # lines of its own output, the first arrivals in order: a report it queued just before the power
    # cut leaves in boot 2, on the true clock (nothing lost), and is not one of them
    ups = [float(line.split()[1]) for line in forged.runs[0][2] if line.startswith("UP ")]
    first = [t for t, _ in forged.arrivals][:len(ups)]
    assert len(ups) >= 2 and all(abs(c - t - years * YEAR) < 3 for c, t in zip(ups, first)), forged.log()
    # boot 2, on the true time: reports resume within a pace of the boot (plus its start and probe)
    start = forged.runs[1][0]
    again, control_again = boot_reports(forged, 1), boot_reports(control, 1)
    print("%s %s: boot 2 reports: forged %d, control %d; fresh draws in the ledger: forged %d, control %d"
          % (case, dialect, len(again), len(control_again), spent(forged), spent(control)))
    # (the pace, then the rest of an epoch's last second and the guard if the pace ended in it)
    assert again and again[0] - start <= period + MARGIN_MS / 1000 + 1.2 + STARTUP_S + 0.5, (again, forged.log())
    assert len(again) >= len(control_again) - 1, (again, control_again, forged.log())
    # never budget: the forged time spends no more fresh draws than the control, to a report.  Fewer is
    # the reports a loaded machine's timing left out of the fixed wall time (seen at load 10: 6 against
    # 8); each board's draws equal its queued reports (above) and boot 2's reports are bounded above
    assert spent(forged) <= spent(control) + 1, (spent(forged), spent(control))
