"""The campaign file read once (mss_aggregator.campaign.Campaign) and the link specs checked in one
place (mss_aggregator.collect.links): what a good file gives, with the firmware's defaults where the
boards set nothing; each bad field named with the file; each link combination that cannot work
refused in the library's own terms, and mapped to a flag by the command line.  No broker, no
network: about a second."""
import ast
import json
import re
from pathlib import Path

import pytest

from mss_aggregator.campaign import Campaign, NoClock
from mss_aggregator.collect.collectors import TlsFileError, tls_context
from mss_aggregator.collect.links import PROBLEMS, LinkError, Links, MqttEndpoint, TlsFiles
from mss_aggregator.collect.lorawan import parse_spec
from mss_aggregator.collect.service import Aggregator
from mss_aggregator.collect.store import QUARANTINE_MAX_ROWS
from mss_aggregator.shuffle.service import Batching
from mss_cli.aggregate import LINK_FLAGS
from mss_node.lorawan_link import DEFAULTS as LORAWAN_DEFAULTS
from mss_node.settings import DEVICE_DEFAULTS
from mss_protocol.config_file import ConfigError
from mss_protocol.oracle_config import OracleConfig

GRR = OracleConfig("grr", 4, 2.0, "full")
COMPACT = OracleConfig("grr", 4, 2.0, "compact")
BROKER = "mqtt://127.0.0.1:1"
CHIRPSTACK = parse_spec("chirpstack:app")


def write(tmp_path, cfg=GRR, **sections):
    path = tmp_path / "campaign.json"
    cfg.save(path, sections)
    return path


def test_a_campaign_file_read_once_with_the_firmware_defaults(tmp_path):
    path = write(tmp_path, device={"period_s": 600, "epoch_origin": 1700000000},
                 labels=["a", "b", "c", "d"])
    c = Campaign.read(path)
    assert c.source == str(path) and c.cfg.config_id_hex == GRR.config_id_hex
    assert c.categories.labels == ("a", "b", "c", "d")
    assert c.clock == {"period_s": 600, "epoch_origin": 1700000000,
                       "accept_past_epochs": DEVICE_DEFAULTS["queue_max"]}
    assert c.require_clock("why") is c.clock
    assert c.setting("period_s") == 600 and c.setting("memoize") is DEVICE_DEFAULTS["memoize"]
    assert c.setting("memo_max") == DEVICE_DEFAULTS["memo_max"]
    assert c.lorawan_ports() == (LORAWAN_DEFAULTS["fport"], LORAWAN_DEFAULTS["time_fport"])
    assert c.quarantine_max_rows == QUARANTINE_MAX_ROWS
    c2 = Campaign.read(write(tmp_path, device={"period_s": 60, "queue_max": 5, "memoize": True,
                                               "lorawan": {"fport": 7, "time_fport": 9}},
                             aggregator={"quarantine_max_rows": 3}))
    assert c2.clock["accept_past_epochs"] == 5 and c2.setting("memoize") is True
    assert c2.lorawan_ports() == (7, 9) and c2.quarantine_max_rows == 3
    with pytest.raises(Exception):  # frozen: one reading, shared
        c2.clock = None


def test_the_file_s_object_one_port_and_a_rewrite_checked_as_read(tmp_path):
    """document: the file's object, a copy (what mss provision and mss deploy build boards from);
    lorawan_port: one FPort, given or the firmware's; rewritten: the object to be written back,
    checked as read, a bad field named with the file."""
    path = write(tmp_path, device={"period_s": 600, "lorawan": {"config_fport": 5}}, labels=["a", "b", "c", "d"])
    c = Campaign.read(path)
    assert c.document == json.loads(path.read_text()) and c.document["device"] is not c.device
    assert c.lorawan_port("config_fport") == 5 and c.lorawan_port("fport") == LORAWAN_DEFAULTS["fport"]
    assert c.rewritten(dict(c.document, device={"period_s": 60})).clock["period_s"] == 60
    with pytest.raises(ConfigError, match=f"{path}: .*budget"):
        c.rewritten(dict(c.document, device={"period_s": 60, "budget": {"epsilon": 4.0}}))


@pytest.mark.parametrize("sections, message", [
    ({"device": {"period_s": 0}}, "device.period_s must be a whole number of seconds >= 1"),
    ({"device": {"period_s": 60, "epoch_origin": -1}}, "device.epoch_origin must be a unix time"),
    ({"device": [1]}, "device must be an object"),
    ({"device": {"period_s": 60}, "aggregator": {"quarantine_rows": 5}}, "unknown field aggregator.quarantine_rows"),
    ({"device": {"period_s": 60}, "aggregator": {"quarantine_max_rows": "many"}},
     "aggregator.quarantine_max_rows must be a non-negative integer"),
    ({"aggregator": {"accept_past_epochs": 2}}, "aggregator.accept_past_epochs needs device.period_s"),
    ({"device": {"period_s": 60, "memoize": "yes"}}, "device.memoize must be true or false"),
    ({"device": {"period_s": 60, "budget": 3}}, "device.budget must be an object"),
    ({"labels": ["a", "b"]}, "labels must be a list of k = 4 names"),
])
def test_each_bad_field_is_named_with_the_file(tmp_path, sections, message):
    path = write(tmp_path, **sections)
    with pytest.raises(ConfigError) as err:
        Campaign.read(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)


def test_unreadable_files_and_a_missing_clock(tmp_path):
    with pytest.raises(ConfigError, match="campaign.json"):
        Campaign.read(tmp_path / "campaign.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ConfigError, match="bad.json"):
        Campaign.read(tmp_path / "bad.json")
    c = Campaign.read(write(tmp_path))
    assert c.clock is None and c.device == {}
    with pytest.raises(NoClock) as err:
        c.require_clock("the aggregator needs it")
    text = str(err.value)
    assert text.startswith(f"{tmp_path / 'campaign.json'}: no device.period_s") and "the aggregator needs it" in text
    assert f"default is {DEVICE_DEFAULTS['period_s']}" in text and "--" not in text
    bad_port = Campaign.read(write(tmp_path, device={"period_s": 60, "lorawan": {"fport": 0}}))
    with pytest.raises(ConfigError, match="device.lorawan.fport"):
        bad_port.lorawan_ports()


def test_frame_and_device_id_against_the_links(tmp_path):
    mqtt, lorawan = Links(MqttEndpoint(BROKER)), Links(MqttEndpoint(BROKER), lorawan=CHIRPSTACK)
    compact = Campaign.read(write(tmp_path, COMPACT, device={"period_s": 60}))
    for links in (mqtt, Links(serial=["/dev/null"]),
                  Links(MqttEndpoint(BROKER), serial=["/dev/null"], lorawan=CHIRPSTACK)):
        with pytest.raises(ConfigError, match="frame compact is dated by arrival") as err:
            compact.check_links(links)
        assert "--" not in str(err.value)
    compact.check_links(lorawan)
    compact.check_links(Links(MqttEndpoint(BROKER), shuffled=True))  # a shuffler's bodies: dated by the batch
    named = Campaign.read(write(tmp_path, device={"period_s": 60, "device_id": "board-7"}))
    named.check_links(mqtt)
    with pytest.raises(ConfigError, match="device.device_id 'board-7' is not a DevEUI"):
        named.check_links(lorawan)
    Campaign.read(write(tmp_path, device={"period_s": 60, "device_id": "70B3D57ED0000001"})).check_links(lorawan)


@pytest.mark.parametrize("given, problem", [
    ({}, "no-link"),
    ({"lorawan": CHIRPSTACK, "serial": ["/dev/null"]}, "lorawan-without-broker"),
    ({"serial": ["/dev/null"], "tls": ("ca.pem",)}, "tls-without-broker"),
    ({"serial": ["/dev/null"], "share_group": "g"}, "shared-without-broker"),
    ({"broker": BROKER, "tls": (None, None, "key.pem")}, "tls-key-without-cert"),
    ({"broker": BROKER, "share_group": "g"}, "shared-without-client-id"),
    ({"broker": BROKER, "serial": ["/dev/null"], "shuffled": True}, "shuffled-device-link"),
    ({"broker": BROKER, "lorawan": CHIRPSTACK, "shuffled": True}, "shuffled-device-link"),
    ({"shuffled": True}, "shuffled-without-broker"),
])
def test_each_link_combination_refused_in_one_place(given, problem):
    with pytest.raises(LinkError) as err:
        Links.of(**given)
    assert err.value.problem == problem and str(err.value) == PROBLEMS[problem]


def test_the_order_a_reader_fixes_them():
    """The mode first, then a link at all, then LoRaWAN's broker, then TLS."""
    with pytest.raises(LinkError) as err:
        Links.of(serial=["/dev/null"], lorawan=CHIRPSTACK, shuffled=True, tls=(None, None, "k"))
    assert err.value.problem == "shuffled-device-link"
    with pytest.raises(LinkError) as err:
        Links.of(tls=(None, None, "k"))
    assert err.value.problem == "no-link"


def test_links_that_work():
    links = Links.of(broker=BROKER, tls=("ca.pem", "c.pem"), client_id="w1", share_group="g", serial=["/dev/x,9600"])
    assert links.mqtt == MqttEndpoint(BROKER, TlsFiles("ca.pem", "c.pem"), "w1", "g")
    assert links.serial == ("/dev/x,9600",) and links.off_lorawan()
    assert links.mqtt.address() == ("127.0.0.1", 1, None, None, True)  # a CA file means TLS
    assert MqttEndpoint("mqtts://u:p@h").address() == ("h", 8883, "u", "p", True)
    assert not Links.of(broker=BROKER, lorawan=CHIRPSTACK).off_lorawan()
    assert not Links.of(broker=BROKER, shuffled=True).off_lorawan()
    for bad in (lambda: MqttEndpoint("http://h"), lambda: MqttEndpoint(BROKER, share_group="a/b", client_id="w"),
                lambda: MqttEndpoint(BROKER, client_id=""), lambda: Links(serial=["/dev/x,0"])):
        with pytest.raises(ValueError) as err:
            bad()
        assert "--" not in str(err.value)


def test_every_library_problem_has_its_flags_and_no_library_message_names_one():
    assert set(LINK_FLAGS) == set(PROBLEMS)
    assert not [m for m in PROBLEMS.values() if "--" in m]
    assert all("--" in m for m in LINK_FLAGS.values())


def test_tls_files_that_are_not_what_they_say(tmp_path):
    (tmp_path / "x.pem").write_text("not a certificate")
    with pytest.raises(TlsFileError) as err:
        tls_context(TlsFiles(ca=str(tmp_path / "x.pem")))
    assert err.value.part == "ca" and err.value.files == (str(tmp_path / "x.pem"),) and "--" not in str(err.value)
    with pytest.raises(TlsFileError) as err:
        tls_context(TlsFiles(cert=str(tmp_path / "x.pem"), key=str(tmp_path / "x.pem")))
    assert err.value.part == "cert" and "not a certificate and its key" in str(err.value)


def test_batching_bounds_in_library_terms():
    assert Batching() == Batching(100, 60.0, 0)
    for kw in ({"min_batch": 0}, {"min_batch": 5, "colluding": 5}, {"grace": -1.0}, {"grace": float("nan")}):
        with pytest.raises(ValueError) as err:
            Batching(**kw)
        assert "--" not in str(err.value)


def test_the_aggregator_takes_the_campaign_and_links_it_is_given(tmp_path):
    """Nothing is read twice: the service takes the Campaign; a shuffled link needs its key, and
    nothing is created before a refusal."""
    campaign = Campaign.read(write(tmp_path, device={"period_s": 60, "memoize": True}))
    with pytest.raises(ValueError, match="shuffle key"):
        Aggregator(campaign, tmp_path / "s.sqlite", Links(MqttEndpoint(BROKER), shuffled=True), log=lambda m: None)
    with pytest.raises(NoClock):
        Aggregator(Campaign.read(write(tmp_path)), tmp_path / "s.sqlite", Links(MqttEndpoint(BROKER)))
    assert not (tmp_path / "s.sqlite").exists()
    campaign = Campaign.read(write(tmp_path, device={"period_s": 60, "memoize": True}))
    agg = Aggregator(campaign, tmp_path / "s.sqlite", Links(MqttEndpoint(BROKER)), name="t", log=lambda m: None)
    try:
        assert agg.device == {"period_s": 60, "memoize": True} and agg.campaign == "t"
        assert agg.ingest.period_s == 60 and agg.ingest.past_epochs == DEVICE_DEFAULTS["queue_max"]
        assert agg.collectors[0].source.startswith("mqtt:mss-agg-t-")  # the kept client id
        assert json.loads(agg.collectors[0].retained[1])["protocol"] == "grr"  # unsigned: no fleet key
    finally:
        agg.stop()


# Who reads a campaign file (style.md habit 6: read a file once).  A module reads one when it
#   - calls mss_protocol.config_file.read_json(path, "config"), the loader of a config file;
#   - calls mss_protocol.configs.load(path), a config file by its path;
#   - calls campaign_clock(raw), the clock pulled out of a campaign file's raw dict;
#   - or json-loads a file it opens (json.load(open(...)), json.loads(....read_text())) while one of
#     its functions takes a config_path, campaign_path, campaign_config or config_file.
# That finds every reader the code had (the CLI's audit, estimate, decode, switch-config, fleet,
# provision, deploy; devices/uplink_samples, tools/lorawan_samples) and none of the modules that
# only write or build configs (a board's config from a plan, mss provision's boards/ID.json).
CAMPAIGN_PATH = re.compile(r"^(config|campaign)_(path|file|config)$")
READER = "aggregator/mss_aggregator/campaign.py"


def campaign_reads(tree):
    """[(line, how)] of the campaign-file reads in a parsed module (the rules above)."""
    found, opens_json = [], None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else None
        if name == "read_json" and len(node.args) > 1 and getattr(node.args[1], "value", None) == "config":
            found.append((node.lineno, "read_json(..., 'config')"))
        elif name == "load" and owner == "configs":
            found.append((node.lineno, "configs.load"))
        elif name == "campaign_clock":
            found.append((node.lineno, "campaign_clock"))
        elif name in ("load", "loads") and owner == "json" and node.args and isinstance(node.args[0], ast.Call):
            inner = node.args[0].func
            if getattr(inner, "attr", None) == "read_text" or getattr(inner, "id", None) == "open":
                opens_json = opens_json or node.lineno
    takes_path = any(CAMPAIGN_PATH.match(a.arg) for fn in ast.walk(tree)
                     if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                     for a in fn.args.args + fn.args.kwonlyargs)
    if opens_json and takes_path:
        found.append((opens_json, "json of a file, beside a config_path"))
    return found


def campaign_readers(root):
    """{module path: [(line, how)]} of the host's modules (aggregator/, tools/) that read a campaign file."""
    out = {}
    for base in ("aggregator", "tools"):
        for path in sorted((root / base).rglob("*.py")):
            found = campaign_reads(ast.parse(path.read_text(encoding="utf-8")))
            if found:
                out[path.relative_to(root).as_posix()] = found
    return out


def test_the_rules_find_a_campaign_reader():
    """Each rule on a module made to break it, and no rule on one that only writes a config."""
    readers = ["x = read_json(p, 'config')", "cfg = configs.load(p)", "clock = campaign_clock(raw)",
               "def read(config_path):\n    return json.loads(Path(config_path).read_text())"]
    for text in readers:
        assert campaign_reads(ast.parse(text)), text
    writer = "def write(config_path, cfg):\n    Path(config_path).write_text(json.dumps(cfg))\n"
    assert not campaign_reads(ast.parse(writer))


def test_the_campaign_file_is_read_in_campaign_py_only():
    """Every command and service takes a Campaign (or the values it needs) from Campaign.read."""
    readers = campaign_readers(Path(__file__).resolve().parents[1])
    assert list(readers) == [READER], {m: r for m, r in readers.items() if m != READER}
