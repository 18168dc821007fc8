"""``mss decode``: one report frame, decoded as the aggregator would."""
import sys

import click

from mss_cli.common import fail


def read_hex(ctx, param, value):
    """The bytes of HEX (``-``: read from stdin); whitespace, ``:`` and a ``0x`` prefix are allowed."""
    text = sys.stdin.read() if value == "-" else value
    text = "".join(text.split()).replace(":", "").removeprefix("0x")
    try:
        data = bytes.fromhex(text)
    except ValueError:
        raise click.BadParameter(f"{value[:40]!r} is not hexadecimal bytes") from None
    if not data:
        raise click.BadParameter("no bytes given")
    return data


def device_id(ctx, param, value):
    from mss_protocol.frames import WireError, check_device

    if value is not None:
        try:
            check_device(value)
        except WireError as exc:
            raise click.BadParameter(str(exc).removeprefix("device: ")) from None
    return value


def header(data):
    """The header fields of ``data`` as its bytes give them (SPEC.md section 4), before any
    check against a config: its length and kind; a full frame's config id, epoch and sequence;
    a compact frame's config tag (and compact-epoch's low 16 bits of the epoch)."""
    from mss_device.frame import HEADER, KINDS, TAG_MASK
    from mss_protocol.frames import kind_of

    kind = kind_of(data[0])
    out = {"length": len(data), "kind": None if kind is None else KINDS[kind]}
    if kind == 0 and len(data) >= HEADER[0]:
        out.update(config_id=data[1:5].hex(), epoch=int.from_bytes(data[5:9], "big"),
                   seq=int.from_bytes(data[9:11], "big"))
    elif kind in (1, 2):
        out["tag"] = data[0] & TAG_MASK
        if kind == 2 and len(data) >= HEADER[2]:
            out["epoch_low16"] = int.from_bytes(data[1:3], "big")
    return out


def described(report, cfg):
    """The JSON form of a decoded report: MSS's block, its modulus and support set; another
    protocol's output (its set bits, point, or OLH's (a, b, y))."""
    from mss_protocol.oracle_config import OracleConfig

    out = {"epoch": report.epoch, "seq": report.seq, "frame": report.frame}
    if isinstance(cfg, OracleConfig):
        return out | {"protocol": cfg.name, "output": list(report.subset)}
    return out | {"protocol": cfg.name, "block": report.j, "modulus": cfg.moduli[report.j],
                  "support": list(report.subset)}


@click.command("decode")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="The campaign config (mss plan --device-config) the frame was made for; its campaign "
                   "clock (device.period_s) dates compact frames and bounds the epochs accepted.")
@click.option("--device", "device", metavar="ID", callback=device_id,
              help="The device id the frame came with (its topic's, serial line's or DevEUI); olh "
                   "needs it (its hash seed), other protocols ignore it.")
@click.option("--epoch", type=click.IntRange(0, 2**32 - 1),
              help="The link's epoch for a compact frame (default: the campaign clock's current one).")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object on stdout: frame (the header fields), accepted, and "
                   "report or reason and detail.")
@click.argument("frame", metavar="HEX", callback=read_hex)
def decode_cmd(config_path, device, epoch, as_json, frame):
    """Decode one report frame (HEX, or - to read it from stdin) as the aggregator would: its
    header fields, then the report (MSS: block and support set; other protocols: their output)
    or the reason the aggregator would quarantine it with (exit 3)."""
    from mss_aggregator import jsonout
    from mss_aggregator.collect.ingest import Ingest
    from mss_iot import Campaign
    from mss_protocol.config_file import ConfigError

    try:
        campaign = Campaign.read(config_path)
    except ConfigError as exc:
        fail(exc)
    cfg, clock = campaign.cfg, campaign.clock
    if getattr(cfg, "name", None) == "olh" and device is None:
        raise click.UsageError("an olh report decodes with its device's hash seed: give --device ID")
    ingest = (Ingest(cfg, None, clock["period_s"], clock["epoch_origin"], past_epochs=clock["accept_past_epochs"])
              if clock else Ingest(cfg, None))  # no clock: no window, and compact frames need --epoch
    out = ingest.frame(frame, device, epoch)
    doc = {"frame": header(frame), "accepted": "report" in out}
    doc.update({"report": described(out["report"], cfg)} if "report" in out else
               {"reason": out["reason"], "detail": out["detail"]})
    if as_json:
        click.echo(jsonout.dumps(doc))
    else:
        click.echo("frame: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in doc["frame"].items()))
        if doc["accepted"]:
            r = doc["report"]
            what = (f"block {r['block']} (modulus {r['modulus']}), support set {{{', '.join(map(str, r['support']))}}}"
                    if "block" in r else f"output {tuple(r['output'])}")
            click.echo(f"report: {r['protocol']}, epoch {r['epoch']}, seq {r['seq']}, {r['frame']} frame; {what}")
    if not doc["accepted"]:
        fail(f"the aggregator would quarantine it: {out['reason']}: {out['detail']}")
