"""device.sleep light and deep (issue 24 item 2) under MicroPython with the modem emulator.

Each board is the real firmware (``mss_node.app.run``) on the unix port with
the emulated board's ``machine`` (``mss_aggregator/devices/emulated_board``):
its sleeps take no real time and move its clock ahead, so ten-minute periods
pass in a fraction of a second while everything the board does awake runs in
real time.  What is measured, per board:

* the MCU: awake = the real time its processes ran, asleep = the sleeps it
  logged (:func:`mss_aggregator.devices.runtime.board_times`);
* the modem (the emulator, on the board's clock): awake and asleep, the sleep
  commands it took, and its radio's TX and RX time (airtime on us915:0);
* the reports, counted where the network server sees them (each uplink dated
  by its arrival on the board's clock, as a compact frame is).

The emulated modem answers an uplink in 50 ms: the Class A receive windows
(RX2 ends about 2 s after the uplink at DR0), during which a real board waits
awake, are not in the measured MCU time (the energy model, ``mss plan
--link``, counts them); the modem's times are physical: its RX time and its
awake time hold each exchange's (uplink, RECEIVE_DELAY2, RX2; a join's at
JOIN_ACCEPT_DELAY1), :meth:`ModemEmulator.exchange_s`.
"""
import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from micropython_runner import FIRMWARE, command
from mss_aggregator.devices.modem import DIALECTS, SLEEP_COMMANDS, emulator
from brokers import mosquitto  # noqa: F401 (fixture)
from mss_aggregator.devices.runtime import BOARD, BoardClock, board_sleeps, board_times
from mss_protocol import energy, lorawan
from mss_protocol.choose import Limits, choose
from mss_protocol.configs import load_dict

PERIOD_S = 600  # ten minutes
EPOCHS = 4
MAX_AWAKE = 0.005  # the MCU is awake less than 0.5 % of the period
NODE = r"""
import sys, machine
from mss_node import app
app.run(sys.argv[1], sys.argv[2], sensor=lambda: 5, clock=machine.clock, ticks=int(sys.argv[3]))
"""


@pytest.fixture(scope="module")
def compact():
    return load_dict(choose(16, 2.0, "auto", limits=Limits(frame="compact", max_bytes=11))["config"])


class Board:
    """One emulated board with its modem (``dialect``, or none: ``device`` gives the
    transport), its folder and its log."""

    def __init__(self, folder, cfg, dialect, sleep, eui=1, **device):
        folder.mkdir()
        self.folder, self.dialect, self.sleep = folder, dialect, sleep
        self.log = folder / "board.log"
        self.clock = BoardClock(self.log)
        self.arrivals = []  # (board time, data) of every uplink the network server got
        d = cfg.to_dict()
        d["device"] = dict({"campaign": "t", "period_s": PERIOD_S, "poll_s": 1, "sleep": sleep}, **device)
        self.modem = None
        if dialect:
            self.modem = emulator(dialect, "70b3d57ed0%06x" % eui, clock=self.clock,
                                       on_uplink=self._uplink)
            # timeouts well above the emulator's 50 ms answers: with 2 s, a join answered late on a
            # loaded machine (the whole suite on 2 cores) left a board's first tick without an uplink
            d["device"].update(transport="lorawan", lorawan={
                "modem": dialect.replace("-old", ""), "path": self.modem.path, "retry_s": 1, "backoff_max_s": 2,
                "join_timeout_s": 10, "tx_timeout_s": 10})
        (folder / "config.json").write_text(json.dumps(d))
        self.awake_s = 0.0
        self.boots = 0
        self.script = NODE
        self.output = ""

    def _uplink(self, modem, fport, fcnt, data):
        if fport == 1:  # a report (device.lorawan.fport), not a probe for network time
            self.arrivals.append((self.clock(), data))

    def boot(self, ticks):
        """Run the firmware once (until its ticks end or it sleeps deep); the real time it ran."""
        argv, env = command(self.script, ["config.json", "state.json", str(ticks)],
                            micropythonpath=[BOARD, FIRMWARE / "lib"])
        env["MSS_BOARD_LOG"] = str(self.log)
        start = time.time()
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=self.folder, env=env)
        self.awake_s += time.time() - start
        self.boots += 1
        self.output += out.stdout + out.stderr
        assert out.returncode == 0, self.output

    def run(self, epochs=EPOCHS):
        if self.modem:
            self.modem.start()
        try:
            if self.sleep == "deep":  # a boot a period: each ends in machine.deepsleep
                while len(self.arrivals) < epochs and self.boots < 2 * epochs:
                    self.boot(epochs)
            else:
                self.boot(epochs)
        finally:
            if self.modem:
                self.modem.stop()
        return self

    def epochs(self):
        return [int(t) // PERIOD_S for t, _ in self.arrivals]

    def state(self):
        return json.loads((self.folder / "state.json").read_text())

    def mcu(self):
        return board_times(self.log, self.awake_s)


def run_all(boards):
    with ThreadPoolExecutor(len(boards)) as pool:
        return list(pool.map(Board.run, boards))


def radio_s(modem, frame_bytes):
    """(TX, RX) seconds the modem's radio should have been on: each join request (23 bytes)
    and uplink on air, then a join-accept (17 bytes) in RX1 or two empty receive windows."""
    link = lorawan.parse_link("lorawan:us915:0")
    sf, bw = energy.DOWNLINK_DRS["us915"][energy.RX1_DR["us915"][0]]
    tx = (modem.joins * lorawan.airtime_ms(23 - 13, link.sf, link.bw_khz)
          + len(modem.uplinks) * lorawan.airtime_ms(frame_bytes, link.sf, link.bw_khz)) / 1000
    rx = modem.joins * lorawan.airtime_ms(17 - 13, sf, bw) / 1000 + len(modem.uplinks) * sum(energy.rx_windows_s(link))
    return tx, rx


def radio_awake_s(modem, frame_bytes):
    """The least time the modem is awake: each join's and uplink's exchange (``exchange_s``), to
    the end of the join-accept or of RX2."""
    join = modem.exchange_s(23, 17, join=True)[2]
    up = modem.exchange_s(frame_bytes + lorawan.OVERHEAD_BYTES)[2]
    return modem.joins * join + len(modem.uplinks) * up


def check_modem_awake(m, least, why):
    """Awake at least its radio's exchanges (physical, not the emulator's 50 ms answers), and
    beyond them less than MAX_AWAKE of the time (the UART's commands)."""
    total = m["awake_s"] + m["asleep_s"]
    assert least - 1e-6 <= m["awake_s"] < least + MAX_AWAKE * total, (m, least, why)


@pytest.mark.parametrize("sleep", ["light", "deep"])
def test_sleeping_boards_are_mostly_asleep_and_report_once_an_epoch(tmp_path, compact, sleep):
    """Each dialect, EPOCHS ten-minute periods: the MCU awake less than MAX_AWAKE of the time,
    the modem its radio's exchanges and less than MAX_AWAKE beyond them (check_modem_awake),
    the modem's sleep command once between any two uplinks, and
    every epoch reported exactly once (with deep, across a restart every period)."""
    boards = run_all([Board(tmp_path / d, compact, d, sleep, eui=i) for i, d in enumerate(DIALECTS)])
    for b in boards:
        why = f"{b.dialect}, {sleep}: {b.output[-3000:]}"
        # one report an epoch, none lost, none twice, across the deep-sleep restarts
        epochs = b.epochs()
        assert epochs == list(range(epochs[0], epochs[0] + EPOCHS)), why
        st = b.state()
        assert st["queue"] == [] and st["seq"] == EPOCHS and len(b.modem.uplinks) == EPOCHS, why
        # the MCU: awake less than MAX_AWAKE of the time, a sleep a period
        mcu = b.mcu()
        assert mcu[sleep] == EPOCHS and mcu["watchdog"] == 0, (mcu, why)
        assert mcu["awake_fraction"] < MAX_AWAKE, (mcu, why)
        assert mcu["asleep_s"] > (EPOCHS - 1) * PERIOD_S, (mcu, why)
        if sleep == "deep":
            assert b.boots == EPOCHS and mcu["light"] == 0, why
        # the modem: its dialect's sleep command once between any two uplinks, awake little
        cmd = SLEEP_COMMANDS[b.dialect]
        assert sum(1 for c in b.modem.commands if c.startswith(cmd)) == EPOCHS, b.modem.commands
        sleeps, ups = [t for t, _ in b.modem.sleeps], [t for t, _ in b.arrivals]
        for t0, t1 in zip(ups, ups[1:]):
            assert sum(1 for t in sleeps if t0 < t < t1) == 1, (sleeps, ups, why)
        m = b.modem.stats()
        assert m["sleeps"] == EPOCHS, (m, why)
        check_modem_awake(m, radio_awake_s(b.modem, len(b.arrivals[0][1])), why)
        tx, rx = radio_s(b.modem, len(b.arrivals[0][1]))
        assert m["tx_s"] == pytest.approx(tx) and m["rx_s"] == pytest.approx(rx), (m, tx, rx)
        print(f"{b.dialect:12} {sleep}: MCU awake {mcu['awake_s']:.3f} s of {mcu['awake_s'] + mcu['asleep_s']:.0f} s "
              f"({mcu['awake_fraction']:.3%}); modem awake {m['awake_s']:.3f} s, asleep {m['asleep_s']:.0f} s, "
              f"TX {m['tx_s']:.3f} s, RX {m['rx_s']:.3f} s, {m['sleeps']} sleep commands, {b.modem.joins} joins")


# A clockless board (its clock reads 2000-01-01 at every boot): compact reports paced by
# mss_node.pace, whose ticks_ms runs on through a light sleep as a board's timer does
# (the emulated sleeps take no real time); a deep sleep restarts it.
NO_CLOCK = r"""
import sys, time, machine
from mss_node import app, pace
boot = machine.clock()
pace.ticks_ms = lambda: time.ticks_add(time.ticks_ms(), machine._slept[0])
app.run(sys.argv[1], sys.argv[2], sensor=lambda: 5, clock=lambda: 946684800 + machine.clock() - boot,
        ticks=int(sys.argv[3]))
"""
MARGIN_MS = 1000  # device.lorawan.pace_margin_ms: paced uplinks 601 s apart at least


def clockless(folder, compact, dialect, sleep, eui):
    b = Board(folder, compact, dialect, sleep, eui=eui)
    b.modem.time_reply = "none"  # no network time either (DeviceTimeReq unanswered)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["device"]["lorawan"]["pace_margin_ms"] = MARGIN_MS
    (folder / "config.json").write_text(json.dumps(cfg))
    b.script = NO_CLOCK
    return b


def check_paced(b, n, why):
    """n uplinks, one an arrival epoch, each a pace (period + margin) after the last: no
    sooner (none doubled), and no later than the board's awake time allows (none lost)."""
    ups = [t for t, _ in b.arrivals]
    assert len(ups) == n and len(set(b.epochs())) == n, (ups, why)
    for t0, t1 in zip(ups, ups[1:]):
        assert PERIOD_S + MARGIN_MS / 1000 <= t1 - t0 < PERIOD_S + MARGIN_MS / 1000 + 5, (ups, why)


@pytest.mark.parametrize("sleep", ["light", "deep"])
def test_clockless_boards_sleep_until_the_next_paced_report(tmp_path, compact, sleep):
    """No clock, device.sleep light or deep, EPOCHS ten-minute periods, two dialects: the board
    sleeps (MCU and modem) until its next paced uplink, one uplink an arrival epoch, none lost
    or doubled across the deep-sleep restarts (each credits its time asleep to the pace)."""
    boards = run_all([clockless(tmp_path / d, compact, d, sleep, i) for i, d in enumerate(("rak3172", "rn2483"))])
    for b in boards:
        why = f"{b.dialect}, {sleep}: {b.output[-3000:]}"
        check_paced(b, EPOCHS, why)
        assert "no clock: compact reports paced" in b.output, why
        st = b.state()
        assert st["queue"] == [] and st["seq"] == EPOCHS and (st["nap"] > 0) == (sleep == "deep"), why
        mcu = b.mcu()
        assert mcu[sleep] == EPOCHS and mcu["watchdog"] == 0 and mcu["awake_fraction"] < MAX_AWAKE, (mcu, why)
        if sleep == "deep":
            assert b.boots == EPOCHS and mcu["light"] == 0, why
        m = b.modem.stats()
        assert m["sleeps"] == EPOCHS, (m, why)
        check_modem_awake(m, radio_awake_s(b.modem, len(b.arrivals[0][1])), why)
        sleeps, ups = [t for t, _ in b.modem.sleeps], [t for t, _ in b.arrivals]
        for t0, t1 in zip(ups, ups[1:]):
            assert sum(1 for t in sleeps if t0 < t < t1) == 1, (sleeps, ups, why)
        print(f"{b.dialect:8} no clock, {sleep}: MCU awake {mcu['awake_fraction']:.3%}, {m['sleeps']} modem sleeps, "
              f"uplinks {[round(t - ups[0], 1) for t in ups]} s")


def test_a_reset_after_a_deep_sleep_credits_no_time(tmp_path, compact):
    """A clockless deep sleeper whose next boot is not the timer's (a watchdog reset or a power
    cycle right after the deep sleep: no DEEPSLEEP_RESET) counts the time asleep as zero: no
    uplink at that boot, a whole pace asleep again; the next timer wake reports on time."""
    b = clockless(tmp_path / "b", compact, "wio-e5", "deep", 1)
    b.modem.start()
    try:
        b.boot(3)
        b.boot(3)  # woken by its timer: the second report
        assert len(b.arrivals) == 2 and b.state()["nap"] > 0, b.output
        (tmp_path / "b" / "board.log.woke").unlink()  # the next boot is a watchdog's
        b.boot(3)
        assert len(b.arrivals) == 2, b.output  # nothing credited: no uplink yet
        kind, ms, _ = board_sleeps(b.log)[-1]
        assert kind == "deep" and ms > PERIOD_S * 1000, board_sleeps(b.log)
        b.boot(3)  # its timer's wake: the next report
    finally:
        b.modem.stop()
    assert len(b.arrivals) == 3 and b.arrivals[2][0] - b.arrivals[1][0] >= 2 * (PERIOD_S + MARGIN_MS / 1000) - 5, b.arrivals


# A board whose awake time is nil: its clock moves only through its sleeps.
FROZEN = r"""
import sys, machine
from mss_node import app
app.run(sys.argv[1], sys.argv[2], sensor=lambda: 5, clock=lambda: %r + machine._slept[0] / 1000,
        ticks=int(sys.argv[3]))
"""


def test_a_sleep_ends_in_the_next_epoch_not_before_it(tmp_path, compact):
    """A 9 s period (a wake phase of 0 s) from 3.2345 s into an epoch: the sleep to the next
    is 5765.5 ms, and a board that slept 5765 ms would wake 0.5 ms early, find nothing due,
    and lose its poll (with a clock this still, every poll); rounded up, each of the four
    ticks reports its own epoch."""
    t0 = (int(time.time()) // 9) * 9 + 3.2345
    b = Board(tmp_path / "b", compact, "rak3172", "light", period_s=9)
    b.script = FROZEN % t0
    b.run()
    lights = [ms for kind, ms, _ in board_sleeps(b.log) if kind == "light"]
    assert lights[0] == 5766 and len(b.modem.uplinks) == EPOCHS, (lights, b.output)
    st = b.state()
    assert st["seq"] == EPOCHS and list(st["last"].values()) == [int(t0) // 9 + EPOCHS - 1], (st, b.output)


def test_no_sleep_outlasts_half_the_watchdog(tmp_path, compact):
    """device.watchdog_ms 8000 (about the RP2040's maximum): the board sleeps in slices of at
    most 4 s, fed between them (the emulated WDT would reset it otherwise), while its modem
    still takes one sleep command a period."""
    b = Board(tmp_path / "b", compact, "rak3172", "light", watchdog_ms=8000).run(3)
    mcu = b.mcu()
    assert mcu["watchdog"] == 0 and len(b.epochs()) == 3 and b.epochs() == sorted(set(b.epochs())), (mcu, b.output)
    lights = [ms for kind, ms, _ in board_sleeps(b.log) if kind == "light"]
    assert max(lights) <= 4000 and len(lights) > 2 * PERIOD_S / 4, lights[:5]
    assert b.modem.stats()["sleeps"] == 3
    assert mcu["awake_fraction"] < MAX_AWAKE, mcu


def test_wifi_off_between_reports(tmp_path, compact):
    """device.wifi.off_between_reports: Wi-Fi goes off before every light sleep and on after it
    (the emulated board's network module records the switches)."""
    b = Board(tmp_path / "b", compact, "wio-e5", "light",
              wifi={"ssid": "field", "password": "x", "off_between_reports": True}).run(3)
    kinds = [kind + (str(ms) if kind == "wifi" else "") for kind, ms, _ in board_sleeps(b.log)]
    assert kinds == ["wifi0", "light", "wifi1"] * 3, kinds
    assert b.mcu()["wifi_off"] == 3 and len(b.epochs()) == 3


def test_mqtt_board_disconnects_to_sleep_and_reports_each_wake(tmp_path, mosquitto):
    """Over MQTT a sleeping board disconnects (a DISCONNECT: its retained status stays
    online, no offline will) and reconnects on every wake; one report an epoch."""
    import paho.mqtt.client as mqtt

    from mss_aggregator.devices.runtime import ensure_umqtt
    from mss_protocol.codec import codec

    ensure_umqtt()
    cfg = load_dict(choose(16, 2.0, "auto", limits=Limits(frame="full"))["config"])
    got, status = [], []
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="watch")
    c.on_message = lambda cl, u, msg: (got if msg.topic.endswith("report") else status).append(msg.payload)
    c.connect("127.0.0.1", mosquitto.port)
    c.subscribe("mss/v1/t/dev1/#", qos=1)
    c.loop_start()
    try:
        b = Board(tmp_path / "b", cfg, None, "light", device_id="dev1", transport="mqtt",
                  mqtt={"host": "127.0.0.1", "port": mosquitto.port, "timeout_s": 5, "backoff_max_s": 2}).run(3)
        deadline = time.time() + 10
        while len(got) < 3 and time.time() < deadline:
            time.sleep(0.05)
    finally:
        c.loop_stop()
        c.disconnect()
    assert len(got) == 3, b.output
    epochs = [codec(cfg).decode(r, "dev1").epoch for r in got]  # full frames carry their epoch
    assert epochs == list(range(epochs[0], epochs[0] + 3)), epochs
    assert b.output.count("mqtt connected") == 3 and "mqtt down" not in b.output, b.output
    assert b"offline" not in status and status[-1:] == [b"online"], status
    mcu = b.mcu()
    assert mcu["light"] == 3 and mcu["awake_fraction"] < MAX_AWAKE, mcu


def test_device_sleep_is_checked():
    from mss_node import settings

    base = load_dict(choose(16, 2.0, "auto", limits=Limits(frame="compact", max_bytes=11))["config"]).to_dict()
    lw = {"transport": "lorawan", "lorawan": {"path": "/dev/x"}}
    for device, why in [({"sleep": "hibernate"}, "device.sleep must be none, light or deep"),
                        ({"sleep": None}, "device.sleep must be none, light or deep"),
                        ({"wifi": {"off_between_reports": True}}, "device.wifi.off_between_reports must be"),
                        ({"sleep": "light", "wifi": {"off_between_reports": 1}},
                         "device.wifi.off_between_reports must be")]:
        with pytest.raises(ValueError, match=why):
            settings.Settings(dict(base, device=dict(lw, **device)))
    for sleep in ("none", "light", "deep"):
        assert settings.Settings(dict(base, device=dict(lw, sleep=sleep))).device["sleep"] == sleep
    assert settings.Settings(dict(base, device=lw)).device["sleep"] == "none"
