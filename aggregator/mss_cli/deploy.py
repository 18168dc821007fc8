"""``mss deploy``: flash the firmware and a board's config onto MicroPython boards with mpremote."""
import click


@click.command("deploy")
def deploy_cmd():
    """Flash boards (being written)."""
    raise click.UsageError("mss deploy is not written yet")
