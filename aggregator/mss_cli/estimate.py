"""``mss estimate``: decode a store or a counts file."""
import csv

import click
from click.core import ParameterSource
from rich.table import Table

from mss_aggregator import jsonout
from mss_aggregator import view as views
from mss_aggregator.collect import central as centrals
from mss_cli.common import CompromisedParam, FloatRange, counters_line, fail, make_console, output_file, post_option, writing
from mss_aggregator import estimates as estimates_lib
from mss_iot import Campaign, EstimateError, EstimateRequest, StoreError, estimate_store, open_store
from mss_protocol.config_file import ConfigError
from mss_protocol.limits import MAX_K


@click.command("estimate")
@click.option("--store", "store_path", metavar="PATH|URL",
              help="SQLite file or postgresql:// URL of a campaign's store.")
@click.option("--counts", "counts_path", type=click.Path(exists=True, dir_okay=False),
              help="Decode a counts file (mss estimate --export-counts, mss merge) instead of a store.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="The campaign's config file: its labels and ordinal name and order the items (default: what "
                   "mss aggregate recorded in the store), and its config id must be the store's or the counts'.")
@click.option("--export-counts", type=click.Path(dir_okay=False), callback=output_file,
              help="Also write the counts (the additive sufficient statistic, with the config).")
@click.option("--json", "as_json", is_flag=True,
              help="Print the estimates as JSON (n, config_id, epoch, pooled, stderr_factor, decoded, counters, "
                   "view, estimates; a shuffled store's also central: guarantee (central, or local where no "
                   "central bound is below it), regime (fresh or memoized) and regime_why, eps, delta, eps0, "
                   "devices (the honest devices counted), n, colluding, method, epochs, batches, composition, why) "
                   "instead of the table.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False), callback=output_file,
              help="Write every item's estimate as CSV.")
@click.option("--plot", type=click.Path(dir_okay=False), callback=output_file,
              help="Write a PNG of the items the table shows (same order, top and intervals).")
@post_option
@click.option("--top", type=click.IntRange(1, MAX_K - 1), default=None,
              help=f"Show the N largest estimates, in table and plot (default: every item of an ordinal domain of "
                   f"at most {views.ALL_ITEMS_UP_TO}, else {views.DEFAULT_TOP}).")
@click.option("--order", type=click.Choice(views.ORDERS), default=None,
              help="item: the items' own order; estimate: largest first (default: item when the config says "
                   "ordinal, else estimate).")
@click.option("--simultaneous/--marginal", default=None,
              help="95% intervals that hold for all k items together (Bonferroni), or for each item alone. "
                   "Default: simultaneous when fewer than k items are shown (the largest of k estimates are a "
                   "selection), else marginal.")
@click.option("--epoch", type=click.IntRange(0, 2**32 - 1), default=None,
              help="Only this epoch's reports (an epoch is a u32, SPEC.md section 4). Default: the fuller "
                   "of the last complete epoch and the current one (each device counts once).")
@click.option("--all-epochs", is_flag=True,
              help="Pool every epoch's reports; standard errors widened by the reports per device when they "
                   "repeat a draw (device.memoize), not for fresh draws.")
@click.option("--delta", type=FloatRange(0, 1, min_open=True, max_open=True), default=centrals.DELTA,
              show_default=True,
              help="A shuffled store's (mss aggregate --shuffled) central delta per batch: the (eps_c, delta) of "
                   "the release is printed beside the estimate (JSON: central), over several batches composed for "
                   "fresh draws; memoized reports over several batches keep their draw's local epsilon.")
@click.option("--compromised", type=CompromisedParam(), default=str(estimates_lib.DEFAULT_COMPROMISED.count),
              show_default=True,
              help="Devices not trusted, a count (3) or a share of the devices decoded (1%): every item's certified "
                   "interval (JSON: certified_ci; integrity: compromised, max_shift) is its 95% interval widened by "
                   "the most their crafted reports (one an epoch each; a counts file: one each) can move it.")
@click.option("--robust", is_flag=True,
              help="Recover the honest devices' estimate from what the --compromised devices' crafted reports may "
                   "have done (LDPRecover-style constraint inference, docs/privacy.md 'Resistance'): its intervals "
                   "widened by how far the recovery moved each estimate, the certified interval still the plain "
                   "decoder's (JSON: robust: method, crafted, excess, suspected; per item plain_estimate).")
@click.option("--exclude-suspects", is_flag=True,
              help="Leave out the reports of the devices mss suspects flags (its tests at their default false-alarm "
                   "rate, 1% per honest device) and say how many (JSON: integrity.excluded_suspects). --store only.")
def estimate_cmd(store_path, counts_path, config_path, export_counts, as_json, csv_path, plot, post, top, order,
                 simultaneous, epoch, all_epochs, delta, compromised, robust, exclude_suspects):
    """Frequency estimates with standard errors, 95% CIs and the items distinguishable from 0, from a store or
    a counts file.  Exit 3 when there is nothing to estimate (an empty store, an epoch without reports, a store
    of another config), saying what there is."""
    delta_given = click.get_current_context().get_parameter_source("delta") != ParameterSource.DEFAULT
    _check_sources(store_path, counts_path, epoch=epoch, all_epochs=all_epochs, exclude_suspects=exclude_suspects,
                   delta_given=delta_given)
    central = None
    try:
        wanted = Campaign.read(config_path) if config_path else None
        if counts_path:
            counts, counters, scope, categories = _from_counts(counts_path, wanted, config_path)
            try:
                est, integrity, recovery, plain = estimates_lib.decode_counts(counts, post, compromised, robust)
            except ValueError as exc:
                raise ConfigError(f"--robust: {exc}") from None
        else:
            selection = dict(epoch=epoch, all_epochs=all_epochs, post=post, delta=delta if delta_given else None,
                             compromised=compromised, robust=robust, exclude_suspects=exclude_suspects)
            found = _from_store(store_path, wanted, config_path, selection)
            counts, counters, scope, categories, central, est = (found.scope.counts, found.counters, found.scope,
                                                                 found.categories, found.central, found.estimate)
            integrity, recovery, plain = found.integrity, found.robust, found.plain
    except (ConfigError, StoreError) as exc:
        fail(str(exc))
    cfg = counts.cfg
    if export_counts:
        with writing("--export-counts", export_counts):
            counts.save(export_counts)
    view = views.make(est, categories, order=order, top=top, simultaneous=simultaneous)
    rows = est.rows()
    if view.categories.labels:
        for r in rows:
            r["label"] = view.categories.name(r["item"])
    estimates_lib.with_certified(rows, integrity, None if plain is None else plain.rows())
    title = f"{counts.total} reports, config {cfg.config_id_hex}"
    if csv_path:
        _write_csv(csv_path, rows, bool(view.categories.labels))
    if plot:
        from mss_aggregator.plotting import plot_estimates

        with writing("--plot", plot):
            plot_estimates(view, plot, title)
    if as_json:
        where = scope.document() if scope else {"epoch": None, "pooled": None}  # a counts file: unknown
        shuffled = {} if central is None else {"central": central}  # a device store's JSON is unchanged
        recovered = {} if recovery is None else {"robust": recovery.document()}
        click.echo(jsonout.dumps({"n": counts.total, "config_id": cfg.config_id_hex, **where,
                                  "counters": counters, "post": post, "view": view.document(), "estimates": rows,
                                  **shuffled, "integrity": integrity.document(), **recovered}))
    else:
        _print_estimate(title, view, counters=counters, scope=scope, central=central, integrity=integrity,
                        recovery=recovery)


def _check_sources(store_path, counts_path, epoch, all_epochs, exclude_suspects, delta_given):
    """UsageError unless exactly one of --store and --counts is given, with only the options it takes."""
    if (store_path is None) == (counts_path is None):
        raise click.UsageError("give --store or --counts")
    if counts_path and (epoch is not None or all_epochs):
        raise click.UsageError("--epoch and --all-epochs select reports in a store; a counts file has no epochs")
    if epoch is not None and all_epochs:
        raise click.UsageError("give --epoch or --all-epochs, not both")
    if counts_path and exclude_suspects:
        raise click.UsageError("--exclude-suspects tests each device's reports in a store; a counts file has no devices")
    if counts_path and delta_given:
        raise click.UsageError("--delta is the central delta of a shuffled store; a counts file has no batches")


def _from_counts(counts_path, wanted, config_path):
    """(counts, counters, scope, categories) of a counts file, checked against --config's (``wanted``)."""
    counts = load_counts(counts_path)
    if wanted and wanted.cfg.config_id != counts.cfg.config_id:
        raise ConfigError(f"{counts_path} holds counts of config {counts.cfg.config_id_hex}, not "
                          f"{config_path}'s {wanted.cfg.config_id_hex}")
    if not counts.total:
        raise ConfigError(f"{counts_path} holds no reports (config {counts.cfg.config_id_hex})")
    return counts, None, None, wanted.categories if wanted else None


def _print_estimate(title, view, counters, scope, central, integrity, recovery=None):
    """The human output: what was decoded and from what, the table and its caption."""
    out = make_console()
    out.print(title + (f"; {counters_line(counters)}" if counters is not None else ""), highlight=False)
    if scope is not None:  # what was decoded (one epoch, or pooled and how widened), then why
        out.print(f"{scope.summary()}; {scope.selection}", highlight=False)
    if central is not None:
        out.print(centrals.line(central), highlight=False)
    out.print(integrity.headline(), highlight=False)
    if recovery is not None:
        out.print(estimates_lib.robust_line(recovery), highlight=False)
    out.print(_table(view))
    for line in view.caption():
        out.print(line)


def load_counts(path):
    """The counts file at ``path``; ConfigError when it is something else (an SQLite store: what to do)."""
    from mss_protocol.counts import Counts

    with open(path, "rb") as fh:
        if fh.read(16) == b"SQLite format 3\x00":
            raise ConfigError(f"{path} is an SQLite store, not a counts file: give it to --store, or export its "
                              f"counts with mss estimate --store {path} --export-counts FILE")
    return Counts.load(path)


def _from_store(store_path, wanted, config_path, selection):
    """The :class:`~mss_aggregator.estimates.StoreEstimate` of the reports ``selection`` (``epoch``,
    ``all_epochs``, ``post``, and ``delta`` when --delta was given) picks, decoded, or ConfigError saying
    what the store holds when that is nothing (or --delta for a store of devices)."""
    with open_store(store_path) as store:
        request = EstimateRequest(config=wanted and wanted.cfg, categories=wanted and wanted.categories,
                                  source=config_path, **selection)
        try:
            return estimate_store(store.store, request)
        except EstimateError as exc:
            if exc.field == "delta":
                raise ConfigError(f"--delta: {store.name} holds reports of devices, not a shuffler's batches "
                                  f"(mss aggregate --shuffled): they have no central guarantee, only eps-LDP") from None
            if exc.field == "robust":
                raise ConfigError(f"--robust: {exc}") from None
            raise ConfigError(str(exc)) from None


def _table(view):
    est, names = view.est, view.categories
    table = Table(title=f"{view.top} of {est.raw.size} items, " + ("in item order" if view.order == "item"
                                                                  else "largest first"))
    table.add_column("item", justify="left" if names.labels else "right")
    for col in ("estimate", "stderr", view.interval_name, "signal"):
        table.add_column(col, justify="right")
    lo, hi = view.intervals()
    signal = view.detected()
    for i in view.shown():
        table.add_row(names.name(i), f"{est.estimate[i]:.4f}", f"{est.stderr[i]:.4f}",
                      f"[{lo[i]:.4f}, {hi[i]:.4f}]", "yes" if signal[i] else "–")
    return table


def _write_csv(path, rows, labels):
    cols = ("item",) + (("label",) if labels else ()) + ("estimate", "stderr", "ci_low", "ci_high", "detected",
                                                        "sim_low", "sim_high", "detected_simultaneous")
    with writing("--csv", path), open(path, "w", newline="") as fh:
        out = csv.DictWriter(fh, cols, extrasaction="ignore")
        out.writeheader()
        out.writerows(rows)
