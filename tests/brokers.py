"""A real Mosquitto on a free loopback port, started and stopped by the tests."""
import os
import shutil
import socket
import subprocess
import time

import pytest

from mss_aggregator.ports import free_port


class Mosquitto:
    def __init__(self, workdir, port=None, extra="", persistence=False, anonymous=True, conf=None):
        self.exe = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)
        if self.exe is None:
            if os.environ.get("CI"):
                pytest.fail("mosquitto is missing under CI (make test installs it as root)")
            pytest.skip("mosquitto not installed (apt-get install mosquitto)")
        self.workdir = workdir
        # A port we chose may be taken between free_port() and the broker's bind (parallel
        # test workers, other processes): then the first start moves to another one.
        self.movable = port is None and conf is None and "listener" not in extra
        self.port = port or free_port()
        self.extra = extra
        self.persistence = persistence
        self.anonymous = anonymous
        self.conf = conf  # a whole config (listening on ``port``) instead of the generated one
        self.proc = None

    def start(self):
        for attempt in range(5):
            if self._start_once():
                self.movable = False  # a restart must come back on the same port
                return self
            if not (self.movable and attempt < 4):
                raise RuntimeError(f"mosquitto did not start on port {self.port}: "
                                   f"{(self.workdir / 'mosquitto.log').read_bytes()[-1000:]!r}")
            self.port = free_port()

    def _start_once(self):
        """Start the broker; True once it listens, False if it exited (its port taken)."""
        conf = self.workdir / "mosquitto.conf"
        persist = (f"persistence true\npersistence_location {self.workdir}/\nautosave_interval 1\n"
                   if self.persistence else "persistence false\n")
        if os.geteuid() == 0:  # else mosquitto drops to user "mosquitto", who cannot write here
            persist += "user root\n"
        # Aggregators ack after a commit, so allow many messages in flight and queued.
        conf.write_text(self.conf or f"per_listener_settings false\nlistener {self.port} 127.0.0.1\n"
                        f"allow_anonymous {str(self.anonymous).lower()}\n{persist}max_inflight_messages 1000\n"
                        f"max_queued_messages 1000000\nlog_dest stdout\n{self.extra}")
        self.log = open(self.workdir / "mosquitto.log", "ab")
        self.proc = subprocess.Popen([self.exe, "-c", str(conf)], stdout=self.log, stderr=self.log)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.proc = None
                self.log.close()
                return False
            if not listens(self.proc.pid, self.port):  # a port someone else listens on is not ours
                time.sleep(0.05)
                continue
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return True
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("mosquitto did not start")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None


def mqtt_client(port, user, password, tls=None, protocol=None):
    """A paho client logged in as ``user`` on the loopback broker at ``port``, its loop
    running and every message kept in ``.received`` as (topic, payload); raises
    ConnectionRefusedError when the broker refuses the login (or gives no CONNACK in 5 s)."""
    import paho.mqtt.client as mqtt

    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=user, protocol=protocol or mqtt.MQTTv311)
    c.username_pw_set(user, password)
    c.received = []
    c.on_message = lambda cl, u, m: c.received.append((m.topic, bytes(m.payload)))
    if tls:
        c.tls_set_context(tls)
    connected = []
    c.on_connect = lambda cl, u, f, reason, p: connected.append(reason)
    c.connect("127.0.0.1", port)
    c.loop_start()
    deadline = time.time() + 5
    while not connected and time.time() < deadline:
        time.sleep(0.02)
    if not connected or connected[0].is_failure:
        c.loop_stop()
        raise ConnectionRefusedError(f"{user}: {connected or 'no CONNACK'}")
    return c


def listens(pid, port):
    """Whether process ``pid`` has a TCP socket listening on ``port`` (Linux's /proc;
    where that cannot be read, True: the caller's connect decides)."""
    tables = [t for t in ("/proc/net/tcp", "/proc/net/tcp6") if os.path.exists(t)]
    if not tables:
        return True
    inodes = set()
    for table in tables:
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                    inodes.add(f"socket:[{fields[9]}]")
    fds = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fds)
    except PermissionError:
        return True
    except FileNotFoundError:  # exited
        return False
    for fd in names:
        try:
            if os.readlink(os.path.join(fds, fd)) in inodes:
                return True
        except OSError:  # closed while we looked
            pass
    return False


def password_file(path, users):
    """A Mosquitto password file at ``path``: each user's password is ``pw-<user>``."""
    exe = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
    if not os.path.exists(exe):
        pytest.skip("mosquitto_passwd not installed")
    for i, user in enumerate(users):
        subprocess.run([exe, *(["-c"] if i == 0 else []), "-b", str(path), user, f"pw-{user}"], check=True)
    path.chmod(0o644)  # readable by user "mosquitto" when the broker drops root
    return path


@pytest.fixture
def mosquitto(tmp_path):
    broker = Mosquitto(tmp_path).start()
    yield broker
    broker.stop()


@pytest.fixture
def any_broker(tmp_path):
    """Mosquitto when installed; otherwise (never under CI) the embedded amqtt
    broker, for tests that need no persistence or redelivery."""
    try:
        broker = Mosquitto(tmp_path).start()
    except pytest.skip.Exception:
        from mss_aggregator.collect.embedded_broker import EmbeddedBroker

        broker = EmbeddedBroker().start()
    yield broker
    broker.stop()
