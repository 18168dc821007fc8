"""``mss simulate``: a simulated fleet through one configuration, MSE against the truth."""
import json
from contextlib import nullcontext

import click
from rich.console import Console
from rich.table import Table

from mss_aggregator.distributions import DistributionError, parse
from mss_cli.common import EPSILON, console, fail, output_file, top_table, writing
from mss_protocol import oracle_config, postprocess, registry
from mss_protocol.mss.config import ConfigError, MssConfig
from mss_protocol.mss.planner import PlanError, plan


@click.command("simulate")
@click.option("--k", "k", type=click.IntRange(min=2), help="Domain size (or take it from --config).")
@click.option("--epsilon", type=EPSILON)
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
              help="Use this config (from mss plan --device-config) instead of planning.")
@click.option("--max-bits", type=click.IntRange(min=1), default=None)
@click.option("--n", "n", type=click.IntRange(min=1), required=True, help="Simulated devices.")
@click.option("--dist", default="zipf:1.1", show_default=True,
              help="zipf:S | spike | uniform | file:counts.csv")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--protocol", type=click.Choice(registry.AVAILABLE), default="mss", show_default=True,
              help="mss (planned for --max-bits), ss (SubsetSelection on the full domain), or a "
                   "one-output protocol: " + ", ".join(oracle_config.NAMES) + ".")
@click.option("--trials", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--post", type=click.Choice(postprocess.CHOICES), default="none", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--plot", type=click.Path(dir_okay=False), callback=output_file,
              help="Write a PNG of truth vs estimates.")
def simulate_cmd(k, epsilon, config_path, max_bits, n, dist, seed, protocol, trials, post,
                 as_json, plot):
    """Simulate N devices, decode their reports and print the accuracy."""
    from mss_aggregator.compare.simulate import simulate

    try:
        if config_path:
            cfg = oracle_config.load(config_path)
            protocol = cfg.name
            if (k and k != cfg.k) or (epsilon and epsilon != cfg.epsilon):
                fail(f"--k/--epsilon disagree with {config_path} (k={cfg.k}, epsilon={cfg.epsilon})")
        elif k is None or epsilon is None:
            raise click.UsageError("give --k and --epsilon, or --config")
        elif protocol == "ss":
            cfg = MssConfig.subset_selection(k, epsilon)
        elif protocol != "mss":
            cfg = oracle_config.OracleConfig(protocol, k, epsilon)
        else:
            cfg = MssConfig.from_dict(plan(k, epsilon, max_bits=max_bits, n=n)["config"])
        probs = parse(dist, cfg.k)
    except (ConfigError, PlanError, DistributionError) as exc:
        fail(str(exc))
    proto = registry.from_config(cfg)
    predicted = proto.variance(n, probs)  # at the simulated distribution
    with console.status(f"simulating {trials} x {n} devices") if not as_json else nullcontext():
        sim = simulate(proto, probs, n, trials, seed, post=post)
    out = {
        "protocol": protocol, "k": cfg.k, "epsilon": cfg.epsilon, "n": n, "trials": trials,
        "mse": float(sim.mse.mean()), "mse_std": float(sim.mse.std(ddof=1)) if trials > 1 else 0.0,
        "predicted_mse": predicted, "decode_seconds": float(sim.decode_seconds.mean()),
        "bits_per_report": cfg.bits_per_report, "config_id": cfg.config_id_hex,
        "eps_effective": cfg.eps_effective, "dist": dist, "post": post, "seed": seed,
    }
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
    table.add_row(f"{out['mse']:.4g}", f"{out['mse_std']:.2g}", f"{predicted:.4g}",
                  f"{out['decode_seconds']:.4f}",
                  f"{out['bits_per_report']['max']}/{out['bits_per_report']['mean']:.1f}")
    out_console = Console()
    out_console.print(table)
    out_console.print(top_table("top 10 categories (last trial)", sim.truth, sim.estimate, 10))
    if plot:
        out_console.print(f"plot: {plot}")
