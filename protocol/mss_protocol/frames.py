"""Host side of the frames every protocol shares (SPEC.md section 4).

:func:`split` checks a report's header in the order SPEC.md fixes and
returns its fields and body; each protocol's codec then checks the body.
Every failure is a :class:`WireError` with a stable short ``reason``, never
another exception, whatever the bytes:

1. ``type``    not bytes;
2. ``length``  empty;
3. ``version`` byte 0 names no frame kind this program knows (a full
               frame's version is not 1, or the reserved 0b01 kinds);
4. ``kind``    a known kind, but not the one the config's ``frame`` names;
5. ``length``  no room for the header and one body byte;
6. ``config``  config id (full) or tag (compact) is not this config's;
7. ``length``  not a length this config's reports have in that kind;
8. ``epoch``   a compact kind without a link epoch in [0, 2**32);
9. checks of the protocol (OLH's device id, then the body: block, length
   of that block, padding, value range).

Compact frames carry no epoch or sequence: the caller passes the epoch its
link gives (``epoch``), and for ``compact-epoch`` the epoch nearest to it
with the frame's low 16 bits is taken, within [0, 2**32).  Their sequence
is 0.
"""
import re
from dataclasses import dataclass

from mss_device.frame import HEADER, KINDS, TAG_MASK, VERSION
from mss_device.gateway import DEVICE_ID  # the host's one definition of a device id

DEV_EUI = re.compile(r"[0-9A-Fa-f]{16}\Z")  # either case; read as lowercase
EPOCHS = 1 << 32  # epochs are u32: a full frame's field, OLH's seed input


class WireError(ValueError):
    """A report that cannot be accepted; ``reason`` is a stable short code."""

    def __init__(self, reason, detail):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class Report:
    config_id: bytes
    epoch: int
    seq: int
    j: int  # MSS block; 0 for the one-output protocols
    subset: tuple  # what the counts tally: MSS residues, set bits, the point, OLH's (a, b, y)
    frame: str = "full"


def kind_of(byte0):
    """Frame kind index of a first byte, or None."""
    top = byte0 >> 6
    if top == 0:
        return 0 if byte0 == VERSION else None
    return {2: 1, 3: 2}.get(top)


def nearest_epoch(link, low):
    """The epoch in [0, 2**32) nearest to ``link`` whose low 16 bits are ``low``
    (floor-mod arithmetic; at either end of the range the one inside it)."""
    epoch = link + (low - link + 32768) % 65536 - 32768
    if epoch < 0:
        epoch += 65536
    elif epoch >= EPOCHS:
        epoch -= 65536
    return epoch


def check_device(device_id):
    """Raise WireError ``device`` unless ``device_id`` is a device id (a str of
    1 to 64 characters from A-Z a-z 0-9 _ . : -)."""
    if not isinstance(device_id, str) or not DEVICE_ID.match(device_id):
        raise WireError("device", f"{device_id!r} is not a device id (1-64 of A-Z a-z 0-9 _ . : -)")


def dev_eui(value):
    """A DevEUI as 16 lowercase hex digits, or ValueError: the one form of a LoRaWAN board's
    device id, on the wire and in OLH's seed (SPEC.md section 4, "Device ids")."""
    if not isinstance(value, str) or not DEV_EUI.match(value):
        shown = repr(value)[:40] if isinstance(value, (str, int, float, type(None))) else type(value).__name__
        raise ValueError(f"a DevEUI is 16 hex digits, got {shown}")
    return value.lower()


def split(data, config_id, body_lengths, kind, epoch=None):
    """(kind name, epoch, seq, body) of a report of the config ``config_id``
    sent in frames of kind index ``kind``, whose bodies are ``body_lengths``
    bytes long (a set).  ``epoch`` is the link's, read by compact kinds only."""
    if not isinstance(data, bytes):  # bytearray, memoryview, str: the caller's bug, named
        raise WireError("type", f"expected bytes, got {type(data).__name__}")
    if not data:
        raise WireError("length", "empty report")
    got = kind_of(data[0])
    if got is None:
        raise WireError("version", f"unknown frame kind or version (byte 0 = {data[0]:#04x})")
    if got != kind:
        raise WireError("kind", f"a {KINDS[got]} frame, but this config's reports are {KINDS[kind]}")
    head = HEADER[kind]
    if len(data) < head + 1:
        raise WireError("length", f"{len(data)} bytes is shorter than any {KINDS[kind]} report (its "
                                  f"{head}-byte header and a body)")
    if kind == 0:
        cid = data[1:5]
        if cid != config_id:
            raise WireError("config", f"config id {cid.hex()} is not {config_id.hex()}")
    elif data[0] & TAG_MASK != config_id[0] & TAG_MASK:
        raise WireError("config", f"tag {data[0] & TAG_MASK} is not this config's "
                                  f"{config_id[0] & TAG_MASK}")
    body = data[head:]
    if len(body) not in body_lengths:
        raise WireError("length", f"{len(data)} bytes is not a {KINDS[kind]} report length of this config")
    if kind == 0:
        return KINDS[0], int.from_bytes(data[5:9], "big"), int.from_bytes(data[9:11], "big"), body
    if type(epoch) is not int or not 0 <= epoch < EPOCHS:
        raise WireError("epoch", f"a {KINDS[kind]} frame needs its link's epoch, an integer in "
                                 f"[0, 2**32), got {epoch!r}")
    if kind == 2:
        epoch = nearest_epoch(epoch, int.from_bytes(data[1:3], "big"))
    return KINDS[kind], epoch, 0, body
