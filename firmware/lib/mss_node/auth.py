"""Signed config pushes (SPEC.md section 5): HMAC-SHA256 with the fleet key.

The retained message on ``mss/v1/<campaign>/config`` is
``{"signed": TEXT, "hmac": HEX}``: TEXT is the JSON document
``{"campaign": ..., "issued": N, "config": {...}}`` and HEX the HMAC-SHA256
(RFC 2104) of TEXT's UTF-8 bytes under ``device.fleet_key``.  The MAC is
checked before TEXT is parsed.  MicroPython has hashlib.sha256 but no hmac
module, hence the few lines below (tests compare them with CPython's hmac).

Loaded only on a board with ``device.fleet_key``: :func:`fleet_key` reads
the key at load, :func:`pushed` checks a pushed message for the node (the
node adopts what it returns with :func:`mss_node.switch.adopt`).
"""
import hashlib
import json

from mss_node import files, log
from mss_node.wallclock import CLOCK_SANE, UNIX_OFFSET

_BLOCK = 64  # SHA-256's block size in bytes
KEY_MIN_HEX = 32  # a fleet key of at least 16 bytes
DEPTH_MAX = 8  # JSON nesting of a config message (an honest one nests 3 or 4 deep)
SKEW_S = 3600  # how far ahead of the board's clock a push may be issued (SPEC.md section 5)


def fleet_key(text):
    """device.fleet_key's bytes.  Messages never show the key."""
    try:
        key = bytes.fromhex(text)
    except (TypeError, ValueError):
        key = b""
    if len(key) * 2 < KEY_MIN_HEX:
        raise ValueError("device.fleet_key must be at least %d hex digits" % KEY_MIN_HEX)
    return key


def hmac_sha256(key, msg):
    if len(key) > _BLOCK:
        key = hashlib.sha256(key).digest()
    key = key + bytes(_BLOCK - len(key))
    inner = hashlib.sha256(bytes([b ^ 0x36 for b in key]))
    inner.update(msg)
    outer = hashlib.sha256(bytes([b ^ 0x5C for b in key]))
    outer.update(inner.digest())
    return outer.digest()


def shallow(text):
    """Raise ValueError when the JSON ``text`` (bytes) nests deeper than DEPTH_MAX: one
    linear scan that skips strings, before json.loads builds anything of it."""
    depth = 0
    quoted = escaped = False
    for c in text:
        if quoted:
            if escaped:
                escaped = False
            elif c == 92:  # backslash
                escaped = True
            elif c == 34:  # "
                quoted = False
        elif c == 34:
            quoted = True
        elif c == 91 or c == 123:  # [ {
            depth += 1
            if depth > DEPTH_MAX:
                raise ValueError("nested deeper than %d" % DEPTH_MAX)
        elif c == 93 or c == 125:
            depth -= 1


def same(a, b):
    """a == b for two digests, looking at every byte (no early exit to time)."""
    if len(a) != len(b):
        return False
    diff = 0
    for i in range(len(a)):
        diff |= a[i] ^ b[i]
    return diff == 0


def unseal(msg, key, campaign):
    """(config dict, issued) of a signed message for ``campaign``; ValueError says why not."""
    if not isinstance(msg, dict) or "hmac" not in msg:
        raise ValueError("not signed (no hmac)")
    text, tag = msg.get("signed"), msg["hmac"]
    if not isinstance(text, str) or not isinstance(tag, str) or len(tag) != 64:
        raise ValueError("malformed signature")
    try:
        tag = bytes.fromhex(tag)
    except ValueError:
        raise ValueError("malformed signature")
    text = text.encode()
    if not same(hmac_sha256(key, text), tag):
        raise ValueError("bad hmac (not signed with this fleet's key)")
    shallow(text)
    d = json.loads(text)
    if not isinstance(d, dict) or not isinstance(d.get("config"), dict):
        raise ValueError("signed document holds no config")
    if d.get("campaign") != campaign:
        raise ValueError("signed for campaign %r, not %r" % (d.get("campaign"), campaign))
    issued = d.get("issued")
    if type(issued) is not int or issued < 0:
        raise ValueError("signed document has no issued counter")
    return d["config"], issued


def pushed(node, msg):
    """(config, issued) for ``node`` (an mss_node.app.Node with a key and a cap) to adopt
    from the pushed ``msg``, else None (logged why): when the HMAC holds, it names this
    campaign, it was issued after the config in use (an old signed config replayed is
    refused) and at most SKEW_S after the board's clock (so a far-future counter cannot
    freeze the board).  The loader, cap included, has the last word
    (:func:`mss_node.switch.adopt`).  The same config issued again only moves the counter
    on (None)."""
    s = node.s
    try:
        d, issued = unseal(msg, s.fleet_key, s.campaign)
    except ValueError as exc:
        log.warn("rejected pushed config: %s" % exc)
        return
    now = int(node.clock()) + UNIX_OFFSET
    if now < CLOCK_SANE:
        log.warn("rejected pushed config: the clock is not set")
        return
    if issued > now + SKEW_S:
        log.warn("rejected pushed config: issued %d is ahead of this board's clock %d by more than %d s"
                 % (issued, now, SKEW_S))
        return
    # a counter in use that is itself that far ahead (stored by earlier firmware, or while
    # the clock ran ahead) is not held against pushes issued within the skew of now
    last = s.issued if s.issued <= now + SKEW_S else now - SKEW_S
    if issued <= last:
        if issued < last:
            log.warn("rejected pushed config: issued %d, before %d of the config in use (a replay?)"
                     % (issued, last))
        return
    if d.get("config_id") == s.config_id:
        s.raw["issued"] = s.issued = issued
        files.save(node.config_path, s.raw)
        return
    return d, issued
