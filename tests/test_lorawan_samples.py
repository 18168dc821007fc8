"""tools/lorawan_samples.py and the sample uplink events of docs/lorawan.md
(issue 43 item 5): for a config from the real ``mss plan --link lorawan:...``
the tool writes ChirpStack v4 (JSON and protobuf) and The Things Stack v3
events of a real report, dated now, which a real ``mss aggregate --lorawan``
stores from a real Mosquitto, none quarantined; the doc's block is exactly
what the tool prints for the config and arguments the doc names, and each of
its events is accepted once the current time is put in.  The checks can fail:
the doc's events as they stand (an old time) are quarantined as ``epoch``, by
the real aggregator too, and with a 1-byte payload as ``wire_length``.
"""
import base64
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from chirpstack_api import integration

from brokers import mosquitto  # noqa: F401 (fixture)
from collect_helpers import AggregatorProcess, wait_for
from mss_aggregator.campaign import Campaign
from mss_aggregator.collect.lorawan import parse_spec, unix_time
from mss_aggregator.collect.store import open_store
from mss_aggregator.devices.network_server import rfc3339
from mss_aggregator.devices.uplink_samples import Applications, BoardCampaign, SampleUplink, refusal

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "lorawan_samples.py"
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
EUI_A, EUI_B = "70b3d57ed0000001", "70b3d57ed0000002"
SPECS = Applications().specs()  # the tool's defaults, which the doc uses
# each plan's events to applications of their own: two aggregators on one topic would both hear them
APPS = {"eu868": Applications("eu868-app", "eu868-app", "ttn"), "doc": Applications()}
EVENTS = {"chirpstack-json": "chirpstack", "chirpstack-protobuf": "chirpstack", "tts": "tts"}


def documented():
    """(mss plan arguments, tool arguments, the block they print) of docs/lorawan.md."""
    text = (ROOT / "docs" / "lorawan.md").read_text()
    m = re.search(r"\n    mss plan ([^\n]*)\n    \.venv/bin/python tools/lorawan_samples\.py ([^\n]*)\n\n"
                  r"<!-- tools/lorawan_samples\.py -->\n\n(.*?)\n<!-- end -->", text, re.S)
    assert m, "docs/lorawan.md: no sample block after its two commands"
    return shlex.split(m[1]), shlex.split(m[2]), m[3]


def run_all(runs):
    """Run the (command, cwd) pairs at once; their outputs."""
    procs = [subprocess.Popen(c, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c, cwd in runs]
    outs = [p.communicate(timeout=60) for p in procs]
    for (c, _), p, (_, err) in zip(runs, procs, outs):
        assert p.returncode == 0, (c, err[-2000:])
    return [out for out, _ in outs]


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """{"eu868": a directory with the EU868 DR0 plan, "doc": one with the plan docs/lorawan.md
    names (US915 DR0)}, each config.json written by the real mss plan run there."""
    root = tmp_path_factory.mktemp("plans")
    args = {"eu868": ["--k", "1024", "--epsilon", "4", "--link", "lorawan:eu868:0", "--device-config", "config.json"],
            "doc": documented()[0]}
    dirs = {name: root / name for name in args}
    for d in dirs.values():
        d.mkdir()
    run_all([([sys.executable, "-m", "mss_cli", "plan", *a], dirs[name]) for name, a in args.items()])
    return dirs


def printed_events(printed):
    """{event name: (topic, the document as the network server publishes it)} of --markdown's output."""
    cs_topic, cs_json = re.search(r"on `(application/\S+)`:\n\n```json\n(.*?)\n```", printed, re.S).groups()
    hexed = re.search(r"```text\n(.*?)\n```", printed, re.S)[1].replace("\n", "")
    tts_topic, tts_json = re.search(r"on `(v3/\S+)`:\n\n```json\n(.*?)\n```", printed, re.S).groups()
    return {"chirpstack-json": (cs_topic, json.dumps(json.loads(cs_json), separators=(",", ":")).encode()),
            "chirpstack-protobuf": (cs_topic, bytes.fromhex(hexed)),
            "tts": (tts_topic, json.dumps(json.loads(tts_json)).encode())}


def edited(name, document, t=None, payload=None):
    """``document`` with its receive time(s) set to unix time ``t`` and/or its payload replaced."""
    if name == "chirpstack-protobuf":
        event = integration.UplinkEvent.FromString(document)
        if t is not None:
            event.time.FromNanoseconds(int(t * 1e6) * 1000)
        if payload is not None:
            event.data = payload
        return event.SerializeToString(deterministic=True)
    doc = json.loads(document)
    up = doc["uplink_message"] if name == "tts" else doc
    if t is not None:
        if name == "tts":
            doc["received_at"] = up["received_at"] = rfc3339(t)
        else:
            doc["time"] = rfc3339(t)
    if payload is not None:
        up["frm_payload" if name == "tts" else "data"] = base64.b64encode(payload).decode()
    return json.dumps(doc).encode()


def test_the_docs_samples_are_the_tools_and_accepted_when_current(plans):
    """The doc's block is the tool's output for the doc's config, time and seed, byte for byte;
    the aggregator's ingest accepts each event with the current time put in, and quarantines
    it as written (an old time: ``epoch``) and with a 1-byte payload (``wire_length``)."""
    _, tool_args, block = documented()
    printed, = run_all([([sys.executable, str(TOOL), *tool_args], plans["doc"])])
    assert printed == block
    campaign = Campaign.read(plans["doc"] / "config.json")
    clock, now = campaign.clock, time.time()
    board = BoardCampaign(campaign.cfg, clock, campaign.lorawan_ports())
    events = printed_events(printed)
    doc_time = unix_time(json.loads(events["tts"][1])["received_at"])
    assert doc_time is not None
    for name, (topic, document) in events.items():
        up = SampleUplink(name, SPECS[EVENTS[name]], topic, document, "")
        assert parse_spec(up.spec).uplink(topic, document, 1).dev_eui == EUI_A
        assert refusal(board, replace(up, document=edited(name, document, now)), now) is None, name
        if abs(now - doc_time) > (clock["accept_past_epochs"] + 2) * clock["period_s"]:
            assert refusal(board, up, now).startswith("epoch: "), name  # the doc's fixed time, not today's window
        one_byte = replace(up, document=edited(name, document, now, b"\x8b"))  # as the old doc samples
        assert refusal(board, one_byte, now).startswith("wire_length: "), name


def test_fresh_samples_are_stored_by_a_real_aggregator(tmp_path, mosquitto, plans):
    """For each plan: the tool's events of two devices (A: ChirpStack JSON and TTS; B: ChirpStack
    protobuf and TTS) through Mosquitto into ``mss aggregate --lorawan chirpstack:APP`` and
    ``--lorawan tts:APP@TENANT``: each stored, under its DevEUI, epoch and FCnt, none quarantined.
    Beside them the doc's events as they stand go to the doc config's aggregators: ``epoch``."""
    aggs = {}  # started first: they come up while the tool runs
    for plan in plans:
        for server, spec in APPS[plan].specs().items():
            d = tmp_path / f"agg-{plan}-{server}"
            d.mkdir()
            aggs[plan, server] = AggregatorProcess(d, plans[plan] / "config.json", d / "store.sqlite",
                                                   broker=f"mqtt://127.0.0.1:{mosquitto.port}",
                                                   extra=("--lorawan", spec)).start()
    outs = {(plan, eui): tmp_path / f"{plan}-{eui}" for plan in plans for eui in (EUI_A, EUI_B)}
    run_all([([sys.executable, str(TOOL), "--config", str(plans[plan] / "config.json"), "--out", str(out),
               "--dev-eui", eui, "--value", "3", "--chirpstack", APPS[plan].chirpstack,
               "--tts", f"{APPS[plan].tts}@{APPS[plan].tenant}"], tmp_path) for (plan, eui), out in outs.items()])
    manifests = {key: json.loads((out / "samples.json").read_text()) for key, out in outs.items()}
    sends = {key: [] for key in aggs}  # (topic, document) to each aggregator
    for (plan, eui), manifest in manifests.items():
        for e in manifest["events"]:
            if e["name"] != ("chirpstack-protobuf" if eui == EUI_A else "chirpstack-json"):  # one marshaler each
                server = EVENTS[e["name"]]
                sends[plan, server].append((e["topic"], (outs[plan, eui] / e["file"]).read_bytes()))
    controls = printed_events(documented()[2])  # the doc's own events, as written
    doc_time = unix_time(json.loads(controls["tts"][1])["received_at"])
    clock = Campaign.read(plans["doc"] / "config.json").clock
    stale = abs(time.time() - doc_time) > (clock["accept_past_epochs"] + 2) * clock["period_s"]
    if stale:
        for name, (topic, document) in controls.items():
            sends["doc", EVENTS[name]].append((topic, document))
    for agg in aggs.values():
        agg.ready()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="ns-samples")
    client.connect("127.0.0.1", mosquitto.port)
    client.loop_start()
    try:
        infos = [client.publish(topic, document, qos=parse_spec(SPECS[server]).qos)  # ChirpStack 1, TTS 0
                 for (_, server), events in sends.items() for topic, document in events]
        for info in infos:
            info.wait_for_publish(10)
        for key, agg in aggs.items():
            wait_for(agg.store, lambda c, n=len(sends[key]): c["received"] >= n, timeout=20)
    finally:
        client.loop_stop()
        client.disconnect()
        for agg in aggs.values():  # all told first, then waited for: they stop at once
            agg.proc.send_signal(signal.SIGTERM)
        assert [agg.proc.wait(20) for agg in aggs.values()] == [0] * len(aggs)
    for (plan, server), agg in aggs.items():
        s = open_store(agg.store)
        try:
            c, keys = s.counters(), s.accepted_keys()
            reasons = [r.split(":")[0] for r, in s.db.execute("SELECT reason FROM quarantine ORDER BY id")]
        finally:
            s.close()
        want = {(eui, manifests[plan, eui]["epoch"], manifests[plan, eui]["fcnt"]) for eui in (EUI_A, EUI_B)}
        controls_here = [n for n in controls if EVENTS[n] == server] if plan == "doc" and stale else []
        assert (c["accepted"], c["duplicate"], c["rejected"]) == (2, 0, len(controls_here)), (plan, server, c)
        assert keys == want, (plan, server)
        assert reasons == ["epoch"] * len(controls_here), (plan, server)
