"""What an operator reads when something is off (issue 48's smaller findings): a refused MQTT login
in words, an estimate with nothing to decode said without nested parentheses, an all-LoRaWAN
fleet provisioned without broker accounts and summarised, device-sim's frames dated as mss decode
takes them.  Fast (about 1.5 s)."""
import json
import time

import numpy as np
import pytest
from click.testing import CliRunner

from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.store import open_store
from mss_aggregator.estimates import EstimateError, EstimateRequest, estimate_store
from mss_node.mqtt_link import connect_error
from mss_protocol.oracle_config import OracleConfig
from mss_protocol.vectors import report_from_stream

CFG = OracleConfig("grr", 12, 3.0)


class MQTTException(Exception):  # umqtt.simple's: the CONNACK's return code its one argument
    pass


@pytest.mark.parametrize("exc, said", [
    (MQTTException(5), "not authorised (MQTT CONNACK 5): check the device's mqtt.user and mqtt.password "
                       "against the broker's accounts"),
    (MQTTException(2), "client id refused (MQTT CONNACK 2): check the device id"),
    (MQTTException(99), "MQTTException(99)"),  # a code MQTT 3.1.1 does not define: as it came
    (OSError(104), "OSError(104)"),
])
def test_a_refused_connect_says_why(exc, said):
    assert connect_error(exc) == said


def test_the_emulator_raises_umqtts_codes():
    """paho reports a 3.1.1 refusal as its MQTT 5 reason code; the CPython umqtt raises the 3.1.1 one."""
    from paho.mqtt.client import convert_connack_rc_to_reason_code as reason

    from mss_aggregator.devices.cpython_umqtt.umqtt.simple import CONNACK_CODE

    assert {code: CONNACK_CODE[reason(code).value] for code in range(1, 6)} == {c: c for c in range(1, 6)}


def test_nothing_in_the_current_epoch_reads_as_sentences(tmp_path):
    before = int(time.time() // 3600)
    store, ingest = open_store(tmp_path / "s.sqlite", CFG), Ingest(CFG, "t")
    store.set_clock({"period_s": 3600, "epoch_origin": 0, "accept_past_epochs": 1})
    rng = np.random.default_rng(48)
    store.write_batch([ingest.from_mqtt(f"mss/v1/t/d{d}/report".encode(),
                                        report_from_stream(CFG.to_dict(), d % 12, rng.bytes(256), 7, 7, f"d{d}")[0])
                       for d in range(20)])
    try:
        with pytest.raises(EstimateError) as err:
            estimate_store(store, EstimateRequest())
    finally:
        store.close()
    said = str(err.value)
    assert any(said.startswith(f"no accepted reports in the current epoch, {current}, nor in the one before. ")
               for current in (before, int(time.time() // 3600))), said
    assert "the fullest: 7 (20 devices). Choose one with --epoch E, or pool them all with --all-epochs" in said
    assert "((" not in said and "))" not in said and "\n" not in said


def test_an_all_lorawan_fleet_gets_no_broker_accounts_and_a_summary(tmp_path):
    """300 LoRaWAN rows: no mosquitto/ folder (their reports come through the network server),
    and a line per transport, not a 300-row table."""
    from mss_cli.main import main
    from mss_protocol.choose import choose

    campaign = tmp_path / "campaign.json"
    campaign.write_text(json.dumps(dict(choose(16, 2.0, "grr")["config"], device={"period_s": 3600})))
    (tmp_path / "fleet.csv").write_text("dev_eui,transport,lorawan.uart\n"
                                        + "".join(f"70b3d57ed0{i:06x},lorawan,1\n" for i in range(300)))
    r = CliRunner().invoke(main, ["provision", str(tmp_path / "fleet.csv"), "--config", str(campaign),
                                  "--campaign", "field", "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.stderr
    said = r.stdout + r.stderr
    assert not (tmp_path / "out" / "mosquitto").exists() and len(list((tmp_path / "out" / "boards").iterdir())) == 300
    assert "300 lorawan boards (AppKey: 300 generated)" in said and "70b3d57ed0000001" not in said
    assert "aggregator account" not in said and "no MQTT board: no Mosquitto accounts written" in said
    assert len(said.splitlines()) < 10, said


def test_device_sim_frames_decode_as_the_aggregator_takes_them(tmp_path):
    """device-sim dates its reports by the config's campaign clock (not epoch 0, outside the
    aggregator's window), so mss decode accepts them with the same full-frame config."""
    from mss_cli.main import main

    cfg = tmp_path / "cfg.json"
    CFG.save(cfg, {"device": {"period_s": 3600}})
    sim = CliRunner().invoke(main, ["device-sim", "--config", str(cfg), "--value", "3", "--runtime", "cpython"])
    assert sim.exit_code == 0, sim.stderr
    out = CliRunner().invoke(main, ["decode", "--config", str(cfg), "--json", sim.stdout.strip()])
    assert out.exit_code == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["accepted"] and doc["frame"]["kind"] == "full" and doc["frame"]["epoch"] >= int(time.time() // 3600) - 1


def test_plan_link_mqtt_says_why_there_is_none():
    from mss_cli.main import main

    r = CliRunner().invoke(main, ["plan", "--k", "16", "--epsilon", "2", "--link", "mqtt"])
    said = " ".join(r.stderr.split())
    assert r.exit_code == 2 and "an MQTT or serial board has no payload or airtime limit to plan" in said, said
    assert "leave --link out" in said and "lorawan:<region>:<dr>" in said
