"""``mss quarantine``: the rejected messages with their reasons, and the devices whose state went back."""
import time

import click
from rich.markup import escape
from rich.table import Table

from mss_cli.common import console, fail, make_console

PREFIX_BYTES = 16  # of a quarantined message shown in hex


def open_reader(store_path):
    """The store at ``store_path``, only read; a data error (exit 3) if it cannot be opened."""
    from mss_aggregator.collect.store import StoreError, open_store
    from mss_protocol.config_file import ConfigError

    try:
        return open_store(store_path)
    except (StoreError, ConfigError) as exc:
        fail(str(exc))


def when(unix):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(unix))


@click.command("quarantine")
@click.option("--store", "store_path", required=True, metavar="PATH|URL",
              help="The campaign's store (what mss aggregate --store was given).")
@click.option("--reason", metavar="CODE",
              help="Only messages of this reason code (the reason column: topic, payload, epoch, "
                   "wire_config, wire_length, checksum, ...).")
@click.option("--limit", type=click.IntRange(1, 10**6), default=20, show_default=True, metavar="N",
              help="Show the newest N messages.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object on stdout: total, shown, quarantine_dropped, messages "
                   "(id, received, time, reason, detail, source, topic, length, sha256, hex), and "
                   "state_resets (events, devices, newest: device_id, resets, epoch, received, time).")
def quarantine_cmd(store_path, reason, limit, as_json):
    """List rejected messages, newest first: the reason the aggregator gave, when, the topic
    (or serial port), the length and the first bytes in hex.  Then the devices whose state
    went back (their full-frame sequence number started again: a deleted or corrupt state
    file, a reflash), newest N, with how many times.

    A store keeps at most aggregator.quarantine_max_rows rows (default 10000); past that the
    rejections are counted, not kept (mss estimate's counters)."""
    from mss_aggregator import jsonout
    from mss_aggregator.collect.service import printable
    from mss_aggregator.collect.store import StoreError

    store = open_reader(store_path)
    try:
        total, rows = store.quarantined(reason, limit)
        dropped = store.counters().get("quarantine_dropped", 0)
        resets = store.state_resets(limit)
    except StoreError as exc:
        fail(str(exc))
    finally:
        store.close()
    for row in rows:
        topic = row.pop("topic")
        payload = row.pop("payload") or b""
        row.update(time=when(row["received"]), hex=payload[:PREFIX_BYTES].hex(),
                   topic=None if topic is None else printable(topic.decode("utf-8", "backslashreplace")))
    for row in resets["newest"]:
        row["time"] = when(row["received"])
    if as_json:
        click.echo(jsonout.dumps({"total": total, "shown": len(rows), "quarantine_dropped": dropped,
                                  "messages": rows, "state_resets": resets}))
        return
    print_state_resets(resets)
    what = f"reason {reason}" if reason else "messages"
    if not rows:
        console.print(f"no quarantined {what} in {escape(store.name)}", highlight=False)
        return
    table = Table(title=f"quarantined {what}: newest {len(rows)} of {total}")
    for name in ("id", "time (UTC)", "reason", "detail", "topic or link", "bytes", "first bytes (hex)"):
        table.add_column(name, justify="right" if name in ("id", "bytes") else "left")
    for row in rows:
        more = "..." if row["length"] is None or row["length"] > PREFIX_BYTES else ""
        table.add_row(str(row["id"]), row["time"], escape(row["reason"]), escape(printable(row["detail"])),
                      escape(row["topic"] or row["source"]), "?" if row["length"] is None else str(row["length"]),
                      row["hex"] + more)
    make_console().print(table)
    if dropped:
        console.print(f"{dropped} more rejected messages were counted but not kept "
                      "(aggregator.quarantine_max_rows)", highlight=False)


def print_state_resets(resets):
    """The devices whose state went back (SPEC.md section 10, "State resets"), if any."""
    rows, devices = resets["newest"], resets["devices"]
    if not devices:
        return
    table = Table(title=f"devices whose state went back: {devices} ({resets['events']} resets), newest {len(rows)}",
                  caption="the sequence started again: a deleted or corrupt state file, a reflash")
    for name in ("device", "resets", "last at epoch", "time (UTC)"):
        table.add_column(name, justify="right" if name in ("resets", "last at epoch") else "left")
    for row in rows:
        table.add_row(escape(row["device_id"]), str(row["resets"]), str(row["epoch"]), row["time"])
    make_console().print(table)
