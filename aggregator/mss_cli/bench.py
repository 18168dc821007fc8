"""``mss bench``: every protocol on the same data."""
import os

import click
from rich.table import Table

from mss_aggregator import jsonout
from mss_aggregator.distributions import DistributionError, parse
from mss_cli.common import (EPSILON, MAX_SIMULATED, SEED, NumberList, csv_list, fail, figure, make_console,
                            output_file, post_option, progress, writing)
from mss_protocol.config_file import ConfigError
from mss_protocol.limits import MAX_K

PROTOCOLS = "mss,ss,pgr,grr,rappor,olh,hr"


def _plot_dir(ctx, param, value):
    """--plot-dir: made if missing, but its parent must exist (a typo is not a folder tree)."""
    if value is not None and not os.path.isdir(value):
        output_file(ctx, param, value)
    return value


@click.command("bench")
@click.option("--k", "ks", default="1024", show_default=True, type=NumberList(click.IntRange(2, MAX_K - 1)),
              help="Domain sizes, comma-separated.")
@click.option("--epsilon", "epsilons", default="0.5,1,2,3,4,5", show_default=True, type=NumberList(EPSILON),
              help="Privacy budgets, comma-separated.")
@click.option("--n", "n", type=click.IntRange(1, MAX_SIMULATED), default=10000, show_default=True,
              help="Simulated devices (one report each) a trial.")
@click.option("--dist", "dists", default="zipf:1.1,spike", show_default=True, callback=csv_list(str),
              help="True value distributions, comma-separated: zipf:S, spike, uniform, file:counts.csv.")
@click.option("--trials", type=click.IntRange(1, 10**4), default=5, show_default=True,
              help="Independent populations per (k, distribution); MSE is their mean, ± their std.")
@click.option("--protocols", "names", default=PROTOCOLS, show_default=True, callback=csv_list(str),
              help="Comma-separated: mss, ss, pgr, grr, rappor (OUE), sue, olh, hr.")
@post_option
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the populations and the reports.")
@click.option("--json", "as_json", is_flag=True, help="Print {\"rows\": [...]} as JSON instead of the table.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), callback=output_file, metavar="FILE",
              help="Also write {\"rows\": [...]} to this JSON file.")
@click.option("--plot-dir", type=click.Path(file_okay=False), callback=_plot_dir, metavar="DIR",
              help="Write the plots here (made if missing): bench-mse-k<k>-<dist>.png, bench-decode-k<k>.png, "
                   "bench-bits-k<k>.png.")
def bench_cmd(ks, epsilons, n, dists, trials, names, post, seed, as_json, output, plot_dir):
    """Accuracy, bits and decode time of every protocol on the same data."""
    from mss_aggregator.compare.bench import Grid, run_bench
    from mss_protocol import registry

    unknown = [p for p in names if p not in registry.AVAILABLE]
    if unknown:
        raise click.BadParameter(f"unknown protocols {', '.join(unknown)} (available: "
                                 f"{', '.join(registry.AVAILABLE)})", param_hint="--protocols")
    try:
        for d in dists:
            parse(d, 4)
    except DistributionError as exc:
        fail(str(exc))
    total = len(ks) * len(dists) * len(epsilons) * len(names) * trials
    try:
        with progress("bench", total) as step:
            grid = Grid(ks=tuple(ks), epsilons=tuple(epsilons), dists=tuple(dists), names=tuple(names))
            rows = run_bench(grid, n, trials=trials, post=post, seed=seed, progress=step)
    except ConfigError as exc:  # a protocol that takes no such (k, epsilon)
        fail(str(exc))
    if output:
        with writing("--output", output), open(output, "w") as fh:
            fh.write(jsonout.dumps({"rows": rows}, indent=1))
    if plot_dir:
        from mss_aggregator.plotting import plot_bench

        with writing("--plot-dir", plot_dir):
            os.makedirs(plot_dir, exist_ok=True)
            plots = plot_bench(rows, os.path.join(plot_dir, "bench"))
    if as_json:
        click.echo(jsonout.dumps({"rows": rows}))
        return
    table = Table(title=f"mss bench: n={n}, {trials} trials, post={post}",
                  caption="MSE: mean squared error per item on frequencies over the trials; vs SS: MSE / "
                          "SubsetSelection's; client s: seconds to make one report on this machine")
    for col in ("protocol", "k", "eps", "dist", "MSE", "± std", "vs SS", "bits max", "client s",
                "decode s"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(r["protocol"], str(r["k"]), f"{r['epsilon']:g}", r["dist"], figure(r["mse"], 3),
                      figure(r["mse_std"], 2), figure(r["mse_ratio_vs_ss"] or None, 3), str(r["bits_max"]),
                      figure(r["client_seconds_per_report"], 2), figure(r["decode_seconds"], 3))
    out = make_console()
    out.print(table)
    for path in plots if plot_dir else ():
        out.print(f"plot: {path}")
