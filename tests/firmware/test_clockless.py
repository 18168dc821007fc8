"""Clockless LoRaWAN boards (issue 24 item 1; SPEC.md section 11, "No clock").

The firmware runs under MicroPython on an emulated modem (a real pty), each
board's clock reading 2000-01-01 at every boot, with 2-second epochs.  A
session is a row of boots of one board: machine.reset-like restarts, watchdog
resets (SIGKILL) and power cycles (SIGKILL and the modem loses its session)
at random moments (seeded), one of them during an uplink (after the modem
took it, before its answer) and one while state.json is written (the temp
file half written, or the old file removed and the new one not yet renamed).
Every arrival is counted by its epoch at the emulated network server (the
modem's receive time, as ChirpStack dates compact frames).  All sessions run
at once (threads, one MicroPython process at a time each), ~20 s in all.
"""
import json
import os
import random
import signal
import subprocess
import threading
import time

import pytest

from brokers import mosquitto  # noqa: F401 (fixture)
from micropython_runner import command, run
from mss_aggregator.devices.modem import DIALECTS, emulator
from mss_aggregator.devices.modem.base import DELAYS_S
from mss_protocol.choose import Limits, choose
from mss_protocol.configs import load_dict

P = 2  # s: period_s, one epoch
MARGIN_MS = 200  # device.lorawan.pace_margin_ms: uplinks at least 2.2 s apart without a clock
TIME_FPORT = 3  # device.lorawan.time_fport (its default)
STARTUP_S = 0.8  # MicroPython start, state load, join or NJS check: before a boot's first uplink can leave
EUI = "70b3d57ed00000c"

# The board: its clock reads 2000-01-01 at boot and runs in real time; prints every
# persisted queueing (QUEUED seq hex), every sent() (SENT hex), every uplink the link
# reports sent (UP board-clock clocked hex); plan["exit_at"]: a machine.reset()-like stop
# at that many seconds after the boot; plan["cut_save"] = [n, mode]: the n-th write of
# state.json is torn (mode "tmp": the temp file half written; "remove": the old file
# removed, the complete temp file not renamed) and the board dies there.
NODE = r"""
import json, sys, time
from mss_node import app, files, lorawan_link
from mss_node.state import State
plan = json.loads(sys.argv[3])
boot = time.time()
print("BOOT")
def clock():
    return 946684800 + (time.time() - boot)
def sleep(s):
    left = plan.get("exit_at", 1e9) - (time.time() - boot)
    if left <= s:
        time.sleep(max(0, left))
        print("RESET")
        raise SystemExit(0)
    time.sleep(s)
saves = [0]
save = files.save
def torn(path, obj):
    if path.endswith("state.json"):
        saves[0] += 1
        if plan.get("cut_save") and saves[0] == plan["cut_save"][0]:
            text, tmp = json.dumps(obj), path + ".tmp"
            with open(tmp, "w") as fh:
                fh.write(text if plan["cut_save"][1] == "remove" else text[:len(text) // 2])
            if plan["cut_save"][1] == "remove":
                try:
                    import os
                    os.remove(path)
                except OSError:
                    pass
            print("CUT %s" % plan["cut_save"][1])
            raise SystemExit(3)
    save(path, obj)
files.save = torn
add = State.add
def traced_add(self, cid, epoch, report, *more):
    seq = self.seq
    add(self, cid, epoch, report, *more)
    print("QUEUED %d %s" % (seq, report.hex()))
State.add = traced_add
sent = State.sent
def traced_sent(self, *a):
    h = self.queue[0]
    sent(self, *a)
    print("SENT %s" % h)
State.sent = traced_sent
send = lorawan_link.LorawanLink.send
def traced_send(self, report):
    ok = send(self, report)
    if ok:
        print("UP %.3f %d %s" % (self.clock(), self.clock.ok(), report.hex()))
    return ok
lorawan_link.LorawanLink.send = traced_send
app.run(sys.argv[1], sys.argv[2], sensor=lambda: 5, clock=clock, sleep=sleep)
"""


def compact_config():
    return load_dict(choose(16, 2.0, "auto", limits=Limits(frame="compact", max_bytes=11))["config"])


def epoch_of(t):
    return int(t // P)  # epoch_origin 0, as the aggregator's campaign clock


class Session(threading.Thread):
    """One board through ``boots``: dicts with ``kind`` (reset, watchdog, power, last), ``at``
    (s after the boot: the stop), ``mid_uplink`` (the watchdog fires as the modem takes an
    uplink), ``kill_after`` ([n, s]: killed s after the boot's n-th report arrived) or
    ``cut_save`` ([n, mode]), ``net_offset`` (s: the network's DeviceTimeAns that far off the
    true time) and ``off`` (s before the next boot); ``device``: more of the device section."""

    def __init__(self, folder, dialect, boots, device=None, **modem):
        super().__init__(daemon=True)
        self.folder, self.dialect, self.boots = folder, dialect, boots
        self.modem = emulator(dialect, EUI + str(DIALECTS.index(dialect)), delays_s=(DELAYS_S[0], 0.15))  # a slow send
        for k, v in modem.items():
            setattr(self.modem, k, v)
        self.modem.on_uplink = self._uplink
        self.arrivals = []  # (receive time, data) of reports at the network server
        self.probes = []  # receive times of time probes (device.lorawan.time_fport)
        self.runs = []  # per boot: (start, end, stdout lines, kind)
        self.proc = None
        self.kill_on_uplink = False
        self.kill_after, self.runs_start = None, 0  # [n, s]: killed s after the boot's n-th report arrived
        self.error = None
        folder.mkdir(exist_ok=True)
        d = compact_config().to_dict()
        d["device"] = {"campaign": "t", "period_s": P, "poll_s": 1, "transport": "lorawan",
                       "lorawan": {"modem": dialect.replace("-old", ""), "path": self.modem.path, "retry_s": 1,
                                   "backoff_max_s": 2, "join_timeout_s": 2, "tx_timeout_s": 1,
                                   "pace_margin_ms": MARGIN_MS}}
        d["device"].update(device or {})
        (folder / "config.json").write_text(json.dumps(d))

    def _uplink(self, modem, fport, fcnt, data):
        if fport == TIME_FPORT:  # a time probe (no report): the aggregator counts it apart
            self.probes.append(time.time())
            return
        self.arrivals.append((time.time(), data))
        if self.kill_after and sum(t >= self.runs_start for t, _ in self.arrivals) == self.kill_after[0]:
            threading.Timer(self.kill_after[1], self.proc.send_signal, [signal.SIGKILL]).start()
        if self.kill_on_uplink and self.proc is not None:
            self.kill_on_uplink = False
            self.proc.send_signal(signal.SIGKILL)  # the watchdog fires while the modem has the uplink

    def run(self):
        self.modem.start()
        try:
            for b in self.boots:
                plan = {}
                if b["kind"] in ("reset", "last"):
                    plan["exit_at"] = b["at"]
                if b.get("cut_save"):
                    plan["cut_save"] = b["cut_save"]
                argv, env = command(NODE, ["config.json", "state.json", json.dumps(plan)])
                self.kill_on_uplink = bool(b.get("mid_uplink"))
                self.modem.net_offset = b.get("net_offset", 0)  # a forged network time: this many s off
                start = self.runs_start = time.time()
                self.kill_after = b.get("kill_after")
                self.proc = subprocess.Popen(argv, env=env, cwd=self.folder, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, text=True)
                timed = b["kind"] in ("watchdog", "power") and not (b.get("mid_uplink") or b.get("cut_save")
                                                                     or b.get("kill_after"))
                try:
                    out, _ = self.proc.communicate(timeout=b["at"] + (0 if timed else 2))
                except subprocess.TimeoutExpired:  # a watchdog reset or a power cut at a random moment
                    self.proc.send_signal(signal.SIGKILL)
                    out, _ = self.proc.communicate()
                end = time.time()
                if b["kind"] == "power":
                    self.modem.power_off()
                self.runs.append((start, end, out.splitlines(), b["kind"]))
                time.sleep(b.get("off", 0))
        except Exception as exc:  # reported by the test
            self.error = exc
        finally:
            self.modem.stop()

    # -- what the test checks ----------------------------------------------
    def lines(self, prefix):
        return [line.split()[1:] for _, _, out, _ in self.runs for line in out if line.startswith(prefix)]

    def log(self):
        return "\n".join(line for _, _, out, _ in self.runs for line in out)

    def per_epoch(self):
        counts = {}
        for t, _ in self.arrivals:
            counts[epoch_of(t)] = counts.get(epoch_of(t), 0) + 1
        return counts


def reset_boots(rng):
    """A machine.reset(), a watchdog reset, a watchdog reset during an uplink, a power cut
    during a state.json write, a power cycle, each at a random moment, in a random order;
    then a last boot that runs 4.5 s."""
    boots = [{"kind": "reset", "at": rng.uniform(0.5, 3.5)},
             {"kind": "watchdog", "at": rng.uniform(0.5, 3.5)},
             {"kind": "watchdog", "at": 6, "mid_uplink": True},
             {"kind": "power", "at": 6, "cut_save": [rng.randint(1, 4), rng.choice(["tmp", "remove"])]},
             {"kind": "power", "at": rng.uniform(0.5, 3.5)}]
    rng.shuffle(boots)
    boots.append({"kind": "last", "at": 4.5})
    for b in boots:
        b["off"] = rng.uniform(0.1, 1.0)
    return boots


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """Every session of this module, run at once."""
    base = tmp_path_factory.mktemp("clockless")
    rng = random.Random(24)
    made = {}
    for dialect in DIALECTS:  # the network does not answer DeviceTimeReq: clockless all along
        made[("resets", dialect)] = Session(base / f"resets-{dialect}", dialect, reset_boots(rng),
                                            time_reply="none")
    for dialect in ("rak3172", "rak3172-old", "wio-e5"):  # the network answers
        boots = [{"kind": "watchdog", "at": rng.uniform(6.5, 7.5), "off": 0.5}, {"kind": "last", "at": 8}]
        made[("time", dialect)] = Session(base / f"time-{dialect}", dialect, boots,
                                          timereq_after_done=dialect == "rak3172-old")
    for dialect in ("rak3172", "wio-e5"):  # it answers, and the modem's read-back is unreadable
        made[("garbage", dialect)] = Session(base / f"garbage-{dialect}", dialect, [{"kind": "last", "at": 7}],
                                             time_reply="garbage")
    return run_sessions(made)


def run_sessions(made):
    """Start every session of ``made`` ({key: Session}) at once, wait for all, check none failed."""
    for s in made.values():
        s.start()
    for s in made.values():
        s.join(60)
    for key, s in made.items():
        assert s.error is None, f"{key}: {s.error!r}"
    return made


def check_once_per_epoch(s):
    counts = s.per_epoch()
    doubled = {e: n for e, n in counts.items() if n > 1}
    assert not doubled, f"{s.dialect}: epochs with more than one report {doubled}\n{s.log()}"


def check_none_lost(s):
    """Every report queued in flash (QUEUED) was sent (SENT, in the order queued) and went on air."""
    queued = [h for _, h in s.lines("QUEUED ")]
    sent = [h for h, in s.lines("SENT ")]
    on_air = [d.hex() for _, d in s.arrivals]
    final = json.loads((s.folder / "state.json").read_text())
    assert sent == queued[:len(sent)] and queued[len(sent):] == final["queue"][:len(queued) - len(sent)], s.log()
    assert len(final["queue"]) <= 1 and final["dropped"] == 0
    assert all(h in on_air for h in sent)
    assert len(queued) <= final["seq"] <= len(queued) + len(s.runs)  # a kill between the write and its print
    return queued, final


@pytest.mark.parametrize("dialect", DIALECTS)
def test_clockless_board_reports_once_per_epoch_across_resets(sessions, dialect):
    s = sessions[("resets", dialect)]
    check_once_per_epoch(s)
    queued, final = check_none_lost(s)
    log = s.log()
    assert "no clock: compact reports paced, 2200 ms apart at least" in log
    assert all(c == "0" for _, c, _ in s.lines("UP ")), "the clock was never set"
    kinds = [k for _, _, _, k in s.runs]
    assert kinds.count("power") == 2 and kinds.count("watchdog") == 2 and kinds.count("reset") == 1
    assert "CUT " in log, "a state.json write was torn"
    assert s.modem.joins >= 3, "each power cycle cost a rejoin"
    # every boot that lived long enough sent its first report within one pace of its start
    for start, end, out, kind in s.runs:
        if end - start > P + MARGIN_MS / 1000 + STARTUP_S:
            first = min((t for t, _ in s.arrivals if t >= start), default=None)
            assert first is not None and first - start <= P + MARGIN_MS / 1000 + STARTUP_S, (kind, out)
    # consecutive arrivals at least a period apart (the pace never counts the time off)
    times = sorted(t for t, _ in s.arrivals)
    assert min(b - a for a, b in zip(times, times[1:])) >= P - 0.05
    span = times[-1] - times[0]
    assert len(times) >= span / (P + MARGIN_MS / 1000 + STARTUP_S) * 0.6, (len(times), span)
    if dialect == "rn2483":
        assert "rn2483 modems give no network time (no DeviceTimeReq)" in log
    else:  # asked once a boot (the first uplink), never answered
        assert "no network time (" in log
        assert 1 <= s.modem.time_requests <= len(s.runs)


def test_a_mid_uplink_reset_resends_the_report_a_period_later(sessions):
    """The watchdog fires as the modem takes the uplink: the board never learns it left, so it
    counts it as sent for the pace and sends it again (it stays queued), a pace after the first
    attempt at the earliest: in another epoch, never lost."""
    for dialect in DIALECTS:
        s = sessions[("resets", dialect)]
        mid = next(i for i, b in enumerate(s.boots) if b.get("mid_uplink"))
        start, end, out, _ = s.runs[mid]
        killed = [(t, d) for t, d in s.arrivals if start <= t <= end]
        assert killed, f"{dialect}: the boot was killed before its uplink\n{out}"
        t0, data = killed[-1]
        again = [t for t, d in s.arrivals if t > end and d == data]
        assert again and again[0] - t0 >= P, dialect
        assert epoch_of(again[0]) != epoch_of(t0)


def test_network_time_sets_the_clock_then_the_board_reports_by_clock_epochs(sessions):
    for dialect in ("rak3172", "rak3172-old", "wio-e5"):
        s = sessions[("time", dialect)]
        check_once_per_epoch(s)
        check_none_lost(s)
        log = s.log()
        # the first boot's time probe (on time_fport, right after the join) sets the clock; after
        # the watchdog reset the modem (still powered) keeps the network's time: read at boot
        assert log.count("lorawan: clock set from the network (DeviceTimeAns)") == 1, log
        assert log.count("lorawan: clock set from the modem's network time") == 1, log
        assert s.modem.time_requests == 1 and len(s.probes) == 1
        for start, end, out, _ in s.runs:
            ups = [line.split()[1:] for line in out if line.startswith("UP ")]
            assert ups and all(c == "1" for _, c, _ in ups), "every report leaves with the clock set"
            arrived = [t for t, _ in s.arrivals if start <= t <= end]
            assert len(arrived) - len(ups) in (0, 1) and len(ups) >= 2  # 1: killed during an uplink
            for (clock, _, _), t in zip(ups, arrived):  # the clock as printed after the uplink's end
                assert -0.6 < t - float(clock) < 1.5, "the board's clock is the network's (RUI3: whole seconds)"
            # a clocked board: one uplink in each epoch of its clock, early in the epoch
            assert [epoch_of(t) for t in arrived] == list(range(epoch_of(arrived[0]),
                                                                epoch_of(arrived[0]) + len(arrived)))
            assert all(0 <= t - epoch_of(t) * P < 1.5 for t in arrived[1:]), [t - epoch_of(t) * P for t in arrived]
        assert epoch_of(s.arrivals[0][0]) - epoch_of(s.probes[0]) <= 1


def test_an_unreadable_time_reply_leaves_the_board_clockless_and_logged(sessions):
    for dialect in ("rak3172", "wio-e5"):
        s = sessions[("garbage", dialect)]
        check_once_per_epoch(s)
        check_none_lost(s)
        log = s.log()
        assert "lorawan: no network time (unreadable" in log and "no clock: reports stay paced" in log
        ups = s.lines("UP ")
        assert len(ups) >= 3 and all(c == "0" for _, c, _ in ups)
        assert s.modem.time_requests == 1  # asked again an hour later, not with every uplink



# MicroPython's own file systems on a RAM block device that stops writing at a chosen block
# write (a power cut): state.json written three times (A, then B and C, each cut at every
# possible block write n1, n2 in turn), then read back after the power returns.
TORN = r"""
import json, os
from mss_node import files

class Ram:
    def __init__(self, blocks, size=512):
        self.size, self.data, self.left = size, bytearray(blocks * size), -1
    def readblocks(self, n, buf, off=0):  # no allocation: the VFS may call it with the heap locked
        a, d = n * self.size + off, self.data
        for i in range(len(buf)):
            buf[i] = d[a + i]
    def writeblocks(self, n, buf, off=None):
        if self.left == 0:
            raise OSError(5)  # the power is gone: nothing more reaches the flash
        self.left -= self.left > 0
        a, d = n * self.size + (off or 0), self.data
        for i in range(len(buf)):
            d[a + i] = buf[i]
    def ioctl(self, op, arg):
        if op == 4:
            return len(self.data) // self.size
        if op == 5:
            return self.size
        if op == 6 and self.left == 0:
            raise OSError(5)
        return 0

VALUES = [{"queue": [c * 40] * 6, "seq": i} for i, c in enumerate("abc")]
for name, Vfs, blocks in (("littlefs", os.VfsLfs2, 128), ("fat", os.VfsFat, 256)):
    cases, bad, n1, more1 = 0, [], 0, True
    while more1:
        n2, more2 = 0, True
        while more2:
            dev = Ram(blocks)
            Vfs.mkfs(dev)
            os.mount(Vfs(dev), "/m")
            files.save("/m/state.json", VALUES[0])
            cut = []
            for value, n in ((VALUES[1], n1), (VALUES[2], n2)):
                dev.left = n
                try:
                    files.save("/m/state.json", value)
                    cut.append(False)
                except OSError:
                    cut.append(True)
                os.umount("/m")
                dev.left = -1
                os.mount(Vfs(dev), "/m")  # the power is back
            got = files.load("/m/state.json", None)
            os.umount("/m")
            cases += 1
            if got not in VALUES:
                bad.append([n1, n2])
            more1, more2 = cut[0], cut[1]
            n2 += 1
        n1 += 1
    print("FS %s %d %s" % (name, cases, json.dumps(bad)))
"""


def test_state_json_survives_power_cuts_on_littlefs_and_fat(tmp_path):
    """Every power cut during one save, or during two in a row, leaves state.json whole: the
    old state or the new one, never none.  (Before files.save renamed a left-over temp file
    into place, a cut between remove and rename followed by a cut while the next temp file was
    written lost the state on FAT: 8 of 63 cut pairs.)"""
    out = run(TORN, cwd=tmp_path)
    assert out.returncode == 0 and not out.stderr, out.stdout + out.stderr
    found = {f[1]: (int(f[2]), json.loads(f[3])) for f in (line.split(" ", 3) for line in out.stdout.splitlines())
             if f[0] == "FS"}
    assert set(found) == {"littlefs", "fat"}
    for name, (cases, bad) in found.items():
        assert cases >= 40 and bad == [], (name, cases, bad)


# A full-frame board (MQTT, serial) whose clock never gets set: 150 ticks of an unset
# clock (sleep moves it), then, with argv[4] "set", 3 ticks of the real clock.
NO_TIME = r"""
import sys, time
from mss_node import app
t = [946684800]
def clock():
    return time.time() if sys.argv[4] == "set" else t[0]
def sleep(s):
    t[0] += s
app.run(sys.argv[1], sys.argv[2], sensor=lambda: 3, clock=clock, sleep=sleep, ticks=int(sys.argv[3]))
"""


def test_full_frame_boards_without_time_say_so_on_the_board_and_in_link_health(tmp_path, mosquitto):
    """MQTT and serial boards keep NTP: without a clock they send no report, log it once a
    minute (3 lines in 150 s, not 150), and say it to the aggregator (retained status
    no-clock; a $MSS2,<id>,!no-clock line), whose link health (/api no_clock, the live table)
    lists them until they report."""
    from ptys import board_links, socat_pair

    from collect_helpers import build_aggregator
    from mss_cli.common import counters_table
    from mss_aggregator.devices.runtime import ensure_umqtt
    from mss_protocol.mss.config import MssConfig
    from mss_protocol.mss.planner import plan

    ensure_umqtt()
    cfg = MssConfig.from_dict(plan(64, 2.0)["config"])
    socat, dev_tty, host_tty = socat_pair(tmp_path)
    boards = {}
    for name, link in board_links(mosquitto.port, dev_tty).items():
        folder = tmp_path / name
        folder.mkdir()
        cfg.save(folder / "config.json", {"device": dict({"campaign": "t", "device_id": f"dev-{name}",
                                                          "period_s": 60, "poll_s": 1}, **link)})
        boards[name] = folder
    cfg.save(tmp_path / "agg.json", {"device": {"period_s": 60}})
    lines = []
    agg = build_aggregator(tmp_path / "agg.json", tmp_path / "agg.sqlite", "t", f"mqtt://127.0.0.1:{mosquitto.port}",
                           serial_ports=[f"{host_tty},115200"], client_id="agg-clock", log=lines.append).start()
    try:
        assert agg.wait_connected(15)
        time.sleep(0.3)
        for name, folder in boards.items():
            out = run(NO_TIME, cwd=folder, args=["config.json", "state.json", "150", "unset"], timeout=60)
            assert out.returncode == 0, out.stdout + out.stderr
            assert out.stdout.count("no clock (no NTP yet?): full frames need the time; not reporting") == 3, \
                out.stdout
            assert not (folder / "state.json").exists() or json.loads((folder / "state.json").read_text())["seq"] == 0
        deadline = time.time() + 10
        while len(agg.no_clock()) < 2 and time.time() < deadline:
            time.sleep(0.1)
        seen = {d["device_id"]: d["source"] for d in agg.no_clock()}
        assert seen == {"dev-mqtt": "mqtt:agg-clock", "dev-serial": f"serial:{host_tty}"}, (seen, lines)
        assert "devices without a clock" in str(counters_table({}, "t", agg.no_clock()).columns[0]._cells)
        assert any("device dev-mqtt (mqtt:agg-clock) has no clock" in m for m in lines)
        for name, folder in boards.items():  # NTP, at last
            out = run(NO_TIME, cwd=folder, args=["config.json", "state.json", "2", "set"], timeout=60)
            assert out.returncode == 0 and "no clock" not in out.stdout, out.stdout + out.stderr
        deadline = time.time() + 10
        while agg.no_clock() and time.time() < deadline:
            time.sleep(0.1)
        assert agg.no_clock() == [], lines
        assert agg.store.counters()["accepted"] >= 2
    finally:
        agg.stop()
        socat.terminate()
