"""Reports over MQTT with micropython-lib's umqtt.simple.

* QoS 1 with a socket timeout (umqtt.simple would otherwise wait for a
  PUBACK forever); a failure drops the connection and the report stays
  queued in flash for the next try;
* persistent session, retained ``online`` status and an ``offline`` will;
  ``status("no-clock")`` (the node has no clock: its reports need the time)
  replaces ``online`` until ``status("online")``, and is the status of every
  connect meanwhile; so does ``skipped-<epoch>`` (device.budget spent, no
  memo: that epoch has no report) until the next report;
* subscription to the campaign's retained config topic, so the fleet can
  be re-parameterised; ``on_config(dict)`` gets every new config (on a board
  with a fleet key and a cap; without, they are ignored, logged once);
* reconnects with exponential back-off after Wi-Fi or broker loss;
* with device.mqtt.tls, TLS with a pinned CA and the expected server name
  (and a client certificate if given), see :mod:`mss_node.tls`;
* with ``device.sleep`` light or deep, ``sleep(ms)`` disconnects before the
  board sleeps (a DISCONNECT: no ``offline`` will) and the next send
  reconnects; a config pushed meanwhile is retained and arrives then;
* no message stops the link: a config message above MAX_MESSAGE bytes is
  read off the wire in small pieces and dropped (still acknowledged), a
  shallow JSON nesting is checked before parsing, and nothing that handling
  a message raises escapes before its QoS 1 PUBACK is sent.

Only the API common to umqtt.simple 1.3.4 and the current 1.8 is used;
:func:`_bounded` replaces ``wait_msg`` and relies on what both share:
``sock`` (read, readinto, write, setblocking), ``_recv_len()`` and ``cb``.
"""
import json
import time

from mss_node import log

MAX_MESSAGE = 4096  # bytes: the largest config message a board takes (SPEC.md section 5)
_CHUNK = 256
_buf = bytearray(_CHUNK)  # what an oversized message is drained into
_ack = bytearray(b"\x40\x02\0\0")  # PUBACK

# device.mqtt: port None is 1883, or 8883 with tls; ca, cert, key: files on the board
# (PEM or DER); server_hostname: the name the broker's certificate must carry (default: host)
DEFAULTS = {"host": "127.0.0.1", "port": None, "user": None, "password": None,
            "keepalive": 60, "timeout_s": 5, "backoff_max_s": 300,
            "tls": False, "ca": None, "cert": None, "key": None, "server_hostname": None}

# umqtt.simple raises MQTTException(code) with the CONNACK's return code (MQTT 3.1.1 section 3.2.2.3)
_LOGIN = ": check the device's mqtt.user and mqtt.password against the broker's accounts"
REFUSED = {1: ("protocol version refused", ""), 2: ("client id refused", ": check the device id"),
           3: ("broker unavailable", ""), 4: ("bad user name or password", _LOGIN), 5: ("not authorised", _LOGIN)}


def connect_error(exc):
    """Why a connect failed, in words: a refused CONNACK by its meaning, anything else as repr."""
    code = exc.args[0] if type(exc).__name__ == "MQTTException" and exc.args else None
    if code in REFUSED:
        return "%s (MQTT CONNACK %d)%s" % (REFUSED[code][0], code, REFUSED[code][1])
    return repr(exc)


def check(m):
    """device.mqtt with its port resolved (mss_node.settings).  A TLS field is never
    ignored: set without ``tls`` it is an error; with ``tls``, :func:`mss_node.tls.check`."""
    if type(m["tls"]) is not bool:
        raise ValueError("device.mqtt.tls must be true or false")
    if m["tls"]:
        from mss_node.tls import check as check_tls

        check_tls(m)
    else:
        for key in ("ca", "cert", "key", "server_hostname"):
            if m[key] is not None:
                raise ValueError("device.mqtt.%s is set but device.mqtt.tls is false" % key)
    if m["port"] is None:
        m["port"] = 8883 if m["tls"] else 1883
    if type(m["port"]) is not int or not 0 < m["port"] < 65536:
        raise ValueError("device.mqtt.port must be a port number, 1 to 65535")
    # keepalive is MQTT's u16; a string (a password in the wrong column) would reach the socket code
    for key, lo, hi in (("keepalive", 0, 65535), ("timeout_s", 1, 3600), ("backoff_max_s", 1, 86400)):
        if type(m[key]) is not int or not lo <= m[key] <= hi:
            raise ValueError("device.mqtt.%s must be an integer, %d to %d" % (key, lo, hi))
    return m


def _skip(sock, n):
    """Read ``n`` bytes off ``sock`` into the small buffer (never the whole message)."""
    while n > 0:
        got = sock.readinto(_buf, min(n, _CHUNK))
        if not got:
            raise OSError(-1)
        n -= got


def _drop(n):
    log.warn("dropped %d-byte config message (limit %d)" % (n, MAX_MESSAGE))


def _bounded(base):
    """umqtt.simple's MQTTClient whose wait_msg reads a PUBLISH of more than MAX_MESSAGE
    bytes (or with a topic longer than the buffer) in pieces, drops it with a log line and
    still sends its PUBACK, so the broker does not redeliver it to the session for ever."""

    class Client(base):
        def wait_msg(self):
            sock = self.sock
            res = sock.read(1)
            sock.setblocking(True)
            if res is None:
                return None
            if res == b"":
                raise OSError(-1)
            if res == b"\xd0":  # PINGRESP
                sock.read(1)
                return None
            op = res[0]
            if op & 0xF0 != 0x30:
                return op
            sz = self._recv_len()
            n = sock.read(2)
            n = n[0] << 8 | n[1]
            sz -= n + 2
            topic = None
            if n > _CHUNK:
                _skip(sock, n)
            else:
                topic = sock.read(n)
            if op & 6:
                pid = sock.read(2)
                sz -= 2
            if topic is None or not 0 <= sz <= MAX_MESSAGE:
                _skip(sock, sz)
                _drop(sz)
            else:
                self.cb(topic, sock.read(sz))  # MqttLink._message raises nothing
            if op & 6 == 2:
                _ack[2], _ack[3] = pid[0], pid[1]
                sock.write(_ack)
            return op

    return Client


def make(node):
    """The link of the node (mss_node.app.Node)."""
    return MqttLink(node.s, node.new_config, node.clock)


class MqttLink:
    def __init__(self, settings, on_config, clock=time.time):
        from umqtt.simple import MQTTClient

        self._cls = _bounded(MQTTClient)
        self.s = settings
        self.on_config = on_config
        self.clock = clock
        self.client = None
        self.backoff = 1
        self.next_try = 0
        self.tls = None
        self.told = False  # "pushed configs are ignored" is logged once
        self.word = "online"  # the retained status
        if settings.device["mqtt"]["tls"]:
            from mss_node.tls import Tls

            self.tls = Tls(settings.device["mqtt"])  # ValueError naming the field: the board stays idle

    def _topic(self, leaf):
        if leaf == "config":
            return "mss/v1/%s/config" % self.s.campaign
        return "mss/v1/%s/%s/%s" % (self.s.campaign, self.s.device_id, leaf)

    def _connect(self):
        m = self.s.device["mqtt"]
        c = self._cls(self.s.device_id.encode(), m["host"], m["port"], m["user"], m["password"],
                      m["keepalive"], ssl=self.tls)
        c.set_callback(self._message)
        status = self._topic("status").encode()
        c.set_last_will(status, b"offline", retain=True, qos=1)
        c.connect(clean_session=False)
        self._timeout(c)
        c.publish(status, self.word.encode(), retain=True, qos=1)
        c.subscribe(self._topic("config").encode(), qos=1)
        self.client = c
        self.backoff = 1
        log.info("mqtt connected to %s:%d%s" % (m["host"], m["port"], " over TLS" if self.tls else ""))

    def _timeout(self, c):
        sock = c.sock
        if not hasattr(sock, "settimeout"):  # MicroPython's SSLSocket: time out the TCP socket under it
            sock = self.tls.raw
        sock.settimeout(self.s.device["mqtt"]["timeout_s"])

    def _up(self):
        if self.client is not None:
            return True
        if self.clock() < self.next_try:
            return False
        try:
            self._connect()
            return True
        except Exception as exc:  # OSError, umqtt's MQTTException (refused), bad replies
            self._down("connect failed: %s" % connect_error(exc))
            return False

    def _down(self, why):
        log.warn("mqtt down (%s), retry in %d s" % (why, self.backoff))
        try:
            if self.client is not None:
                self.client.sock.close()
        except (OSError, AttributeError):
            pass
        self.client = None
        self.next_try = self.clock() + self.backoff
        self.backoff = min(self.backoff * 2, self.s.device["mqtt"]["backoff_max_s"])

    def send(self, report):
        if not self._up():
            return False
        try:
            self.client.publish(self._topic("report").encode(), report, qos=1)
            return True
        except Exception as exc:  # any link failure: back off and retry later
            self._down("publish failed: %r" % (exc,))
            return False

    def sleep(self, ms):
        if self.client is None:
            return
        try:
            self.client.disconnect()
        except Exception:  # OSError, a TLS error: the broker times the session out
            pass
        self.client = None
        self.backoff = 1

    def status(self, word):
        if word != self.word:
            self.word = word
            if self.client is not None:
                try:
                    self.client.publish(self._topic("status").encode(), word.encode(), retain=True, qos=1)
                except Exception as exc:  # the next connect publishes it
                    self._down("status failed: %r" % (exc,))

    def poll(self):
        if not self._up():
            return
        try:
            self.client.check_msg()
            self._timeout(self.client)  # check_msg cleared it
        except Exception as exc:  # any link failure: back off and retry later
            self._down("poll failed: %r" % (exc,))

    def _message(self, topic, msg):
        if not msg:  # the retained config deleted: nothing to adopt
            return
        if self.s.fleet_key is None or self.s.cap is None:
            if not self.told:
                log.warn("pushed configs are ignored: this board has no device.fleet_key and "
                         "device.max_epsilon")
                self.told = True
            return
        if len(msg) > MAX_MESSAGE:  # a client that hands whole messages (the CPython one)
            return _drop(len(msg))
        try:
            from mss_node.auth import shallow

            shallow(msg)
            self.on_config(json.loads(msg))
        except Exception as exc:  # ValueError, MemoryError, ...: the PUBACK must still go out
            log.warn("ignored config message: %s" % (exc,))
