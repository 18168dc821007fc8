"""Hostile configs, at boot and pushed over a real Mosquitto, on MicroPython and
CPython: forged (wrong key, unsigned, tampered, another campaign, replayed),
above the board's cap, thresholds that contradict their epsilon, moduli out
of range, wrong rank_bits -- each refused and logged, the board keeps its
config; a config signed with the fleet key and within the cap is adopted,
also when ``mss aggregate``'s service publishes it.  Plus the firmware's
HMAC and exact privacy arithmetic under MicroPython against CPython."""
import hmac
import json
import random
import re
import subprocess

import paho.mqtt.client as mqtt
import pytest

from brokers import mosquitto  # noqa: F401 (fixture)
from hostile import GOOD, HOSTILE, KEY, OTHER_KEY, device
from micropython_runner import MPLIB, ROOT, run
from micropython_runner import command as mp_command
from mss_aggregator.devices.runtime import command
from mss_protocol.mss.config import MssConfig
from mss_protocol.oracle_config import NAMES, OracleConfig
from mss_protocol.sealed import seal

RUNTIMES = ["micropython", "cpython"]
NEW = MssConfig.build(64, 2.0, [59, 61, 63])  # epsilon 2: exactly the cap

BOOT = r"""
import sys
from mss_node import app
for path in sys.argv[1:]:
    print("=== " + path)
    app.run(path, path + ".state", sensor=lambda: 3, ticks=1, sleep=lambda s: None)
"""

PUSH = r"""
import sys, time
from mss_node import app
for path in sys.argv[1:]:
    print("=== " + path)
    app.run(path, path + ".state", sensor=lambda: 3, ticks=4, sleep=lambda s: time.sleep(0.25))
"""


@pytest.fixture(scope="module", autouse=True)
def umqtt():
    subprocess.run(["sh", str(ROOT / "tools" / "get_umqtt.sh"), str(MPLIB)], check=True,
                   env={"PYTHON": __import__("sys").executable, "PATH": "/usr/bin:/bin"})


def run_on(runtime, script, args, cwd):
    """{config path: its log} of ``script`` run on each config path of ``args``, one
    process a board, all at once: a board's run is mostly waiting (its polls, its
    broker's timeouts), 1-2 s each: 17-20 s a case list one after another."""
    procs = {}
    for path in map(str, args):
        if runtime == "micropython":
            argv, env = mp_command(script, [path])
        else:
            argv, env = command("cpython", "unused", [])
            argv = [argv[0], "-c", script, path]
        procs[path] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       cwd=cwd, env=env)
    logs = {}
    for path, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, out + err
        head, _, text = out.partition("\n")
        assert head == "=== " + path, out
        logs[path] = text
    return logs


def write(path, cfg, **dev):
    path.write_text(json.dumps(dict(cfg, device=dev)))
    return path


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_hostile_configs_are_refused_at_boot(tmp_path, runtime):
    """config.json itself is hostile: the board stays idle and says why."""
    serial = {"transport": "serial", "serial": {"path": str(tmp_path / "uart")}, "device_id": "d"}
    paths = {name: write(tmp_path / f"{i}.json", d, **device(**serial))
             for i, (name, (d, _)) in enumerate(HOSTILE.items())}
    paths["good"] = write(tmp_path / "good.json", GOOD, **device(**serial))
    logs = run_on(runtime, BOOT, paths.values(), tmp_path)
    for name, (_, why) in HOSTILE.items():
        log = logs[str(paths[name])]
        assert "[error] idle: " in log and "reporting config" not in log, (name, log)
        assert re.search(why, log), (name, log)
    assert "reporting config " + GOOD["config_id"] in logs[str(paths["good"])]


def _tampered(c):
    m = json.loads(seal(NEW.to_dict(), KEY, c, 10))
    return dict(m, signed=m["signed"].replace('"epsilon": 2.0', '"epsilon": 2.5'))


def _signed(d, key=KEY, campaign=None, issued=10):
    return lambda c: seal(d, key, campaign or c, issued)


# name -> (the retained message for campaign c, what the board must log, its device fields, its issued)
PUSHES = {name: (_signed(d), "rejected pushed config: .*" + why, {}, 0) for name, (d, why) in HOSTILE.items()}
PUSHES.update({
    "wrong-key": (_signed(NEW.to_dict(), OTHER_KEY), r"rejected pushed config: bad hmac", {}, 0),
    "unsigned": (lambda c: json.dumps(NEW.to_dict()), r"rejected pushed config: not signed \(no hmac\)", {}, 0),
    "tampered": (lambda c: json.dumps(_tampered(c)), r"rejected pushed config: bad hmac", {}, 0),
    "hmac-not-hex": (lambda c: json.dumps(dict(_tampered(c), hmac="z" * 64)),
                     r"rejected pushed config: malformed signature", {}, 0),
    "other-campaign": (_signed(NEW.to_dict(), campaign="elsewhere"),
                       r"rejected pushed config: signed for campaign 'elsewhere'", {}, 0),
    "replayed": (_signed(NEW.to_dict()), r"rejected pushed config: issued 10, before 11 of the config in use",
                 {}, 11),
    "no-key-on-board": (_signed(NEW.to_dict()), r"pushed configs are ignored: this board has no "
                        r"device.fleet_key", {"fleet_key": None}, 0),
    "adopted": (_signed(NEW.to_dict()), "now using config " + NEW.config_id_hex, {}, 0),
})


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_pushed_configs_are_checked(tmp_path, mosquitto, runtime):
    """Each case on its own campaign's retained config topic, seen by a board on
    GOOD (epsilon 1, cap 2).  Only the signed config within the cap is adopted."""
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    pub.connect("127.0.0.1", mosquitto.port)
    pub.loop_start()
    paths = {}
    for i, (name, (message, _, extra, issued)) in enumerate(PUSHES.items()):
        campaign = f"c{i}"
        pub.publish(f"mss/v1/{campaign}/config", message(campaign), qos=1, retain=True).wait_for_publish()
        dev = device(campaign=campaign, device_id=f"dev{i}", period_s=1, poll_s=1, transport="mqtt",
                     mqtt={"host": "127.0.0.1", "port": mosquitto.port, "timeout_s": 2, "backoff_max_s": 1})
        dev = {k: v for k, v in dict(dev, **extra).items() if v is not None}
        paths[name] = write(tmp_path / f"{i}.json", dict(GOOD, issued=issued), **dev)
    pub.loop_stop()
    logs = run_on(runtime, PUSH, paths.values(), tmp_path)
    for name, (_, why, _, _) in PUSHES.items():
        log = logs[str(paths[name])]
        assert re.search(why, log), (name, log)
        now = json.loads(paths[name].read_text())
        assert now["config_id"] == (NEW.config_id_hex if name == "adopted" else GOOD["config_id"]), name
        if name != "adopted":
            assert "now using config" not in log, (name, log)
    assert logs[str(paths["no-key-on-board"])].count("pushed configs are ignored") == 1
    adopted = json.loads(paths["adopted"].read_text())
    assert adopted["issued"] == 10 and adopted["device"]["fleet_key"] == KEY.hex()


@pytest.mark.parametrize("signed", [True, False], ids=["with-key", "without-key"])
def test_the_aggregator_signs_what_it_publishes(tmp_path, mosquitto, signed):
    """mss aggregate's service with a fleet key: a MicroPython board on GOOD adopts
    its config; without one it publishes the plain config, says so, and the board refuses it."""
    from collect_helpers import build_aggregator

    NEW.save(tmp_path / "agg.json", {"device": {"period_s": 3600}})  # mss aggregate needs the clock
    said = []
    agg = build_aggregator(tmp_path / "agg.json", tmp_path / "s.sqlite", "t", f"mqtt://127.0.0.1:{mosquitto.port}",
                           log=said.append, fleet_key=KEY if signed else None).start()
    try:
        assert agg.wait_connected(10)
        dev = device(campaign="t", device_id="dev1", period_s=1, poll_s=1, transport="mqtt",
                     mqtt={"host": "127.0.0.1", "port": mosquitto.port, "timeout_s": 2, "backoff_max_s": 1})
        path = write(tmp_path / "config.json", GOOD, **dev)
        log = run_on("micropython", PUSH, [path], tmp_path)[str(path)]
    finally:
        agg.stop()
    now = json.loads(path.read_text())["config_id"]
    if signed:
        assert "now using config " + NEW.config_id_hex in log and now == NEW.config_id_hex, log
        assert not any("no fleet key" in m for m in said)
    else:
        assert "rejected pushed config: not signed (no hmac)" in log and now == GOOD["config_id"], log
        assert any("no fleet key: the config on mss/v1/t/config is unsigned" in m for m in said)


HMAC = r"""
import json, sys
from mss_node.auth import hmac_sha256
cases = json.load(open(sys.argv[1]))
print(json.dumps([hmac_sha256(bytes.fromhex(k), bytes.fromhex(m)).hex() for k, m in cases]))
"""


def test_firmware_hmac_is_rfc2104_under_micropython(tmp_path):
    """Keys shorter than, equal to and longer than SHA-256's 64-byte block; the same
    bytes as CPython's hmac."""
    rnd = random.Random(3)
    cases = [(rnd.randbytes(kl).hex(), rnd.randbytes(ml).hex())
             for kl in (0, 1, 16, 32, 63, 64, 65, 200) for ml in (0, 1, 55, 64, 1000)]
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    out = run(HMAC, args=[str(tmp_path / "cases.json")])
    assert out.returncode == 0, out.stderr
    want = [hmac.new(bytes.fromhex(k), bytes.fromhex(m), "sha256").hexdigest() for k, m in cases]
    assert json.loads(out.stdout) == want


VERIFY = r"""
import json, sys
from mss_device import check
from mss_device.params import Params
res = []
for d in json.load(open(sys.argv[1])):
    try:
        hi, lo = check.verify(Params(d), d["epsilon"])
        res.append([str(hi), str(lo)])
    except ValueError as exc:
        res.append(str(exc))
print(json.dumps(res))
"""


def test_micropython_computes_the_same_exact_ratios_and_refusals(tmp_path):
    """The loader's long-int arithmetic under MicroPython: the same worst ratio (exactly)
    and the same refusals as CPython, over every protocol and the hostile configs."""
    from mss_device import check
    from mss_device.params import Params

    configs = [OracleConfig(n, k, e).to_dict() for n in NAMES for k in (5, 64, 1000) for e in (0.5, 2.0, 7.0)]
    configs += [MssConfig.build(k, e, m).to_dict() for k, m in [(64, [59, 61, 63]), (1024, [1019, 1021]),
                                                               (40000, [39997, 39989]), (100, [100])]
                for e in (0.5, 2.0, 9.0)]
    configs += [d for d, _ in HOSTILE.values()]
    (tmp_path / "cfgs.json").write_text(json.dumps(configs))
    out = run(VERIFY, args=[str(tmp_path / "cfgs.json")])
    assert out.returncode == 0, out.stderr
    want = []
    for d in configs:
        try:
            want.append([str(v) for v in check.verify(Params(d), d["epsilon"])])
        except ValueError as exc:
            want.append(str(exc))
    assert json.loads(out.stdout) == want
    assert sum(isinstance(w, str) for w in want) == 7  # HOSTILE but above-cap (the cap is the node's)
