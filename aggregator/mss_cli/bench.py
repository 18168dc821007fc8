"""``mss bench``: every protocol on the same data."""
import click
from rich.console import Console
from rich.table import Table

from mss_aggregator import jsonout
from mss_aggregator.distributions import DistributionError, parse
from mss_cli.common import console, csv_list, epsilon_list, fail, output_file, writing
from mss_protocol import postprocess
from mss_protocol.mss.config import ConfigError


@click.command("bench")
@click.option("--k", "ks", default="1024", show_default=True, callback=csv_list(int))
@click.option("--epsilon", "epsilons", default="0.5,1,2,3,4,5", show_default=True,
              callback=epsilon_list)
@click.option("--n", "n", type=click.IntRange(min=1), default=10000, show_default=True)
@click.option("--dist", "dists", default="zipf:1.1,spike", show_default=True,
              callback=csv_list(str))
@click.option("--trials", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--protocols", "names", default="mss,ss,pgr,grr,rappor,olh,hr", show_default=True,
              callback=csv_list(str), help="mss, ss, pgr, grr, rappor (OUE), sue, olh, hr.")
@click.option("--post", type=click.Choice(postprocess.CHOICES), default="none", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False, allow_dash=True), callback=output_file,
              help="Write {\"rows\": [...]} to this file (- prints it instead of the table).")
@click.option("--plot", "plot_prefix", callback=output_file, help="Write <prefix>-mse/decode/bits-*.png.")
def bench_cmd(ks, epsilons, n, dists, trials, names, post, seed, json_path, plot_prefix):
    """Accuracy, bits and decode time of every protocol on the same data."""
    from rich.progress import Progress

    from mss_aggregator.compare.bench import run_bench
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
        with Progress(console=console, transient=True) as bar:
            task = bar.add_task("bench", total=total)
            rows = run_bench(ks, epsilons, n, dists, trials, names, post, seed,
                             progress=lambda: bar.advance(task))
    except ConfigError as exc:  # a protocol that takes no such (k, epsilon)
        fail(str(exc))
    if json_path == "-":
        click.echo(jsonout.dumps({"rows": rows}))
        return
    if json_path:
        with writing("--json", json_path), open(json_path, "w") as fh:
            fh.write(jsonout.dumps({"rows": rows}, indent=1))
    table = Table(title=f"mss bench: n={n}, {trials} trials, post={post}")
    for col in ("protocol", "k", "eps", "dist", "MSE", "± std", "vs SS", "bits max", "client s",
                "decode s"):
        table.add_column(col, justify="right")
    for r in rows:
        ratio = f"{r['mse_ratio_vs_ss']:.3f}" if r["mse_ratio_vs_ss"] else "-"
        table.add_row(r["protocol"], str(r["k"]), f"{r['epsilon']:g}", r["dist"], f"{r['mse']:.3g}",
                      f"{r['mse_std']:.2g}", ratio, str(r["bits_max"]),
                      f"{r['client_seconds_per_report']:.2g}", f"{r['decode_seconds']:.3g}")
    wide = Console(width=160)
    wide.print(table)
    if plot_prefix:
        from mss_aggregator.plotting import plot_bench

        with writing("--plot", plot_prefix):
            for path in plot_bench(rows, plot_prefix):
                wide.print(f"plot: {path}")
