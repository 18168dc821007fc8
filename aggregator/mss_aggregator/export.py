"""A store's per-epoch estimates or additive counts as a CSV or Parquet file, with
their provenance (``mss export``).

Two tables, one row per:

* ``estimates``: (epoch, item) -- ``epoch``, ``item``, ``label`` (only when the
  store records the items' names), ``estimate``, ``stderr``, the marginal 95%
  interval ``ci_low``/``ci_high`` and ``detected``, the simultaneous one
  (Bonferroni over the k items) ``sim_low``/``sim_high`` and
  ``detected_simultaneous``, then ``n`` (the epoch's accepted reports),
  ``devices`` (its devices; a shuffled store: at least) and ``stderr_factor`` (what
  the decoder's standard errors were multiplied by, :mod:`.collect.scope`).  Each
  epoch is decoded alone, exactly as ``mss estimate --epoch E`` decodes it: the
  same numbers as its ``--json`` ``estimates``.
* ``counts``: (epoch, block, cell) -- the additive sufficient statistic
  (:class:`~mss_protocol.counts.Counts`): ``block`` j, ``cell`` r in
  [0, m_j), ``block_reports`` n_j (the epoch's reports with J = j, repeated on
  each of the block's cells) and ``count`` c_j[r].  Counts add across epochs and
  sites: summing ``count`` over epochs gives the pooled counts ``mss estimate
  --all-epochs`` decodes (``mss merge`` adds count files the same way).

Provenance (:func:`provenance`): ``format`` ("mss-export") and ``version``,
``what``, ``config_id``, ``spec_version`` (the wire format's, SPEC.md),
``campaign`` (absent when the store records none), ``config`` (the config as
JSON), ``store`` (its file, or a PostgreSQL URL's host and database: never a
password), ``post``, ``epochs``, ``exported_at`` (unix seconds) and
``mss_iot_version``.  In a Parquet file they are the footer's key-value
metadata, strings as they are and other values as JSON (DuckDB:
``SELECT * FROM parquet_kv_metadata('f.parquet')``; pyarrow:
``pq.read_schema(path).metadata``).  A CSV file stays plain (a header row, then
data, so that DuckDB's and pandas' readers need no option) and its metadata goes
beside it in ``<file>-metadata.json``, the file name CSV on the Web (W3C CSVW)
looks for, with CSVW's ``tableSchema`` (each column's name and datatype) and the
provenance under ``"mss-iot"``.

Parquet needs pyarrow, the optional extra ``parquet``
(``pip install 'mss-iot[parquet]'``); CSV needs nothing.

Examples
--------
>>> from mss_aggregator.collect.store import open_store
>>> store = open_store("campaign.sqlite")                        # doctest: +SKIP
>>> result = export(store, ExportRequest("estimates", "parquet", "est.parquet"))  # doctest: +SKIP
>>> result.rows, result.epochs                                   # doctest: +SKIP
(128, [7, 8])
"""
import csv
import json
import os
import time
from dataclasses import dataclass, field

from mss_aggregator.collect import scope as scopes
from mss_device.frame import VERSION as SPEC_VERSION  # the wire format's version (SPEC.md, section 4)
from mss_protocol import registry

FORMAT, FORMAT_VERSION = "mss-export", 1
TABLES = ("estimates", "counts")
FORMATS = ("csv", "parquet")
INSTALL_HINT = "pip install 'mss-iot[parquet]'"
METADATA_SUFFIX = "-metadata.json"  # CSVW's sidecar: <file>-metadata.json

# (name, Arrow type, CSVW datatype); label only when the store records names
ESTIMATE_COLUMNS = (("epoch", "int64", "integer"), ("item", "int64", "integer"), ("label", "string", "string"),
                    ("estimate", "float64", "double"), ("stderr", "float64", "double"),
                    ("ci_low", "float64", "double"), ("ci_high", "float64", "double"),
                    ("detected", "bool", "boolean"), ("sim_low", "float64", "double"),
                    ("sim_high", "float64", "double"), ("detected_simultaneous", "bool", "boolean"),
                    ("n", "int64", "integer"), ("devices", "int64", "integer"),
                    ("stderr_factor", "float64", "double"))
COUNT_COLUMNS = (("epoch", "int64", "integer"), ("block", "int64", "integer"), ("cell", "int64", "integer"),
                 ("block_reports", "int64", "integer"), ("count", "int64", "integer"))


class ExportError(RuntimeError):
    """Nothing to export, or the file cannot be written as asked."""


class ParquetUnavailable(ExportError):
    """pyarrow is not installed."""


@dataclass(frozen=True)
class ExportRequest:
    """What to export (ValueError for an unknown table or format).

    Parameters
    ----------
    what : str
        One of :data:`TABLES`: ``estimates`` (a row per epoch and item) or ``counts`` (a row per
        epoch and count cell).
    fmt : str
        One of :data:`FORMATS`: ``csv`` (its metadata in ``<out>-metadata.json``) or ``parquet``.
    out : str
        The file to write.
    post : str
        The estimates' post-processing (:mod:`mss_protocol.postprocess`).
    epochs : tuple of int, optional
        The epochs (None: every epoch with accepted reports).
    """
    what: str
    fmt: str
    out: str
    post: str = "none"
    epochs: tuple | None = None

    def __post_init__(self):
        if self.what not in TABLES:
            raise ValueError(f"what must be one of {TABLES}, got {self.what!r}")
        if self.fmt not in FORMATS:
            raise ValueError(f"fmt must be one of {FORMATS}, got {self.fmt!r}")


@dataclass
class ExportResult:
    """What :func:`export` wrote.

    Attributes
    ----------
    out : str
        The file.
    metadata : str or None
        The CSV's sidecar (``<out>-metadata.json``); None for Parquet (the metadata is in the file).
    rows : int
        Rows written (epochs x k for estimates, epochs x sum of the moduli for counts).
    epochs : list of int
        The epochs exported, ascending.
    provenance : dict
        The file's metadata (:func:`provenance`: config id, SPEC version, campaign, ...).
    """
    out: str
    metadata: str | None  # the CSV's sidecar; None for Parquet (in the file)
    rows: int
    epochs: list
    provenance: dict = field(default_factory=dict)

    def to_dict(self):
        return {"out": self.out, "metadata": self.metadata, "rows": self.rows, "epochs": self.epochs,
                "what": self.provenance["what"], "config_id": self.provenance["config_id"],
                "campaign": self.provenance.get("campaign")}


def require_pyarrow():
    """(pyarrow, pyarrow.parquet); :class:`ParquetUnavailable` naming the extra without them."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as exc:
        raise ParquetUnavailable(f"Parquet needs pyarrow ({INSTALL_HINT}); CSV needs nothing") from exc
    return pyarrow, pyarrow.parquet


def store_epochs(store):
    """The epochs with accepted reports (a shuffled store: with a batch's reports), oldest first."""
    return [e for e, _ in store.devices_per_epoch(last=2**62)]


def estimate_rows(store, epochs, post="none"):
    """One dict per (epoch, item) of ``epochs``, each epoch decoded alone as
    :func:`.scope.select` and :func:`.scope.decode` do for ``mss estimate --epoch``
    (columns: :data:`ESTIMATE_COLUMNS`)."""
    protocol = registry.from_config(store.cfg)
    names = store.categories()
    out = []
    for epoch in epochs:
        scope = scopes.select(store, epoch)
        if not scope.counts.total:
            continue
        extra = {"n": scope.counts.total, "devices": scope.devices, "stderr_factor": scope.stderr_factor}
        for row in scopes.decode(protocol, scope, post).rows():
            label = {"label": names.name(row["item"])} if names.labels else {}
            out.append({"epoch": epoch, "item": row["item"], **label, **row, **extra})
    return out


def count_rows(store, epochs):
    """One dict per (epoch, block, cell) of ``epochs``: the accepted reports' additive counts
    (columns: :data:`COUNT_COLUMNS`)."""
    cfg, out = store.cfg, []
    for epoch in epochs:
        counts = store.counts(epoch)
        if not counts.total:
            continue
        for j in range(cfg.l):
            n_j = int(counts.n[j])
            out.extend({"epoch": epoch, "block": j, "cell": r, "block_reports": n_j, "count": int(c)}
                       for r, c in enumerate(counts.block(j)))
    return out


def provenance(store, request, epochs):
    """The file's metadata (see the module docstring)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        mine = version("mss-iot")
    except PackageNotFoundError:  # run from a source tree
        mine = "unknown"
    doc = {"format": FORMAT, "version": FORMAT_VERSION, "what": request.what,
           "config_id": store.cfg.config_id_hex, "spec_version": SPEC_VERSION}
    campaign = store.campaign()
    if campaign is not None:
        doc["campaign"] = campaign
    doc.update({"config": store.cfg.to_dict(), "store": store.name, "post": request.post, "epochs": epochs,
                "exported_at": time.time(), "mss_iot_version": mine})
    return doc


def columns_of(request, rows):
    """The columns of ``request.what``'s table, ``label`` only when the rows have one."""
    if request.what == "counts":
        return COUNT_COLUMNS
    labelled = bool(rows) and "label" in rows[0]
    return tuple(c for c in ESTIMATE_COLUMNS if labelled or c[0] != "label")


def export(store, request):
    """Write ``request.what`` of ``store`` to ``request.out`` (``mss export``).

    Parameters
    ----------
    store : mss_aggregator.collect.store.Store
        An open store (left open).
    request : ExportRequest
        The table (``estimates``: a row per epoch and item; ``counts``: a row per epoch and count
        cell), the format (``csv``, ``parquet``), the file, the post-processing and the epochs.

    Returns
    -------
    ExportResult
        ``rows`` written (epochs x k for estimates), ``epochs``, the CSV's sidecar ``metadata``
        (None for Parquet) and the ``provenance``; ``to_dict()`` is ``mss export --json``.

    Raises
    ------
    ExportError
        The epochs asked for hold no accepted reports.
    ParquetUnavailable
        Parquet without pyarrow (checked before any work).
    OSError
        From the file.
    """
    if request.fmt == "parquet":
        require_pyarrow()
    held = store_epochs(store)
    if request.epochs is None:
        epochs = held
    else:
        missing = sorted(set(request.epochs) - set(held))
        if missing:
            raise ExportError(f"{store.name} has no accepted reports in epoch "
                              f"{', '.join(map(str, missing))}: {scopes.contents(store)}")
        epochs = sorted(set(request.epochs))
    if not epochs:
        raise ExportError(scopes.contents(store))
    rows = (estimate_rows(store, epochs, request.post) if request.what == "estimates"
            else count_rows(store, epochs))
    meta = provenance(store, request, epochs)
    columns = columns_of(request, rows)
    if request.fmt == "parquet":
        write_parquet(request.out, rows, columns, meta)
        sidecar = None
    else:
        sidecar = write_csv(request.out, rows, columns, meta)
    return ExportResult(request.out, sidecar, len(rows), epochs, provenance=meta)


def write_parquet(path, rows, columns, meta):
    """``rows`` as a Parquet file of ``columns`` ([(name, Arrow type, ...)]), ``meta`` in its
    key-value metadata (strings as they are, other values as JSON)."""
    pa, pq = require_pyarrow()
    schema = pa.schema([(name, pa.type_for_alias(kind)) for name, kind, _ in columns],
                       metadata={k: v if isinstance(v, str) else json.dumps(v) for k, v in meta.items()})
    table = pa.Table.from_pydict({name: [r[name] for r in rows] for name, _, _ in columns}, schema=schema)
    pq.write_table(table, path)


def write_csv(path, rows, columns, meta):
    """``rows`` as CSV (a header, then data; floats exact, booleans true/false) and its
    CSVW-style ``<path>-metadata.json``; the sidecar's path."""
    names = [name for name, _, _ in columns]
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(names)
        out.writerows([_cell(r[name]) for name in names] for r in rows)
    sidecar = path + METADATA_SUFFIX
    doc = {"@context": "http://www.w3.org/ns/csvw", "url": os.path.basename(path),
           "dc:title": f"mss-iot {meta['what']} of config {meta['config_id']}",
           "tableSchema": {"columns": [{"name": name, "datatype": kind} for name, _, kind in columns]},
           "mss-iot": meta}
    with open(sidecar, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    return sidecar


def _cell(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else value


def read_metadata(path):
    """The provenance of a file :func:`export` wrote: a Parquet file's key-value metadata
    (values decoded as written) or a CSV file's sidecar's ``"mss-iot"``."""
    if path.endswith(".parquet") or not os.path.exists(path + METADATA_SUFFIX):
        _, pq = require_pyarrow()
        raw = {k.decode(): v.decode() for k, v in (pq.read_schema(path).metadata or {}).items()}
        strings = ("format", "what", "config_id", "campaign", "store", "post", "mss_iot_version")
        return {k: v if k in strings else json.loads(v) for k, v in raw.items() if not k.startswith("ARROW:")}
    with open(path + METADATA_SUFFIX) as fh:
        return json.load(fh)["mss-iot"]
