"""The device application under MicroPython driving an emulated LoRaWAN modem
over a real pty, in each command dialect: joins with back-off, keeps every
refused report and sends it later, never sends two reports in one epoch,
switches config on a downlink and ignores malformed ones."""
import json

import pytest

from micropython_runner import run
from mss_aggregator.devices.modem import DIALECTS, emulator
from mss_protocol.choose import Limits, Reporting, choose
from mss_protocol.codec import codec
from mss_protocol.configs import load_dict

EUI = "70b3d57ed0000001"
T0 = 1_800_000_000  # the device's clock: one epoch per tick (period_s = poll_s = 1)

# A virtual clock that sleep() advances, and a print of every uplink the
# link reports sent, with the epoch it left in.
NODE = r"""
import sys
from mss_node import app, lorawan_link
t = [int(sys.argv[4])]
def clock():
    return t[0]
def sleep(s):
    t[0] += s
send = lorawan_link.LorawanLink.send
def traced(self, report):
    ok = send(self, report)
    if ok:
        print("UPLINK %d %s" % (t[0], report.hex()))
    return ok
lorawan_link.LorawanLink.send = traced
app.run(sys.argv[1], sys.argv[2], sensor=lambda: 5, clock=clock, sleep=sleep, ticks=int(sys.argv[3]))
"""


def make_config(k, eps, frame):
    return load_dict(choose(k, eps, "auto", limits=Limits(frame=frame, max_bytes=11))["config"])


@pytest.fixture(scope="module")
def compact():
    return make_config(16, 2.0, "compact")


def modem_settings(modem, dialect, **kw):
    return dict({"modem": dialect.replace("-old", ""), "path": modem.path, "retry_s": 1,
                 "backoff_max_s": 2, "join_timeout_s": 2, "tx_timeout_s": 1}, **kw)


def write_config(folder, cfg, modem, dialect, name="config.json", **device):
    d = cfg.to_dict()
    d["device"] = dict({"campaign": "t", "period_s": 1, "poll_s": 1, "transport": "lorawan",
                        "lorawan": modem_settings(modem, dialect)}, **device)
    path = folder / name
    path.write_text(json.dumps(d))
    return path


def run_node(tmp_path, ticks):
    out = run(NODE, cwd=tmp_path, args=["config.json", "state.json", str(ticks), str(T0)], timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    uplinks = [line.split()[1:] for line in out.stdout.splitlines() if line.startswith("UPLINK ")]
    state = json.loads((tmp_path / "state.json").read_text())
    return out.stdout, [(int(t), bytes.fromhex(h)) for t, h in uplinks], state


@pytest.fixture
def modem(request):
    made = []

    def make(dialect, **kw):
        m = emulator(dialect, EUI, **kw)
        m.start()
        made.append(m)
        return m

    yield make
    for m in made:
        m.stop()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_refusals_keep_every_report_and_none_leaves_twice(tmp_path, modem, compact, dialect):
    faults = {"join": ["fail", "busy", "fail"],
              "send": ["busy", "no_channel", "duty_cycle", "length", "unjoined", "mac_err", "silent"]}
    m = modem(dialect, faults=faults)
    write_config(tmp_path, compact, m, dialect)
    log, uplinks, state = run_node(tmp_path, 40)
    assert f"device {EUI} reporting" in log  # the DevEUI from the modem is the device id
    assert m.faults == {"join": [], "send": []}, "every refusal was met"
    assert m.joins >= 2, "an unjoined refusal makes the board rejoin"
    # every drawn report went on air exactly once: draws (seq) = uplinks on air = uplinks sent
    assert state["queue"] == [] and state["dropped"] == 0
    assert len(m.uplinks) == len(uplinks) == state["seq"]
    assert [d for _, _, d in m.uplinks] == [d for _, d in uplinks]
    # compact frames carry no epoch: at most one leaves per epoch; once the
    # refusals are over, one every epoch
    epochs = [t for t, _ in uplinks]
    assert len(set(epochs)) == len(epochs)
    assert epochs[-5:] == list(range(T0 + 35, T0 + 40))
    assert "counted as sent" in log  # the silent modem: on air, not sent again
    assert all(fport == 1 for fport, _, _ in m.uplinks)
    dec = codec(compact)
    for t, data in uplinks:
        assert dec.decode(data, EUI, t - T0).config_id == compact.config_id


@pytest.mark.parametrize("frame", ["compact", "compact-epoch"])
def test_reports_wait_for_the_network(tmp_path, modem, frame):
    """Joins fail for several epochs.  compact-epoch frames queue one report per
    epoch and send them all once joined, each with its epoch; compact frames
    keep one waiting report, which stands for the epoch it leaves in."""
    cfg = make_config(16, 2.0, frame)
    m = modem("rak3172", faults={"join": ["fail"] * 4})
    write_config(tmp_path, cfg, m, "rak3172", lorawan=modem_settings(m, "rak3172", backoff_max_s=1))
    log, uplinks, state = run_node(tmp_path, 14)
    assert state["queue"] == [] and len(uplinks) == len(m.uplinks) == state["seq"]
    epochs_sent = [t for t, _ in uplinks]
    if frame == "compact":
        assert len(set(epochs_sent)) == len(epochs_sent)
        assert len(uplinks) <= 14 - 4
    else:
        dec = codec(cfg)
        dated = [dec.decode(data, EUI, t - T0).epoch for t, data in uplinks]
        assert dated == sorted(set(dated)) and len(dated) == 14  # one per epoch, none lost
        assert len(set(epochs_sent)) < len(epochs_sent)  # the backlog left in one go


@pytest.mark.parametrize("dialect", DIALECTS)
def test_downlink_switches_to_a_held_config(tmp_path, modem, compact, dialect):
    other = make_config(64, 1.0, "compact")
    assert other.config_id[:2] != compact.config_id[:2]
    m = modem(dialect)
    held = write_config(tmp_path, other, m, dialect, name="other.json")
    write_config(tmp_path, compact, m, dialect, configs=[held.name])
    for fport, data in [(2, b"\x00\x01\x02"), (2, "ZZ"), (7, other.config_id[:2]), (2, b"\xff\xfe"),
                        (2, other.config_id[:2])]:
        m.downlink(fport, data)
    log, uplinks, state = run_node(tmp_path, 12)
    assert "ignored malformed downlink on the config port (3 bytes, not 2)" in log
    assert "ignored malformed downlink on the config port (garbled)" in log
    assert "ignored downlink on port 7" in log
    assert "ignored config switch to fffe: no held config has that id" in log
    assert f"now using config {other.config_id_hex}" in log
    now = json.loads((tmp_path / "config.json").read_text())
    assert now["config_id"] == other.config_id_hex and now["device"]["configs"] == [held.name]
    tags = [data[0] & 0x3F for _, data in uplinks]
    switch = tags.index(other.config_id[0] & 0x3F)
    assert switch == 5 and set(tags[:switch]) == {compact.config_id[0] & 0x3F}
    assert set(tags[switch:]) == {other.config_id[0] & 0x3F}
    epochs = [t for t, _ in uplinks]
    assert len(set(epochs)) == len(epochs)  # the switch brings no second report in an epoch


def test_device_refuses_bad_lorawan_settings(tmp_path, compact):
    from mss_node import settings

    base = compact.to_dict()
    for lorawan, why in [({"modem": "sx1276", "path": "/dev/x"}, "device.lorawan.modem must be one of"),
                         ({"modem": "rak3172"}, "needs the modem's uart"),
                         ({"path": "/dev/x", "fport": 0}, "fport must be an application port"),
                         ({"path": "/dev/x", "fport": 2}, "fport, config_fport and time_fport must differ"),
                         ({"path": "/dev/x", "time_fport": 1}, "fport, config_fport and time_fport must differ"),
                         ({"path": "/dev/x", "fport": "1"}, "fport must be an application port"),
                         ({"path": "/dev/x", "tx_timeout_s": 0}, "tx_timeout_s must be a positive"),
                         ({"path": "/dev/x", "fprot": 3}, "unknown field device.lorawan.fprot")]:
        d = dict(base, device={"transport": "lorawan", "lorawan": lorawan})
        with pytest.raises(ValueError, match=why):
            settings.Settings(d)
    with pytest.raises(ValueError, match="device.configs must be a list"):
        settings.Settings(dict(base, device={"transport": "lorawan", "lorawan": {"path": "/dev/x"},
                                             "configs": "other.json"}))


# NODE, plus a print of every report drawn, with the epoch it was drawn in
DRAWING = NODE.replace("app.run(", r"""from mss_node import reporter
report = reporter.Reporter.report
def drawn(self, value, epoch, seq):
    out = report(self, value, epoch, seq)
    print("DRAW %d %s" % (epoch, out.hex()))
    return out
reporter.Reporter.report = drawn
app.run(""")


def test_olh_reports_decode_with_their_drawing_seed_across_a_reboot_and_a_rejoin(tmp_path, modem):
    """SPEC.md section 4: OLH's seed is the drawing epoch's.  Joins fail for 6
    epochs (6 reports queue in flash), the board reboots (a new process on
    the same state file), then the network drops the session once (a rejoin,
    FCnt from 0 again).  Every uplink, dated by the network at its arrival,
    decodes to its drawing epoch and to the seed (a, b) of that epoch and
    the DevEUI, which the board hashed with."""
    from mss_device.olh import seed

    cfg = load_dict(choose(64, 2.0, "olh", limits=Limits(frame="compact-epoch", max_bytes=11))["config"])
    runs = []
    for ticks, faults in ((6, {"join": ["fail"] * 40}), (10, {"send": ["ok"] * 3 + ["unjoined"]})):
        faults["send"] = [None if f == "ok" else f for f in faults.get("send", [])]
        m = modem("rak3172", faults=faults)
        write_config(tmp_path, cfg, m, "rak3172", lorawan=modem_settings(m, "rak3172", backoff_max_s=1))
        t0 = T0 + sum(r[0] for r in runs)
        out = run(DRAWING, cwd=tmp_path, args=["config.json", "state.json", str(ticks), str(t0)], timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
        lines = [line.split() for line in out.stdout.splitlines()]
        runs.append((ticks, m, [(int(e), h) for w, e, h in (x[:3] for x in lines if x[:1] == ["DRAW"])],
                     [(int(t), h) for w, t, h in (x[:3] for x in lines if x[:1] == ["UPLINK"])]))
    (_, first, draws1, up1), (_, second, draws2, up2) = runs
    assert first.uplinks == [] and up1 == [] and len(draws1) == 6, "the first boot sent nothing"
    assert second.joins >= 2, "the dropped session made the board rejoin"
    draws, uplinks = draws1 + draws2, up2
    assert len(uplinks) == len(draws) == 16 and [h for _, h in uplinks] == [h for _, h in draws]
    dec = codec(cfg)
    late = 0
    for (drawn_in, _), (sent_at, data) in zip(draws, uplinks):
        r = dec.decode(bytes.fromhex(data), EUI, sent_at)  # the network's epoch at arrival (period 1 s)
        assert r.epoch == drawn_in and r.subset[:2] == seed(cfg.config_id, r.epoch, EUI, cfg.protocol.P)
        late += sent_at != drawn_in
    assert late >= 6  # the queued ones left epochs after they were drawn


OTHER_EUI = "70b3d57ed0000002"


@pytest.mark.parametrize("given", [None, EUI, EUI.upper(), OTHER_EUI], ids=["absent", "equal", "case", "different"])
def test_a_lorawan_board_seeds_with_its_dev_eui(tmp_path, modem, given):
    """SPEC.md section 4, "Device ids": the board seeds OLH with the id its uplinks arrive under,
    the modem's DevEUI in lowercase; device.device_id may only name that DevEUI, in either case,
    and a board whose modem reports another refuses to start (ids that are no DevEUI at all are
    refused at load: test_lorawan_device_ids_at_load)."""
    cfg = load_dict(choose(16, 2.0, "olh", limits=Limits(frame="compact"),
                           reporting=Reporting(olh_seed="device"))["config"])
    m = modem("rak3172")
    write_config(tmp_path, cfg, m, "rak3172", **({} if given is None else {"device_id": given}))
    out = run(NODE, cwd=tmp_path, args=["config.json", "state.json", "3", str(T0)], timeout=180)
    if given == OTHER_EUI:
        assert not m.uplinks  # the board stays idle, saying why (mss_node.settings)
        assert f"device.device_id {OTHER_EUI} is not the modem's DevEUI {EUI}" in out.stdout + out.stderr
        return
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"device {EUI} reporting" in out.stdout  # the id its reporter seeds with
    assert m.uplinks


LOAD = r"""
import sys
from mss_node import settings
for p in sys.argv[1:]:
    try:
        print('LOADED', settings.load(p).device_id)
    except ValueError as exc:
        print('REFUSED', exc)
"""


def test_lorawan_device_ids_at_load(tmp_path):
    """The board's loader keeps MQTT and serial ids as given (the board writes them onto its link)
    and takes on LoRaWAN only a DevEUI, read as lowercase; the host's checks agree: mss aggregate
    and mss shuffle collecting uplinks refuse such a config, naming device.device_id."""
    from mss_aggregator.collect.lorawan import parse_spec
    from collect_helpers import build_aggregator, build_shuffler
    from mss_protocol.config_file import ConfigError

    # any protocol: the link's id
    cfg = load_dict(choose(16, 2.0, "ss", limits=Limits(frame="compact-epoch"))["config"]).to_dict()
    cases = [("lorawan", None, "LOADED None"), ("lorawan", EUI, f"LOADED {EUI}"),
             ("lorawan", EUI.upper(), f"LOADED {EUI}"), ("lorawan", "board-07", "REFUSED device.device_id"),
             ("lorawan", "70b3d57e-d000-0001", "REFUSED device.device_id"),
             ("lorawan", EUI[:15], "REFUSED device.device_id"),
             ("mqtt", "board-07", "LOADED board-07"), ("mqtt", "BOARD-07", "LOADED BOARD-07"),
             ("serial", "Board-07", "LOADED Board-07")]
    paths = []
    for n, (link, given, _) in enumerate(cases):
        device = {"period_s": 60, "transport": link, link: {"path": "/dev/null"} if link != "mqtt" else {}}
        if given is not None:
            device["device_id"] = given
        path = tmp_path / f"{n}.json"
        path.write_text(json.dumps(dict(cfg, device=device)))
        paths.append(str(path))
    out = run(LOAD, args=paths)
    assert out.returncode == 0, out.stdout + out.stderr
    for line, (link, given, expected) in zip(out.stdout.strip().splitlines(), cases):
        assert line.startswith(expected), (link, given, line)
        if link != "lorawan" or given is None or "LOADED" in expected:
            continue
        path, spec = paths[cases.index((link, given, expected))], parse_spec("chirpstack:app")
        with pytest.raises(ConfigError, match="device.device_id"):
            build_aggregator(path, tmp_path / "s.sqlite", "t", lorawan=spec, broker="mqtt://127.0.0.1:1",
                             log=lambda m: None)
        with pytest.raises(ConfigError, match="device.device_id"):
            build_shuffler(path, tmp_path / "q.sqlite", b"k" * 32, "t", broker="mqtt://127.0.0.1:1", lorawan=spec,
                           forward_broker="mqtt://127.0.0.1:1")
        assert not (tmp_path / "s.sqlite").exists() and not (tmp_path / "q.sqlite").exists()
