"""``mss quarantine`` (rejected messages with their reasons) and ``mss decode`` (one frame)."""
import click


@click.command("quarantine")
def quarantine_cmd():
    """List quarantined messages (being written)."""
    raise click.UsageError("mss quarantine is not written yet")


@click.command("decode")
def decode_cmd():
    """Decode one frame (being written)."""
    raise click.UsageError("mss decode is not written yet")
