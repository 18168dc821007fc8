"""``mss audit --config CFG --empirical`` on the configs ``mss plan`` writes (every
link kind, protocol and frame kind: compact frames decoded with the link's epoch,
as a LoRaWAN network server dates them), and docs/privacy.md section 6, the
sign-off checklist, followed step by step on a LoRaWAN config.

Statistics: each audit's honest rows are one-sided Clopper-Pearson bounds at
alpha = 0.001 (a false alarm <= 0.1% a row, fixed seeds, so a run is
reproducible); the control (MSS at 2 epsilon) is caught with a wide margin at
2,000 reports (its bound ~3.5 against epsilon 2).
"""
import json
import time

import numpy as np
import pytest
from micropython_runner import require_micropython
from collect_helpers import mss

from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.lorawan import parse_spec
from mss_aggregator.collect.ingest import campaign_clock
from mss_aggregator.collect.store import open_store
from mss_aggregator.devices.network_server import chirpstack_uplink
from mss_aggregator.web.live import LiveView
from mss_device.frame import KINDS
from mss_protocol import configs, registry
from mss_protocol.vectors import report_from_stream

EU, US = "lorawan:eu868:0", "lorawan:us915:0"
# the RN2483 on a light-sleeping board (a deep-sleeping one rejoins a report: refused, mss_protocol.energy)
RP2040_RN2483 = ("--link", EU, "--board", "rp2040", "--modem", "rn2483")
# (mss plan's arguments after --k 16 --epsilon 2, the protocol, frame and OLH seed it must write)
GRID = [
    ((), "ss", "full", None),  # no link: the planner's choice
    (("--link", EU), "ss", "compact", None),  # the config
    (("--link", US), "ss", "compact", None),
    (RP2040_RN2483, "ss", "compact", None),
    (("--protocol", "mss"), "mss", "full", None),
    (RP2040_RN2483 + ("--protocol", "mss", "--frame", "compact-epoch"), "mss", "compact-epoch", None),
    (("--link", EU, "--protocol", "grr", "--irr-epsilon", "3"), "grr", "compact", None),
    (("--link", US, "--protocol", "olh"), "olh", "compact", "device"),  # memoized: one seed a device
    (("--link", EU, "--protocol", "olh", "--fresh-reports"), "olh", "compact-epoch", "epoch"),
    (("--protocol", "olh", "--fresh-reports"), "olh", "full", "epoch"),
    (("--protocol", "rappor", "--frame", "compact-epoch"), "rappor", "compact-epoch", None),
    (("--link", EU, "--protocol", "sue"), "sue", "compact", None),
    (("--protocol", "hr", "--irr-epsilon", "3"), "hr", "full", None),
    (("--link", US, "--protocol", "pgr", "--frame", "compact-epoch"), "pgr", "compact-epoch", None),
]


def test_the_grid_covers_every_protocol_frame_and_link():
    assert {p for _, p, _, _ in GRID} == set(registry.AVAILABLE)
    assert {f for _, _, f, _ in GRID} == set(KINDS)
    links = {tuple(a[a.index("--link") + 1:a.index("--link") + 2]) + (("rn2483",) if "rn2483" in a else ())
             if "--link" in a else () for a, _, _, _ in GRID}
    assert links == {(), (EU,), (US,), (EU, "rn2483")}
    assert {s for _, p, _, s in GRID if p == "olh"} == {"device", "epoch"}


def _plan(path, *args):
    out = mss("plan", "--k", 16, "--epsilon", 2, *args, "--device-config", path)
    assert out.returncode == 0, out.stderr
    return json.loads(path.read_text())


def _check_empirical(doc, name):
    """Every honest row within epsilon, the config's firmware run (not "not run"), the control caught."""
    rows = {r["client"]: r for r in doc["epsilon_audit"]["rows"]}
    assert set(rows) == {name, f"{name} firmware", "control: mss at 2 eps"}, rows
    fw = rows[f"{name} firmware"]
    assert "error" not in fw and fw["runtime"] == "micropython", fw
    for row in (rows[name], fw):
        assert row["within_epsilon"] and row["eps_lower_bound"] <= doc["epsilon"], row
        assert row["tp"] > row["fp"], row  # the event is seen: reports decoded, not all refused
    assert rows["control: mss at 2 eps"]["within_epsilon"] is False


@pytest.mark.parametrize("args,name,frame,seed", GRID, ids=lambda v: " ".join(v) if isinstance(v, tuple) else None)
def test_empirical_audit_of_a_planned_config(tmp_path, args, name, frame, seed):
    require_micropython()
    path = tmp_path / "cfg.json"
    raw = _plan(path, *args)
    assert (raw["protocol"], raw.get("frame", "full"), raw.get("seed", "epoch" if name == "olh" else None)) \
        == (name, frame, seed)
    assert raw["device"].get("memoize", False) is ("--fresh-reports" not in args)
    out = mss("audit", "--config", path, "--empirical", "--trials", 0, "--audit-trials", 2000, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    cfg = configs.load(path)
    assert doc["config"]["config_id"] == cfg.config_id_hex and doc["config"]["frame"] == frame
    assert [r["protocol"] for r in doc["rows"]] == [name]
    row = doc["rows"][0]
    assert row["eps_effective"] <= doc["epsilon"] + 1e-12
    assert row["bayes_exact"] is None or row["bayes_exact"] <= doc["ceiling"] * (1 + 1e-9)
    _check_empirical(doc, name)


# -- docs/privacy.md section 6 on a LoRaWAN deployment -------------------------------

APP = "pilot"


def _uplink(eui, fport, fcnt, data, t):
    """(topic, payload) bytes of a ChirpStack v4 uplink event received at unix time ``t``."""
    topic, doc = chirpstack_uplink(APP, eui, fport, fcnt, data, t)
    return topic.encode(), json.dumps(doc).encode()


def _pilot_store(path, cfg_path, raw, devices=300, seed=6):
    """A pilot campaign's store: ``devices`` boards of the config (their device client,
    memoized: the same report in the last two epochs) over LoRaWAN (ChirpStack uplinks,
    dated by the network server's time), one board's budget spent in the last epoch
    (the 1-byte skipped-epoch uplink on the time port)."""
    cfg = configs.load(cfg_path)
    clock = campaign_clock(raw)
    period = clock["period_s"]
    now = time.time()
    current = int((now - clock["epoch_origin"]) // period)
    store = open_store(path, cfg, APP)
    store.set_clock(clock)
    store.record_memoize(True)
    ingest = Ingest(cfg, APP, period, clock["epoch_origin"], lorawan=parse_spec(f"chirpstack:{APP}"), ports=(1, 3))
    rng = np.random.default_rng(seed)
    values = rng.choice(cfg.k, devices, p=np.arange(cfg.k, 0, -1) / (cfg.k * (cfg.k + 1) / 2))
    msgs = []
    for d, value in enumerate(values.tolist()):
        eui = f"70b3d57ed005{d:04x}"
        report, _ = report_from_stream(raw, value, rng.bytes(256), current, 0, eui)
        for n, epoch in enumerate((current - 1, current)):
            t = clock["epoch_origin"] + epoch * period + period // 2
            msgs.append(ingest.from_lorawan(*_uplink(eui, 1, n, report, t)))
    t = clock["epoch_origin"] + current * period + period // 2
    msgs.append(ingest.from_lorawan(*_uplink("70b3d57ed005ffff", 3, 0, b"\x01", t)))  # a skipped epoch
    assert all("reason" not in m for m in msgs), [m for m in msgs if "reason" in m][:3]
    store.write_batch(msgs)
    store.close()
    return path


def test_signoff_checklist_on_a_lorawan_config(tmp_path):
    """docs/privacy.md section 6, each step's command as written (paths adapted), on a
    LoRaWAN EU868 config (issue 43's: SS in compact frames, whose empirical audit
    needs the link's epoch), completed for the boards as docs/lorawan.md section 3
    says (transport lorawan, the modem's UART)."""
    require_micropython()
    days = 365
    # step 3's "mss plan ... --campaign-days D before the config exists"
    plan = mss("plan", "--k", 16, "--epsilon", 2, "--link", EU, "--n", 500, "--campaign-days", days,
               "--device-config", tmp_path / "lora16.json")
    assert plan.returncode == 0, plan.stderr
    raw = json.loads((tmp_path / "lora16.json").read_text())
    assert (raw["protocol"], raw.get("frame")) == ("ss", "compact")
    raw["device"].update(transport="lorawan", lorawan={"modem": "rak3172", "uart": 1, "tx": 4, "rx": 5})
    cfg_path = tmp_path / "cfg.json"
    cfg_path.write_text(json.dumps(raw))
    config_id = configs.load(cfg_path).config_id_hex

    # 1. the config is the audited one
    out = mss("audit", "--config", cfg_path)
    assert out.returncode == 0, out.stderr
    assert f"config {config_id}: {raw['protocol']}, frame compact" in out.stdout
    doc = json.loads(mss("audit", "--config", cfg_path, "--json").stdout)
    assert doc["config"]["config_id"] == config_id and [r["protocol"] for r in doc["rows"]] == [raw["protocol"]]
    assert all(r["eps_effective"] <= raw["epsilon"] for r in doc["rows"])
    out = mss("device-sim", "--check-only", "--config", cfg_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "accepted by the board" in out.stdout and f"config id {config_id}" in out.stdout
    assert "budget epsilon 8 per 30 days" in out.stdout

    # 2. one report, for a realistic prior: a pilot's estimate
    store = _pilot_store(tmp_path / "pilot.sqlite", cfg_path, raw)
    est = mss("estimate", "--store", store, "--config", cfg_path, "--json")
    assert est.returncode == 0, est.stderr
    (tmp_path / "est.json").write_text(est.stdout)
    out = mss("audit", "--config", cfg_path, "--prior", f"file:{tmp_path / 'est.json'}", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    bayes = doc["rows"][0]["bayes_exact"]
    assert doc["bounds"]["no_information"] <= bayes <= doc["ceiling"]
    assert doc["bounds"]["no_information"] > 1 / raw["k"]  # the pilot's skewed prior, not the uniform one

    # 3. and 5. the whole campaign; what memoization leaks (linkability)
    out = mss("audit", "--config", cfg_path, "--longitudinal", "--campaign-days", days, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    dep = doc["deployment"]
    assert dep["campaign_days"] == days and dep["memoize"] and dep["budget"] == raw["device"]["budget"]
    configured = [r for r in dep["rows"] if r["mode"] == "configured"]
    assert configured and all("weak" not in r["strength"] for r in configured)
    assert all(s <= c + 1e-9 for r in configured for s, c in zip(r["success"], r["ceiling"]))
    assert {r["protocol"] for r in doc["linkability"]["rows"]} == {raw["protocol"]}
    assert mss("audit", "--config", cfg_path, "--longitudinal", "--campaign-days", days).returncode == 0

    # 4. the budget is on the boards; mss deploy refuses a periodic config without one
    assert raw["device"]["memoize"] is True and raw["device"]["budget"]["days"] == 30
    out = mss("deploy", "--config", cfg_path, "--dry-run")
    assert out.returncode == 0, out.stderr
    bare = dict(raw, device={k: v for k, v in raw["device"].items() if k not in ("memoize", "budget")})
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    out = mss("deploy", "--config", tmp_path / "bare.json", "--dry-run")
    assert out.returncode == 2 and "no device.budget" in out.stderr
    assert mss("deploy", "--config", tmp_path / "bare.json", "--dry-run", "--no-budget").returncode == 0

    # 6. the code that runs matches the analysis
    out = mss("audit", "--config", cfg_path, "--empirical", "--json")
    assert out.returncode == 0, out.stderr
    _check_empirical(json.loads(out.stdout), raw["protocol"])
    out = mss("audit", "--config", cfg_path, "--empirical")
    assert out.returncode == 0, out.stderr
    assert f"{raw['protocol']} firmware" in out.stdout and "not run" not in out.stdout

    # 7. decoding keeps its promises: one epoch by default, pooled with widened errors; skipped epochs counted
    one = json.loads(est.stdout)
    assert not one["pooled"] and one["devices"] == one["n"] == 300
    pooled = json.loads(mss("estimate", "--store", store, "--config", cfg_path, "--json", "--all-epochs").stdout)
    assert pooled["pooled"] and pooled["n"] == 600 and pooled["stderr_factor"] == pytest.approx(2 ** 0.5)
    live = LiveView(store, interval=60, device=raw["device"])
    try:
        counters = live.counters()  # /api/counters
        assert counters["skipped_epochs"], counters
        # 8. the dashboard's privacy panel: the loss so far beside the ceiling, with its verdict
        attacker = live.config_doc()["deployment"]["attacker"]
        assert attacker and all(a["success"] <= a["ceiling"] + 1e-9 and a["strength"] != "weak" for a in attacker)
    finally:
        live.close()
