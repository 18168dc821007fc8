"""``mss provision --chirpstack URL``: a fleet's LoRaWAN devices registered through ChirpStack v4's
gRPC API (mss_aggregator.network_server), against a DeviceService served in the test from the
``chirpstack-api`` package's own service definitions, every request checked field by field;
a provisioning the server stops half-way is completed by running it again, nothing created twice.
"""
import json
from concurrent import futures

import grpc
import pytest
from chirpstack_api import api
from click.testing import CliRunner

from mss_aggregator.network_server import RegisterError, register_chirpstack
from mss_cli.main import main
from mss_protocol.choose import choose

KEY = "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.api-key"
APP, PROFILE = "6f1c1c2e-1d2f-4b5f-9d2e-0a1b2c3d4e5f", "0b1a8f2e-0d9c-4a52-9b7e-2f5f3c6a1d10"
CAMPAIGN = "field"
N = 45  # three batches of 20, the last one short


class DeviceService(api.DeviceServiceServicer):
    """ChirpStack's DeviceService as far as registering goes: NOT_FOUND for what it lacks,
    ALREADY_EXISTS for what it has, UNAUTHENTICATED without the key; ``fail_after[method]``
    calls of a method succeed, the next ones answer UNAVAILABLE (a server gone mid-way)."""

    def __init__(self):
        self.devices, self.keys, self.calls, self.fail_after = {}, {}, [], {}

    def check(self, method, context):
        if dict(context.invocation_metadata()).get("authorization") != f"Bearer {KEY}":
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "authentication failed: invalid token")
        done = sum(1 for m, _ in self.calls if m == method)
        if method in self.fail_after and done >= self.fail_after[method]:
            context.abort(grpc.StatusCode.UNAVAILABLE, "connection refused")

    def call(self, method, request, context):
        self.check(method, context)
        self.calls.append((method, request))

    def Get(self, request, context):
        self.call("Get", request, context)
        if request.dev_eui not in self.devices:
            context.abort(grpc.StatusCode.NOT_FOUND, "Object does not exist")
        return api.GetDeviceResponse(device=self.devices[request.dev_eui])

    def Create(self, request, context):
        self.call("Create", request, context)
        if request.device.dev_eui in self.devices:
            context.abort(grpc.StatusCode.ALREADY_EXISTS, "Object already exists")
        self.devices[request.device.dev_eui] = request.device
        return empty()

    def Update(self, request, context):
        self.call("Update", request, context)
        if request.device.dev_eui not in self.devices:
            context.abort(grpc.StatusCode.NOT_FOUND, "Object does not exist")
        self.devices[request.device.dev_eui] = request.device
        return empty()

    def GetKeys(self, request, context):
        self.call("GetKeys", request, context)
        if request.dev_eui not in self.keys:
            context.abort(grpc.StatusCode.NOT_FOUND, "Object does not exist")
        return api.GetDeviceKeysResponse(device_keys=self.keys[request.dev_eui])

    def CreateKeys(self, request, context):
        self.call("CreateKeys", request, context)
        if request.device_keys.dev_eui in self.keys:
            context.abort(grpc.StatusCode.ALREADY_EXISTS, "Object already exists")
        self.keys[request.device_keys.dev_eui] = request.device_keys
        return empty()

    def UpdateKeys(self, request, context):
        self.call("UpdateKeys", request, context)
        self.keys[request.device_keys.dev_eui] = request.device_keys
        return empty()

    def count(self, method):
        return sum(1 for m, _ in self.calls if m == method)


def empty():
    from google.protobuf.empty_pb2 import Empty

    return Empty()


@pytest.fixture
def chirpstack():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    service = DeviceService()
    api.add_DeviceServiceServicer_to_server(service, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    service.url = f"http://127.0.0.1:{port}"
    yield service
    server.stop(None)


@pytest.fixture
def fleet(tmp_path):
    campaign = tmp_path / "campaign.json"
    campaign.write_text(json.dumps(dict(choose(16, 2.0, "grr")["config"], device={"period_s": 3600})))
    (tmp_path / "fleet.csv").write_text("dev_eui,join_eui,transport,lorawan.uart\n" + "".join(
        f"70b3d57ed0{i:06x},70b3d57ed00000ff,lorawan,1\n" for i in range(N)))
    (tmp_path / "api.key").write_text(KEY + "\n")
    return tmp_path


def provision(fleet, *extra):
    args = ["provision", fleet / "fleet.csv", "--config", fleet / "campaign.json", "--campaign", CAMPAIGN,
            "--out", fleet / "out", *extra]
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r.exit_code, r.stdout + " ".join(r.stderr.split())


def registering(fleet, url):
    return provision(fleet, "--chirpstack", url, "--api-key-file", fleet / "api.key", "--application", APP,
                     "--device-profile", PROFILE)


def app_keys(fleet):
    return {d["device"]["devEui"]: d["deviceKeys"]["nwkKey"]
            for d in json.loads((fleet / "out" / "lorawan" / "chirpstack-devices.json").read_text())}


def test_a_half_done_provisioning_completes_on_a_rerun_field_by_field(fleet, chirpstack):
    """The server goes away after 27 creates: the run stops (exit 3, what was done and 'run it
    again'); the re-run creates the other 18 and nothing twice; a third run changes nothing."""
    chirpstack.fail_after["Create"] = 27
    code, said = registering(fleet, chirpstack.url)
    assert code == 3 and "UNAVAILABLE" in said and f"of {N} devices registered" in said, said
    assert "run it again to complete it" in said and len(chirpstack.devices) == 27
    keys = app_keys(fleet)
    assert len(keys) == N and not any(k in said for k in keys.values())  # the AppKeys: in the 0600 file only
    chirpstack.fail_after.clear()
    code, said = registering(fleet, chirpstack.url)
    assert code == 0, said
    assert f"{N} devices registered ({N - 27} created, 0 updated, 27 unchanged)" in said
    assert chirpstack.count("Create") == N and chirpstack.count("Update") == 0  # each device created once
    assert chirpstack.count("CreateKeys") == N and chirpstack.count("UpdateKeys") == 0
    for eui, key in keys.items():  # what ChirpStack was sent, field by field
        d = chirpstack.devices[eui]
        assert (d.dev_eui, d.name, d.join_eui, d.application_id, d.device_profile_id) == (
            eui, f"eui-{eui}", "70b3d57ed00000ff", APP, PROFILE)
        assert d.description == f"mss-iot campaign {CAMPAIGN}" and dict(d.tags) == {"campaign": CAMPAIGN}
        assert not (d.is_disabled or d.skip_fcnt_check or d.variables)
        k = chirpstack.keys[eui]
        assert (k.dev_eui, k.nwk_key, k.app_key, k.gen_app_key) == (eui, key, "", "")  # 1.0.x: AppKey in nwk_key
    calls = len(chirpstack.calls)
    code, said = registering(fleet, chirpstack.url)
    assert code == 0 and f"({0} created, 0 updated, {N} unchanged)" in said, said
    assert {m for m, _ in chirpstack.calls[calls:]} == {"Get", "GetKeys"}  # reads only


def test_a_device_left_without_keys_gets_them_and_a_changed_one_is_updated(fleet, chirpstack):
    """Stopped between Create and CreateKeys: the re-run adds the keys.  A device an operator
    edited (name, a tag of theirs, disabled) is updated to the fleet's fields, the operator's tag
    and flag kept; a rotated AppKey is updated; a device of another application is refused."""
    assert provision(fleet, "--application", APP, "--device-profile", PROFILE)[0] == 0
    bodies = json.loads((fleet / "out" / "lorawan" / "chirpstack-devices.json").read_text())
    chirpstack.fail_after["CreateKeys"] = 10
    with pytest.raises(RegisterError) as exc:
        register_chirpstack(bodies, chirpstack.url, KEY, batch=5)
    assert exc.value.report.done == 10 and len(chirpstack.devices) == 15 and len(chirpstack.keys) == 10
    chirpstack.fail_after.clear()
    first = bodies[0]["device"]["devEui"]
    edited = chirpstack.devices[first]
    edited.name, edited.is_disabled = "renamed", True
    edited.tags["site"] = "north"
    report = register_chirpstack(bodies, chirpstack.url, KEY, batch=5)
    assert len(report.updated) == 6 and report.updated[0] == first and len(report.unchanged) == 9
    assert len(report.created) == N - 15 and chirpstack.count("Create") == N
    d = chirpstack.devices[first]
    assert (d.name, d.is_disabled, dict(d.tags)) == (f"eui-{first}", True, {"campaign": CAMPAIGN, "site": "north"})
    bodies[1]["deviceKeys"]["nwkKey"] = "00" * 16
    report = register_chirpstack(bodies, chirpstack.url, KEY)
    assert report.updated == [bodies[1]["device"]["devEui"]] and chirpstack.keys[report.updated[0]].nwk_key == "00" * 16
    bodies[2]["device"]["applicationId"] = "another-app"
    with pytest.raises(RegisterError, match="is in application .* not another-app"):
        register_chirpstack(bodies, chirpstack.url, KEY)


def test_a_list_without_its_ids_is_refused_and_a_bad_key_said(fleet, chirpstack):
    code, said = provision(fleet)
    assert code == 0 and not (fleet / "out" / "lorawan" / "chirpstack-devices.json").exists()
    assert "no ChirpStack device list written: it needs --application and --device-profile" in said
    assert (fleet / "out" / "lorawan" / "tts-devices.json").exists()
    code, said = provision(fleet, "--application", APP)
    assert code == 2 and "--application and --device-profile go together" in said
    code, said = provision(fleet, "--chirpstack", chirpstack.url, "--application", APP, "--device-profile", PROFILE)
    assert code == 2 and "--chirpstack needs --api-key-file" in said
    code, said = registering(fleet, "grpc://127.0.0.1:1")
    assert code == 2 and "--chirpstack" in said and "not an http:// or https:// URL" in said
    with pytest.raises(RegisterError, match="without an application id or device-profile id"):
        register_chirpstack([{"device": {"devEui": "70b3d57ed0000001"}, "deviceKeys": {}}], chirpstack.url, KEY)
    (fleet / "api.key").write_text("not-the-key\n")
    code, said = registering(fleet, chirpstack.url)
    assert code == 3 and "UNAUTHENTICATED" in said and "the API key is not valid" in said and not chirpstack.devices


def test_the_things_stack_bulk_import_file(fleet):
    """lorawan/tts-devices.json is what ttn-lw-cli end-devices create and the Console's import read:
    a JSON stream, one end device a board, with every field the JSON File Reference requires."""
    code, said = provision(fleet, "--frequency-plan", "EU_863_870_TTN")
    assert code == 0 and "no frequency_plan_id" not in said, said
    text = (fleet / "out" / "lorawan" / "tts-devices.json").read_text()
    decoder, at, docs = json.JSONDecoder(), 0, []
    while text[at:].strip():
        doc, at = decoder.raw_decode(text, len(text) - len(text[at:].lstrip()))
        docs.append(doc)
    assert len(docs) == N and len({d["ids"]["device_id"] for d in docs}) == N
    for i, d in enumerate(docs):
        eui = f"70b3d57ed0{i:06x}"
        assert d["ids"] == {"device_id": f"eui-{eui}", "dev_eui": eui.upper(), "join_eui": "70B3D57ED00000FF"}
        assert (d["lorawan_version"], d["lorawan_phy_version"], d["frequency_plan_id"], d["supports_join"]) == (
            "MAC_V1_0_3", "PHY_V1_0_3_REV_A", "EU_863_870_TTN", True)
        assert len(d["root_keys"]["app_key"]["key"]) == 32
    code, said = provision(fleet)
    assert code == 0 and "no frequency_plan_id: give --frequency-plan" in said
    assert "frequency_plan_id" not in (fleet / "out" / "lorawan" / "tts-devices.json").read_text()
