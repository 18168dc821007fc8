"""``mss provision``: the per-board configs, broker credentials and network-server device lists of a fleet."""
import click


@click.command("provision")
def provision_cmd():
    """Provision a fleet from a CSV file (being written)."""
    raise click.UsageError("mss provision is not written yet")
