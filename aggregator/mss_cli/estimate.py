"""``mss estimate`` (decode a store or a counts file) and ``mss merge`` (sum counts)."""
import click
import numpy as np
from rich.console import Console
from rich.table import Table

from mss_aggregator import jsonout
from mss_cli.common import console, fail, output_file, writing
from mss_protocol import postprocess, registry
from mss_protocol.mss.config import ConfigError


@click.command("estimate")
@click.option("--store", "store_path", metavar="PATH|URL",
              help="SQLite file or postgresql:// URL of a campaign's store.")
@click.option("--counts", "counts_path", type=click.Path(exists=True, dir_okay=False),
              help="Decode a counts file (mss estimate --export-counts, mss merge) instead of a store.")
@click.option("--export-counts", type=click.Path(dir_okay=False), callback=output_file,
              help="Also write the counts (the additive sufficient statistic, with the config).")
@click.option("--json", "as_json", is_flag=True)
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), callback=output_file,
              help="Write estimates as CSV.")
@click.option("--plot", type=click.Path(dir_okay=False), callback=output_file,
              help="Write a PNG of the top estimates.")
@click.option("--post", type=click.Choice(postprocess.CHOICES), default="none", show_default=True)
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--epoch", type=click.IntRange(0, 2**32 - 1), default=None,
              help="Only this epoch's reports (an epoch is a u32, SPEC.md section 4). Default: the fuller "
                   "of the last complete epoch and the current one (each device counts once).")
@click.option("--all-epochs", is_flag=True,
              help="Pool every epoch's reports; standard errors widened by the reports per device.")
def estimate_cmd(store_path, counts_path, export_counts, as_json, csv_path, plot, post, top, epoch, all_epochs):
    """Frequency estimates with standard errors and 95% CIs from a store or a counts file."""
    from mss_protocol.mss.counts import Counts
    from mss_aggregator.collect import scope as scopes
    from mss_aggregator.collect.store import StoreError, open_store

    if (store_path is None) == (counts_path is None):
        raise click.UsageError("give --store or --counts")
    if counts_path and (epoch is not None or all_epochs):
        raise click.UsageError("--epoch and --all-epochs select reports in a store; a counts file has no epochs")
    if epoch is not None and all_epochs:
        raise click.UsageError("give --epoch or --all-epochs, not both")
    try:
        if counts_path:
            counts, counters, scope = Counts.load(counts_path), None, None
        else:
            store = open_store(store_path)
            try:
                scope, counters = scopes.select(store, epoch, all_epochs), store.counters()
            finally:
                store.close()
            counts = scope.counts
    except (ConfigError, StoreError) as exc:
        fail(str(exc))
    cfg = counts.cfg
    if export_counts:
        with writing("--export-counts", export_counts):
            counts.save(export_counts)
    protocol = registry.from_config(cfg)
    est = protocol.decode(counts, post=post) if scope is None else scopes.decode(protocol, scope, post)
    rows = est.rows()
    if csv_path:
        with writing("--csv", csv_path), open(csv_path, "w") as fh:
            fh.write("item,estimate,stderr,ci_low,ci_high\n")
            for r in rows:
                fh.write(f"{r['item']},{r['estimate']!r},{r['stderr']!r},{r['ci_low']!r},{r['ci_high']!r}\n")
    if plot:
        from mss_aggregator.plotting import plot_estimates

        with writing("--plot", plot):
            plot_estimates(None, est, plot, f"{counts.total} reports, config {cfg.config_id_hex}")
    if as_json:
        where = scope.document() if scope else {"epoch": None, "pooled": None}  # a counts file: unknown
        click.echo(jsonout.dumps({"n": counts.total, "config_id": cfg.config_id_hex, **where,
                                  "counters": counters, "post": post, "estimates": rows}))
        return
    out = Console()
    out.print(f"{counts.total} reports, config {cfg.config_id_hex}"
              + (f", counters {counters}" if counters is not None else ""))
    if scope is not None:
        what = "every epoch" if scope.pooled else "no epoch" if scope.epoch is None else f"epoch {scope.epoch}"
        widened = f", standard errors x{scope.stderr_factor:.3f}" if scope.stderr_factor != 1 else ""
        out.print(f"{what}: {scope.selection}; {scope.devices} devices in {scope.epochs} epochs{widened}")
    table = Table(title=f"top {top} categories")
    for col in ("item", "estimate", "stderr", "95% CI"):
        table.add_column(col, justify="right")
    for i in np.argsort(-est.estimate, kind="stable")[:top]:
        table.add_row(str(i), f"{est.estimate[i]:.4f}", f"{est.stderr[i]:.4f}",
                      f"[{est.ci_low[i]:.4f}, {est.ci_high[i]:.4f}]")
    out.print(table)


@click.command("merge")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), callback=output_file,
              help="Where to write the summed counts.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def merge_cmd(inputs, output, as_json):
    """Sum count files of the same config (sites that share only counts)."""
    from mss_protocol.mss.counts import Counts

    try:
        total = Counts.load(inputs[0])
        for path in inputs[1:]:
            part = Counts.load(path)
            try:
                total = total.merge(part)
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc} ({inputs[0]}); only one config merges") from None
    except ConfigError as exc:
        fail(str(exc))
    with writing("--output", output):
        total.save(output)
    if as_json:
        click.echo(jsonout.dumps({"inputs": list(inputs), "output": output, "n": int(total.total),
                               "config_id": total.cfg.config_id_hex}))
        return
    console.print(f"{len(inputs)} files, {total.total} reports, config {total.cfg.config_id_hex} -> {output}")
