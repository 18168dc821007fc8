"""``mss simulate``: a simulated fleet through one configuration, MSE against the truth."""
import json
from dataclasses import replace

import click
from rich.table import Table

from mss_aggregator.distributions import DistributionError
from mss_cli.common import (EPSILON, MAX_BITS, MAX_SIMULATED, SEED, fail, figure, make_console, output_file,
                            post_option, progress, top_table, writing)
from mss_protocol import oracle_config
from mss_protocol.choose import CHOICES
from mss_protocol.config_file import ConfigError
from mss_protocol.limits import MAX_K
from mss_protocol.mss.planner import PlanError


@click.command("simulate")
@click.option("--k", "k", type=click.IntRange(2, MAX_K - 1), help="Domain size (or take it from --config).")
@click.option("--epsilon", type=EPSILON, help="Privacy budget per report (or take it from --config).")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="Use this config (from mss plan --device-config) instead of planning.")
@click.option("--max-bits", type=click.IntRange(1, MAX_BITS), default=None,
              help="Largest report body in bits, as mss plan --max-bits.")
@click.option("--n", "n", type=click.IntRange(1, MAX_SIMULATED), required=True, help="Simulated devices.")
@click.option("--dist", default="zipf:1.1", show_default=True,
              help="The devices' true values: zipf:S, spike, uniform or file:counts.csv.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the values and the reports.")
@click.option("--protocol", type=click.Choice(CHOICES), default="auto", show_default=True,
              help="auto: the protocol mss plan chooses for --k, --epsilon, --max-bits and --n; mss (planned "
                   "for --max-bits); ss (SubsetSelection on the full domain); or a one-output protocol: "
                   + ", ".join(oracle_config.NAMES) + ".")
@click.option("--trials", type=click.IntRange(1, 10**4), default=1, show_default=True,
              help="Independent fleets; the MSE is their mean, ± their std.")
@post_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--plot", type=click.Path(dir_okay=False), callback=output_file,
              help="Write a PNG of truth vs estimates.")
def simulate_cmd(k, epsilon, config_path, max_bits, n, dist, seed, protocol, trials, post,
                 as_json, plot):
    """Simulate N devices, decode their reports and print the accuracy."""
    from mss_iot import SimulateRequest, SimulateRequestError, simulate, simulation_config

    if config_path is None and (k is None or epsilon is None):
        raise click.UsageError("give --k and --epsilon, or --config")
    request = SimulateRequest(n, k=k, epsilon=epsilon, config=config_path, protocol=protocol, max_bits=max_bits,
                              dist=dist, seed=seed, trials=trials, post=post)
    try:
        cfg = simulation_config(request, plan_progress=progress)
        with progress(f"simulating {trials} x {n} devices"):
            result = simulate(replace(request, config=cfg))
    except SimulateRequestError as exc:  # --k/--epsilon against --config's (the others are checked above)
        fail(f"--k/--epsilon disagree with {config_path} (k={exc.config.k}, epsilon={exc.config.epsilon})")
    except (ConfigError, PlanError, DistributionError) as exc:
        fail(str(exc))
    out, sim, predicted = result.to_dict(), result, result.predicted_mse
    protocol = out["protocol"]
    if plot:
        from mss_aggregator import view
        from mss_aggregator.plotting import plot_estimates

        with writing("--plot", plot):
            plot_estimates(view.make(sim.estimate, top=40), plot,
                           f"{protocol.upper()} k={cfg.k} eps={cfg.epsilon} n={n} {dist} (post={post})", sim.truth)
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    table = Table(title=f"{protocol.upper()} simulation: k={cfg.k}, epsilon={cfg.epsilon}, n={n}, {dist}")
    for col in ("MSE per item", "± std", "predicted MSE", "decode s", "bits max/mean"):
        table.add_column(col)
    table.add_row(figure(out["mse"]), figure(out["mse_std"], 2), figure(predicted),
                  figure(out["decode_seconds"], 3),
                  f"{out['bits_per_report']['max']}/{out['bits_per_report']['mean']:.1f}")
    out_console = make_console()
    out_console.print(table)
    out_console.print(top_table("top 10 categories (last trial)", sim.truth, sim.estimate, 10))
    if plot:
        out_console.print(f"plot: {plot}")
