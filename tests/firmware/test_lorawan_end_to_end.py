"""The whole LoRaWAN path with real parts: the firmware under MicroPython on an
emulated modem (pty), ChirpStack-shaped uplinks through a real Mosquitto, two
aggregators (one store per config), and ``mss switch-config`` scheduling the
downlink that moves the device to its second, held config."""
import json
import subprocess
import sys
import time

from brokers import mosquitto  # noqa: F401 (fixture)
from micropython_runner import run
from mss_aggregator.collect.lorawan import parse_spec
from collect_helpers import build_aggregator
from mss_aggregator.collect.store import open_store
from mss_aggregator.devices.modem import emulator
from mss_aggregator.devices.network_server import ChirpStackEmulator
from mss_protocol.choose import Limits, choose
from mss_protocol.configs import load_dict

EUI = "70b3d57ed00000a1"
NODE = r"""
import sys
from mss_node import app
app.run(sys.argv[1], sys.argv[2], sensor=lambda: 7, ticks=int(sys.argv[3]))
"""


def test_uplinks_and_a_config_switch_end_to_end(tmp_path, mosquitto):
    first = load_dict(choose(16, 2.0, "auto", limits=Limits(frame="compact", max_bytes=11))["config"])
    second = load_dict(choose(64, 1.0, "auto", limits=Limits(frame="compact", max_bytes=11))["config"])
    device = {"period_s": 1, "lorawan": {"fport": 1, "config_fport": 2}}
    for name, cfg in (("a.json", first), ("b.json", second)):
        cfg.save(tmp_path / name, {"device": device})
    aggs = [build_aggregator(tmp_path / f"{name}.json", tmp_path / f"{name}.sqlite", "t",
                             f"mqtt://127.0.0.1:{mosquitto.port}", client_id=f"agg-{name}",
                             lorawan=parse_spec("chirpstack:app1"), log=lambda m: None).start() for name in "ab"]
    network = ChirpStackEmulator("127.0.0.1", mosquitto.port, "app1")
    modem = emulator("rak3172", EUI)
    network.attach(modem)
    modem.start()
    try:
        assert all(a.wait_connected(15) for a in aggs)
        out = subprocess.run([sys.executable, "-m", "mss_cli", "switch-config", "--lorawan", "chirpstack:app1",
                              "--broker", f"mqtt://127.0.0.1:{mosquitto.port}", "--to-config",
                              str(tmp_path / "b.json"), "--device", EUI], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        deadline = time.time() + 10
        while not modem.pending and time.time() < deadline:  # the network server holds it for the next uplink
            time.sleep(0.05)
        assert modem.pending == [(2, second.config_id[:2].hex().upper())]

        d = first.to_dict()
        d["device"] = {"campaign": "t", "period_s": 1, "poll_s": 1, "transport": "lorawan", "configs": ["b.json"],
                       "lorawan": {"modem": "rak3172", "path": modem.path, "retry_s": 1, "tx_timeout_s": 2}}
        (tmp_path / "config.json").write_text(json.dumps(d))
        res = run(NODE, cwd=tmp_path, args=["config.json", "state.json", "6"], timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"now using config {second.config_id_hex}" in res.stdout
        deadline = time.time() + 15
        while sum(a.store.counters()["received"] for a in aggs) < 2 * len(modem.uplinks) and time.time() < deadline:
            time.sleep(0.1)
    finally:
        modem.stop()
        network.close()
        for a in aggs:
            a.stop()
    counters = [open_store(tmp_path / f"{name}.sqlite").counters() for name in "ab"]
    tags = [data[0] & 0x3F for _, _, data in modem.uplinks]
    n_first = tags.count(first.config_id[0] & 0x3F)
    n_second = tags.count(second.config_id[0] & 0x3F)
    assert n_first >= 1 and n_second >= 2 and n_first + n_second == len(tags)
    # each store counts its own config's uplinks and quarantines the other's, nothing else
    assert counters[0]["accepted"] == n_first and counters[0]["rejected_wire_config"] == n_second
    assert counters[1]["accepted"] == n_second and counters[1]["rejected_wire_config"] == n_first
    assert counters[0]["rejected"] == n_second and counters[1]["rejected"] == n_first
    keys = open_store(tmp_path / "b.sqlite").accepted_keys()
    assert {dev for dev, _, _ in keys} == {EUI}
