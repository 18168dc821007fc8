"""``mss aggregate --allow-list``: reports of provisioned device ids only.

The fleet CSV ``mss provision`` reads is taken as it is (a LoRaWAN row by its DevEUI, lowercase as
the uplinks carry it), so is a plain list of ids; a report of any other id is quarantined as
``not_allowed`` before its frame is read, counted as ``rejected_not_allowed`` in the store, in
/api/counters and in /metrics, and never stored as accepted.  A bad file names itself and its line.
The shuffler shares the check (its Ingest judges identity before the ids are stripped)."""
import json
import urllib.request

import numpy as np
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from collect_helpers import clocked
from mss_aggregator.campaign import Campaign
from mss_aggregator.collect.allow_list import AllowList, AllowListError
from mss_aggregator.collect.links import LinkError, Links
from mss_aggregator.collect.service import Aggregator
from mss_aggregator.collect.store import open_store
from mss_aggregator.shuffle.service import Shuffler
from mss_aggregator.web.live import LiveView
from mss_aggregator.web.server import WebServer
from mss_cli.common import DATA_ERROR
from mss_cli.main import main as cli
from mss_protocol.oracle_config import OracleConfig
from mss_protocol.vectors import report_from_stream

CFG = OracleConfig("grr", 12, 3.0)
BROKER = "mqtt://127.0.0.1:1"  # never connected: the tests feed the ingest directly
# the fleet CSV of mss provision (docs/provisioning.md), as an operator writes it
FLEET = ("device_id,transport,dev_eui,join_eui,period_s\n"
         "board-1,mqtt,,,3600\n"
         "bench-2,serial,,,\n"
         "lw-one,lorawan,70B3D57ED0000001,0000000000000000,\n"
         "\n")


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "cfg.json"
    CFG.save(path, clocked(0))
    return path


@pytest.fixture
def fleet(tmp_path):
    path = tmp_path / "fleet.csv"
    path.write_text(FLEET)
    return path


def report(device, seed):
    frame, _ = report_from_stream(CFG.to_dict(), seed % CFG.k, np.random.default_rng(seed).bytes(64), 0, seed,
                                  device)
    return f"mss/v1/t/{device}/report".encode(), frame


def test_provisions_fleet_csv_is_taken_as_it_is(fleet):
    allowed = AllowList.read(fleet)
    assert allowed.ids == {"board-1", "bench-2", "70b3d57ed0000001"}  # a LoRaWAN board: its DevEUI, lowercase
    assert allowed.source == str(fleet)


def test_a_plain_list_with_comments_and_a_devEUI_in_capitals(tmp_path):
    path = tmp_path / "ids.txt"
    path.write_text("# the bench fleet\nboard-1\n\n  bench-2   # on the shelf\n70B3D57ED0000001\n")
    allowed = AllowList.read(path)
    assert allowed.allows("board-1") and allowed.allows("bench-2") and allowed.allows("70b3d57ed0000001")
    assert not allowed.allows("board-3")


@pytest.mark.parametrize("text, where", [
    ("board-1\nbad id here\n", "line 2: 'bad id here' is not a device id"),
    ("# nothing\n\n", "no device id in it"),
    ("device_id,transport,dev_eui\nb1,mqtt,\nx,lorawan,70b3\n", "line 3: '70b3' is not a DevEUI"),
    ("device_id,transport\nb1,mqtt\n,serial\n", "line 3: a serial row needs its device_id"),
])
def test_a_malformed_allow_list_names_the_file_and_line(tmp_path, text, where):
    path = tmp_path / "allow.txt"
    path.write_text(text)
    with pytest.raises(AllowListError) as exc:
        AllowList.read(path)
    assert str(exc.value).startswith(f"{path}: {where}" if where.startswith("no") else f"{path} {where}")


def test_the_command_line_says_the_flag_the_file_and_the_line(tmp_path, config, capsys):
    bad = tmp_path / "allow.txt"
    bad.write_text("board-1\nboard 2\n")
    result = CliRunner().invoke(cli, ["aggregate", "--config", str(config), "--store", str(tmp_path / "s.sqlite"),
                                      "--broker", BROKER, "--allow-list", str(bad)])
    assert result.exit_code == DATA_ERROR
    said = result.output + capsys.readouterr().err
    assert f"--allow-list {bad} line 2: 'board 2' is not a device id" in said
    assert not (tmp_path / "s.sqlite").exists()  # refused before anything opened


def test_a_shuffled_aggregator_takes_no_allow_list(fleet):
    with pytest.raises(LinkError) as exc:
        Links.of(broker=BROKER, shuffled=True, allowed=AllowList.read(fleet))
    assert exc.value.problem == "allowed-shuffled"


def test_a_refused_device_is_quarantined_counted_and_served(tmp_path, config, fleet):
    store_path = tmp_path / "s.sqlite"
    agg = Aggregator(Campaign.read(config), store_path, Links.of(broker=BROKER, allowed=AllowList.read(fleet)),
                     name="t", log=lambda msg: None)
    try:
        items = [agg.ingest.from_mqtt(*report("board-1", 1)), agg.ingest.from_mqtt(*report("intruder", 2)),
                 agg.ingest.from_mqtt(*report("bench-2", 3)), agg.ingest.from_mqtt(*report("intruder", 4))]
        assert [i.get("reason") for i in items] == [None, "not_allowed", None, "not_allowed"]
        agg.store.write_batch(items)
    finally:
        agg.stop()
    store = open_store(store_path)
    try:
        c = store.counters()
        assert (c["received"], c["accepted"], c["rejected_not_allowed"]) == (4, 2, 2)
        total, rows = store.quarantined("not_allowed")
        assert total == 2 and all(r["detail"] == f"device intruder is not on the allow-list {fleet}" for r in rows)
    finally:
        store.close()
    view = LiveView(store_path, interval=60, brokers=list)
    web = WebServer(view, "127.0.0.1:0").start()
    try:
        with urllib.request.urlopen(web.url + "api/counters", timeout=10) as r:
            api = json.loads(r.read())
        with urllib.request.urlopen(web.url + "metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        web.stop()
        view.close()
    assert api["counters"]["rejected_not_allowed"] == 2 and api["counters"]["accepted"] == 2
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples[("mss_reports_total", (("outcome", "rejected_not_allowed"),))] == 2
    assert samples[("mss_reports_total", (("outcome", "accepted"),))] == 2


def test_the_shuffler_checks_the_allow_list_before_stripping_ids(tmp_path, config, fleet):
    links = Links.of(broker=BROKER, allowed=AllowList.read(fleet))
    shuffler = Shuffler(Campaign.read(config), tmp_path / "q.sqlite", bytes(32), "t", links=links, log=lambda m: None)
    try:
        assert shuffler.ingest.from_mqtt(*report("intruder", 5))["reason"] == "not_allowed"
        assert "report" in shuffler.ingest.from_mqtt(*report("board-1", 6))
    finally:
        shuffler.stop()
