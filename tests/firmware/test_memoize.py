"""device.memoize: one randomised draw per (config, value), re-sent while the
value lasts (RAPPOR-style permanent randomised response).

The node runs with a fake link (reports collected in memory) and a clock set
to successive epochs.  Reboots, memoize off, memos that are no body of the
config and replay of the shared vectors run under the real MicroPython unix
port and CPython; the allocation check under MicroPython only; the rest
in-process on CPython (the same firmware files).
"""
import json
import math
import random
import subprocess
import sys

import numpy as np
import pytest

from micropython_runner import run
from mss_aggregator.distributions import parse
from mss_device.frame import HEADER_BYTES
from mss_device.rng import ByteRng
from mss_node import files, settings
from mss_node.app import Node
from mss_node.reporter import Reporter
from mss_node.state import State
from mss_protocol import privacy, vectors
from mss_protocol.codec import codec
from mss_protocol.counts import Counts
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.decoder import Decoder
from mss_protocol.mss.wire import WireCodec
from mss_protocol.oracle_config import OracleConfig
from mss_protocol.sealed import seal

CFG = MssConfig.build(64, 2.0, [59, 61, 63])
CID = CFG.config_id_hex
T0 = 1704067200  # 2024-01-01, a whole number of hours: epoch = T0 // 3600 + i
E0 = T0 // 3600
RUNTIMES = ["micropython", "cpython"]

# One boot per epoch: a new Node (and State) from the same files each time.
REBOOTS = r"""
import json, sys
from mss_device.rng import ByteRng
from mss_node.app import Node


class Link:
    def __init__(self):
        self.out = []

    def send(self, b):
        self.out.append(b.hex())
        return True

    def poll(self):
        pass


values = json.loads(sys.argv[3])
res = []
for i in range(len(values)):
    link, rng = Link(), ByteRng()
    node = Node(sys.argv[1], sys.argv[2], lambda: values[i], rng=rng,
                clock=lambda: 1704067200 + 3600 * i, link=link)
    node.tick()
    res.append([link.out, rng.consumed])
print(json.dumps(res))
"""


class Link:
    def __init__(self):
        self.out = []

    def send(self, b):
        self.out.append(bytes(b))
        return True

    def poll(self):
        pass


def write_config(tmp_path, cfg=CFG, **device):
    d = cfg.to_dict()
    d["device"] = dict({"device_id": "m1", "transport": "serial"}, **device)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(d))
    return str(path)


def run_reboots(runtime, tmp_path, values, **device):
    args = [write_config(tmp_path, **device), str(tmp_path / "state.json"), json.dumps(values)]
    if runtime == "micropython":
        out = run(REBOOTS, cwd=tmp_path, args=args)
    else:
        out = subprocess.run([sys.executable, "-c", REBOOTS, *args], capture_output=True, text=True,
                             cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(len(sent) == 1 for sent, _ in res)  # one report per epoch, sent at once
    return [bytes.fromhex(sent[0]) for sent, _ in res], [consumed for _, consumed in res]


class Device:
    """One in-process node with a seeded byte source and a settable clock."""

    def __init__(self, tmp_path, seed, name="state.json", **device):
        """``device`` fields write a config.json; without them the one in tmp_path is used."""
        self.value, self.now, self.link = None, T0, Link()
        self.rng = ByteRng(random.Random(seed).randbytes)
        self.config = write_config(tmp_path, **device) if device else str(tmp_path / "config.json")
        self.state = str(tmp_path / name)
        self.boot()

    def boot(self):
        self.node = Node(self.config, self.state, lambda: self.value, rng=self.rng,
                         clock=lambda: self.now, link=self.link)

    def report(self, value, epoch):
        """The body sent for ``value`` at epoch E0 + epoch, and the random bytes it used."""
        self.value, self.now = value, T0 + 3600 * epoch
        before, sent = self.rng.consumed, len(self.link.out)
        self.node.tick()
        assert len(self.link.out) == sent + 1
        return self.link.out[-1][HEADER_BYTES:], self.rng.consumed - before


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_bodies_survive_reboots_with_fresh_headers(tmp_path, runtime):
    reports, consumed = run_reboots(runtime, tmp_path, [5, 5, 5], memoize=True)
    codec = WireCodec(CFG)
    decoded = [codec.decode(r) for r in reports]
    assert [(r.epoch, r.seq) for r in decoded] == [(E0, 0), (E0 + 1, 1), (E0 + 2, 2)]
    assert reports[1][HEADER_BYTES:] == reports[2][HEADER_BYTES:] == reports[0][HEADER_BYTES:]
    assert consumed[0] > 0 and consumed[1:] == [0, 0]  # no random byte after the first draw
    memo = json.loads((tmp_path / "state.json").read_text())["memo"]
    assert memo == {CID: [[5, reports[0][HEADER_BYTES:].hex()]]}


def collision_probability(cfg):
    """P(two independent draws for the same value give the same (j, Z)):
    sum_j l^-2 (p'^2 / C(m-1, w-1) + (1 - p')^2 / C(m-1, w)), exact channel of SPEC.md section 2."""
    return sum((p * p / math.comb(m - 1, w - 1) + (1 - p) ** 2 / math.comb(m - 1, w)) / cfg.l ** 2
               for m, w, p in zip(cfg.moduli, cfg.omegas, cfg.p))


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_memoize_off_draws_afresh_every_epoch(tmp_path, runtime):
    """Each epoch reads random bytes; the three bodies are pairwise different
    unless two independent draws collide: probability <= 3 x 1.5e-9 here."""
    assert collision_probability(CFG) < 1e-6 / 3
    reports, consumed = run_reboots(runtime, tmp_path, [5, 5, 5])
    assert all(c > 0 for c in consumed)
    assert len({r[HEADER_BYTES:] for r in reports}) == 3
    assert json.loads((tmp_path / "state.json").read_text())["memo"] == {}


def test_value_change_draws_and_a_return_reuses(tmp_path):
    dev = Device(tmp_path, seed=1, memoize=True)
    b5, c5 = dev.report(5, 0)
    b9, c9 = dev.report(9, 1)
    assert c5 > 0 and c9 > 0  # a new value is a new draw
    assert dev.report(5, 2) == (b5, 0) and dev.report(9, 3) == (b9, 0)
    dev.boot()  # and after a reboot
    assert dev.report(5, 4) == (b5, 0)


def test_least_recently_used_memo_is_evicted(tmp_path, capsys):
    dev = Device(tmp_path, seed=2, memoize=True, memo_max=2)
    b1, _ = dev.report(1, 0)
    dev.report(2, 1)
    assert dev.report(1, 2) == (b1, 0)  # 1 is now the most recently used
    capsys.readouterr()
    dev.report(3, 3)  # evicts 2, not 1
    assert "memo full (2 values)" in capsys.readouterr().out
    assert [e[0] for e in dev.node.state.memo[CID]] == [1, 3]
    assert dev.report(1, 4) == (b1, 0)
    _, used = dev.report(2, 5)  # 2 was forgotten: a fresh draw
    assert used > 0
    saved = json.loads((tmp_path / "state.json").read_text())["memo"][CID]
    assert [e[0] for e in saved] == [1, 2]


def test_rng_is_not_touched_by_a_replay():
    """replay reads no randomness at all: its byte source is empty."""
    from mss_device.params import Params

    p = Params(CFG.to_dict())
    first = Reporter(p, ByteRng(random.Random(3).randbytes)).report(17, 1, 0)
    dry = ByteRng(lambda n: b"")  # any draw raises EOFError
    again = Reporter(p, dry).replay(first[HEADER_BYTES:], 2, 1)
    assert again[HEADER_BYTES:] == first[HEADER_BYTES:] and again[:HEADER_BYTES] != first[:HEADER_BYTES]
    assert dry.consumed == 0


def test_memo_is_saved_in_the_write_that_queues_the_report(tmp_path, monkeypatch):
    dev = Device(tmp_path, seed=4, memoize=True)
    writes = []
    real = files.save
    monkeypatch.setattr(files, "save", lambda path, obj: (writes.append(json.loads(json.dumps(obj))),
                                                           real(path, obj))[1])
    dev.report(7, 0)
    queued, sent = writes  # queue the report (with its memo), then mark it sent
    assert len(queued["queue"]) == 1 and [e[0] for e in queued["memo"][CID]] == [7]
    assert queued["last"] == {CID: E0}


@pytest.mark.parametrize("reboot", [True, False], ids=["power-cut", "flash-full"])
def test_a_failed_flash_write_sends_nothing_and_changes_nothing(tmp_path, monkeypatch, reboot):
    """A draw that never reached flash is never sent: after a power cut the next
    boot draws afresh; when the write fails without a reboot (flash full) the
    state in memory is left as it was and the next tick draws afresh.  Either
    way only one draw ever leaves the board, and it is the one memoized."""
    dev = Device(tmp_path, seed=5, memoize=True)
    state = dev.node.state
    before = (list(state.queue), state.seq, dict(state.last), state.memo)

    def fail(path, obj):
        raise OSError("power cut" if reboot else "no space left")

    monkeypatch.setattr(files, "save", fail)
    dev.value, dev.now = 7, T0
    with pytest.raises(OSError):
        dev.node.tick()
    assert (list(state.queue), state.seq, dict(state.last), state.memo) == before
    assert dev.link.out == []
    monkeypatch.undo()
    if reboot:
        dev.boot()
    body, used = dev.report(7, 0)
    assert used > 0 and len(dev.link.out) == 1
    assert dev.report(7, 1) == (body, 0)


def test_new_config_drops_other_memos(tmp_path):
    key = bytes(range(16))
    dev = Device(tmp_path, seed=6, memoize=True, fleet_key=key.hex(), max_epsilon=2.0,
                 max_ratio=privacy.cap(2.0))
    dev.report(5, 0)
    other = MssConfig.build(64, 2.0, [55, 59, 61, 62])
    dev.node.new_config(json.loads(seal(other.to_dict(), key, "default", 1)))
    assert dev.node.s.config_id == other.config_id_hex
    _, used = dev.report(5, 1)
    assert used > 0  # another channel: a new draw
    saved = json.loads((tmp_path / "state.json").read_text())["memo"]
    assert list(saved) == [other.config_id_hex]


@pytest.mark.parametrize("memo", [
    [], {"aa": "x"}, {"aa": [[1]]}, {"aa": [["1", "00"]]}, {"aa": [[1, "zz"]]}, {"aa": [[True, "00"]]},
    {"aa": [[1, 5]]}, {"aa": [[1, "0"]]}, {"aa": [None]}, {"aa": [[1, 0, "00"]]}, {"aa": {"1": "00"}}])
def test_ill_typed_memo_starts_fresh(tmp_path, memo):
    (tmp_path / "state.json").write_text(json.dumps({"seq": 9, "last": {"aa": 3}, "memo": memo}))
    s = State(str(tmp_path / "state.json"), queue_max=2, memo_max=4)
    assert s.seq == 0 and s.last == {} and s.memo == {}


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("entry", [[5, ""], [5, "00"],  # too short
                                   [5, "c0000000"],  # block 3 of 3
                                   [5, "0000000000"],  # block 0 has 31 body bits: 4 bytes
                                   [5, "80000000"],  # block 2 has 34: 5 bytes
                                   [5, "00000001"]])  # non-zero padding
def test_memo_that_is_no_body_of_the_config_is_redrawn(tmp_path, runtime, entry):
    """A memo of the right types that cannot be a body of this config (block
    index, length, padding) is replaced by a fresh draw; the board goes on."""
    assert list(CFG.body_bits) == [31, 31, 34] and CFG.jbits == 2
    (tmp_path / "state.json").write_text(json.dumps({"memo": {CID: [entry]}}))
    reports, consumed = run_reboots(runtime, tmp_path, [5, 5], memoize=True)
    assert consumed[0] > 0 and consumed[1] == 0
    assert reports[0][HEADER_BYTES:] == reports[1][HEADER_BYTES:]
    WireCodec(CFG).decode(reports[0])
    memo = json.loads((tmp_path / "state.json").read_text())["memo"][CID]
    assert len(memo) == 1 and memo[0] != entry


VECTORS = ["k64_eps1", "k64_eps4", "k1024_eps4", "k22000_eps5"]
REPLAY_VECTORS = r"""
import json, sys
from mss_device.params import Params
from mss_device.rng import ByteRng
from mss_node.reporter import Reporter
d = json.load(open(sys.argv[1]))
dry = ByteRng(lambda n: b"")
r = Reporter(Params(d["config"]), dry)
out = []
for v in d["vectors"]:
    body = bytes.fromhex(v["report_hex"])[11:]
    out.append([r.replay(body, v["epoch"], v["seq"]).hex(), r.replay(body, 0x3FFFFFFF, 0xFFFF).hex()])
print(json.dumps([out, dry.consumed]))
"""


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("vector", VECTORS)
def test_replay_writes_the_encoders_header(runtime, vector):
    """replay(body) is byte for byte the encoder's report of that draw, for the
    shared test vectors (block indices of 1 to 4 bits, bodies of 2 to 159 bytes)
    and at the largest epoch and sequence number."""
    from micropython_runner import FIRMWARE

    path = vectors.DIR / f"{vector}.json"
    if runtime == "micropython":
        res = run(REPLAY_VECTORS, args=[str(path)])
    else:
        res = subprocess.run([sys.executable, "-c", REPLAY_VECTORS, str(path)], capture_output=True,
                             text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    out, consumed = json.loads(res.stdout)
    d = json.loads(path.read_text())
    cfg = MssConfig.from_dict(d["config"])
    codec = WireCodec(cfg)
    assert consumed == 0
    for v, (same, top) in zip(d["vectors"], out):
        assert same == v["report_hex"]
        assert top == codec.encode(v["j"], v["subset"], 0x3FFFFFFF, 0xFFFF).hex()


def test_replay_allocates_only_its_output(tmp_path):
    """Under MicroPython with the gc off, a replay allocates exactly what
    building its output costs (a bytearray, then bytes), and no more than the
    encoder allocates for the same (j, Z)."""
    script = r"""
import gc, json, sys
from mss_device.params import Params
from mss_device.randomiser import privatise
from mss_node.reporter import Reporter
r = Reporter(Params(json.load(open(sys.argv[1]))))
c = r.client
diff = []
for i in range(21):
    j = privatise(r.params, i, r.rng, c.mark)
    body = c.encoder.encode(j, c.mark, 1, i)[11:]
    gc.collect(); gc.disable()
    a0 = gc.mem_alloc(); r.replay(body, 2, i); a1 = gc.mem_alloc()
    c.encoder.encode(j, c.mark, 2, i); a2 = gc.mem_alloc()
    bytes(bytearray(11 + len(body))); a3 = gc.mem_alloc()
    gc.enable()
    diff.append([(a1 - a0) - (a3 - a2), (a1 - a0) - (a2 - a1)])
print(json.dumps(diff[1:]))  # the first calls fill lookup caches
"""
    out = run(script, args=[write_config(tmp_path)])
    assert out.returncode == 0, out.stdout + out.stderr
    diff = json.loads(out.stdout)
    assert len(diff) == 20 and all(output == 0 and encoder <= 0 for output, encoder in diff)


@pytest.mark.parametrize("field,value,why", [
    ("memoize", 1, "device.memoize must be true or false"),
    ("memoize", "yes", "device.memoize must be true or false"),
    ("memoize", None, "device.memoize must be true or false"),
    ("memo_max", 0, "device.memo_max must be at least 1"),
    ("memo_max", -1, "device.memo_max must be a non-negative integer"),
    ("memo_max", "16", "device.memo_max must be a non-negative integer"),
    ("memo_max", True, "device.memo_max must be a non-negative integer"),
])
def test_bad_memo_settings_are_rejected(field, value, why):
    d = dict(CFG.to_dict(), device={"device_id": "x", field: value})
    with pytest.raises(ValueError, match=why):
        settings.Settings(d)


def test_memo_settings_defaults_and_template():
    s = settings.Settings(dict(CFG.to_dict(), device={"device_id": "x"}))
    assert s.device["memoize"] is False and s.device["memo_max"] == 16
    from micropython_runner import FIRMWARE

    template = json.loads((FIRMWARE / "config.json").read_text())
    template["device"]["device_id"] = "x"
    s = settings.Settings(template)
    assert s.device["memoize"] is False and s.device["memo_max"] == 16


K16 = MssConfig.build(16, 2.0, [11, 13, 14, 15])
N_DEVICES, EPOCHS, MOVERS = 3000, 3, 0.3
Z_MAX = 4.5


def test_each_epoch_estimate_is_unbiased_with_memoize(tmp_path):
    """3000 emulated devices (the firmware's Node, a seeded ByteRng each),
    values from Zipf(1.1) over k = 16; 70% keep their value, 30% redraw it
    every epoch.  Each epoch's reports are decoded on their own; every item's
    z = (estimate - true frequency) / SE must stay below 4.5 over 16 items x 3
    epochs (+ the 16 pooled ones): with exact SEs the union bound gives a
    false-alarm rate of 64 x 2 x 3.4e-6 = 4.4e-4.  The pooled estimate uses
    SE x sqrt(3): a device's memoized reports are perfectly correlated, so
    the decoder's independence SE is too small by up to sqrt(reports per device).
    The same statistic rejects a wrong truth (items 0 and 1 swapped): it can fail.
    """
    codec = WireCodec(K16)
    decoder = Decoder(K16)
    gen = np.random.default_rng(2025)
    dist = parse("zipf:1.1", 16)
    values = [gen.choice(16, size=N_DEVICES, p=dist)]
    movers = gen.random(N_DEVICES) < MOVERS
    for _ in range(EPOCHS - 1):
        values.append(np.where(movers, gen.choice(16, size=N_DEVICES, p=dist), values[0]))
    write_config(tmp_path, cfg=K16, memoize=True)
    devices = [Device(tmp_path, seed=1000 + i, name=f"s{i}.json") for i in range(N_DEVICES)]
    bodies = np.empty((EPOCHS, N_DEVICES), dtype=object)
    used = np.zeros((EPOCHS, N_DEVICES), dtype=int)
    pooled = Counts(K16)
    z = []
    for e in range(EPOCHS):
        reports = []
        for i, dev in enumerate(devices):
            bodies[e, i], used[e, i] = dev.report(int(values[e][i]), e)
            reports.append(codec.decode(dev.link.out[-1]))
        assert {(r.epoch, r.seq) for r in reports} == {(E0 + e, e)}
        counts = Counts(K16).add(reports)
        pooled = pooled.merge(counts)
        est = decoder.decode(counts)
        truth = np.bincount(values[e], minlength=16) / N_DEVICES
        z.append((est.raw - truth) / est.stderr)
        wrong = truth[[1, 0] + list(range(2, 16))]
        assert np.max(np.abs((est.raw - wrong) / est.stderr)) > Z_MAX
    est = decoder.decode(pooled)
    truth = np.bincount(np.concatenate(values), minlength=16) / (N_DEVICES * EPOCHS)
    z.append((est.raw - truth) / (est.stderr * math.sqrt(EPOCHS)))
    assert np.max(np.abs(z)) < Z_MAX, np.round(z, 2)
    # memo reuse: stayers send epoch 0's body again, with no random byte
    stay = ~movers
    assert all(bodies[e, i] == bodies[0, i] for e in (1, 2) for i in np.flatnonzero(stay))
    assert used[0].min() > 0 and used[1:, stay].max() == 0
    # movers: a value seen before by that device reuses its body; a new one is drawn
    for i in np.flatnonzero(movers):
        seen = {}
        for e in range(EPOCHS):
            v = values[e][i]
            if v in seen:
                assert bodies[e, i] == seen[v] and used[e, i] == 0
            else:
                assert used[e, i] > 0
                seen[v] = bodies[e, i]


def test_turning_memoize_off_removes_the_memos_from_flash(tmp_path):
    dev = Device(tmp_path, seed=9, memoize=True)
    dev.report(7, 0)
    assert json.loads((tmp_path / "state.json").read_text())["memo"]
    Device(tmp_path, seed=9, memoize=False)  # the board restarts with memoize off
    assert json.loads((tmp_path / "state.json").read_text())["memo"] == {}


@pytest.mark.parametrize("irr", [None, 0.5])
def test_node_memoizes_olh_with_device_seed_and_redraws_the_irr(tmp_path, irr):
    """The board (MicroPython, one boot per epoch, the value unchanged): memoize with olh
    seed device; with an IRR every epoch reads a few random bytes (the IRR) and the memo
    holds the first draw's y'; without one the body is re-sent and no byte read."""
    cfg = OracleConfig("olh", 64, 3.0, seed="device", irr_epsilon=irr)
    d = dict(cfg.to_dict(), device={"device_id": "m1", "transport": "serial", "memoize": True})
    (tmp_path / "config.json").write_text(json.dumps(d))
    out = run(REBOOTS, cwd=tmp_path, args=[str(tmp_path / "config.json"), str(tmp_path / "state.json"),
                                           json.dumps([5] * 6)])
    assert out.returncode == 0, out.stdout + out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    reports = [bytes.fromhex(sent[0]) for sent, _ in res]
    used = [u for _, u in res]
    memo = json.loads((tmp_path / "state.json").read_text())["memo"][cfg.config_id_hex]
    assert len(memo) == 1 and memo[0][0] == 5
    c = codec(cfg)
    decoded = [c.decode(r, "m1") for r in reports]
    assert len({r.subset[:2] for r in decoded}) == 1  # one seed for every epoch
    if irr is None:
        assert used[0] > 0 and used[1:] == [0] * 5
        assert {r[HEADER_BYTES:].hex() for r in reports} == {memo[0][1]}
    else:
        assert used[0] > 4 and all(u >= 4 for u in used[1:])  # chance(T1) reads 4 bytes a report
        assert len({r[HEADER_BYTES:] for r in reports}) > 1  # p1 ~ 0.08 on g = 21: all equal w.p. < 1e-5
