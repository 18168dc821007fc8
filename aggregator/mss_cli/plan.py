"""``mss plan``: choose a configuration for a domain, a budget and a link."""
import json

import click
from rich.console import Console
from rich.table import Table

from mss_cli.common import fail
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import PlanError, plan


@click.command("plan")
@click.option("--k", "k", type=click.IntRange(min=4), required=True, help="Domain size (categories).")
@click.option("--epsilon", type=click.FloatRange(min=0, min_open=True), required=True,
              help="Privacy budget per report (epsilon-LDP).")
@click.option("--max-bits", type=click.IntRange(min=1), default=None,
              help="Largest report body in bits (e.g. a LoRa payload).")
@click.option("--n", "n", type=click.IntRange(min=1), default=10000, show_default=True,
              help="Reports assumed for the predicted MSE.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the moduli search.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--device-config", type=click.Path(dir_okay=False, writable=True),
              help="Write the config file devices and the aggregator load.")
@click.option("--no-cache", is_flag=True, help="Recompute even if a cached plan exists.")
def plan_cmd(k, epsilon, max_bits, n, seed, as_json, device_config, no_cache):
    """Choose moduli and subset sizes for K categories at EPSILON."""
    try:
        result = plan(k, epsilon, max_bits=max_bits, n=n, seed=seed, use_cache=not no_cache)
    except PlanError as exc:
        fail(str(exc))
    if device_config:
        MssConfig.from_dict(result["config"]).save(device_config)
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    out = Console()
    table = Table(title=f"MSS plan for k={k}, epsilon={epsilon}", show_header=False)
    for label, value in [
        ("moduli", result["moduli"]), ("subset sizes (omega)", result["omegas"]),
        ("eps_effective", repr(result["eps_effective"])),
        ("bits per report (max / mean)", f"{result['bits_per_report']['max']} / "
                                         f"{result['bits_per_report']['mean']:.1f}"),
        (f"predicted MSE per item (n={n})", f"{result['predicted_mse']:.4g}"),
        ("SubsetSelection MSE (same n)", f"{result['ss_variance']:.4g} ({result['ss_bits']} bits)"),
        ("variance ratio vs SS", f"{result['variance_ratio_vs_ss']:.4f}"),
        ("config id", result["config_id"]),
    ]:
        table.add_row(label, str(value))
    out.print(table)
    if device_config:
        out.print(f"wrote {device_config}")
