"""device.budget: the privacy budget the board enforces (issue 25 item 2; SPEC.md section 10,
"Budget").

The ledger runs under the real MicroPython unix port: one process a scenario, the node's
board time driven by an emulated ``time.ticks_ms`` (mss_node.uptime, wrapping as the port's
does), its wall clock and its resets by the script (a reset builds a new Node from the
files; a power cut during a state.json write is a save that stops half way).  The config:
GRR, k = 8, epsilon 1 (its worst ratio r is just below e), budget epsilon 3 per day: exactly
3 fresh draws a window (r^3 <= floor60(e^3) < r^4), the window W = 1 day + 1/64 of it of
board time.  Settings checks run in-process on CPython (the same firmware files).
"""
import json
import time
from fractions import Fraction

import pytest

from brokers import mosquitto  # noqa: F401 (fixture)
from micropython_runner import run
from mss_node import settings
from mss_node.ledger import window_ms
from mss_node.state import State
from mss_protocol.budget import budget_section, draws_per_window, ratio_fraction, worst_ratio
from mss_protocol.oracle_config import OracleConfig

A = OracleConfig("grr", 8, 1.0)
B = OracleConfig("grr", 8, 0.5)
BUDGET = budget_section(3.0, 1)
W = window_ms(1)
DAY = 86400000
PERIOD = 3600
RA = worst_ratio(A)
N = draws_per_window(BUDGET, RA)  # fresh draws a window: 3


def config(cfg=A, **device):
    d = cfg.to_dict()
    d["device"] = dict({"device_id": "b1", "transport": "serial", "period_s": PERIOD, "budget": BUDGET}, **device)
    return d


def write(tmp_path, name="config.json", cfg=A, **device):
    (tmp_path / name).write_text(json.dumps(config(cfg, **device)))
    return name


# The harness: ``Board`` runs a Node on emulated ticks, wall clock and link (statuses
# recorded); each scenario prints one JSON line last.
HARNESS = r"""
import json, sys, time
from mss_node import app, files, switch, uptime
from mss_device.rng import ByteRng

T = [int(sys.argv[2]) if len(sys.argv) > 2 else 0]  # ticks_ms at the first boot
uptime.ticks_ms = lambda: T[0]
R = [0]  # real time, ms since the start
WALL = [1704067200.0 + 30 * 86400]  # the wall clock (s): epochs follow it, the ledger never reads it
PERIOD = 3600


class Link:
    def __init__(self):
        self.sent, self.words = 0, []

    def send(self, b):
        self.sent += 1
        return True

    def poll(self):
        pass

    def status(self, w):
        self.words.append(w)


class Cut(Exception):
    pass


real_save = files.save
armed = [None]


def save(path, obj):
    mode = armed[0]
    if mode is None or not path.endswith("state.json"):
        return real_save(path, obj)
    armed[0] = None
    text = json.dumps(obj)
    with open(path + ".tmp", "w") as fh:  # the temp file half written, or whole and the old file removed
        fh.write(text if mode == "remove" else text[:len(text) // 2])
    if mode == "remove":
        import os
        os.remove(path)
    raise Cut(mode)


files.save = save


class Board:
    def __init__(self, cfg="config.json"):
        self.cfg, self.link, self.rng, self.value = cfg, Link(), ByteRng(), 0
        self.boot()

    def boot(self, ticks=None):
        if ticks is not None:
            T[0] = ticks
        self.node = app.Node(self.cfg, "state.json", lambda: self.value, rng=self.rng,
                             clock=lambda: WALL[0], link=self.link)

    def run(self, ms):
        # the board runs ms of real time: its ticks advance (read at least every 2^28 ms)
        while ms > 0:
            step = min(ms, 1 << 28)
            T[0] = time.ticks_add(T[0], step)
            R[0] += step
            WALL[0] += step / 1000
            ms -= step
            self.node.ledger.now()

    def off(self, ms, ticks):
        # a reset: the board is off ms (real time and the wall clock go on), boots with ticks
        R[0] += ms
        WALL[0] += ms / 1000
        self.boot(ticks)

    def epoch(self, value=None, wall=PERIOD):
        # the wall clock moves on by ``wall`` s (the next epoch), one tick: what came of it
        if value is not None:
            self.value = value
        WALL[0] += wall
        return self.tick()

    def tick(self):
        used, sent, said = self.rng.consumed, self.link.sent, len(self.link.words)
        self.node.tick()
        words = self.link.words[said:]
        if len(self.link.words) > 100:  # long runs: keep the memory flat
            del self.link.words[:]
        if self.link.sent > sent:
            return "fresh" if self.rng.consumed != used else "memo"
        return "skip" if words and words[-1].startswith("skipped-") else "none"

    def ms(self):
        return self.node.ledger.ms

    def spent(self):
        return files.load("state.json")["spent"]
"""


def scenario(tmp_path, body, ticks=0):
    out = run(HARNESS + body, cwd=tmp_path, args=["x", str(ticks)], timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stdout


EDGES = r"""
b = Board()
W = int(sys.argv[3])
res = []
def step(ms):
    b.run(ms)
    res.append([b.ms(), b.epoch()])
step(0); step(1000); step(1000)  # three fresh draws at board time 0, 1000, 2000
step(W - 1 - 2000)  # one tick before the first leaves the window: refused
b.run(1)
res.append([b.ms(), b.tick()])  # at the edge, but this epoch was skipped: no second attempt
res.append([b.ms(), b.epoch()])  # the next epoch, at the edge: allowed
step(999)  # W + 999: the draw of 1000 still counts
step(1)  # W + 1000: it left
print(json.dumps([res, b.link.words, b.spent()]))
"""


@pytest.mark.parametrize("ticks", [0, (1 << 30) - 1500], ids=["ticks-0", "ticks-wrap"])
def test_spent_and_renewed_exactly_at_the_window_edge(tmp_path, ticks):
    """Three fresh draws fill the budget; the fourth is refused one ms before the first draw
    leaves the window and allowed at the edge (a skipped epoch is not tried twice); the same
    across the ticks' wrap."""
    assert N == 3 and RA ** 3 <= ratio_fraction(BUDGET) < RA ** 4
    write(tmp_path)
    (res, words, spent), log = scenario(tmp_path, EDGES.replace("sys.argv[3]", str(W)), ticks)
    assert res == [[0, "fresh"], [1000, "fresh"], [2000, "fresh"], [W - 1, "skip"], [W, "none"], [W, "fresh"],
                   [W + 999, "skip"], [W + 1000, "fresh"]]
    skipped = [w for w in words if w.startswith("skipped-")]
    assert len(skipped) == 2 and words == [skipped[0], "online", skipped[1], "online"]
    assert log.count("budget spent (epsilon 3 per 1 days): skipped epoch") == 2  # once a skipped epoch
    assert "next fresh draw possible in about 1 h" in log  # 1 ms to go, rounded up to an hour
    hi, lo = RA.numerator, RA.denominator
    assert len(spent) == 1 and Fraction(spent[0][0], spent[0][1]) == RA and spent[0][2:] == [2000, W, W + 1000]
    assert hi > lo


# The start RESETS and JUMPS share: a board reporting in three epochs, a second of board time apart.
SPEND_THREE = r"""
b = Board()
W = int(sys.argv[3])
res = []
for i in range(3):
    res.append([b.ms(), b.epoch()])
    b.run(1000)
"""

# The end RESETS and CORRUPT share: an epoch 1 ms before the window's edge, then one on it.
EDGE = r"""
b.run(W - 1 - b.ms())
res.append([b.ms(), b.epoch()])
b.run(1)
res.append([b.ms(), b.epoch()])
print(json.dumps(res))
"""

RESETS = SPEND_THREE + r"""
b.run(5000)  # not written: lost at the reset
b.off(86400000, (1 << 30) - 700)  # a day off; it boots with ticks about to wrap
res.append([b.ms(), b.epoch()])
""" + EDGE


def test_time_off_and_unwritten_time_count_as_zero(tmp_path):
    """A reset resumes board time from the last write: the day the board was off and the
    5 s it ran after its last write count as zero, so the window ends W of board time after
    the first draw, later in real time, never sooner."""
    write(tmp_path)
    res, _ = scenario(tmp_path, RESETS.replace("sys.argv[3]", str(W)))
    # the 3 draws at 0, 1000, 2000 (written with their sends: bt 0, 1000, 2000); the 5 s lost
    assert res == [[0, "fresh"], [1000, "fresh"], [2000, "fresh"], [2000, "skip"], [W - 1, "skip"],
                   [W, "fresh"]]


CUTS = r"""
b = Board()
res = []
mode = sys.argv[3]
res.append(b.epoch())
b.run(1000)
armed[0] = mode  # the write that queues the second fresh draw (with its spend) is cut
try:
    b.epoch()
    res.append("no cut")
except Cut:
    pass
b.off(500, 12345)
res.append(b.tick())  # the same epoch: sent (remove: the write happened), or drawn again (tmp)
b.run(1000)
res.append(b.epoch())
res.append(b.epoch())
armed[0] = mode  # a cut while a skip marks its epoch
try:
    b.epoch()
except Cut:
    pass
b.off(0, 99)
res.append(b.tick())
print(json.dumps([res, b.link.sent, b.spent()]))
"""


@pytest.mark.parametrize("mode", ["tmp", "remove"])
def test_a_power_cut_during_the_write_never_sends_an_unspent_draw(tmp_path, mode):
    """A power cut while state.json is written (the temp file half written: the old state
    stays; or the old file removed and the new one not yet renamed: the new state is the
    temp file): a report is sent only if its spend was written with it, so every report
    sent has its entry, and the budget's 3 draws are never exceeded.  The second copy of the
    ledger (ledger.json) is written before state.json: a cut draw's spend stays spent."""
    write(tmp_path)
    (res, sent, spent), _ = scenario(tmp_path, CUTS.replace("sys.argv[3]", repr(mode)))
    if mode == "tmp":  # the cut draw was not queued, but its spend is in the copy: drawn again, with one less left
        assert res == ["fresh", "fresh", "skip", "skip", "skip"] and sent == 2
    else:  # the new state was whole: its report is queued, sent at the next tick, not drawn again;
        assert res == ["fresh", "memo", "fresh", "skip", "none"] and sent == 3  # and the skip's epoch is marked
    assert len(spent) == 1 and len(spent[0]) - 2 == 3  # 3 spent


def test_the_tick_sent_after_a_cut_is_the_queued_one(tmp_path):
    """(The 'memo' above, with memoize off, is the queued report of the cut write: no random
    byte read for it.)  A state whose write was cut between remove and rename loads from the
    temp file, queue and ledger together."""
    write(tmp_path)
    state = tmp_path / "state.json"
    state.with_suffix(".json.tmp").write_text(json.dumps({"queue": ["00"], "spent": [[3, 1, 5]], "bt": 9}))
    s = State(str(state), queue_max=4)
    assert not s.broken and s.queue == ["00"] and s.spent == [[3, 1, 5]] and s.bt == 9


JUMPS = SPEND_THREE + r"""
res.append([b.ms(), b.epoch(wall=365 * 86400)])  # NTP moves the wall clock a year ahead
res.append([b.ms(), b.epoch(wall=-366 * 86400)])  # ... then a year and a day back
b.run(600000)
res.append([b.ms(), b.tick()])
res.append([b.ms(), b.epoch(wall=2 * 365 * 86400)])  # ... and ahead again: new epochs
b.run(W - b.ms())
res.append([b.ms(), b.epoch()])
print(json.dumps(res))
"""


def test_wall_clock_jumps_cannot_renew_the_budget(tmp_path):
    """The wall clock a year ahead (NTP, network time) brings new epochs, not a new budget;
    a year and a day back the board reports nothing (those epochs are used) and breaks nothing;
    only board time renews the budget."""
    write(tmp_path)
    res, _ = scenario(tmp_path, JUMPS.replace("sys.argv[3]", str(W)))
    assert [k for _, k in res] == ["fresh", "fresh", "fresh", "skip", "none", "none", "skip", "fresh"]
    assert res[-1][0] == W and res[3][0] == res[4][0] == 3000


SWITCH = r"""
b = Board()
res = []
for i in range(3):
    res.append(b.epoch())
switch.adopt(b.node, json.load(open("b.json")), "held config")
res.append(b.node.s.config_id)
res.append(b.epoch())
print(json.dumps([res, b.spent()]))
"""


def test_a_config_switch_keeps_the_ledger(tmp_path):
    """Three draws of config A (epsilon 1) spend the budget: a switch to config B (epsilon
    0.5, which alone would have 6 draws a window) draws nothing: the ledger is the device's."""
    write(tmp_path)
    write(tmp_path, "b.json", cfg=B)
    assert draws_per_window(BUDGET, worst_ratio(B)) == 6
    (res, spent), _ = scenario(tmp_path, SWITCH)
    assert res == ["fresh", "fresh", "fresh", B.config_id_hex, "skip"]
    assert [Fraction(g[0], g[1]) for g in spent] == [RA] and len(spent[0]) == 5


def test_after_a_switch_both_configs_draws_count_in_one_product(tmp_path):
    """In-process (CPython): after a day of board time the A draws left; B draws go in their
    own group beside any A draw still in the window, both counted in one product."""
    from mss_node import uptime
    from mss_node.app import Node
    from mss_node.switch import adopt

    t = [0]
    wall = [1704067200]
    real = uptime.ticks_ms
    uptime.ticks_ms = lambda: t[0]
    try:
        write(tmp_path)

        class Link:
            out = []

            def send(self, b):
                self.out.append(b)
                return True

            def poll(self):
                pass

        node = Node(str(tmp_path / "config.json"), str(tmp_path / "state.json"), lambda: 1,
                    clock=lambda: wall[0], link=Link())
        for i in range(3):
            wall[0] += PERIOD
            t[0] += 1000
            node.tick()
        t[0] += W - 2000  # the first A draw left (board time W + 1000)
        adopt(node, B.to_dict(), "held config")
        kinds = []
        for i in range(6):
            wall[0] += PERIOD
            n = len(node.link.out)
            node.tick()
            kinds.append(len(node.link.out) - n)
        spent = json.loads((tmp_path / "state.json").read_text())["spent"]
    finally:
        uptime.ticks_ms = real
    rb = worst_ratio(B)
    # 2 A draws left in the window: B draws while RA^2 RB^n <= budget: n = 2 (RA^2 RB^3 > e^3)
    n = max(i for i in range(7) if RA ** 2 * rb ** i <= ratio_fraction(BUDGET))
    assert kinds == [1] * n + [0] * (6 - n) and n == 2
    assert [Fraction(g[0], g[1]) for g in spent] == [RA, rb] and [len(g) - 2 for g in spent] == [2, n]


CORRUPT = r"""
b = Board()
W = int(sys.argv[3])
res = [[b.ms(), b.epoch()]]
open("state.json", "w").write(sys.argv[4])
b.off(1000, 5)
res.append([b.ms(), b.epoch()])
""" + EDGE
TAMPERED = ['{"broken', '{"spent": [[1, 2, 0]], "bt": 5}', '{"spent": [[3, 1, 9]], "bt": 5}',
            '{"spent": [[3, 1, 4, 2]], "bt": 5}', '{"spent": [[3, 1]], "bt": 5}', '{"spent": [[3, 1, true]], "bt": 5}',
            '{"spent": {"a": 1}}', '{"bt": -1}', '{"bt": "5"}', '{"seq": "x", "spent": []}',
            json.dumps({"spent": [[3, 1] + list(range(257))], "bt": 300})]


@pytest.mark.parametrize("content", [TAMPERED[0], TAMPERED[1]], ids=["unreadable", "ratio-below-1"])
def test_a_corrupt_or_tampered_state_counts_as_a_spent_window(tmp_path, content):
    """A state file that is there but unreadable or tampered loses its ledger: the board
    counts the budget as spent for a whole window from its boot (never as empty), so a
    wiped ledger cannot buy fresh draws."""
    write(tmp_path)
    res, log = scenario(tmp_path, CORRUPT.replace("sys.argv[3]", str(W)).replace("sys.argv[4]", repr(content)))
    assert res == [[0, "fresh"], [0, "skip"], [W - 1, "skip"], [W, "fresh"]]
    assert "unreadable or tampered: starting fresh (a device.budget counts as spent for a whole window)" in log


@pytest.mark.parametrize("content", TAMPERED)
def test_state_validation_of_the_ledger(tmp_path, content):
    path = tmp_path / "state.json"
    path.write_text(content)
    s = State(str(path), queue_max=2)
    assert s.broken and s.spent == [[1, 0, 0]] and s.bt == 0 and s.queue == []


def test_no_state_file_and_a_torn_first_write_are_an_empty_ledger(tmp_path):
    s = State(str(tmp_path / "state.json"), queue_max=2)
    assert not s.broken and s.spent == [] and s.bt == 0
    (tmp_path / "state.json.tmp").write_text('{"seq": 1, "spe')  # the first write ever, cut
    s = State(str(tmp_path / "state.json"), queue_max=2)
    assert not s.broken and s.spent == []
    ok = {"spent": [[3, 1, 4, 4, 9], [1, 0, 2]], "bt": 9}
    (tmp_path / "state.json").write_text(json.dumps(ok))
    s = State(str(tmp_path / "state.json"), queue_max=2)
    assert not s.broken and s.spent == ok["spent"] and s.bt == 9


# 10,000 epochs of a board whose value moves (memoize, 3 memos: a value outside them needs a
# fresh draw), with resets (time lost since the last write, hours off, ticks restarting
# anywhere), a year's wall-clock jump ahead and two days back.  Printed: per fresh draw and
# per skip, (real ms, board ms); and the counts of each kind.
SIM = r"""
import random
random.seed(int(sys.argv[3]))
b = Board()
kinds = {}
v = 0
for e in range(10000):
    if random.getrandbits(8) < 40:
        v = random.getrandbits(3)
    if e in (3000, 6000):
        b.epoch(wall=365 * 86400 if e == 3000 else -2 * 86400)
    if random.getrandbits(10) < 2:
        b.run(random.getrandbits(10))
        b.off(random.getrandbits(25), random.getrandbits(30))
    b.run(3600000 - 2000 + random.getrandbits(12))
    k = b.epoch(v)
    kinds[k] = kinds.get(k, 0) + 1
    if k in ("fresh", "skip"):
        print("%s %d %d" % (k, R[0], b.ms()))
print(json.dumps(kinds))
"""


def test_ten_thousand_epochs_never_overspend_and_draw_when_allowed(tmp_path):
    """Every window of W of real time (and so of D days) holds at most 3 fresh draws: the
    product of their ratios is within the budget's, exactly; and every skip happened when the
    ledger was full (3 draws in the W of board time before it): the board draws when allowed."""
    write(tmp_path, memoize=True, memo_max=3)
    kinds, log = scenario(tmp_path, SIM.replace("sys.argv[3]", "7"))
    rows = [line.split() for line in log.splitlines()]
    fresh = [[int(r[1]), int(r[2])] for r in rows if r[0] == "fresh"]
    skips = [[int(r[1]), int(r[2])] for r in rows if r[0] == "skip"]
    assert sum(kinds.values()) == 10000 and kinds["fresh"] == len(fresh) and kinds["skip"] == len(skips)
    assert kinds["fresh"] > 500 and kinds["skip"] > 500 and kinds["memo"] > 3000, kinds
    cap = ratio_fraction(BUDGET)
    real = [r for r, _ in fresh]
    for i, r in enumerate(real):  # draws in (r - W, r]: the most any window of W holds ending at a draw
        n = sum(1 for x in real[max(0, i - 10):i + 1] if r - W < x)
        assert RA ** n <= cap, (i, n)
    board = [m for _, m in fresh]
    for i, m in enumerate(board):  # the board's own view: fewer than 3 before each draw
        assert sum(1 for x in board[:i] if m - W < x) < N
    for _, m in skips:  # ... and 3 at each skip
        assert sum(1 for x in board if m - W < x <= m) == N, m
    assert board == sorted(board)  # board time never runs back, resets included


@pytest.mark.parametrize("budget,why", [
    ("4/30", "config field device.budget must be an object"),
    ({"epsilon": 3.0, "ratio": BUDGET["ratio"]}, "device.budget.days must be a whole number of days, 1 to 10000"),
    (dict(BUDGET, days=0), "device.budget.days must be"),
    (dict(BUDGET, days=10001), "device.budget.days must be"),
    (dict(BUDGET, days=1.0), "device.budget.days must be"),
    (dict(BUDGET, days=True), "device.budget.days must be"),
    (dict(BUDGET, epsilon=None), "device.budget.epsilon \\(a positive number\\) needs device.budget.ratio"),
    (dict(BUDGET, epsilon="3"), "device.budget.epsilon \\(a positive number\\) needs device.budget.ratio"),
    (dict(BUDGET, ratio=20.08), "device.budget.epsilon \\(a positive number\\) needs device.budget.ratio"),
    (dict(BUDGET, ratio="20.0.8"), "device.budget.ratio must be a decimal number"),
    (dict(BUDGET, ratio="-20.08"), "device.budget.ratio must be a decimal number"),
    (dict(BUDGET, epsilon=3.1), "device.budget.ratio is not e\\^epsilon"),
    (dict(BUDGET, extra=1), "unknown field device.budget.extra"),
    (budget_section(0.9, 30), "device.budget.epsilon 0.9 is below one fresh report of this config"),
    (budget_section(200.0, 30), "device.budget.epsilon 200 allows more than 256 fresh reports of this config "
                                "\\(epsilon 0.5\\) in 30 days"),
])
def test_bad_budgets_are_refused_naming_the_field(budget, why):
    with pytest.raises(ValueError, match=why):
        settings.Settings(config(A if budget.get("epsilon") != 200.0 else B, budget=budget)
                          if isinstance(budget, dict) else config(budget=budget))


def test_a_budget_reads_exactly():
    s = settings.Settings(config())
    b = s.budget
    assert Fraction(b["num"], b["den"]) == ratio_fraction(BUDGET) and b["days"] == 1 and b["ms"] == W
    assert b["draws"] == N and W == DAY + DAY // 64
    assert settings.Settings(config(budget=None)).budget is None


# A board whose budget runs out: each tick is the next epoch (its clock starts 12 epochs in
# the past, inside the aggregator's window), a new value each epoch, memoize off: 3 fresh
# reports, then skipped epochs.
SKIPPER = r"""
import sys, time
from mss_node import app
t = [time.time() - 12 * 60]
v = [0]
def sleep(s):
    t[0] += 60
def sensor():
    v[0] += 1
    return v[0] % 8
app.run(sys.argv[1], sys.argv[2], sensor=sensor, clock=lambda: t[0], sleep=sleep, ticks=int(sys.argv[3]))
"""


def test_skipped_epochs_are_counted_once_per_link(tmp_path, mosquitto):
    """MQTT and serial boards with a spent budget say each skipped epoch (retained status
    skipped-<epoch>, a $MSS2,<id>,!skipped-<epoch> line); the aggregator counts each (device,
    epoch) once per link: not again when an aggregator restart gets the retained status
    again, nor for a repeated line; /api/counters and /metrics show the counts."""
    from ptys import board_links, socat_pair

    from collect_helpers import build_aggregator
    from mss_aggregator.devices.runtime import ensure_umqtt
    from mss_aggregator.web.live import LiveView
    from mss_aggregator.web.server import MetricsCollector
    from mss_device.framing import status_line

    ensure_umqtt()
    socat, dev_tty, host_tty = socat_pair(tmp_path)
    boards = {}
    for name, link in board_links(mosquitto.port, dev_tty).items():
        folder = tmp_path / name
        folder.mkdir()
        write(folder, device_id=f"dev-{name}", campaign="t", period_s=60, poll_s=1, **link)
        boards[name] = folder
    agg_cfg = dict(A.to_dict(), device={"period_s": 60})
    (tmp_path / "agg.json").write_text(json.dumps(agg_cfg))
    lines = []

    def aggregator():
        return build_aggregator(tmp_path / "agg.json", tmp_path / "agg.sqlite", "t",
                                f"mqtt://127.0.0.1:{mosquitto.port}", serial_ports=[f"{host_tty},115200"],
                                client_id="agg-skip", log=lines.append).start()

    def wait(agg, want):
        deadline = time.time() + 10
        while agg.store.skipped_epochs() != want and time.time() < deadline:
            time.sleep(0.1)
        return agg.store.skipped_epochs()

    agg = aggregator()
    try:
        assert agg.wait_connected(15)
        time.sleep(0.3)
        for name, folder in boards.items():
            out = run(SKIPPER, cwd=folder, args=["config.json", "state.json", "6"], timeout=60)
            assert out.returncode == 0, out.stdout + out.stderr
            assert out.stdout.count("budget spent (epsilon 3 per 1 days): skipped epoch") == 3, out.stdout
            last = out.stdout.split("skipped epoch ")[-1].split(";")[0]
        want = {"mqtt": 3, "serial": 3, "lorawan": 0}
        assert wait(agg, want) == want, lines
        assert agg.store.counters()["accepted"] == 6  # 3 reports a board; statuses are not received reports
        with open(dev_tty, "w") as fh:  # a repeated line: the same (device, epoch)
            fh.write(status_line("dev-serial", "skipped-" + last))
        time.sleep(0.5)
    finally:
        agg.stop()
    agg = aggregator()  # a restart: the broker delivers the retained status again
    try:
        assert agg.wait_connected(15)
        time.sleep(1.0)
        assert agg.store.skipped_epochs() == want
    finally:
        agg.stop()
        socat.terminate()
    view = LiveView(tmp_path / "agg.sqlite")
    try:
        assert view.counters()["skipped_epochs"] == want
        fam = {f.name: f for f in MetricsCollector(view).collect()}["mss_skipped_epochs"]
        assert {s.labels["link"]: s.value for s in fam.samples if s.name.endswith("_total")} == want
    finally:
        view.close()


def test_lorawan_skip_uplinks_are_counted_once(tmp_path):
    """A LoRaWAN board says a skipped epoch with one byte, 01, on time_fport (a time probe is
    00): copies from two gateways count once (the epoch of the network's receive time), a
    probe stays a probe, an old event outside the window counts nothing; not received reports."""
    from mss_aggregator.collect.ingest import Ingest
    from mss_aggregator.collect.lorawan import parse_spec
    from mss_aggregator.collect.store import open_store
    from mss_aggregator.devices.network_server import chirpstack_uplink

    dev, now = "70b3d57ed0050001", time.time()
    ingest = Ingest(A, "t", PERIOD, lorawan=parse_spec("chirpstack:app"), ports=(1, 3))

    def up(fcnt, payload, t, gateway=0):
        topic, doc = chirpstack_uplink("app", dev, 3, fcnt, payload, t, gateway)
        return ingest.from_lorawan(topic.encode(), json.dumps(doc).encode(), source="lorawan")

    items = [up(7, b"\x01", now), up(7, b"\x01", now + 0.1, gateway=1), up(8, b"\x00", now),
             up(9, b"\x01", now - 40 * PERIOD)]
    store = open_store(tmp_path / "s.sqlite", A)
    try:
        assert store.write_batch(items) == ["skipped", "duplicate", "time_probes", "ignored"]
        assert store.skipped_epochs() == {"mqtt": 0, "serial": 0, "lorawan": 1}
        c = store.counters()
        assert c["received"] == 1 and c["time_probes"] == 1 and c["accepted"] == 0
    finally:
        store.close()


def test_the_lorawan_link_says_a_skip_in_one_byte_on_time_fport():
    """LorawanLink.status: ``skipped...`` is one uplink of the byte 01 on time_fport, not
    retried when refused; other words send nothing."""
    from mss_node.lorawan_link import LorawanLink
    from mss_node.modem import SENT

    sent = []

    class Modem:
        answer = SENT

        def send(self, port, data, ms):
            sent.append((port, data))
            return self.answer, "sent", None

    link = LorawanLink.__new__(LorawanLink)
    link.cfg = {"time_fport": 3, "tx_timeout_s": 1, "retry_s": 1, "backoff_max_s": 2}
    link.modem, link.joined, link.next_try, link.asleep, link.clock = Modem(), True, 0, False, lambda: 0
    link.backoff = 1
    link.rng = type("R", (), {"below": staticmethod(lambda n: 0)})()
    link.status("online")
    link.status("skipped-12")
    link.status("skipped")  # a clockless board's
    assert sent == [(3, "01"), (3, "01")]
    Modem.answer = "busy"
    link.status("skipped-13")
    assert sent[-1] == (3, "01") and link.next_try > 0  # refused: backs off, not queued


def test_check_only_shows_the_budget(tmp_path):
    """mss device-sim --check-only (the board's loader under MicroPython) says what the budget
    allows, or the board's refusal naming the field."""
    from collect_helpers import mss

    path = tmp_path / "config.json"
    path.write_text(json.dumps(config()))
    cmd = ["device-sim", "--check-only", "--config", path]
    out = mss(*cmd)
    assert out.returncode == 0 and "budget epsilon 3 per 1 days (3 fresh draws of this config a window)" in \
        out.stdout, out.stdout + out.stderr
    path.write_text(json.dumps(config(budget=budget_section(0.9, 1))))
    out = mss(*cmd)
    assert out.returncode == 1 and "device.budget.epsilon 0.9 is below one fresh report" in out.stderr


@pytest.mark.parametrize("woke", [True, False], ids=["timer-wake", "other-reset"])
def test_a_deep_sleep_counts_only_when_its_timer_ended_it(tmp_path, monkeypatch, woke):
    """A deep sleep's time (nap, written just before it) is added to board time at the next
    boot only when the port says its timer woke the board; either way it is used once."""
    from mss_node import uptime
    from mss_node.app import Node

    monkeypatch.setattr(uptime, "ticks_ms", lambda: 777)
    monkeypatch.setattr(uptime, "timer_woke", lambda: woke)
    write(tmp_path, serial={"path": str(tmp_path / "out")})
    (tmp_path / "state.json").write_text(json.dumps({"spent": [[3, 1, 100]], "bt": 1000, "nap": 5000}))
    node = Node(str(tmp_path / "config.json"), str(tmp_path / "state.json"), lambda: 1, clock=lambda: 1704067200)
    saved = json.loads((tmp_path / "state.json").read_text())
    assert node.ledger.now() == (6000 if woke else 1000) and saved["nap"] == 0 and saved["bt"] == node.ledger.now()
    again = Node(str(tmp_path / "config.json"), str(tmp_path / "state.json"), lambda: 1, clock=lambda: 1704067200)
    assert again.ledger.now() == saved["bt"]  # a reset after that boot credits nothing more


def test_a_board_with_a_budget_writes_its_nap_before_a_deep_sleep(tmp_path, monkeypatch):
    """device.sleep deep with a budget (full frames, no pace): the sleep's length is written
    (nap) just before machine.deepsleep, so that the ledger can credit it; on a port that cannot
    tell a timer wake (no DEEPSLEEP_RESET) the board sleeps light instead."""
    import sys
    import types

    from mss_node.app import Node
    from mss_node.power import Rest
    from mss_node.wallclock import CLOCK_SANE, UNIX_OFFSET

    calls = []
    fake = types.SimpleNamespace(lightsleep=lambda ms: calls.append(("light", ms)),
                                 deepsleep=lambda ms: calls.append(("deep", ms)), DEEPSLEEP_RESET=4)
    monkeypatch.setitem(sys.modules, "machine", fake)
    write(tmp_path, sleep="deep", serial={"path": str(tmp_path / "out")})
    node = Node(str(tmp_path / "config.json"), str(tmp_path / "state.json"), lambda: 1, clock=lambda: 1704067200)
    Rest(node, lambda: None, lambda s: None, UNIX_OFFSET, CLOCK_SANE)(60000)
    assert calls == [("deep", 60000)] and json.loads((tmp_path / "state.json").read_text())["nap"] == 60000
    del fake.DEEPSLEEP_RESET
    Rest(node, lambda: None, lambda s: None, UNIX_OFFSET, CLOCK_SANE)(60000)
    assert calls[-1] == ("light", 60000)


# The ledger's second copy (issue 44, item 6; SPEC.md section 10, "The second copy"): a budget
# spent in three epochs of three values, state.json deleted (or the copy damaged first), a reboot.
SPEND_VALUES = r"""
b = Board()
W = int(sys.argv[3])
res = []
for i in range(3):
    res.append([b.ms(), b.epoch(i)])
    b.run(1000)
res.append([b.ms(), b.epoch(3)])  # spent: a fourth value is skipped
"""

DELETED = SPEND_VALUES + r"""
import os
os.remove("state.json")  # what `mpremote rm :state.json` does
b.off(60000, 4242)
res.append([b.ms(), b.epoch(0)])  # its memo went with state.json: no fresh draw either
res.append([b.ms(), b.epoch(1)])
""" + EDGE


@pytest.mark.parametrize("memoize", [False, True], ids=["fresh-each-epoch", "memoize"])
def test_deleting_the_state_file_refunds_nothing(tmp_path, memoize):
    """A board spends its budget (3 fresh draws), state.json is deleted, the board reboots: the
    ledger comes back from its second copy (ledger.json), so no fresh draw until the first one
    leaves the window, W of board time after it (board time resumed from the copy: 2000)."""
    write(tmp_path, memoize=memoize)
    res, _ = scenario(tmp_path, DELETED.replace("sys.argv[3]", str(W)))
    assert res == [[0, "fresh"], [1000, "fresh"], [2000, "fresh"], [3000, "skip"],
                   [2000, "skip"], [2000, "skip"], [W - 1, "skip"], [W, "fresh"]]
    assert (tmp_path / "ledger.json").exists()


DAMAGED = SPEND_VALUES + r"""
line = files.load("ledger.json")
digest, _, text = line.partition(" ")
mode = sys.argv[4]
if mode == "torn":
    open("ledger.json", "w").write(json.dumps(line)[:40])
elif mode == "edited":  # the draws removed, the digest left: found
    files.save("ledger.json", digest + " " + text.split(";")[0])
else:  # a digest that matches a ledger that is no ledger (ratio below 1)
    from mss_node.ledger_copy import encode
    files.save("ledger.json", encode([[1, 2, 0]], 5))
b.off(1000, 77)
res.append([b.ms(), b.epoch(0)])  # state.json's ledger holds
from mss_node.ledger_copy import decode
res.append(decode(files.load("ledger.json"))[0] == decode(line)[0])  # ... and is copied again
import os
os.remove("state.json")
b.off(1000, 78)
res.append([b.ms(), b.epoch(1)])
""" + EDGE


@pytest.mark.parametrize("mode", ["torn", "edited", "invalid"])
def test_a_damaged_second_copy_is_ignored_and_rewritten(tmp_path, mode):
    """A second copy that is torn, edited (its digest no longer matches) or no ledger is
    ignored, never trusted to refund: state.json's ledger holds, the copy is written again
    from it at that boot, and a later deletion of state.json still refunds nothing."""
    write(tmp_path)
    res, log = scenario(tmp_path, DAMAGED.replace("sys.argv[3]", str(W)).replace("sys.argv[4]", repr(mode)))
    assert res == [[0, "fresh"], [1000, "fresh"], [2000, "fresh"], [3000, "skip"], [3000, "skip"], True,
                   [3000, "skip"], [W - 1, "skip"], [W, "fresh"]]
    assert ("second copy (ledger.json) is corrupt: ignored" in log) == (mode != "torn")  # torn JSON: no file


NVS = r"""
class NVS:  # esp32.NVS as the port has it: one namespace, blobs and i32s, OSError when absent
    store = {}

    def __init__(self, ns):
        self.ns = ns

    def set_blob(self, k, v):
        NVS.store[(self.ns, k)] = bytes(v)

    def set_i32(self, k, v):
        NVS.store[(self.ns, k)] = v

    def get_i32(self, k):
        if (self.ns, k) not in NVS.store:
            raise OSError(-4354)
        return NVS.store[(self.ns, k)]

    def get_blob(self, k, buf):
        v = NVS.store.get((self.ns, k))
        if v is None or len(v) > len(buf):
            raise OSError(-4354)
        buf[:len(v)] = v
        return len(v)

    def commit(self):
        pass


class esp32:
    pass


esp32.NVS = NVS
sys.modules["esp32"] = esp32
""" + SPEND_VALUES + r"""
import os
res.append(sorted(k for _, k in NVS.store))
os.remove("state.json")
b.off(0, 5)
res.append([b.ms(), b.epoch(0)])
NVS.store[("mss", "ledger_n")] = 10  # a damaged copy: ignored, state.json's ledger holds, copied again
b.off(0, 6)
res.append([b.ms(), b.epoch(0)])
os.remove("state.json")
b.off(0, 7)
res.append([b.ms(), b.epoch(0)])
print(json.dumps([res, [x for x in os.listdir() if x.startswith("ledger")]]))
"""


def test_on_an_esp32_the_copy_is_in_nvs(tmp_path):
    """With esp32.NVS (emulated) the copy goes to NVS namespace mss, no file: a deleted
    state.json refunds nothing; a damaged NVS copy is ignored (state.json's ledger holds) and
    written again, so a later deletion refunds nothing either."""
    write(tmp_path)
    (res, files), _ = scenario(tmp_path, NVS.replace("sys.argv[3]", str(W)))
    assert res == [[0, "fresh"], [1000, "fresh"], [2000, "fresh"], [3000, "skip"], ["ledger", "ledger_n"],
                   [2000, "skip"], [2000, "skip"], [2000, "skip"]]
    assert files == []
