"""``mss merge``: sum counts files of one config."""
import click

from mss_aggregator import jsonout
from mss_cli.common import console, fail, output_file, writing
from mss_cli.estimate import load_counts
from mss_protocol.config_file import ConfigError


@click.command("merge")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), callback=output_file,
              help="Where to write the summed counts.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def merge_cmd(inputs, output, as_json):
    """Sum count files of the same config (sites that share only counts)."""
    try:
        total = load_counts(inputs[0])
        for path in inputs[1:]:
            part = load_counts(path)
            try:
                total = total.merge(part)
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc} ({inputs[0]}); only one config merges") from None
    except ConfigError as exc:
        fail(str(exc))
    with writing("--output", output):
        total.save(output)
    if as_json:
        click.echo(jsonout.dumps({"inputs": list(inputs), "output": output, "n": int(total.total),
                               "config_id": total.cfg.config_id_hex}))
        return
    console.print(f"{len(inputs)} files, {total.total} reports, config {total.cfg.config_id_hex} -> {output}")
