"""umqtt.simple's API subset on CPython, over paho-mqtt, so the unchanged
firmware (mss_node.mqtt_link) can run as an emulated device on a machine
without the MicroPython binary.  Only what the firmware uses is provided."""
import queue
import threading

import paho.mqtt.client as mqtt


class MQTTException(Exception):
    pass


class _Sock:
    """Stands in for the socket: the firmware sets its timeout and closes it."""

    def __init__(self, owner):
        self.owner, self.timeout = owner, None

    def settimeout(self, t):
        self.timeout = t

    def close(self):
        self.owner._close()


class MQTTClient:
    def __init__(self, client_id, server, port=0, user=None, password=None, keepalive=0, **_):
        self.client_id = client_id.decode() if isinstance(client_id, bytes) else client_id
        self.server, self.port = server, port or 1883
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
        if self.will:
            c.will_set(*self.will)
        c.on_message = lambda cl, u, m: self._inbox.put((m._topic, bytes(m.payload)))
        try:
            c.connect(self.server, self.port, keepalive=self.keepalive or 60)
        except OSError:
            raise
        except Exception as exc:
            raise OSError(str(exc))
        c.loop_start()
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
