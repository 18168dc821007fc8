"""``mss suspects``: the devices whose stored reports no honest device would likely have sent."""
import click
from rich.markup import escape
from rich.table import Table

from mss_cli.common import FloatRange, fail, make_console
from mss_cli.quarantine import open_reader

SHOWN_PAIRS = 10  # flagged item pairs printed (all in --json)


@click.command("suspects")
@click.option("--store", "store_path", required=True, metavar="PATH|URL",
              help="The campaign's store (what mss aggregate --store was given).")
@click.option("--alpha", type=FloatRange(0, 1, min_open=True, max_open=True), default=None, metavar="A",
              help="False-alarm rate per honest device (default 0.01): an honest device is flagged with "
                   "probability at most A, whatever its values.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: protocol, alpha, devices, memoized, tests, flagged, suspects "
                   "(device_id, evidence: test, statistic, threshold, p_value, alpha, items, reports) and "
                   "population_pairs (items, devices, p_value).")
def suspects_cmd(store_path, alpha, as_json):
    """Test every device's reports over the campaign against the honest channel and list the devices
    flagged, with the evidence: which test, its statistic, the threshold it crossed and the p-value.

    The tests (docs/privacy.md section 7, "Detection"): support-size (a report no honest input
    likely produces), one-item and two-items (the same items supported in too many epochs), and
    population (items co-supported by more devices than chance).  mss estimate --exclude-suspects
    leaves these devices' reports out."""
    from mss_aggregator import jsonout
    from mss_aggregator.collect.store import StoreError
    from mss_aggregator.integrity.detect import DEFAULT_ALPHA, suspects

    store = open_reader(store_path)
    try:
        found = suspects(store, DEFAULT_ALPHA if alpha is None else alpha)
    except StoreError as exc:
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        click.echo(jsonout.dumps(found.to_dict()))
        return
    out = make_console()
    memo = ", distinct reports of memoizers" if found.memoized else ""
    out.print(f"{found.devices} devices tested ({found.protocol}{memo}; tests: {', '.join(found.tests)}; "
              f"false-alarm rate {found.alpha:g} per honest device): {len(found.flagged)} flagged", highlight=False)
    for pair in found.pairs[:SHOWN_PAIRS]:
        out.print(f"population: items {pair['items'][0]} and {pair['items'][1]} co-supported by {pair['devices']} "
                  f"devices (p = {pair['p_value']:.2g})", highlight=False)
    if len(found.pairs) > SHOWN_PAIRS:
        out.print(f"population: {len(found.pairs) - SHOWN_PAIRS} more pairs flagged (--json lists them)", highlight=False)
    if not found.flagged:
        return
    table = Table(title="suspect devices")
    for name in ("device", "test", "statistic", "threshold", "p-value", "items", "reports"):
        table.add_column(name, justify="left" if name in ("device", "test", "items") else "right")
    for device_id, evidence in sorted(found.flagged.items()):
        for ev in evidence:
            threshold = "-".join(map(str, ev.threshold)) if isinstance(ev.threshold, (list, tuple)) else str(ev.threshold)
            table.add_row(escape(str(device_id)), ev.test, str(ev.statistic), threshold, f"{ev.p_value:.2g}",
                          " ".join(map(str, ev.items)), str(ev.reports))
    out.print(table)
