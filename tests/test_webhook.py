"""Uplinks over an authenticated channel (issue 48 item 4): ChirpStack v4's HTTP integration (both
marshalers, events built with the official ``chirpstack-api`` protobufs) and The Things Stack's
webhooks, POSTed over real HTTP on loopback to a running aggregator (in process: its service and
its web server), through the same ingest as the MQTT integration: a report stored once however
often it is posted, the quarantine reasons, answers only after the store's commit (503 when it
fails, so that the network server retries), forged posts refused and counted.  About 2 s."""
import base64
import json
import re
import time
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from mss_aggregator.collect.links import LinkError, Links, Webhook
from mss_aggregator.collect.lorawan import webhook_server
from mss_aggregator.collect.service import Aggregator
from mss_aggregator.collect.store import StoreError, open_store
from mss_aggregator.devices.network_server import chirpstack_event, marshal, tts_uplink
from mss_aggregator.web.live import LiveView
from mss_aggregator.web.server import WebServer
from mss_cli.main import main
from mss_iot import Campaign
from mss_protocol.codec import codec
from test_collect_lorawan import APP, GRR, PERIOD, TENANT, eui, save

TOKEN = "4f1c0b6e9d2a7c3e8b5f1a6d0c9e2b7a"
KINDS = {"chirpstack-json": ("chirpstack", "json"), "chirpstack-protobuf": ("chirpstack", "protobuf"),
         "tts": ("tts", None)}


def event(how, dev, fcnt, frame, t, fport=1):
    """The body the network server POSTs for one uplink (``how``: a key of KINDS)."""
    kind, marshaler = KINDS[how]
    if kind == "chirpstack":
        return marshal(chirpstack_event(APP, dev, fport, fcnt, frame, t)[1], marshaler)
    return json.dumps(tts_uplink(APP, TENANT, dev, fport, fcnt, frame, t)[1]).encode()


class Running:
    """An aggregator taking ``kind``'s webhook, its web server on a free loopback port."""

    def __init__(self, tmp_path, kind):
        self.store_path = tmp_path / "s.sqlite"
        links = Links(lorawan=Webhook(webhook_server(kind), TOKEN))
        self.agg = Aggregator(Campaign.read(save(GRR, tmp_path / "cfg.json")), self.store_path, links, name="t",
                              log=lambda line: None)
        self.view = LiveView(self.agg.store.location, interval=3600, device=self.agg.device)
        self.web = WebServer(self.view, "127.0.0.1:0", webhook=self.agg.webhook).start()
        self.agg.start()
        self.url = f"{self.web.url}lorawan/{kind}"

    def post(self, body, token=TOKEN, query="?event=up", auth=None):
        """(status, JSON answer) of one POST."""
        headers = {"Content-Type": "application/octet-stream"}
        if auth or token:
            headers["Authorization"] = auth or f"Bearer {token}"
        req = urllib.request.Request(self.url + query, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def get(self, path):
        with urllib.request.urlopen(self.web.url + path, timeout=10) as r:
            return r.read().decode()

    def counters(self):
        s = open_store(self.store_path)
        try:
            return s.counters(), s.accepted_keys()
        finally:
            s.close()

    def stop(self):
        self.agg.stop()
        self.web.stop()
        self.view.close()


@pytest.fixture
def running(tmp_path, request):
    run = Running(tmp_path, KINDS[request.param][0])
    yield run
    run.stop()


@pytest.mark.parametrize("running", list(KINDS), indirect=True)
def test_posts_are_stored_once_after_the_commit_and_forgeries_refused(running, request):
    how = request.node.callspec.params["running"]
    c0, now = codec(GRR), float(int(time.time()))
    epoch = int(now) // PERIOD
    reports = [(eui(d), 10 + d, c0.encode(d % GRR.k)) for d in range(5)]
    for n, (dev, fcnt, frame) in enumerate(reports, 1):
        assert running.post(event(how, dev, fcnt, frame, now)) == (200, {"stored": True})
        # answered after the commit: another connection to the store already reads it
        assert running.counters()[0]["accepted"] == n
    again = event(how, *reports[0], now)  # the network server sends it again (a lost answer, a retry)
    assert running.post(again) == (200, {"stored": True})
    forged = event(how, eui(9), 1, c0.encode(3), now)
    assert running.post(forged, token=None)[0] == 401
    assert running.post(forged, token="not-the-token")[0] == 401
    assert running.post(forged, auth="Basic " + base64.b64encode(f"x:{TOKEN}".encode()).decode())[0] == 401
    bad = [event(how, eui(7), 3, c0.encode(1), now, fport=2),  # not the reports' FPort
           event(how, eui(8), 3, bytes(13), now)]  # longer than any frame
    bad.append(b"\x08\x01garbage" if how == "chirpstack-protobuf" else b'{"truncated": ')
    for body in bad:
        assert running.post(body) == (200, {"stored": True})  # stored as quarantine rows
    c, keys = running.counters()
    assert (c["received"], c["accepted"], c["duplicate"], c["rejected"]) == (9, 5, 1, 3)
    assert set(keys) == {(dev, epoch, fcnt) for dev, fcnt, _ in reports}  # each once; the forged one not
    reasons = {k for k, v in c.items() if k.startswith("rejected_") and v}
    json_reason = "rejected_lorawan_protobuf" if how == "chirpstack-protobuf" else "rejected_lorawan_json"
    assert reasons == {"rejected_lorawan_fport", "rejected_payload", json_reason}
    if how.startswith("chirpstack"):  # ChirpStack posts every event to one URL, ?event= says which
        assert running.post(forged, query="?event=join") == (200, {"ignored": "event join: not an uplink"})
        assert running.counters()[0]["received"] == 9
    hook = json.loads(running.get("api/counters"))["webhook"]
    schema = json.loads(running.get("api/openapi.json"))["paths"]["/api/counters"]["get"]["responses"]["200"][
        "content"]["application/json"]["schema"]["properties"]["webhook"]
    assert sorted(hook) == sorted(schema["required"]) and sorted(hook["posts"]) == sorted(
        schema["properties"]["posts"]["required"])
    assert hook["refused"] == {"no_token": 2, "bad_token": 1}
    assert hook["posts"]["stored"] == 9
    metrics = {s.name + str(sorted(s.labels.items())): s.value
               for f in text_string_to_metric_families(running.get("metrics")) for s in f.samples}
    assert metrics["mss_webhook_refused_total[('reason', 'bad_token')]"] == 1
    assert metrics["mss_webhook_refused_total[('reason', 'no_token')]"] == 2
    assert metrics["mss_webhook_posts_total[('outcome', 'stored')]"] == 9


@pytest.mark.parametrize("running", ["tts"], indirect=True)
def test_a_failed_commit_answers_503_so_the_network_server_retries(running):
    def broken(items):
        raise StoreError("disk full")
    running.agg.store.write_batch = broken
    status, doc = running.post(event("tts", eui(1), 1, codec(GRR).encode(1), None))
    assert status == 503 and "send it again" in doc["error"]
    assert running.agg.failures.event.is_set()  # the command stops on it, nothing acknowledged
    assert running.counters()[0]["received"] == 0


def test_links_and_command_line_refuse_what_cannot_work(tmp_path):
    with pytest.raises(LinkError, match="no broker goes with them"):
        Links.of(broker="mqtt://127.0.0.1:1883", lorawan=Webhook(webhook_server("tts"), TOKEN))
    with pytest.raises(LinkError, match="visible ASCII"):
        Webhook(webhook_server("chirpstack"), "two words")
    assert TOKEN not in repr(Webhook(webhook_server("chirpstack"), TOKEN))  # never in a log or a traceback
    cfg, token = save(GRR, tmp_path / "cfg.json"), tmp_path / "token"
    token.write_text(TOKEN + "\n")
    base = ["aggregate", "--config", str(cfg), "--store", str(tmp_path / "s.sqlite")]
    cases = {("--lorawan-webhook", "tts", "--webhook-token-file", str(token)): "needs --http",
             ("--lorawan-webhook", "tts", "--http", "127.0.0.1:0"): "needs --webhook-token-file",
             ("--webhook-token-file", str(token), "--serial", "/dev/null"): "is for --lorawan-webhook",
             ("--lorawan-webhook", "tts", "--webhook-token-file", str(token), "--http", "127.0.0.1:0",
              "--broker", "mqtt://127.0.0.1:1883"): "drop --broker",
             ("--lorawan-webhook", "chirpstack", "--webhook-token-file", str(token), "--http", "127.0.0.1:0",
              "--lorawan", f"chirpstack:{APP}"): "give one"}
    for args, message in cases.items():
        result = CliRunner().invoke(main, base + list(args))
        assert result.exit_code == 2 and message in re.sub(r"\s+", " ", result.output), (args, result.output)
