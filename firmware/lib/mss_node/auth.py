"""Signed config pushes (SPEC.md section 5): HMAC-SHA256 with the fleet key.

The retained message on ``mss/v1/<campaign>/config`` is
``{"signed": TEXT, "hmac": HEX}``: TEXT is the JSON document
``{"campaign": ..., "issued": N, "config": {...}}`` and HEX the HMAC-SHA256
(RFC 2104) of TEXT's UTF-8 bytes under ``device.fleet_key``.  The MAC is
checked before TEXT is parsed.  MicroPython has hashlib.sha256 but no hmac
module, hence the few lines below (tests compare them with CPython's hmac).

Loaded only on a board with ``device.fleet_key``: :func:`fleet_key` reads
the key at load, :func:`pushed` takes a pushed message for the node.
"""
import hashlib
import json

from mss_node import files, log
from mss_node.switch import adopt

_BLOCK = 64  # SHA-256's block size in bytes
KEY_MIN_HEX = 32  # a fleet key of at least 16 bytes


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
    if not same(hmac_sha256(key, text.encode()), tag):
        raise ValueError("bad hmac (not signed with this fleet's key)")
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
    """Adopt the pushed ``msg`` on ``node`` (an mss_node.app.Node with a key and a cap) when
    the HMAC holds, it names this campaign, it was issued after the config in use (an old
    signed config replayed is refused) and the loader accepts it, cap included.  The same
    config issued again only moves the counter on."""
    s = node.s
    try:
        d, issued = unseal(msg, s.fleet_key, s.campaign)
    except ValueError as exc:
        log.warn("rejected pushed config: %s" % exc)
        return
    if issued <= s.issued:
        if issued < s.issued:
            log.warn("rejected pushed config: issued %d, before %d of the config in use (a replay?)"
                     % (issued, s.issued))
        return
    if d.get("config_id") == s.config_id:
        s.raw["issued"] = s.issued = issued
        files.save(node.config_path, s.raw)
        return
    adopt(node, d, "pushed config", issued)
