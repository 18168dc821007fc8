"""``mss plan``: choose a configuration for a domain, a budget and a link."""
import json

import click
from rich.console import Console
from rich.table import Table

from mss_aggregator.distributions import DistributionError, parse
from mss_cli.common import fail
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import PROTOCOLS, PlanError, plan


@click.command("plan")
@click.option("--k", "k", type=click.IntRange(min=4), required=True, help="Domain size (categories).")
@click.option("--epsilon", type=click.FloatRange(min=0, min_open=True), required=True,
              help="Privacy budget per report (epsilon-LDP).")
@click.option("--max-bits", type=click.IntRange(min=1), default=None,
              help="Largest report body in bits (e.g. a LoRa payload).")
@click.option("--n", "n", type=click.IntRange(min=1), default=10000, show_default=True,
              help="Reports assumed for the predicted MSE.")
@click.option("--protocol", type=click.Choice(["auto", "mss", "ss"]), default="auto", show_default=True,
              help="auto: the most accurate of MSS and SubsetSelection (MSS's one-block case); "
                   "mss: the best MSS configuration, compared honestly; ss: SubsetSelection.")
@click.option("--prior", "prior_spec", default="uniform", show_default=True,
              help="Value distribution the MSE is predicted at: uniform, zipf:S, spike, "
                   "file:est.json (mss estimate --json) or file:counts.csv.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the moduli search.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--device-config", type=click.Path(dir_okay=False, writable=True),
              help="Write the config file devices and the aggregator load.")
@click.option("--no-cache", is_flag=True, help="Recompute even if a cached plan exists.")
def plan_cmd(k, epsilon, max_bits, protocol, prior_spec, n, seed, as_json, device_config, no_cache):
    """Choose moduli and subset sizes for K categories at EPSILON."""
    assert protocol in PROTOCOLS
    try:
        prior = None if prior_spec == "uniform" else parse(prior_spec, k)
        result = plan(k, epsilon, max_bits=max_bits, n=n, seed=seed, use_cache=not no_cache, prior=prior,
                      prior_label=prior_spec, protocol=protocol)
    except (PlanError, DistributionError) as exc:
        fail(str(exc))
    if device_config:
        MssConfig.from_dict(result["config"]).save(device_config)
    if as_json:
        click.echo(json.dumps(result, indent=1))
        return
    out = Console()
    parts = result["predicted_mse_parts"]
    table = Table(title=f"plan for k={k}, epsilon={epsilon}: {result['protocol'].upper()}", show_header=False)
    for label, value in [
        ("protocol", result["protocol"]), ("moduli", result["moduli"]), ("subset sizes (omega)", result["omegas"]),
        ("eps_effective", repr(result["eps_effective"])),
        ("bits per report (max / mean)", f"{result['bits_per_report']['max']} / "
                                         f"{result['bits_per_report']['mean']:.1f}"),
        (f"predicted MSE per item (n={n}, {prior_spec} prior)",
         f"{result['predicted_mse']:.4g} (noise {parts['noise']:.3g} + block assignment {parts['assignment']:.3g})"),
        ("SubsetSelection MSE (same n)", f"{result['ss_variance']:.4g} ({result['ss_bits']} bits)"),
        ("variance ratio vs SS", f"{result['variance_ratio_vs_ss']:.4f}"),
        ("config id", result["config_id"]),
    ]:
        table.add_row(label, str(value))
    out.print(table)
    if result["protocol"] == "mss" and result["variance_ratio_vs_ss"] > 1 \
            and result["bits_per_report"]["max"] >= result["ss_bits"]:
        out.print(f"note: SubsetSelection is better here in both MSE and bits ({result['ss_bits']} bits, "
                  f"MSE ratio {result['variance_ratio_vs_ss']:.4f}); --protocol auto would choose it")
    if device_config:
        out.print(f"wrote {device_config}")
