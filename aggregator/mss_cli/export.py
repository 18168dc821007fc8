"""``mss export``: a store's per-epoch estimates or additive counts as CSV or Parquet
(:mod:`mss_aggregator.export`)."""
import click

from mss_aggregator import export as exports  # the formats, tables and install hint the options offer
from mss_aggregator import jsonout
from mss_cli.common import console, fail, output_file, post_option, writing
from mss_iot import ExportError, ExportRequest, StoreError, export, open_store
from mss_protocol.config_file import ConfigError


@click.command("export")
@click.option("--store", "store_path", required=True, metavar="PATH|URL",
              help="SQLite file or postgresql:// URL of a campaign's store.")
@click.option("--format", "fmt", type=click.Choice(exports.FORMATS), default="csv", show_default=True,
              help="csv (its metadata beside it in FILE-metadata.json) or parquet (metadata in the file; "
                   f"needs pyarrow: {exports.INSTALL_HINT}).")
@click.option("--what", type=click.Choice(exports.TABLES), default="estimates", show_default=True,
              help="estimates: a row per epoch and item (estimate, stderr, 95% intervals, n); counts: a row per "
                   "epoch and count cell (the additive counts, which sum across epochs and sites).")
@click.option("--out", type=click.Path(dir_okay=False), callback=output_file, metavar="FILE",
              help="Where to write (default: mss-<what>-<config id>.<format> in the current folder).")
@click.option("--epoch", "epochs", type=click.IntRange(0, 2**32 - 1), multiple=True,
              help="Only this epoch (repeat for several; default: every epoch with accepted reports).")
@post_option
@click.option("--json", "as_json", is_flag=True,
              help="Print what was written as JSON (out, metadata, rows, epochs, what, config_id, campaign).")
def export_cmd(store_path, fmt, what, out, epochs, post, as_json):
    """Write a store's per-epoch estimates with their intervals, or its additive counts, as CSV or Parquet,
    with the config id, SPEC version and campaign in the file's metadata (docs/metrics.md)."""
    if out == "-":
        raise click.UsageError("--out -: give a file (a CSV's metadata is written beside it, Parquet is binary)")
    try:
        store = open_store(store_path)
    except (ConfigError, StoreError) as exc:
        fail(str(exc))
    try:
        out = out or f"mss-{what}-{store.cfg.config_id_hex}.{fmt}"
        request = ExportRequest(what, fmt, out, post=post, epochs=tuple(epochs) or None)
        with writing("--out", out):
            result = export(store.store, request)
    except (ExportError, StoreError) as exc:
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        click.echo(jsonout.dumps(result.to_dict()))
        return
    beside = f", metadata in {result.metadata}" if result.metadata else ", metadata in the file"
    console.print(f"{result.rows} rows of {what} ({len(result.epochs)} epochs, config "
                  f"{result.provenance['config_id']}) -> {result.out}{beside}", highlight=False)
