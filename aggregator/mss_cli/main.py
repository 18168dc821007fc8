"""``mss``: one command line for planning, simulation, collection, estimation,
the protocol comparison and the privacy audit.  Each command is its own module,
named for it (``mss device-sim``: :mod:`mss_cli.device_sim`); this one only
assembles them.  Exit codes: :mod:`mss_cli.common`.

A command's module is imported when that command runs (or for ``mss -h``): the
modules pull in SciPy and the protocols, up to a second of CPU at every start, and
``mss aggregate`` or ``mss fleet`` need little of it (click's lazily loaded
subcommands pattern).
"""
import importlib

import click

from mss_cli.common import HELP, Group

COMMANDS = {  # name -> (module of mss_cli, named for the command; its click command)
    "plan": ("plan", "plan_cmd"), "simulate": ("simulate", "simulate_cmd"),
    "device-sim": ("device_sim", "device_sim_cmd"), "aggregate": ("aggregate", "aggregate_cmd"),
    "estimate": ("estimate", "estimate_cmd"), "merge": ("merge", "merge_cmd"),
    "fleet": ("fleet", "fleet_cmd"), "demo": ("demo", "demo_cmd"), "bench": ("bench", "bench_cmd"),
    "audit": ("audit", "audit_cmd"), "switch-config": ("switch_config", "switch_config_cmd"),
    "provision": ("provision", "provision_cmd"), "deploy": ("deploy", "deploy_cmd"),
    "quarantine": ("quarantine", "quarantine_cmd"), "decode": ("decode", "decode_cmd"),
    "shuffle": ("shuffle", "shuffle_cmd"),
    "export": ("export", "export_cmd"), "suspects": ("suspects", "suspects_cmd"),
}


class LazyGroup(Group):
    """:class:`~mss_cli.common.Group` whose :data:`COMMANDS` are imported on first use."""

    def list_commands(self, ctx):
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx, name):
        if name in COMMANDS and name not in self.commands:
            module, attr = COMMANDS[name]
            self.add_command(getattr(importlib.import_module(f"mss_cli.{module}"), attr), name)
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, context_settings=HELP)  # -h on every command; one-line usage errors
@click.version_option(package_name="mss-iot")
def main():
    """Private frequency estimation for microcontroller fleets (ModularSubsetSelection)."""


@main.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion_cmd(shell):
    """Print the shell completion script, e.g. eval "$(mss completion bash)" in ~/.bashrc."""
    from click.shell_completion import get_completion_class

    click.echo(get_completion_class(shell)(main, {}, "mss", "_MSS_COMPLETE").source())
