"""The Python API (issue 46, item 4): ``import mss_iot`` gives the workflows whose ``to_dict()`` is
the matching command's ``--json`` for the same inputs (plan, simulate, a store's estimates, export,
audit, the campaign file), ``to_frame()`` DataFrames where pandas is installed and a clear error
where it is not, SciPy-style docstrings on every public function, a cheap import, and a command
line that takes its workflows only through ``mss_iot`` (about 6 s in all)."""
import ast
import inspect
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import mss_iot
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.store import open_store as open_raw_store
from mss_cli.main import main
from mss_protocol.categories import Categories
from mss_protocol.mss.config import MssConfig
from mss_protocol.vectors import report_from_stream
from postgres import pg_url, postgres_server  # noqa: F401 (fixtures)

CLI = Path(__file__).resolve().parents[1] / "aggregator" / "mss_cli"
CFG = MssConfig.build(16, 2.0, [13, 15])
LABELS = tuple(f"room {i}" for i in range(CFG.k))
EPOCHS = {5: 120, 6: 90}  # devices per epoch
CAMPAIGN = "api-test"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="mss")


def mss_json(*args):
    out = run(*args, "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def fill(path):
    """``EPOCHS``' devices' real reports (the device client's bytes) into the store at ``path``."""
    store, ingest = open_raw_store(path, CFG), Ingest(CFG, CAMPAIGN)
    store.record_campaign(CAMPAIGN)
    store.set_categories(Categories(CFG.k, LABELS))
    rng = np.random.default_rng(46)
    msgs = []
    for epoch, devices in EPOCHS.items():
        for d in range(devices):
            report, _ = report_from_stream(CFG.to_dict(), int(rng.zipf(1.5) % CFG.k), rng.bytes(256), epoch, epoch,
                                           f"d{d}")
            msgs.append(ingest.from_mqtt(f"mss/v1/{CAMPAIGN}/d{d}/report".encode(), report))
    store.write_batch(msgs)
    store.close()


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("api") / "s.sqlite")
    fill(path)
    return path


def without_view(doc):
    return {k: v for k, v in doc.items() if k != "view"}


def test_plan_is_mss_plan_json():
    p = mss_iot.plan(k=16, epsilon=2.0, question=mss_iot.Question(n=500))
    assert p.to_dict() == mss_json("plan", "--k", 16, "--epsilon", 2.0, "--n", 500)
    same = mss_iot.plan(mss_iot.PlanRequest(k=16, epsilon=2.0, question=mss_iot.Question(n=500)))
    assert same.to_dict() == p.to_dict()
    with pytest.raises(TypeError, match="not both"):
        mss_iot.plan(mss_iot.PlanRequest(k=16, epsilon=2.0), k=8)
    frame = p.to_frame()
    assert list(frame["protocol"]) == [c["protocol"] for c in p.to_dict()["candidates"]]
    assert "ss" in set(frame["protocol"])


def test_campaign_from_file(tmp_path):
    path = tmp_path / "c.json"
    mss_iot.plan(k=16, epsilon=2.0).save_device_config(path)
    campaign = mss_iot.Campaign.from_file(path)
    raw = json.loads(path.read_text())
    assert campaign.to_dict() == {**campaign.cfg.to_dict(), "device": raw["device"],
                                  "config_id": campaign.cfg.config_id_hex}
    assert campaign.clock["period_s"] == raw["device"]["period_s"] and campaign.source == str(path)
    with pytest.raises(mss_iot.ConfigError, match="nope.json"):
        mss_iot.Campaign.from_file(tmp_path / "nope.json")


@pytest.mark.parametrize("args", [dict(k=16, epsilon=2.0, n=800, protocol="grr", trials=3, seed=4),
                                  dict(k=32, epsilon=1.0, n=600, protocol="ss", dist="uniform", post="clip")])
def test_simulate_is_mss_simulate_json(args):
    sim = mss_iot.simulate(**args)
    flags = [x for key, value in args.items() for x in (f"--{key}", value)]
    mine, cli = sim.to_dict(), mss_json("simulate", *flags)
    assert mine.pop("decode_seconds") >= 0 and cli.pop("decode_seconds") >= 0  # a wall clock
    assert mine == cli
    assert sim.mse.shape == (args.get("trials", 1),) and sim.truth.shape == (args["k"],)
    frame = sim.to_frame()
    assert list(frame.columns) == ["item", "truth", "estimate", "stderr", "ci_low", "ci_high"]
    assert len(frame) == args["k"] and frame["truth"].sum() == pytest.approx(1)


def test_simulate_refuses_a_config_it_disagrees_with(tmp_path):
    path = tmp_path / "c.json"
    mss_iot.plan(k=16, epsilon=2.0).save_device_config(path)
    with pytest.raises(mss_iot.SimulateRequestError) as err:
        mss_iot.simulate(config=str(path), k=8, n=10)
    assert err.value.field == "k" and err.value.config.k == 16 and "--" not in str(err.value)


@pytest.mark.parametrize("selection", [("--epoch", 5), ("--epoch", 6), ("--all-epochs",), ()])
def test_store_estimate_is_mss_estimate_json(store_path, selection):
    cli = without_view(mss_json("estimate", "--store", store_path, *selection))
    kwargs = {"epoch": selection[1]} if selection[:1] == ("--epoch",) else {"all_epochs": bool(selection)}
    with mss_iot.open_store(store_path) as store:
        est = store.estimate(**kwargs)
    assert est.to_dict() == cli
    frame = est.to_frame()
    assert list(frame["label"]) == list(LABELS) and list(frame["estimate"]) == [r["estimate"] for r in cli["estimates"]]
    assert est.estimate.estimate.shape == (CFG.k,)


def test_a_postgresql_store_reads_the_same(pg_url, store_path):
    fill(pg_url)
    with mss_iot.open_store(pg_url) as pg, mss_iot.open_store(store_path) as lite:
        assert pg.epochs() == lite.epochs() and "@" not in pg.name  # the URL's host and database, no password
        assert pg.estimates().rows == lite.estimates().rows
        est = pg.estimate(epoch=6)
    assert est.to_dict() == without_view(mss_json("estimate", "--store", pg_url, "--epoch", 6))


def test_store_epochs_counts_and_every_epoch(store_path):
    with mss_iot.open_store(store_path) as store:
        assert store.epochs() == sorted(EPOCHS) and store.campaign() == CAMPAIGN
        assert {e: store.counts(e).total for e in EPOCHS} == EPOCHS
        assert store.counts().total == sum(EPOCHS.values())
        table = store.estimates()
    assert table.epochs == sorted(EPOCHS) and len(table.rows) == len(EPOCHS) * CFG.k
    frame = table.to_frame()
    for epoch in EPOCHS:  # each epoch decoded alone: mss estimate --epoch E
        want = mss_json("estimate", "--store", store_path, "--epoch", epoch)["estimates"]
        assert list(frame[frame["epoch"] == epoch]["estimate"]) == [r["estimate"] for r in want]
    assert table.to_dict()["rows"] == table.rows


def test_store_errors_name_the_request_field(store_path, tmp_path):
    with mss_iot.open_store(store_path) as store:
        with pytest.raises(mss_iot.EstimateError) as err:
            store.estimate(epoch=99)
        assert err.value.field == "epoch" and "no accepted reports in epoch 99" in str(err.value)
        with pytest.raises(mss_iot.EstimateError) as err:
            store.estimate(delta=1e-9)
        assert err.value.field == "delta" and "--" not in str(err.value).split(":")[0]
    assert run("estimate", "--store", store_path, "--epoch", 99).exit_code == 3
    empty = str(tmp_path / "empty.sqlite")
    open_raw_store(empty, CFG).close()
    with mss_iot.open_store(empty) as store:
        with pytest.raises(mss_iot.EstimateError, match="holds no accepted reports") as err:
            store.estimate()
        assert err.value.field is None and store.epochs() == []


def test_export_is_mss_export_json(store_path, tmp_path):
    with mss_iot.open_store(store_path) as store:
        mine = mss_iot.export(store.store, mss_iot.ExportRequest("estimates", "csv", str(tmp_path / "a.csv")))
    cli = mss_json("export", "--store", store_path, "--out", tmp_path / "a.csv")
    assert mine.to_dict() == cli


def test_audit_is_mss_audit_json():
    report = mss_iot.audit(k=8, epsilon=1.0, names=("grr", "ss"), trials=500, seed=3)
    cli = mss_json("audit", "--k", 8, "--epsilon", 1.0, "--protocols", "grr,ss", "--trials", 500, "--seed", 3)
    assert report.to_dict() == cli and report.problems() == []
    assert list(report.to_frame()["protocol"]) == ["grr", "ss"]


def test_to_frame_without_pandas_says_what_is_missing(monkeypatch, store_path):
    with mss_iot.open_store(store_path) as store:
        est = store.estimate(epoch=5)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="to_frame.. needs pandas"):
        est.to_frame()
    assert est.to_dict()["n"] == EPOCHS[5]  # to_dict needs nothing


def test_every_name_resolves_and_the_import_is_cheap():
    for name in mss_iot.__all__:
        assert getattr(mss_iot, name) is not None, name
    with pytest.raises(AttributeError):
        mss_iot.no_such_name  # noqa: B018
    code = ("import sys, mss_iot; mss_iot.plan; "
            "print(sorted(m for m in ('mss_aggregator.collect.service', 'mss_aggregator.shuffle.service', "
            "'mss_aggregator.privacy.audit', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"  # planning does not load the services, the audit or pandas


def public_functions():
    """Every function ``mss_iot`` exports, and every public method of the result objects it defines."""
    out = []
    for name in mss_iot.__all__:
        obj = getattr(mss_iot, name)
        if inspect.isfunction(obj):
            out.append((name, obj))
        elif inspect.isclass(obj) and obj.__module__ in ("mss_iot.store", "mss_iot.workflows", "mss_iot.campaign",
                                                         "mss_aggregator.estimates", "mss_aggregator.simulation"):
            out += [(f"{name}.{m}", f) for m, f in vars(obj).items()
                    if not m.startswith("_") and (inspect.isfunction(f) or isinstance(f, classmethod))]
    return out


@pytest.mark.parametrize("name,func", public_functions())
def test_scipy_style_docstrings(name, func):
    func = getattr(func, "__func__", func)
    doc = inspect.getdoc(func) or ""
    params = [p for p in inspect.signature(func).parameters if p not in ("self", "cls")]
    if params:
        assert "Parameters\n----------" in doc, name
        for p in params:
            if not p.startswith("**"):
                assert p in doc.split("Returns")[0], f"{name}: parameter {p} undocumented"
    if name.split(".")[-1] not in ("close",):  # close() returns nothing
        assert "Returns\n-------" in doc, name


# the services' constructors document every parameter in prose (their files are being reworked for the
# campaign and link specs, issue 46, item 1); errors carry a sentence, not sections
PROSE_CLASSES = {"Aggregator", "Shuffler", "Batching"}


@pytest.mark.parametrize("name", [n for n in mss_iot.__all__ if inspect.isclass(getattr(mss_iot, n))])
def test_every_exported_class_documents_its_fields(name):
    cls = getattr(mss_iot, name)
    doc = inspect.getdoc(cls) or ""
    if issubclass(cls, Exception) or name in PROSE_CLASSES:
        assert doc, name
        return
    assert "Parameters\n----------" in doc or "Attributes\n----------" in doc, name


# The workflow entry points a command must take from mss_iot, not from their home module.
WORKFLOWS = {"plan", "Campaign", "open_store", "simulate", "audit", "export", "estimate_store"}
HOMES = {"mss_aggregator.plan", "mss_aggregator.campaign", "mss_aggregator.simulation", "mss_aggregator.estimates",
         "mss_aggregator.audit", "mss_aggregator.export", "mss_aggregator.collect.store",
         "mss_aggregator.compare.simulate"}
# (module, name): why that command takes it from the library directly
EXCEPTIONS = {
    ("quarantine", "open_store"): "reads the quarantine, state resets and counters, not estimates",
    ("switch_config", "open_store"): "reads which devices reported (per-device rows), not estimates",
    ("fleet", "open_store"): "counts a fleet run's accepted reports per device, not estimates",
    ("aggregate", "open_store"): "the live display reads the counters the aggregator writes",
}


def workflow_imports(path):
    """(name, where) of each workflow ``path`` takes from its home module instead of mss_iot:
    ``from <home> import <name>`` and ``<alias>.<name>`` after ``from mss_aggregator import <home>``."""
    tree = ast.parse(path.read_text())
    found, aliases = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if node.module in HOMES and alias.name in WORKFLOWS:
                    found.append((alias.name, f"line {node.lineno}"))
                if f"{node.module}.{alias.name}" in HOMES:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr in WORKFLOWS):
            found.append((node.attr, f"line {node.lineno}"))
    return found


def test_the_cli_takes_its_workflows_through_mss_iot():
    stray = [(path.stem, name, where) for path in sorted(CLI.glob("*.py")) for name, where in workflow_imports(path)
             if (path.stem, name) not in EXCEPTIONS]
    assert stray == []
    used = {(path.stem, name) for path in CLI.glob("*.py") for name, _ in workflow_imports(path)}
    assert set(EXCEPTIONS) <= used, f"exceptions no longer needed: {set(EXCEPTIONS) - used}"
