"""``mss simulate``: a simulated fleet through one configuration, MSE against the truth."""
import json

import click
from rich.table import Table

from mss_aggregator.distributions import DistributionError, parse
from mss_cli.common import (EPSILON, MAX_BITS, MAX_SIMULATED, SEED, fail, figure, make_console, output_file,
                            post_option, progress, top_table, writing)
from mss_protocol import configs, oracle_config, registry
from mss_protocol.choose import CHOICES, choose
from mss_protocol.config_file import ConfigError
from mss_protocol.limits import MAX_K
from mss_protocol.mss.config import MssConfig
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
    from mss_aggregator.compare.simulate import simulate

    try:
        if config_path:
            cfg = configs.load(config_path)
            protocol = cfg.name
            if (k and k != cfg.k) or (epsilon and epsilon != cfg.epsilon):
                fail(f"--k/--epsilon disagree with {config_path} (k={cfg.k}, epsilon={cfg.epsilon})")
        elif k is None or epsilon is None:
            raise click.UsageError("give --k and --epsilon, or --config")
        elif protocol == "ss":
            cfg = MssConfig.subset_selection(k, epsilon)
        elif protocol not in ("mss", "auto"):
            cfg = oracle_config.OracleConfig(protocol, k, epsilon)
        else:
            with progress(f"planning {protocol} for k={k}, epsilon {epsilon:g}"):
                cfg = configs.load_dict(choose(k, epsilon, protocol, max_bits=max_bits, n=n)["config"])
            protocol = cfg.name
        probs = parse(dist, cfg.k)
    except (ConfigError, PlanError, DistributionError) as exc:
        fail(str(exc))
    proto = registry.from_config(cfg)
    predicted = proto.variance(n, probs)  # at the simulated distribution
    with progress(f"simulating {trials} x {n} devices"):
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
    table.add_row(figure(out["mse"]), figure(out["mse_std"], 2), figure(predicted),
                  figure(out["decode_seconds"], 3),
                  f"{out['bits_per_report']['max']}/{out['bits_per_report']['mean']:.1f}")
    out_console = make_console()
    out_console.print(table)
    out_console.print(top_table("top 10 categories (last trial)", sim.truth, sim.estimate, 10))
    if plot:
        out_console.print(f"plot: {plot}")
