"""Signed config pushes, the host side (SPEC.md section 5; device: ``mss_node.auth``).

The aggregator publishes ``{"signed": TEXT, "hmac": HEX}`` on the retained
``mss/v1/<campaign>/config``: TEXT is ``{"campaign", "issued", "config"}``
as JSON and HEX its HMAC-SHA256 under the fleet key, which a board holds
in ``device.fleet_key`` from flashing on.  ``issued`` grows with every
publication (the signing time in seconds), so a board refuses a config
issued before the one it runs: a recorded message cannot roll it back.
"""
import hmac
import json
import os

from mss_protocol.config_file import ConfigError

KEY_MIN_BYTES = 16
ENV = "MSS_FLEET_KEY"
MAX_MESSAGE = 4096  # bytes: the largest config message a board takes (SPEC.md section 5)


def seal(config, key, campaign, issued):
    """The message text for ``config`` (a config dict, section 5).  ConfigError if it
    is longer than a board takes: it would drop it, unread."""
    text = json.dumps({"campaign": campaign, "issued": int(issued), "config": config}, sort_keys=True)
    message = json.dumps({"signed": text, "hmac": hmac.new(key, text.encode(), "sha256").hexdigest()})
    if len(message.encode()) > MAX_MESSAGE:
        raise ConfigError(f"the signed config message is {len(message.encode())} bytes; boards drop any "
                          f"above {MAX_MESSAGE} (SPEC.md section 5)")
    return message


def parse_key(text, source):
    """The key bytes of hex ``text``; ConfigError names ``source`` (never the key)."""
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        raise ConfigError(f"{source}: a fleet key is hex digits") from None
    if len(key) < KEY_MIN_BYTES:
        raise ConfigError(f"{source}: a fleet key needs at least {KEY_MIN_BYTES} bytes "
                          f"({2 * KEY_MIN_BYTES} hex digits), got {len(key)}")
    return key


def load_key(path=None):
    """The fleet key from ``path`` (a file holding its hex), else ``$MSS_FLEET_KEY``, else None."""
    if path is not None:
        try:
            with open(path) as fh:
                return parse_key(fh.read(), str(path))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the fleet key: {exc.strerror}") from None
    if os.environ.get(ENV):
        return parse_key(os.environ[ENV], f"${ENV}")
    return None
