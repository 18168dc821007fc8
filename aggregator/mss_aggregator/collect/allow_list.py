"""The device ids a campaign takes reports from: an allow-list, read once at the edge.

Identity is what stops a planted board (docs/privacy.md, "What identity guarantees, and what the
operator adds"): the store keeps one report per device id per epoch, and the broker's ACL lets a
board publish under its own id only; but a board that is not the operator's, with a login or a
LoRaWAN session of its own, is a device id like any other.  An :class:`AllowList` makes the
provisioned ids the only ones heard: :class:`~.ingest.Ingest` quarantines the report of any other
id with the reason ``not_allowed`` (counted as ``rejected_not_allowed``), before it is decoded.

The file is one of:

* the fleet CSV ``mss provision`` reads (:mod:`mss_aggregator.provision`), as it is: a header
  row with a ``transport`` column and ``device_id`` and/or ``dev_eui``; a ``lorawan`` row's id is
  its DevEUI (the id its uplinks carry, SPEC.md section 4), any other row's its ``device_id``;
* a plain list, one device id a line; blank lines and ``#`` comments are skipped.

Every id must be a device id (``mss_device.gateway.DEVICE_ID``); a DevEUI (16 hex digits) in
either case is taken in its one form too, lowercase (:func:`mss_protocol.frames.dev_eui`), as a
network server's uplinks give it.  A bad file is one :class:`AllowListError` naming the file and
the line.
"""
import csv
import io
from dataclasses import dataclass

from mss_device.gateway import DEVICE_ID
from mss_protocol.frames import DEV_EUI, dev_eui

MAX_BYTES = 16 << 20  # a fleet of a million ids fits many times over


class AllowListError(ValueError):
    """An allow-list file that cannot be read; the message names the file (and the line)."""


@dataclass(frozen=True)
class AllowList:
    """The device ids reports are taken from.

    Parameters
    ----------
    ids : frozenset of str
        The ids as reports carry them (a DevEUI lowercase).
    source : str
        Where they were read (a path), named in a quarantine row's detail.
    """

    ids: frozenset
    source: str = "allow-list"

    def __post_init__(self):
        object.__setattr__(self, "ids", frozenset(self.ids))

    def allows(self, device_id):
        return device_id in self.ids

    def __len__(self):
        return len(self.ids)

    @classmethod
    def read(cls, path):
        """The allow-list of the file at ``path`` (fleet CSV or plain list, see the module);
        AllowListError naming ``path`` and the line: unreadable, empty, or an id that is not one."""
        try:
            with open(path, "rb") as fh:
                data = fh.read(MAX_BYTES + 1)
        except OSError as exc:
            raise AllowListError(f"{path}: cannot read it: {exc.strerror or exc}") from None
        if len(data) > MAX_BYTES:
            raise AllowListError(f"{path}: over {MAX_BYTES} bytes: not an allow-list")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise AllowListError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        first = next((line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")), "")
        header = {c.strip() for c in first.split(",")}
        rows = csv_ids(path, text) if "transport" in header else plain_ids(path, text)
        ids = set()
        for line, value in rows:
            ids.update(forms(path, line, value))
        if not ids:
            raise AllowListError(f"{path}: no device id in it (an empty allow-list would refuse every report)")
        return cls(frozenset(ids), str(path))


def forms(path, line, value):
    """The forms of one id as reports carry it: itself, and a DevEUI's lowercase form."""
    if not DEVICE_ID.match(value):
        raise AllowListError(f"{path} line {line}: {value[:70]!r} is not a device id (1 to 64 of A-Z a-z 0-9 "
                             f"_ . : -)")
    return {value, dev_eui(value)} if DEV_EUI.match(value) else {value}


def plain_ids(path, text):
    """[(line number, id)] of a plain list: one id a line, blank lines and # comments skipped."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        value = line.split("#", 1)[0].strip()
        if value:
            out.append((n, value))
    return out


def csv_ids(path, text):
    """[(line number, id)] of ``mss provision``'s fleet CSV: a lorawan row's dev_eui, else its device_id."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    fields = [c.strip() for c in reader.fieldnames or ()]
    if "device_id" not in fields and "dev_eui" not in fields:
        raise AllowListError(f"{path} line 1: a fleet CSV needs a device_id or dev_eui column")
    out = []
    try:
        for cells in reader:
            row = {(c or "").strip(): (v or "").strip() if isinstance(v, str) else "" for c, v in cells.items()}
            if not any(row.values()):
                continue
            column = "dev_eui" if row.get("transport") == "lorawan" else "device_id"
            if not row.get(column):
                raise AllowListError(f"{path} line {reader.line_num}: a {row.get('transport') or 'board'} row "
                                     f"needs its {column}")
            if column == "dev_eui" and not DEV_EUI.match(row[column]):
                raise AllowListError(f"{path} line {reader.line_num}: {row[column][:70]!r} is not a DevEUI "
                                     f"(16 hex digits)")
            out.append((reader.line_num, dev_eui(row[column]) if column == "dev_eui" else row[column]))
    except csv.Error as exc:
        raise AllowListError(f"{path} line {reader.line_num}: not CSV: {exc}") from None
    return out
