"""Collectors: MQTT (paho-mqtt 2.x) and serial ports (pyserial), both feeding
one writer thread that stores batches and only then acknowledges them.

The MQTT session is persistent (clean_session=False, QoS 1, fixed client
id), with manual acknowledgement: a PUBACK leaves only after the batch
holding the message is committed, so a crash before the commit makes the
broker redeliver it, and the store's de-duplication (by config, device,
epoch and sequence, never by the DUP flag) keeps it counted once.  The same
collector reads a LoRaWAN network server's uplinks (ChirpStack at QoS 1;
The Things Stack offers QoS 0 only, where what arrives during a crash is
lost, not miscounted).
"""
import queue
import ssl
import threading
import time
from urllib.parse import unquote, urlparse

import paho.mqtt.client as mqtt
import serial

from mss_aggregator.collect.link_health import Client, LinkHealth
from mss_device.gateway import DEVICE_ID, MARK, parse_status, split_lines

BATCH = 500
BATCH_SECONDS = 0.02
RECONNECT_DELAY = (1, 30)  # seconds: paho's back-off, first and longest wait
LEVEL_MAX = 64  # characters of a campaign or share-group name
MAX_BAUD = 2**31 - 1  # the kernel's termios speed is a C int


def check_topic_level(value, flag):
    """``value`` if it can be one MQTT topic level (the campaign in ``mss/v1/<campaign>/...``,
    the group in ``$share/<group>/...``): 1 to 64 printable characters (no control character,
    NUL included, and valid UTF-8), none of them ``/``, ``+`` or ``#``; else ValueError naming
    ``flag`` (what the value is, in the caller's terms)."""
    if not isinstance(value, str) or not 1 <= len(value) <= LEVEL_MAX:
        raise ValueError(f"{flag} {value!r}: a topic level is 1 to {LEVEL_MAX} characters")
    for c in value:
        if c in "/+#":
            raise ValueError(f"{flag} {value!r}: a topic level may not hold {c!r} "
                             f"({'a level separator' if c == '/' else 'an MQTT wildcard'})")
        if not c.isprintable():  # control characters, NUL, a byte that is not UTF-8 (a surrogate)
            raise ValueError(f"{flag} {value!r}: a topic level holds printable UTF-8 characters only")
    return value


def skipped(word):
    """The epoch of a status ``skipped-<epoch>`` (SPEC.md section 10: the board's budget is
    spent and its value has no memo, so that epoch has no report), else None."""
    head, _, digits = word.partition("-")
    if head != "skipped" or not digits.isdigit() or not digits.isascii() or len(digits) > 12:
        return None
    return int(digits)


def check_client_id(value, flag="client id"):
    """An MQTT client id: at least one character, printable UTF-8; else ValueError naming ``flag``."""
    if not value or not value.isprintable():
        raise ValueError(f"{flag} {value!r}: a client id is one or more printable characters")
    return value


def parse_serial(spec, flag="serial port"):
    """(port, baud) of ``PORT[,BAUD]`` (default 115200 baud); ValueError naming ``flag``."""
    port, comma, baud = spec.partition(",")
    if not port:
        raise ValueError(f"{flag} {spec!r}: give a port, e.g. /dev/ttyUSB0,115200")
    if not comma:
        return port, 115200
    if not baud.isdigit() or not 1 <= int(baud) <= MAX_BAUD:  # isdigit: no sign, no spaces
        raise ValueError(f"{flag} {spec!r}: the baud rate is a whole number from 1 to {MAX_BAUD}")
    return port, int(baud)


class ThreadDied(RuntimeError):
    """A service thread ended on an unexpected exception; the message is ``<thread>: <cause>``."""

    def __init__(self, thread, exc):
        super().__init__(f"{thread}: {type(exc).__name__}: {exc}")
        self.thread, self.cause = thread, exc


class Failures:
    """The first unexpected end of a service thread (collector, writer, HTTP server), reported
    by that thread: the main loop waits on ``event`` and stops with :meth:`error`."""

    def __init__(self):
        self.event = threading.Event()
        self._lock = threading.Lock()
        self.first = None  # (thread, exception)

    def report(self, thread, exc):
        with self._lock:
            if self.first is None:
                self.first = (thread, exc)
        self.event.set()

    def error(self):
        """The first failure as a :class:`ThreadDied`, or None."""
        return None if self.first is None else ThreadDied(*self.first)


def parse_broker(url):
    """(host, port, user, password, tls) from mqtt[s]://[user:pass@]host[:port]."""
    u = urlparse(url)
    shown = url.replace(f":{u.password}@", ":***@") if u.password else url  # errors never show a password
    if u.scheme not in ("mqtt", "mqtts") or not u.hostname:
        raise ValueError(f"broker URL must look like mqtt://[user:pass@]host:port, got {shown!r}")
    try:
        port = u.port  # urllib's ValueError ("Port out of range 0-65535") names no URL
    except ValueError:
        port = 0
    if port == 0 or (port is None and u.netloc.endswith(":")):
        raise ValueError(f"broker URL {shown!r}: the port is a number from 1 to 65535")
    tls = u.scheme == "mqtts"
    return (u.hostname, port or (8883 if tls else 1883),
            unquote(u.username) if u.username else None,
            unquote(u.password) if u.password else None, tls)


class TlsFileError(ValueError):
    """A TLS file that is not what it should be: ``part`` "ca" (the CA certificate) or "cert" (the
    client certificate and its key), ``files`` the paths, ``why`` the ssl module's reason."""

    def __init__(self, part, files, why):
        what = "not a CA certificate file" if part == "ca" else "not a certificate and its key"
        super().__init__(f"TLS {' / '.join(str(f) for f in files if f)}: {what} ({why})")
        self.part, self.files, self.why = part, files, why


def tls_context(tls):
    """The broker's certificate checked against ``tls.ca`` (default: the system's
    CAs) and the host name; ``tls.cert``/``tls.key``: a client certificate (the key
    may be in the cert file); ``tls`` a :class:`~.links.TlsFiles`.  A bad file is a
    :class:`TlsFileError`."""
    try:
        ctx = ssl.create_default_context(cafile=tls.ca)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise TlsFileError("ca", (tls.ca,), exc) from None
    if tls.cert:
        try:
            ctx.load_cert_chain(tls.cert, tls.key)
        except (OSError, ValueError) as exc:
            raise TlsFileError("cert", (tls.cert, tls.key), exc) from None
    return ctx


class Writer(threading.Thread):
    """Drains (receive, ack) tuples into store batches; acks after commit.  ``receive()``
    is the link's step of classifying a message (``Ingest.receive_mqtt``, ...: a result or
    a :class:`~.ingest.Pending` frame); the batch's frames are then decoded together
    (``Ingest.decode_batch``).  An exception stops it (``error``; told to ``failures``,
    a :class:`Failures`)."""

    def __init__(self, store, ingest, on_batch=None, failures=None):
        super().__init__(name="mss-writer", daemon=True)
        self.store, self.ingest, self.on_batch, self.failures = store, ingest, on_batch, failures
        self.inbox = queue.Queue()
        self.stopping = threading.Event()
        self.error = None

    def run(self):
        try:
            while not (self.stopping.is_set() and self.inbox.empty()):
                batch = self._next_batch()
                if batch:
                    items = self.ingest.decode_batch([receive() for receive, _ in batch])
                    outcomes = self.store.write_batch(items)
                    for _, ack in batch:
                        if ack:
                            ack()
                    if self.on_batch:
                        self.on_batch(items, outcomes)
        except Exception as exc:  # a store failure stops acknowledging: nothing is lost
            self.error = exc
            if self.failures is not None:
                self.failures.report("writer", exc)

    def _next_batch(self):
        try:
            batch = [self.inbox.get(timeout=0.1)]
        except queue.Empty:
            return []
        deadline = time.monotonic() + BATCH_SECONDS
        while len(batch) < BATCH:
            try:
                batch.append(self.inbox.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                break
        return batch

    def stop(self):
        self.stopping.set()
        self.join()


class MqttCollector:
    """One subscription to ``topic`` at ``qos`` on ``endpoint`` (a :class:`~.links.MqttEndpoint`
    whose client id is set; its share group, if any, shares the subscription); each message is
    classified by ``classify(topic, payload, source)`` (``Ingest.receive_mqtt``, or
    ``receive_lorawan`` for a network server's uplinks) in the writer, its frame
    decoded with the writer's batch.
    ``retained`` = (topic, payload) is published on every connect: the
    campaign config that MQTT devices read.  The endpoint's TLS files: see
    :func:`tls_context`.  Connection
    failures are logged, counted and retried (``health``); an exception that
    ends paho's network thread (e.g. in a callback) is told to ``failures``.  With
    ``clocks`` (a :class:`~.link_health.DeviceClocks`), the devices' retained statuses on
    ``status_topic`` (never shared: retained) say which have no clock."""

    def __init__(self, endpoint, writer, subscription, *, retained=None, log=print, failures=None, clocks=None,
                 status_topic=None):
        """``subscription``: (topic, classify, qos)."""
        host, port, user, password, tls = endpoint.address()
        topic, classify, qos = subscription
        share_group, client_id = endpoint.share_group, endpoint.client_id
        self.host, self.port = host, port
        self.writer, self.classify, self.qos, self.retained, self.log = writer, classify, qos, retained, log
        self.topic = f"$share/{share_group}/{topic}" if share_group else topic
        self.clocks, self.status_topic = clocks, status_topic if clocks is not None else None
        self.source = f"mqtt:{client_id}"  # which worker stored a report
        self.health = LinkHealth(f"{host}:{port}", tls, log, *RECONNECT_DELAY)
        died = (lambda exc: failures.report(f"mqtt collector {host}:{port}", exc)) if failures else None
        c = Client(mqtt.CallbackAPIVersion.VERSION2, client_id=check_client_id(client_id), clean_session=False,
                   protocol=mqtt.MQTTv311, manual_ack=True, health=self.health, died=died)
        if user:
            c.username_pw_set(user, password)
        if tls:
            c.tls_set_context(tls_context(endpoint.tls))
        c.on_connect = self._on_connect
        self.stopping = False
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        c.reconnect_delay_set(*RECONNECT_DELAY)
        self.client = c
        self.connected = threading.Event()

    def _on_connect(self, client, userdata, flags, reason, properties):
        if reason.is_failure:
            self.health.failed("broker", f"connection refused: {reason}")
            return
        self.health.connected()
        client.subscribe(self.topic, qos=self.qos)
        if self.status_topic:
            client.subscribe(self.status_topic, qos=1)
        if self.retained:
            client.publish(*self.retained, qos=1, retain=True)
        self.connected.set()
        self.log(f"mqtt: connected to {self.host}:{self.port}{' over TLS' if self.health.tls else ''}, "
                 f"subscribed to {self.topic}")

    def _on_disconnect(self, client, userdata, flags, reason, properties):
        if not self.stopping:
            self.health.disconnected(reason)

    def _on_message(self, client, userdata, msg):
        # msg._topic is the raw bytes: paho's msg.topic decodes UTF-8 and would raise on bad topics
        topic, payload, mid, qos = msg._topic, msg.payload, msg.mid, msg.qos
        if self.status_topic and topic.endswith(b"/status"):  # a device's status: not a report
            parts = topic.decode("utf-8", "replace").split("/")
            if len(parts) == 5 and DEVICE_ID.match(parts[3]) and len(payload) <= 32:
                word = bytes(payload).decode("ascii", "replace")
                epoch = skipped(word)
                if epoch is not None:  # device.budget spent: counted once, acked after the commit
                    self.writer.inbox.put((lambda: self.writer.ingest.skip("mqtt", parts[3], epoch, self.source),
                                           (lambda: client.ack(mid, qos)) if qos else None))
                    return
                self.clocks.said(parts[3], word, self.source)
            if qos:
                client.ack(mid, qos)
            return
        self.writer.inbox.put((lambda: self.classify(topic, payload, self.source),
                               (lambda: client.ack(mid, qos)) if qos else None))

    def start(self):
        self.client.connect_async(self.host, self.port, keepalive=30)
        self.client.loop_start()

    def stop(self):
        self.stopping = True
        self.client.disconnect()
        self.client.loop_stop()


class SerialCollector(threading.Thread):
    """Reads report lines from one serial port (``/dev/ttyUSB0[,baud]``, :func:`parse_serial`);
    each line is parsed and classified by ``Ingest.receive_serial`` in the writer.  A port that
    fails is retried; any other exception ends the thread and is told to ``failures``."""

    def __init__(self, spec, writer, log=print, failures=None, clocks=None):
        super().__init__(name=f"mss-serial-{spec}", daemon=True)
        self.port, self.baud = parse_serial(spec)
        self.writer, self.log, self.failures, self.clocks = writer, log, failures, clocks
        self.stopping = threading.Event()

    def run(self):
        try:
            self._read()
        except Exception as exc:
            if self.failures is None:
                raise
            self.failures.report(f"serial collector {self.port}", exc)

    def _read(self):
        while not self.stopping.is_set():
            try:
                with serial.Serial(self.port, self.baud, timeout=0.2) as ser:
                    self.log(f"serial: reading {self.port} at {self.baud} baud")
                    buf = b""
                    while not self.stopping.is_set():
                        buf += ser.read(4096)
                        lines, buf = split_lines(buf)
                        for line in lines:
                            self._line(line)
            except (serial.SerialException, OSError) as exc:
                self.log(f"serial: {self.port}: {exc}; retrying")
                self.stopping.wait(1.0)

    def _line(self, line, mark=MARK.encode()):
        status = self.clocks is not None and line.startswith(mark) and parse_status(line)
        epoch = skipped(status[1]) if status else None
        if epoch is not None:  # $MSS2,<id>,!skipped-<epoch>,<crc>: device.budget spent, counted once
            device = status[0]
            self.writer.inbox.put((lambda: self.writer.ingest.skip("serial", device, epoch, f"serial:{self.port}"),
                                   None))
        elif status:  # $MSS2,<id>,!no-clock,<crc>: the board has no clock (DeviceClocks)
            self.clocks.said(status[0], status[1], f"serial:{self.port}")
        elif line.startswith(mark):  # else console log output, not a report line
            self.writer.inbox.put((lambda: self.writer.ingest.receive_serial(self.port, line), None))

    def stop(self):
        self.stopping.set()
        self.join(2)
