"""``mss``: one command line for planning, simulation, collection, estimation,
the protocol comparison and the privacy audit.  Each command group is its own
module; this one only assembles them.  Exit codes: :mod:`mss_cli.common`.
"""
import click

from mss_cli import (audit, bench, collect, demo, deploy, devices, estimate, inspect, plan, provision, shuffle,
                     simulate, switch)
from mss_cli.common import HELP, Group


@click.group(cls=Group, context_settings=HELP)  # -h on every command; one-line usage errors
@click.version_option(package_name="mss-iot")
def main():
    """Private frequency estimation for microcontroller fleets (ModularSubsetSelection)."""


for command in (plan.plan_cmd, simulate.simulate_cmd, devices.device_sim_cmd, collect.aggregate_cmd,
                estimate.estimate_cmd, estimate.merge_cmd, devices.fleet_cmd, demo.demo_cmd,
                bench.bench_cmd, audit.audit_cmd, switch.switch_cmd, provision.provision_cmd, deploy.deploy_cmd,
                inspect.quarantine_cmd, inspect.decode_cmd, shuffle.shuffle_cmd):
    main.add_command(command)


@main.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion_cmd(shell):
    """Print the shell completion script, e.g. eval "$(mss completion bash)" in ~/.bashrc."""
    from click.shell_completion import get_completion_class

    click.echo(get_completion_class(shell)(main, {}, "mss", "_MSS_COMPLETE").source())
