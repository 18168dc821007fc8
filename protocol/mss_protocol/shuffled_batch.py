"""Shuffled batches: what a shuffler forwards to the aggregator (SPEC.md, "Shuffled batches").

One batch is one MQTT message on ``mss/v1/<campaign>/shuffled`` (QoS 1)::

    magic b"MSSB" | version u8 = 2 | config id (4 bytes) | batch id (16 random bytes)
    | epoch u32 BE | first_epoch u32 BE | colluding u32 BE | n u32 BE
    | n times: body length u16 BE, body
    | HMAC-SHA256 (32 bytes) over every byte before it

``epoch`` is the epoch the batch is released for (the latest one it covers),
``first_epoch`` the earliest epoch of a report in it (``first_epoch <= epoch``).
The shuffler puts at most one body of a device in a batch, so ``n`` is the
batch's distinct devices; ``colluding`` is the number of them its operator
assumes may collude with the aggregator (``mss shuffle --assume-colluding``),
which the central guarantee does not count as hiding anyone (version 1 had
neither rule: a batch counted reports).
Each body is a report as a ``compact`` frame of the config (SPEC.md section
4: one tag byte, then the protocol's body): the device's header (device id,
sequence, epoch, the config id beyond its tag) is gone.  The aggregator
decodes the bodies with the config's codec in frame kind ``compact`` at the
batch's ``epoch``.

The MAC key is the shuffle key the shuffler and the aggregator share (at
least :data:`MIN_KEY_BYTES` bytes: HMAC-SHA256's 256-bit security needs a
256-bit key, RFC 2104 section 3).  :func:`decode_batch` checks the MAC first,
in constant time (``hmac.compare_digest``), and parses nothing of an
unauthenticated message: every failure is a :class:`BatchError` with a
stable short ``reason``.  :func:`load_key` reads the key as the fleet key
is read (``mss_protocol.sealed``): hex digits in a file, else in
``$MSS_SHUFFLE_KEY``; ``openssl rand -hex 32`` makes one.
"""
import hashlib
import hmac
import os
import struct
from dataclasses import dataclass

from mss_device.frame import HEADER, KINDS, TAG_MASK

MAGIC = b"MSSB"
VERSION = 2  # 2: colluding, and one body a device (1 counted reports, not devices)
CONFIG_ID_BYTES = 4  # mss_device.params._digest: the first 4 bytes of a SHA-256
BATCH_ID_BYTES = 16
MAC_BYTES = 32
MIN_KEY_BYTES = 32
KEY_ENV = "MSS_SHUFFLE_KEY"
MAX_BODY = 0xFFFF  # a body's length is a u16
# devices of a batch assumed to collude with the aggregator unless its shuffler's operator says more
# (mss shuffle --assume-colluding): 0 is the amplification theorems' own assumption, stated with every guarantee
DEFAULT_COLLUDING = 0
_HEAD = struct.Struct(f">4sB{CONFIG_ID_BYTES}s{BATCH_ID_BYTES}sIIII")
HEADER_BYTES = _HEAD.size  # 41
EPOCHS = 1 << 32


class BatchError(ValueError):
    """A batch that cannot be accepted; ``reason`` is a stable short code:
    ``type``, ``key``, ``length``, ``mac``, ``magic``, ``version``, ``epoch``,
    ``count``, ``body``, ``config`` (decode), or ``batch`` (encode)."""

    def __init__(self, reason, detail):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class ShuffledBatch:
    config_id: bytes
    batch_id: bytes
    epoch: int
    first_epoch: int
    bodies: tuple  # of bytes, each a compact frame of the config, at most one a device
    colluding: int = DEFAULT_COLLUDING  # of the batch's devices, how many its shuffler's operator assumes collude

    @property
    def batch_id_hex(self):
        return self.batch_id.hex()


def check_key(key):
    """Raise BatchError ``key`` unless ``key`` is bytes of at least MIN_KEY_BYTES."""
    if not isinstance(key, bytes):
        raise BatchError("key", f"the shuffle key must be bytes, got {type(key).__name__}")
    if len(key) < MIN_KEY_BYTES:
        raise BatchError("key", f"the shuffle key has {len(key)} bytes; at least {MIN_KEY_BYTES} "
                                "are needed (HMAC-SHA256)")


def load_key(path=None, flag="--shuffle-key-file"):
    """The shuffle key from file ``path`` (its hex digits), else ``$MSS_SHUFFLE_KEY``;
    BatchError ``key`` names the file or the variable (never the key) when neither
    is given, or the text is not hex, or the key is shorter than MIN_KEY_BYTES."""
    if path is not None:
        source = f"{flag} {path}"
        try:
            with open(path, encoding="ascii") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise BatchError("key", f"{source}: cannot read the shuffle key: "
                                    f"{getattr(exc, 'strerror', None) or exc}") from None
    elif os.environ.get(KEY_ENV):
        source, text = f"${KEY_ENV}", os.environ[KEY_ENV]
    else:
        raise BatchError("key", f"no shuffle key: give {flag} FILE or set ${KEY_ENV} (hex, at least "
                                f"{MIN_KEY_BYTES} bytes: openssl rand -hex {MIN_KEY_BYTES})")
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        raise BatchError("key", f"{source}: a shuffle key is hex digits") from None
    if len(key) < MIN_KEY_BYTES:
        raise BatchError("key", f"{source}: a shuffle key needs at least {MIN_KEY_BYTES} bytes "
                                f"({2 * MIN_KEY_BYTES} hex digits), got {len(key)}")
    return key


def _config_id(config):
    """The 4 config id bytes of a config object (``.config_id``) or of bytes."""
    cid = getattr(config, "config_id", config)
    if not isinstance(cid, bytes) or len(cid) != CONFIG_ID_BYTES:
        raise BatchError("config", f"a config id is {CONFIG_ID_BYTES} bytes, got {cid!r}")
    return cid


def topic(campaign):
    """The MQTT topic of ``campaign``'s batches, from the shuffler to the aggregator (SPEC.md section 12)."""
    return f"mss/v1/{campaign}/shuffled"


def compact_body(config, kind, frame):
    """The body of a batch for ``frame``, an accepted report of ``config`` in
    frame kind ``kind`` (a name of ``mss_device.frame.KINDS``): its compact
    frame, the tag byte 0b10tttttt (t = config id byte 0 AND 0x3F) and the
    report's body, its header (config id, epoch, sequence) dropped."""
    head = HEADER[KINDS.index(kind)]
    return bytes((0x80 | (_config_id(config)[0] & TAG_MASK),)) + frame[head:]


def mac(key, data):
    return hmac.new(key, data, hashlib.sha256).digest()


def encode_batch(key, config, batch_id, epoch, first_epoch, bodies, colluding=DEFAULT_COLLUDING):
    """The bytes of one batch of ``bodies`` (compact frames, already permuted:
    this function keeps their order, at most one a device) of ``config`` (a config
    or its id bytes), ``colluding`` of whose devices may collude with the aggregator."""
    check_key(key)
    cid = _config_id(config)
    if not isinstance(batch_id, bytes) or len(batch_id) != BATCH_ID_BYTES:
        raise BatchError("batch", f"a batch id is {BATCH_ID_BYTES} bytes, got {batch_id!r}")
    if not (type(epoch) is int and type(first_epoch) is int and 0 <= first_epoch <= epoch < EPOCHS):
        raise BatchError("batch", f"need 0 <= first_epoch <= epoch < 2**32, got {first_epoch!r}, {epoch!r}")
    if not (type(colluding) is int and 0 <= colluding < EPOCHS):
        raise BatchError("batch", f"colluding is a u32, got {colluding!r}")
    bodies = list(bodies)
    if not bodies or len(bodies) >= EPOCHS:
        raise BatchError("batch", f"a batch holds 1 to 2**32 - 1 bodies, got {len(bodies)}")
    parts = [_HEAD.pack(MAGIC, VERSION, cid, batch_id, epoch, first_epoch, colluding, len(bodies))]
    for body in bodies:
        if not isinstance(body, bytes) or not 0 < len(body) <= MAX_BODY:
            raise BatchError("batch", f"a body is 1 to {MAX_BODY} bytes, got {body!r:.40}")
        parts += (struct.pack(">H", len(body)), body)
    data = b"".join(parts)
    return data + mac(key, data)


def decode_batch(key, data, config=None):
    """The :class:`ShuffledBatch` in ``data``, after checking its MAC under
    ``key`` and its format; with ``config`` (a config or its id bytes) also
    that the batch is of that config (reason ``config``)."""
    check_key(key)
    if not isinstance(data, bytes):
        raise BatchError("type", f"expected bytes, got {type(data).__name__}")
    if len(data) < HEADER_BYTES + MAC_BYTES:
        raise BatchError("length", f"{len(data)} bytes is shorter than any batch "
                                   f"({HEADER_BYTES + MAC_BYTES})")
    signed, tag = data[:-MAC_BYTES], data[-MAC_BYTES:]
    if not hmac.compare_digest(mac(key, signed), tag):
        raise BatchError("mac", "the HMAC does not verify under the shuffle key")
    magic, version, cid, batch_id, epoch, first_epoch, colluding, n = _HEAD.unpack_from(signed)
    if magic != MAGIC:
        raise BatchError("magic", f"magic {magic!r} is not {MAGIC!r}")
    if version != VERSION:
        raise BatchError("version", f"batch format version {version} is not {VERSION}")
    if first_epoch > epoch:
        raise BatchError("epoch", f"first_epoch {first_epoch} is after epoch {epoch}")
    if config is not None and cid != _config_id(config):
        raise BatchError("config", f"config id {cid.hex()} is not {_config_id(config).hex()}")
    if n == 0:
        raise BatchError("count", "an empty batch")
    bodies, off = [], HEADER_BYTES
    for i in range(n):
        if off + 2 > len(signed):
            raise BatchError("count", f"the batch ends before body {i} of {n}")
        (size,) = struct.unpack_from(">H", signed, off)
        if size == 0 or off + 2 + size > len(signed):
            raise BatchError("body", f"body {i} of {size} bytes does not fit the batch")
        bodies.append(signed[off + 2:off + 2 + size])
        off += 2 + size
    if off != len(signed):
        raise BatchError("length", f"{len(signed) - off} bytes after the last of {n} bodies")
    return ShuffledBatch(config_id=cid, batch_id=batch_id, epoch=epoch, first_epoch=first_epoch, bodies=tuple(bodies),
                         colluding=colluding)
