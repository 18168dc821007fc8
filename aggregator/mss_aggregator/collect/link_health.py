"""The state of one broker connection, as the log, /metrics and the dashboard show it.

Every failed attempt is logged once with its cause and counted by cause:

* ``dns`` -- the host name does not resolve;
* ``refused`` -- nothing listens on the port (closed port, broker down);
* ``timeout`` -- no answer in time;
* ``certificate`` -- TLS: the broker's certificate is not signed by the CA
  given, or is not for the host name;
* ``tls`` -- any other TLS failure, including a connection closed during the
  handshake (a plain MQTT port, a listener that wants a client certificate);
* ``closed`` -- the broker closed the connection before accepting it;
* ``broker`` -- the broker answered CONNACK with a refusal (credentials, ACL);
* ``other`` -- anything else (the text says what).

paho retries on its own with back-off; ``delay`` mirrors its schedule
(``reconnect_delay_set(min, max)``: min, then doubled up to max, back to
min once connected) so the log says when the next attempt comes.

:class:`DeviceClocks` is the devices' side of link health: the boards that
said they have no clock (an MQTT board's retained status ``no-clock``, a
serial board's ``$MSS2,<id>,!no-clock,<crc>`` line: SPEC.md sections 8, 9),
whose full or compact-epoch reports wait for the time, until they report or
(MQTT) their status is ``online`` again.
"""
import socket
import ssl
import threading
import time

import paho.mqtt.client as mqtt

CAUSES = ("dns", "refused", "timeout", "certificate", "tls", "closed", "broker", "other")


def cause_of(exc, tls):
    """(cause, text) for an exception raised while connecting."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "certificate", str(exc)
    if isinstance(exc, ssl.SSLError):
        return "tls", str(exc)
    if isinstance(exc, socket.gaierror):
        return "dns", str(exc)
    if isinstance(exc, ConnectionRefusedError):
        return "refused", str(exc)
    if isinstance(exc, TimeoutError):
        return "timeout", str(exc) or "timed out"
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)) and tls:
        return "tls", f"{exc} during the TLS handshake (not a TLS port, or it wants a client certificate?)"
    if isinstance(exc, (ConnectionError, EOFError)):
        return "closed", str(exc)
    return "other", f"{type(exc).__name__}: {exc}"


class DeviceClocks:
    """The devices without a clock (see the module docstring); thread-safe.  A device
    is logged once when it first says so, and once when it has the time again."""

    MAX = 10000  # devices kept: forged status messages cannot grow it without bound

    def __init__(self, log=print):
        self.log = log
        self.lock = threading.Lock()
        self.without = {}  # device id -> {"device_id", "source", "since", "last"}

    def said(self, device_id, word, source):
        """``word``: ``no-clock`` adds the device, ``online`` drops it, any other is ignored."""
        now = time.time()
        with self.lock:
            if word == "no-clock":
                new = device_id not in self.without
                if new and len(self.without) >= self.MAX:
                    return
                self.without[device_id] = {"device_id": device_id, "source": source, "last": now,
                                           "since": now if new else self.without[device_id]["since"]}
            elif word == "online":
                new = self.without.pop(device_id, None) is not None
            else:
                return
        if new:
            self.log(f"device {device_id} ({source}) has no clock: its reports wait for the time (NTP)"
                     if word == "no-clock" else f"device {device_id} ({source}) has the time again")

    def reported(self, device_ids):
        """Devices whose reports arrived: they have the time."""
        with self.lock:
            back = [d for d in set(device_ids) if self.without.pop(d, None) is not None]
        for d in sorted(back):
            self.log(f"device {d} has the time again (it reports)")

    def status(self):
        """The devices without a clock, by device id: ``device_id``, ``source``, ``since``, ``last``."""
        with self.lock:
            return [dict(v) for _, v in sorted(self.without.items())]


class LinkHealth:
    def __init__(self, broker, tls, log, min_delay=1, max_delay=30):
        self.broker, self.tls, self.log = broker, tls, log
        self.min_delay, self.max_delay = min_delay, max_delay
        self.lock = threading.Lock()
        self.state = "connecting"  # connecting -> up | down; down -> connecting ...
        self.failures = dict.fromkeys(CAUSES, 0)
        self.streak = 0  # failures since the last success: paho's back-off step
        self.last_error = self.last_error_at = self.connected_since = None

    def delay(self):
        return min(self.min_delay * 2 ** max(self.streak - 1, 0), self.max_delay)

    def attempt(self):
        with self.lock:
            self.state = "connecting"

    def failed(self, cause, text):
        with self.lock:
            self.state = "down"
            self.failures[cause] += 1
            self.streak += 1
            self.last_error, self.last_error_at = f"{cause}: {text}", time.time()
            delay = self.delay()
        self.log(f"mqtt: cannot connect to {self.broker} ({cause}): {text}; retrying in {delay} s")

    def connected(self):
        with self.lock:
            self.state, self.streak, self.connected_since = "up", 0, time.time()

    def disconnected(self, reason):
        """The connection ended: lost after CONNACK, or closed before it (a failure)."""
        with self.lock:
            state = self.state
            if state == "up":
                self.state = "down"
        if state == "up":
            self.log(f"mqtt: disconnected from {self.broker} ({reason}), reconnecting")
        elif state == "connecting":
            hint = " (with TLS: does the listener want a client certificate? --tls-cert)" if self.tls else ""
            self.failed("closed", f"connection closed before CONNACK ({reason}){hint}")

    def status(self):
        with self.lock:
            return {"broker": self.broker, "tls": self.tls, "connected": self.state == "up",
                    "connected_since": self.connected_since if self.state == "up" else None,
                    "failures": dict(self.failures), "last_error": self.last_error,
                    "last_error_at": self.last_error_at}


class Client(mqtt.Client):
    """paho's client, telling ``health`` of every connection attempt and of the
    exception that ends one: paho's own on_connect_fail is given none.  ``died``
    (a callable, or None) is given the exception that ends the network thread
    (paho re-raises a callback's), instead of a traceback and a silent end."""

    def __init__(self, *args, health, died=None, **kw):
        super().__init__(*args, **kw)
        self.health, self.died = health, died

    def loop_forever(self, *args, **kw):  # loop_start's thread runs it
        try:
            return super().loop_forever(*args, **kw)
        except Exception as exc:
            if self.died is None:
                raise
            self.died(exc)

    def reconnect(self):  # paho's loop calls it for the first connection and every retry
        self.health.attempt()
        try:
            return super().reconnect()
        except Exception as exc:
            self.health.failed(*cause_of(exc, self.health.tls))
            raise
