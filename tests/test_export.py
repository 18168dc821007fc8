"""``mss export`` (issue 46, item 5): a store of real device reports exported as CSV and
as Parquet, read back by DuckDB and pandas: per-epoch estimates equal to what ``mss
estimate --epoch E --json`` prints, counts that sum to the pooled counts ``mss estimate
--all-epochs --export-counts`` writes, and the config id, SPEC version and campaign in
the file's metadata (Parquet's key-value metadata, the CSV's -metadata.json)."""
import json
import sys

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from mss_aggregator import export as exports
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.store import open_store
from mss_cli.main import main
from mss_device.frame import VERSION
from mss_protocol.categories import Categories
from mss_protocol.mss.config import MssConfig
from mss_protocol.vectors import report_from_stream
from postgres import pg_url, postgres_server  # noqa: F401 (fixtures)

CFG = MssConfig.build(64, 2.0, [59, 61, 63])
LABELS = [f"bin {i}" for i in range(CFG.k)]
EPOCHS = {3: 400, 4: 250}  # devices per epoch
CAMPAIGN = "greenhouse-7"


def fill(location):
    """``EPOCHS``' devices, real reports of a skewed distribution, into the store at ``location``."""
    store, ingest = open_store(location, CFG), Ingest(CFG, CAMPAIGN)
    store.record_campaign(CAMPAIGN)
    store.set_categories(Categories(CFG.k, tuple(LABELS)))
    rng = np.random.default_rng(46)
    probs = np.arange(1, CFG.k + 1, dtype=float) ** 2
    probs /= probs.sum()
    msgs = []
    for epoch, devices in EPOCHS.items():
        for d in range(devices):
            report, _ = report_from_stream(CFG.to_dict(), int(rng.choice(CFG.k, p=probs)), rng.bytes(256), epoch,
                                           epoch, f"d{d}")
            msgs.append(ingest.from_mqtt(f"mss/v1/{CAMPAIGN}/d{d}/report".encode(), report))
    store.write_batch(msgs)
    store.close()


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "s.sqlite"
    fill(path)
    return str(path)


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="mss")


def mss_json(*args):
    out = run(*args, "--json")
    assert out.exit_code == 0, out.output + out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def estimated(store_path):
    """{epoch: mss estimate --epoch E --json's estimates}."""
    return {e: mss_json("estimate", "--store", store_path, "--epoch", e) for e in EPOCHS}


def check_metadata(meta, what):
    assert meta["format"] == "mss-export" and meta["what"] == what
    assert meta["config_id"] == CFG.config_id_hex and meta["spec_version"] == VERSION == 1
    assert meta["campaign"] == CAMPAIGN and meta["epochs"] == sorted(EPOCHS)
    assert meta["config"] == CFG.to_dict() and meta["post"] == "none"


def check_estimates(frame, estimated):
    """``frame`` (a DataFrame of the export) against ``mss estimate --json``, epoch by epoch."""
    assert list(frame["epoch"].unique()) == sorted(EPOCHS) and len(frame) == len(EPOCHS) * CFG.k
    for epoch, doc in estimated.items():
        rows = frame[frame["epoch"] == epoch].sort_values("item")
        assert list(rows["item"]) == list(range(CFG.k)) and list(rows["label"]) == LABELS
        assert set(rows["n"]) == {doc["n"]} == {EPOCHS[epoch]} and set(rows["devices"]) == {EPOCHS[epoch]}
        assert set(rows["stderr_factor"]) == {doc["stderr_factor"]}
        for col in ("estimate", "stderr", "ci_low", "ci_high", "sim_low", "sim_high"):
            want = [np.inf if r[col] is None else r[col] for r in doc["estimates"]]  # JSON's null: inf
            assert list(rows[col]) == want and np.isfinite(want).all(), col  # exactly: floats round-trip
        for col in ("detected", "detected_simultaneous"):
            assert [bool(v) for v in rows[col]] == [r[col] for r in doc["estimates"]], col


def test_csv_estimates_read_by_pandas_and_duckdb(store_path, estimated, tmp_path):
    out = tmp_path / "est.csv"
    doc = mss_json("export", "--store", store_path, "--out", out)
    assert doc["rows"] == len(EPOCHS) * CFG.k and doc["metadata"] == f"{out}-metadata.json"
    assert doc["config_id"] == CFG.config_id_hex and doc["campaign"] == CAMPAIGN
    check_estimates(pd.read_csv(out), estimated)
    check_estimates(duckdb.sql(f"SELECT * FROM read_csv('{out}')").df(), estimated)
    side = json.loads((tmp_path / "est.csv-metadata.json").read_text())
    assert side["url"] == "est.csv" and side["@context"] == "http://www.w3.org/ns/csvw"
    assert [c["name"] for c in side["tableSchema"]["columns"]] == list(pd.read_csv(out).columns)
    check_metadata(side["mss-iot"], "estimates")
    types = dict(duckdb.sql(f"DESCRIBE SELECT * FROM read_csv('{out}')").fetchall()[i][:2] for i in range(4))
    assert types == {"epoch": "BIGINT", "item": "BIGINT", "label": "VARCHAR", "estimate": "DOUBLE"}


def test_parquet_estimates_read_by_pandas_and_duckdb(store_path, estimated, tmp_path):
    out = tmp_path / "est.parquet"
    doc = mss_json("export", "--store", store_path, "--format", "parquet", "--out", out)
    assert doc["metadata"] is None and doc["epochs"] == sorted(EPOCHS)
    check_estimates(pd.read_parquet(out), estimated)
    check_estimates(duckdb.sql(f"SELECT * FROM '{out}'").df(), estimated)
    kv = {k.decode(): v.decode() for k, v in duckdb.sql(
        f"SELECT key, value FROM parquet_kv_metadata('{out}')").fetchall()}
    assert kv["config_id"] == CFG.config_id_hex and kv["spec_version"] == "1" and kv["campaign"] == CAMPAIGN
    check_metadata(exports.read_metadata(str(out)), "estimates")


def test_one_epoch_and_post_processing(store_path, tmp_path):
    out = tmp_path / "e4.csv"
    mss_json("export", "--store", store_path, "--epoch", 4, "--post", "simplex", "--out", out)
    frame = pd.read_csv(out)
    want = mss_json("estimate", "--store", store_path, "--epoch", 4, "--post", "simplex")["estimates"]
    assert set(frame["epoch"]) == {4} and list(frame["estimate"]) == [r["estimate"] for r in want]
    assert frame["estimate"].sum() == pytest.approx(1) and (frame["estimate"] >= 0).all()
    assert json.loads((tmp_path / "e4.csv-metadata.json").read_text())["mss-iot"]["post"] == "simplex"


@pytest.mark.parametrize("fmt", exports.FORMATS)
def test_counts_are_additive_and_sum_to_the_pooled_counts(store_path, tmp_path, fmt):
    out = tmp_path / f"counts.{fmt}"
    mss_json("export", "--store", store_path, "--what", "counts", "--format", fmt, "--out", out)
    frame = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
    assert list(frame.columns) == ["epoch", "block", "cell", "block_reports", "count"]
    assert len(frame) == len(EPOCHS) * sum(CFG.moduli)
    store = open_store(store_path)
    try:
        for epoch in EPOCHS:  # each epoch's rows are its counts
            rows = frame[frame["epoch"] == epoch]
            counts = store.counts(epoch)
            assert list(rows["count"]) == counts.c.tolist()
            assert rows.groupby("block")["block_reports"].first().tolist() == counts.n.tolist()
    finally:
        store.close()
    pooled = tmp_path / "pooled.json"
    assert run("estimate", "--store", store_path, "--all-epochs", "--export-counts", pooled).exit_code == 0
    total = json.loads(pooled.read_text())  # the counts file: n per block, counts per block's cells
    summed = duckdb.sql("SELECT block, cell, SUM(count) AS c FROM frame GROUP BY block, cell "
                        "ORDER BY block, cell").fetchall()
    assert [c for _, _, c in summed] == [c for block in total["counts"] for c in block]
    per_block = frame.groupby(["epoch", "block"])["block_reports"].first().groupby("block").sum()
    assert per_block.tolist() == total["n"] and sum(total["n"]) == sum(EPOCHS.values())
    meta = (json.loads((tmp_path / "counts.csv-metadata.json").read_text())["mss-iot"] if fmt == "csv"
            else exports.read_metadata(str(out)))
    check_metadata(meta, "counts")


def test_a_postgresql_store_exports_the_same(pg_url, store_path, tmp_path):
    fill(pg_url)
    for path, location in ((tmp_path / "pg.parquet", pg_url), (tmp_path / "lite.parquet", store_path)):
        mss_json("export", "--store", location, "--format", "parquet", "--out", path)
    pg, lite = pd.read_parquet(tmp_path / "pg.parquet"), pd.read_parquet(tmp_path / "lite.parquet")
    assert pg.equals(lite)
    meta = exports.read_metadata(str(tmp_path / "pg.parquet"))
    assert "@" not in meta["store"] and meta["campaign"] == CAMPAIGN  # the URL's host and database, no password


def test_parquet_without_pyarrow_names_the_extra(store_path, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    out = run("export", "--store", store_path, "--format", "parquet", "--out", tmp_path / "x.parquet")
    assert out.exit_code == 3 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("error: Parquet needs pyarrow (pip install 'mss-iot[parquet]')"), out.stderr
    assert not (tmp_path / "x.parquet").exists()


def test_nothing_to_export_is_one_error_line(store_path, tmp_path):
    out = run("export", "--store", store_path, "--epoch", 9, "--out", tmp_path / "x.csv")
    assert out.exit_code == 3 and out.stderr.count("\n") == 1, out.stderr
    assert "no accepted reports in epoch 9" in out.stderr and "epochs; the latest: 3" in out.stderr, out.stderr
    empty = tmp_path / "empty.sqlite"
    open_store(empty, CFG).close()
    out = run("export", "--store", empty, "--out", tmp_path / "y.csv")
    assert out.exit_code == 3 and "holds no accepted reports" in out.stderr, out.stderr
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "y.csv").exists()
    out = run("export", "--store", store_path, "--out", "-")
    assert out.exit_code == 2 and out.stderr.startswith("error: --out -: give a file"), out.stderr
