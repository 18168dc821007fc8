"""Messages that must not stop a board (issue 23, items 2-4), under the MicroPython
unix port at 128 KiB and 256 KiB heaps, with a real Mosquitto and the board's
persistent session: a retained config message of 64 KB or 16 KB, 3,000 nested
brackets (6 KB, dropped on its size) and 1,500 (3 KB, under the size limit: the
bounded parser), a validly signed config for a protocol whose module the board
lacks, and a signed config issued at 2**62 followed by a legitimate push.  Each
board reports every epoch (period 1 s) while the message is retained and after
it is deleted; the counts are epochs delivered to the broker.  Plus garbled,
oversized and malformed LoRaWAN downlink lines on every modem dialect."""
import json
import math
import re
import shutil
import subprocess
import time

import paho.mqtt.client as mqtt
import pytest

from brokers import mosquitto  # noqa: F401 (fixture)
from hostile import GOOD, KEY, device
from micropython_runner import FIRMWARE, MPLIB, ROOT, command, run
from mss_protocol.mss.config import MssConfig
from mss_protocol.oracle_config import OracleConfig
from mss_protocol.sealed import seal
from test_node_lorawan import NODE  # the LoRaWAN board script: uplinks traced, clock and sleep in ticks

ATTACK_S = 5.0  # the hostile message is retained this long from the board's start
AFTER_S = 5.0  # then deleted (and, for "issued", a legitimate push published) for this long
HEAPS = ("128k", "256k")
NEW = MssConfig.build(64, 2.0, [59, 61, 63]).to_dict()  # within the cap of 2
LEGIT = MssConfig.build(64, 1.5, [59, 61, 63]).to_dict()
OLH = OracleConfig("olh", 64, 2.0).to_dict()
LIMIT = 4096  # SPEC section 5: the largest config message a board takes

# The board: the firmware's own loop (app.run), a 0.2 s tick, until the deadline.
BOARD = r"""
import sys, time
from mss_node import app
deadline = float(sys.argv[3])
def sleep(s):
    if time.time() > deadline:
        raise SystemExit
    time.sleep(0.2)
try:
    app.run(sys.argv[1], sys.argv[2], sensor=lambda: 3, sleep=sleep)
except SystemExit:
    pass
print("END")
"""


@pytest.fixture(scope="module", autouse=True)
def umqtt():
    subprocess.run(["sh", str(ROOT / "tools" / "get_umqtt.sh"), str(MPLIB)], check=True,
                   env={"PYTHON": __import__("sys").executable, "PATH": "/usr/bin:/bin"})


def _padded(n):
    """A JSON object of n bytes."""
    return json.dumps({"pad": "x" * (n - 11)}).encode()


# name -> the retained message on campaign c (bytes), at the board's start
ATTACKS = {
    "retained-64k": lambda c: _padded(65536),
    "retained-16k": lambda c: _padded(16384),
    "nested-3000": lambda c: b"[" * 3000 + b"]" * 3000,
    "nested-1500": lambda c: b"[" * 1500 + b"]" * 1500,
    "missing-protocol": lambda c: seal(OLH, KEY, c, int(time.time()) - 60).encode(),
    "issued-2**62": lambda c: seal(NEW, KEY, c, 2 ** 62).encode(),
}
# what the board's log must say of each
SAYS = {
    "retained-64k": r"dropped 655\d\d-byte config message \(limit 4096\)",
    "retained-16k": r"dropped 163\d\d-byte config message \(limit 4096\)",
    "nested-3000": r"dropped 6000-byte config message \(limit 4096\)",
    "nested-1500": r"ignored config message: nested deeper than \d+",
    "missing-protocol": r"rejected pushed config: this board does not carry protocol 'olh'",
    "issued-2**62": r"rejected pushed config: issued 4611686018427387904 is ahead of this board's clock",
}


def _lib_without(tmp_path, module):
    """A copy of the board's lib without ``module`` (a path under lib)."""
    lib = tmp_path / "lib"
    shutil.copytree(FIRMWARE / "lib", lib)
    (lib / module).unlink()
    return lib


class Reports:
    """Every report on the broker: board (campaign) -> [(epoch, config id hex)]."""

    def __init__(self, port):
        self.got = {}
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
        self.client.on_message = self._on
        self.client.connect("127.0.0.1", port)
        self.client.subscribe("mss/v1/+/+/report", qos=1)
        self.client.loop_start()

    def _on(self, c, u, m):
        p = bytes(m.payload)
        if len(p) >= 11 and p[0] == 1:  # a full frame: config id, epoch u32
            self.got.setdefault(m.topic.split("/")[2], []).append((int.from_bytes(p[5:9], "big"),
                                                                  p[1:5].hex()))

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


def _publisher(port):
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    pub.connect("127.0.0.1", port)
    pub.loop_start()
    return pub


def test_no_config_message_stops_a_board(tmp_path, mosquitto):
    """12 boards at once (6 attacks x 2 heaps), one process each."""
    pub = _publisher(mosquitto.port)
    reports = Reports(mosquitto.port)
    olh_less = _lib_without(tmp_path, "mss_device/olh.py")
    boards = {}
    for i, (name, message) in enumerate(ATTACKS.items()):
        for heap in HEAPS:
            c = f"a{i}h{heap}"
            pub.publish(f"mss/v1/{c}/config", message(c), qos=1, retain=True).wait_for_publish()
            folder = tmp_path / c
            folder.mkdir()
            dev = device(campaign=c, device_id=c, period_s=1, poll_s=1, transport="mqtt",
                         mqtt={"host": "127.0.0.1", "port": mosquitto.port, "timeout_s": 2,
                               "backoff_max_s": 1})
            (folder / "config.json").write_text(json.dumps(dict(GOOD, device=dev)))
            boards[(name, heap)] = c, folder
    def start(deadline):
        procs = {}
        for (name, heap), (c, folder) in boards.items():
            argv, env = command(BOARD, ["config.json", "state.json", str(deadline)], heapsize=heap,
                                micropythonpath=[olh_less] if name == "missing-protocol" else None)
            procs[(name, heap)] = subprocess.Popen(argv, env=env, cwd=folder, stdout=subprocess.PIPE,
                                                   stderr=subprocess.STDOUT, text=True)
        return procs

    # the attack; then the message deleted and every board rebooted: its persistent session
    # would bring back a message it never acknowledged
    t0 = time.time()
    t_clear, t_end = t0 + ATTACK_S, t0 + ATTACK_S + AFTER_S
    logs = {key: p.communicate(timeout=60)[0] for key, p in start(t_clear).items()}
    legit_issued = int(time.time())
    for (name, heap), (c, _) in boards.items():
        topic = f"mss/v1/{c}/config"
        if name == "issued-2**62":  # the operator's next push (mss aggregate restarted)
            pub.publish(topic, seal(LEGIT, KEY, c, legit_issued), qos=1, retain=True).wait_for_publish()
        else:
            pub.publish(topic, b"", qos=1, retain=True).wait_for_publish()  # the retained message deleted
    later = {key: p.communicate(timeout=60)[0] for key, p in start(t_end).items()}
    time.sleep(0.5)
    reports.close()
    pub.loop_stop()

    during = set(range(math.ceil(t0) + 1, math.floor(t_clear)))
    after = set(range(math.ceil(t_clear) + 1, math.floor(t_end) - 1))
    figures, failed = {}, []
    for (name, heap), (c, folder) in boards.items():
        got = reports.got.get(c, [])
        epochs = {e for e, _ in got}
        if name == "issued-2**62":  # after: the epochs reported under the legitimate push
            epochs = {e for e, cid in got if e in during or cid == LEGIT["config_id"]}
        figures[(name, heap)] = (len(during & epochs), len(during), len(after & epochs), len(after))
        log, log2 = logs[(name, heap)], later[(name, heap)]
        ok = during <= epochs and after <= epochs and "END" in log and "END" in log2
        ok = ok and len(re.findall(SAYS[name], log)) == 1 and not re.search(SAYS[name], log2)
        ok = ok and "mqtt down" not in log + log2
        now = json.loads((folder / "config.json").read_text())
        state = json.loads((folder / "state.json").read_text())
        if name == "issued-2**62":  # the far-future push refused, the legitimate one adopted
            ok = ok and now["config_id"] == LEGIT["config_id"] and now["issued"] == legit_issued
            ok = ok and "now using config " + LEGIT["config_id"] in log2 and "now using" not in log
            ok = ok and {cid for e, cid in got if e in after} == {LEGIT["config_id"]}
        else:  # nothing of the message in the board's files
            ok = ok and now == json.loads(json.dumps(dict(GOOD, device=now["device"])))
            ok = ok and set(state["last"]) == {GOOD["config_id"]} and state["dropped"] == 0
            ok = ok and {cid for _, cid in got} == {GOOD["config_id"]}
        ok = ok and "Traceback" not in log + log2 and "tick failed" not in log + log2
        if not ok:
            failed.append((name, heap, figures[(name, heap)], log[-3000:] + "=== rebooted\n" + log2[-2000:]))
    print("epochs delivered (during, of, after, of):", figures)
    for name, heap, figure, log in failed:
        print("=== %s at %s: %s\n%s" % (name, heap, figure, log))
    assert not failed, [f[:3] for f in failed]


# -- LoRaWAN downlinks ------------------------------------------------------------

EUI = "70b3d57ed0000001"
T_LORA = 1_800_000_000
# the app on a virtual clock (one epoch a tick), every uplink the link counts as sent printed
# downlinks (fport, data as the modem writes them); "<FF>" becomes the bytes ff fe (no UTF-8)
DOWNLINKS = [(2, "<FF>0102"), ("1<FF>", "0102"), (2, "A" * 2000), (2, "ABC"), (99999999999999999999, "0102"),
             (-5, "0102"), (2, ""), ("x", "y"), (2, "0102<FF>"),
             (2, OLH["config_id"][:4].upper())]  # a switch to a held config of a protocol the board lacks


def _raw_modem(dialect):
    from mss_aggregator.devices.modem import EMULATORS

    class RawModem(EMULATORS[dialect]):
        def _say(self, *lines, delay=0.0):
            if delay:
                time.sleep(delay)
            raw = b"".join(line.encode().replace(b"<FF>", b"\xff\xfe") + b"\r\n" for line in lines)
            try:
                __import__("os").write(self.master, raw)
            except OSError:
                pass

    return RawModem(dialect, EUI)


@pytest.mark.parametrize("dialect", ["rak3172", "rak3172-old", "wio-e5", "rn2483"])
def test_no_downlink_stops_a_lorawan_board(tmp_path, dialect):
    """Garbled (bytes no UTF-8 decoder takes), oversized (2,000 hex digits, past the
    line limit) and malformed (ports not numbers, out of range, odd hex) downlinks, one
    after each uplink: each is ignored (with a log line where the dialect reads it as a
    downlink), and so is a switch to a held config for a protocol the board lacks; the
    board reports every epoch and every report goes on air once."""
    from mss_protocol.choose import Limits, choose

    cfg = choose(16, 2.0, "auto", limits=Limits(frame="compact", max_bytes=11))["config"]
    m = _raw_modem(dialect)
    m.start()
    try:
        for fport, data in DOWNLINKS:
            m.downlink(fport, data)
        lw = {"modem": dialect.replace("-old", ""), "path": m.path, "retry_s": 1, "backoff_max_s": 2,
              "join_timeout_s": 2, "tx_timeout_s": 1}
        dev = {"campaign": "t", "period_s": 1, "poll_s": 1, "transport": "lorawan", "lorawan": lw,
               "configs": ["held.json"]}
        (tmp_path / "held.json").write_text(json.dumps(dict(OLH, device=dev)))
        (tmp_path / "config.json").write_text(json.dumps(dict(cfg, device=dev)))
        ticks = len(DOWNLINKS) + 3
        out = run(NODE, cwd=tmp_path, args=["config.json", "state.json", str(ticks), str(T_LORA)], timeout=120,
                  micropythonpath=[_lib_without(tmp_path, "mss_device/olh.py")])
    finally:
        m.stop()
    log = out.stdout + out.stderr
    assert out.returncode == 0, log
    state = json.loads((tmp_path / "state.json").read_text())
    sent = [int(line.split()[1]) for line in log.splitlines() if line.startswith("UPLINK ")]
    print("%s: epochs reported %d of %d, frames on air %d for %d reports, ticks failed %d"
          % (dialect, len(set(sent)), ticks, len(m.uplinks), state["seq"], log.count("tick failed")))
    assert "tick failed" not in log and "Traceback" not in log, log
    assert sent == list(range(T_LORA, T_LORA + ticks)), log  # one report every epoch
    assert len(m.uplinks) == state["seq"] == ticks and state["queue"] == [], log  # each on air once
    assert m.pending == [], "every downlink was delivered"
    assert log.count("ignored") >= 5, log  # the others are no downlink line in that dialect
    assert "rejected held config: this board does not carry protocol 'olh'" in log
    assert json.loads((tmp_path / "config.json").read_text())["config_id"] == cfg["config_id"]


# -- the issued counter against the board's clock (CPython, in-process) ------------

T_NOW = 1_800_000_000


class _Link:
    def send(self, b):
        return True

    def poll(self):
        pass


def _node(tmp_path, clock, issued=0):
    from mss_node.app import Node

    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(GOOD, issued=issued, device=device(device_id="x", campaign="t"))))
    return Node(str(path), str(tmp_path / "state.json"), lambda: 3, clock=clock, link=_Link())


def test_issued_is_bounded_by_the_boards_clock(tmp_path, capsys):
    """A push issued more than SKEW_S after the board's clock is refused; one within it is
    adopted, and then blocks the operator's pushes at most until the clock passes it."""
    from mss_node.auth import SKEW_S

    now = [T_NOW]
    node = _node(tmp_path, lambda: now[0])
    node.new_config(json.loads(seal(NEW, KEY, "t", 2 ** 62)))
    node.new_config(json.loads(seal(NEW, KEY, "t", T_NOW + SKEW_S + 1)))
    assert capsys.readouterr().out.count("is ahead of this board's clock") == 2
    assert node.s.config_id == GOOD["config_id"] and node.s.issued == 0
    node.new_config(json.loads(seal(NEW, KEY, "t", T_NOW + SKEW_S)))  # a bad push within the skew
    assert node.s.config_id == NEW["config_id"] and node.s.issued == T_NOW + SKEW_S
    now[0] = T_NOW + 60
    node.new_config(json.loads(seal(LEGIT, KEY, "t", now[0])))  # the operator's, too early
    assert "before %d of the config in use" % (T_NOW + SKEW_S) in capsys.readouterr().out
    now[0] = T_NOW + SKEW_S + 1
    node.new_config(json.loads(seal(LEGIT, KEY, "t", now[0])))  # restarted after the skew
    assert node.s.config_id == LEGIT["config_id"]
    assert json.loads((tmp_path / "config.json").read_text())["issued"] == now[0]


def test_a_frozen_counter_from_earlier_firmware_recovers(tmp_path):
    """config.json holding issued 2**62 (adopted before this rule, or while the clock ran
    ahead): the next push issued at the board's time is adopted, and replaces the counter."""
    node = _node(tmp_path, lambda: T_NOW, issued=2 ** 62)
    node.new_config(json.loads(seal(LEGIT, KEY, "t", T_NOW - 5)))
    assert node.s.config_id == LEGIT["config_id"] and node.s.issued == T_NOW - 5
    assert json.loads((tmp_path / "config.json").read_text())["issued"] == T_NOW - 5


def test_a_board_without_a_clock_refuses_pushes(tmp_path, capsys):
    node = _node(tmp_path, lambda: 1000)  # not set (before 2024)
    node.new_config(json.loads(seal(NEW, KEY, "t", 10)))
    assert "rejected pushed config: the clock is not set" in capsys.readouterr().out
    assert node.s.config_id == GOOD["config_id"]


@pytest.mark.parametrize("text,ok", [
    (b'{"a": [[[[[[[1]]]]]]]}', True),  # 8 deep
    (b'{"a": [[[[[[[[1]]]]]]]]}', False),  # 9
    (b'{"a": "[[[[[[[[[[[[", "b": "\\\\", "c": "\\"[[[[[[[[[["}', True),  # brackets in strings
    (b"[" * 3000, False),
    (json.dumps({"signed": seal(NEW, KEY, "t", 1), "hmac": "0" * 64}).encode(), True),
])
def test_nesting_is_bounded_before_parsing(text, ok):
    from mss_node.auth import shallow

    if ok:
        shallow(text)
    else:
        with pytest.raises(ValueError, match="nested deeper than 8"):
            shallow(text)


# -- the wire: an oversized PUBLISH under MicroPython, with umqtt.simple 1.3.4 ------

WIRE = r"""
from umqtt.simple import MQTTClient
from mss_node import mqtt_link

class Sock:
    # a PUBLISH (QoS 1, packet id 0x1234) of ``size`` payload bytes, made up as it is read
    def __init__(self, size, topic=b"mss/v1/t/config"):
        n, length = 2 + len(topic) + 2 + size, b""
        while True:
            b, n = n & 127, n >> 7
            length += bytes([b | 128 if n else b])
            if not n:
                break
        self.head = b"\x32" + length + bytes([len(topic) >> 8, len(topic) & 255]) + topic + b"\x12\x34"
        self.at, self.left, self.out, self.biggest = 0, len(self.head) + size, [], 0
    def read(self, n):
        self.biggest = max(self.biggest, n)
        n = min(n, self.left)
        h = self.head[self.at:self.at + n]
        self.at += len(h)
        self.left -= n
        return h + b"x" * (n - len(h))
    def readinto(self, buf, n):
        b = self.read(n)
        buf[:len(b)] = b
        return len(b)
    def write(self, b, n=None):
        self.out.append(bytes(b))
    def setblocking(self, f):
        pass

got = []
c = mqtt_link._bounded(MQTTClient)(b"x", "127.0.0.1")
c.cb = lambda t, m: got.append(len(m))
for size, topic in ((4096, 15), (4097, 15), (65536, 15), (1000000, 15), (2, 300)):
    c.sock = Sock(size, b"t" * topic)
    op = c.wait_msg()
    print("RESULT", size, topic, op, c.sock.left, c.sock.out[0].hex(), c.sock.biggest, got)
"""


def test_an_oversized_message_is_drained_off_the_wire_and_acknowledged():
    """umqtt.simple's wait_msg as the board's link bounds it, on a 64 KiB heap: a PUBLISH
    above 4,096 bytes (or with a topic longer than 256) is read in pieces of at most 256
    bytes, never whole, dropped with a log line, and its PUBACK sent; one of 4,096 is
    delivered."""
    out = run(WIRE, heapsize="64k")
    assert out.returncode == 0, out.stdout + out.stderr
    results = [line.split(" ", 1)[1] for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    assert results == ["4096 15 50 0 40021234 4096 [4096]"] + [
        f"{size} {topic} 50 0 40021234 256 [4096]" for size, topic in ((4097, 15), (65536, 15), (1000000, 15),
                                                                      (2, 300))], out.stdout
    drops = [line.split("[warn] ")[1] for line in out.stdout.splitlines() if "[warn]" in line]
    assert drops == [f"dropped {n}-byte config message (limit 4096)" for n in (4097, 65536, 1000000, 2)]


PUSH = r"""
import sys, time
from mss_node import app
app.run(sys.argv[1], sys.argv[1] + ".state", sensor=lambda: 3, ticks=4, sleep=lambda s: time.sleep(0.25))
"""


def test_the_operator_recovers_a_fleet_by_restarting_the_aggregator(tmp_path, mosquitto):
    """A fleet-key holder's push issued 2**62 is refused; the operator's fix is the ordinary
    one: (re)start ``mss aggregate`` with the fleet key (it signs with issued = now), and a
    MicroPython board on its persistent session adopts that config."""
    from collect_helpers import build_aggregator

    pub = _publisher(mosquitto.port)
    pub.publish("mss/v1/t/config", seal(NEW, KEY, "t", 2 ** 62), qos=1, retain=True).wait_for_publish()
    pub.loop_stop()
    dev = device(campaign="t", device_id="dev1", period_s=1, poll_s=1, transport="mqtt",
                 mqtt={"host": "127.0.0.1", "port": mosquitto.port, "timeout_s": 2, "backoff_max_s": 1})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(GOOD, device=dev)))
    out = run(PUSH, cwd=tmp_path, args=[str(path)])
    assert out.returncode == 0 and "is ahead of this board's clock" in out.stdout, out.stdout + out.stderr
    assert json.loads(path.read_text())["config_id"] == GOOD["config_id"]
    (tmp_path / "agg.json").write_text(json.dumps(dict(LEGIT, device={"campaign": "t", "period_s": 1})))
    agg = build_aggregator(tmp_path / "agg.json", tmp_path / "s.sqlite", "t", f"mqtt://127.0.0.1:{mosquitto.port}",
                           log=lambda m: None, fleet_key=KEY).start()
    try:
        assert agg.wait_connected(10)
        out = run(PUSH, cwd=tmp_path, args=[str(path)])
    finally:
        agg.stop()
    assert out.returncode == 0 and "now using config " + LEGIT["config_id"] in out.stdout, out.stdout
    now = json.loads(path.read_text())
    assert now["config_id"] == LEGIT["config_id"] and abs(now["issued"] - time.time()) < 60
