"""TLS for the MQTT link: the broker's certificate checked against a pinned CA
and the expected server name, optionally a client certificate and key.

:class:`Tls` is the ``ssl`` argument of umqtt.simple.  Every version ends
up calling its ``wrap_socket``: 1.4 and later as ``ssl.wrap_socket(sock,
server_hostname=host)``; 1.3.4 (PyPI) as ``ussl.wrap_socket(sock, **{})``,
so the name ``ussl`` (gone since MicroPython 1.23, and on older ports
wrapping with ``CERT_NONE`` when given no parameters) is pointed at the
link's Tls.  What the port cannot do (no ``ssl.SSLContext``, an unreadable
or unparsable file) raises ValueError naming the field, at load.

Files may be PEM or DER: MicroPython's ssl parses DER only, so the first
PEM block is decoded here; CPython reads the client certificate and key
itself, by name, as PEM.
"""
import sys

def check(m):
    """The TLS fields of device.mqtt (tls true), as mss_node.mqtt_link.check loads them."""
    for key in ("ca", "cert", "key", "server_hostname"):
        if m[key] is not None and (not isinstance(m[key], str) or not m[key]):
            raise ValueError("device.mqtt.%s must be a non-empty string" % key)
    if m["ca"] is None:
        raise ValueError("device.mqtt.tls needs device.mqtt.ca (the file of the CA that signed "
                         "the broker's certificate)")
    if (m["cert"] is None) != (m["key"] is None):
        raise ValueError("device.mqtt.cert and device.mqtt.key go together (a client certificate "
                         "and its key)")


# EPIPE, ECONNRESET (the same numbers on Linux and lwIP), mbedtls's FATAL_ALERT_MESSAGE
_ENDED = (32, 104, -0x7780)


def _text(exc):
    s = str(exc).strip()  # mbedtls messages come wrapped in newlines; a bare errno gets its type
    return s if s and not s.lstrip("-").isdigit() else "%s %s" % (type(exc).__name__, s)


def _der(path, field):
    """The file as DER: a PEM file's first block decoded (MicroPython's ssl takes DER only)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ValueError("device.mqtt.%s: cannot read %s (%s)" % (field, path, _text(exc)))
    end = data.find(b"-----END")
    if not data.startswith(b"-----BEGIN") or end < 0:
        return data
    import binascii

    try:
        return binascii.a2b_base64(data[data.find(b"\n") + 1:end].replace(b"\r", b"").replace(b"\n", b""))
    except ValueError:
        raise ValueError("device.mqtt.%s: %s is neither PEM nor DER" % (field, path))


class Tls:
    def __init__(self, m):
        try:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        except (ImportError, AttributeError):
            raise ValueError("device.mqtt.tls: this port has no ssl.SSLContext (MicroPython 1.23 or later)")
        ctx.verify_mode = ssl.CERT_REQUIRED  # micropython-lib's SSLContext starts at CERT_NONE
        ca = _der(m["ca"], "ca")
        try:
            ctx.load_verify_locations(cadata=ca)
        except (OSError, ValueError) as exc:
            raise ValueError("device.mqtt.ca: %s is not a CA certificate (%s)" % (m["ca"], _text(exc)))
        if m["cert"]:
            if sys.implementation.name == "micropython":
                chain = (_der(m["cert"], "cert"), _der(m["key"], "key"))
            else:
                chain = (m["cert"], m["key"])
            try:
                ctx.load_cert_chain(*chain)
            except (OSError, ValueError) as exc:
                raise ValueError("device.mqtt.cert, key: %s and %s are not a certificate and its key (%s)"
                                 % (m["cert"], m["key"], _text(exc)))
        self.ctx = ctx
        self.hostname = m["server_hostname"] or m["host"]
        self.timeout = m["timeout_s"]
        self.raw = None  # the TCP socket under the last TLS one
        sys.modules["ussl"] = self  # umqtt.simple 1.3.4: import ussl; ussl.wrap_socket(sock)

    def wrap_socket(self, sock, server_hostname=None):
        """The handshake, bounded by the link's timeout; the name checked is
        device.mqtt.server_hostname (default: host) whatever the caller says."""
        sock.settimeout(self.timeout)
        try:
            wrapped = self.ctx.wrap_socket(sock, server_hostname=self.hostname)
        except (OSError, ValueError) as exc:  # unknown CA, wrong name, not a TLS port, ...
            sock.close()
            why = _text(exc)
            if getattr(exc, "errno", None) in _ENDED:
                why += " (the broker ended the handshake: not a TLS port, or no client certificate it accepts)"
            raise OSError("TLS handshake with %s refused: %s" % (self.hostname, why))
        self.raw = sock
        return wrapped
