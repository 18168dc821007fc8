"""umqtt.simple's API subset on CPython, over paho-mqtt, so the unchanged
firmware (mss_node.mqtt_link) can run as an emulated device on a machine
without the MicroPython binary.  Only what the firmware uses is provided.

TLS as in umqtt.simple 1.4 and later: ``ssl`` is an SSLContext (anything
with ``wrap_socket(sock, server_hostname=...)``), called with the server
name and trusted with every check.  The legacy ``ssl=True`` + ``ssl_params``
form is refused, never quietly sent in clear."""
import queue
import threading

import paho.mqtt.client as mqtt


class MQTTException(Exception):
    pass


# paho reports an MQTT 3.1.1 CONNACK refusal as the MQTT 5 reason code; umqtt.simple raises the 3.1.1 code
CONNACK_CODE = {132: 1, 133: 2, 136: 3, 134: 4, 135: 5}


class _Sock:
    """Stands in for the socket: the firmware sets its timeout and closes it."""

    def __init__(self, owner):
        self.owner, self.timeout = owner, None

    def settimeout(self, t):
        self.timeout = t

    def close(self):
        self.owner._close()


class _Context:
    """What paho wants of an SSLContext, over umqtt's ``ssl`` object."""

    check_hostname = True  # the object checks the name, as umqtt.simple leaves it to do

    def __init__(self, ssl, server):
        self.ssl, self.server = ssl, server

    def wrap_socket(self, sock, server_hostname=None, do_handshake_on_connect=True):
        return self.ssl.wrap_socket(sock, server_hostname=self.server)  # umqtt.simple's call


class MQTTClient:
    def __init__(self, client_id, server, port=0, user=None, password=None, keepalive=0, ssl=None):
        if ssl is True:
            raise ValueError("this umqtt.simple takes an SSLContext as ssl, not the legacy ssl=True")
        self.client_id = client_id.decode() if isinstance(client_id, bytes) else client_id
        self.server, self.port, self.ssl = server, port or (8883 if ssl else 1883), ssl
        self.user, self.password, self.keepalive = user, password, keepalive
        self.cb, self.will, self.sock, self._c = None, None, None, None
        self._inbox = queue.Queue()

    def set_callback(self, f):
        self.cb = f

    def set_last_will(self, topic, msg, retain=False, qos=0):
        self.will = (topic.decode(), msg, qos, retain)

    def connect(self, clean_session=True):
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id,
                        clean_session=clean_session)
        if self.user:
            c.username_pw_set(self.user, self.password)
        if self.ssl:
            c.tls_set_context(_Context(self.ssl, self.server))
        if self.will:
            c.will_set(*self.will)
        c.on_message = lambda cl, u, m: self._inbox.put((m._topic, bytes(m.payload)))
        answer = queue.Queue()  # like umqtt.simple, connect returns only once CONNACK is read
        c.on_connect = lambda cl, u, flags, reason, p: answer.put(reason)
        c.on_disconnect = lambda cl, u, flags, reason, p: answer.put(
            OSError(f"connection closed before CONNACK ({reason})"))
        try:
            c.connect(self.server, self.port, keepalive=self.keepalive or 60)
        except OSError:
            raise
        except Exception as exc:
            raise OSError(str(exc))
        c.loop_start()
        try:
            reason = answer.get(timeout=10)
        except queue.Empty:
            reason = OSError("timed out waiting for CONNACK")
        if isinstance(reason, OSError) or reason.is_failure:
            c.disconnect()  # and no reconnecting behind the firmware's back
            c.loop_stop()
            raise reason if isinstance(reason, OSError) else MQTTException(CONNACK_CODE.get(reason.value,
                                                                                            reason.value))
        c.on_disconnect = None
        self._c, self.sock = c, _Sock(self)
        return 0

    def _wait(self, info):
        info.wait_for_publish(self.sock.timeout)
        if not info.is_published():
            raise OSError("timed out waiting for PUBACK")

    def publish(self, topic, msg, retain=False, qos=0):
        self._wait(self._c.publish(topic.decode(), msg, qos=qos, retain=retain))

    def subscribe(self, topic, qos=0):
        done = threading.Event()
        self._c.on_subscribe = lambda *a: done.set()
        self._c.subscribe(topic.decode(), qos=qos)
        if not done.wait(self.sock.timeout or 10):
            raise OSError("timed out waiting for SUBACK")

    def check_msg(self):
        while not self._inbox.empty():
            self.cb(*self._inbox.get())

    def disconnect(self):
        self._c.disconnect()
        self._c.loop_stop()

    def _close(self):
        self._c.loop_stop()
        sock = self._c.socket()
        if sock:
            sock.close()
