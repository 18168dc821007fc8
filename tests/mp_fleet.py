# MicroPython source, run by tests/e2e_matrix.py (not a test module): many
# boards in one MicroPython process, each a real mss_node.app.Node with its
# own config.json/state.json folder, device id, clock and byte stream.
#
# argv[1]: a plan (JSON): {"period_s", "epoch_origin", "late_s", "go",
# "boards": [{"dir", "value", "skew", "phase", "seed", "unique_id"}]}; the "go" file,
# written once every fleet is up: {"t0", "t_end", "uart_outage": [t0, t1] or
# null}.  Board i wakes once a period of its own clock (as a board waking
# from deep sleep), at board time epoch_origin + e * period_s + phase, its
# clock running ``skew`` seconds behind the real one, and runs one tick of
# the firmware (draw if due, send the queue, poll).  In the ``uart_outage``
# window the serial link's write fails with OSError(EIO).  After t_end the
# boards draw nothing more (the sensor reads None) and for up to 3 more
# periods send what is still queued.  Lines for
# the harness start with "@":
#   @B i device_id             board i is up
#   @READY                     every board is up; waits for the "go" file (its t0)
#   @D i epoch hex t           board i drew report hex for its epoch (real time t)
#   @S i hex t / @F i hex t    a send of hex succeeded / failed
#   @E i error                 a tick raised (the firmware's own loop would log it)
#   @L i t                     board i slept through a wake: this process ran late, and the
#                              wake would have come within "late_s" of its epoch's end
#   @Q i queued                reports still queued at the end
#   @END
import hashlib
import json
import sys
import time

from mss_device.rng import ByteRng
from mss_node import settings
from mss_node.app import Node

plan = json.load(open(sys.argv[1]))
P = plan["period_s"]
ORIGIN = plan["epoch_origin"]
LATE = plan["late_s"]
UART = None  # the real-time window in which serial writes fail (from the "go" file)
DRAINING = False  # after t_end: no new reports (the sensor reads nothing), queues still leave


def say(*fields):
    sys.stdout.write("@" + " ".join([str(f) for f in fields]) + "\n")


def stream(seed):
    """read(n) of SHA-256(seed || counter) blocks: each board's reproducible byte source."""
    st = [0, b""]

    def read(n):
        buf = st[1]
        while len(buf) < n:
            buf += hashlib.sha256(seed + st[0].to_bytes(4, "big")).digest()
            st[0] += 1
        st[1] = buf[n:]
        return buf[:n]

    return read


def board(i, b):
    skew, value = b["skew"], b["value"]
    settings._unique_id = lambda: b["unique_id"]  # the unix port has no machine.unique_id
    node = Node(b["dir"] + "/config.json", b["dir"] + "/state.json", lambda: None if DRAINING else value,
                ByteRng(stream(b["seed"].encode())), lambda: time.time() - skew)
    report, send = node.reporter.report, node.link.send

    def logged_report(v, epoch, seq):
        out = report(v, epoch, seq)
        say("D", i, epoch, out.hex(), time.time())
        return out

    def logged_send(data):
        ok = send(data)
        say("S" if ok else "F", i, data.hex(), time.time())
        return ok

    node.reporter.report = logged_report
    node.link.send = logged_send
    if hasattr(node.link, "_write"):  # the serial link
        write = node.link._write

        def failing_write(text):
            if UART and UART[0] <= time.time() < UART[1]:
                raise OSError(5)  # EIO: the far end of the line is gone
            write(text)

        node.link._write = failing_write
    return node


# TCP_NODELAY on the MQTT boards' sockets: umqtt.simple writes a packet in
# several small writes, so Nagle and a delayed ACK hold each round trip ~40 ms
# on loopback; a real board pays that alone, but this process runs them all.
try:
    import umqtt.simple as _umqtt

    _real = _umqtt.socket

    class _Sockets:
        pass

    def _socket(*args):
        s = _real.socket(*args)
        s.setsockopt(6, 1, 1)  # IPPROTO_TCP, TCP_NODELAY
        return s

    _umqtt.socket = _Sockets()
    _umqtt.socket.socket = _socket
    _umqtt.socket.getaddrinfo = _real.getaddrinfo
except ImportError:  # no MQTT boards here
    pass

nodes = []
for i, b in enumerate(plan["boards"]):
    nodes.append(board(i, b))
    say("B", i, nodes[-1].s.device_id)
say("READY")
while True:
    try:
        go = json.load(open(plan["go"]))
        break
    except (OSError, ValueError):
        time.sleep(0.05)
t0, t_end, UART = go["t0"], go["t_end"], go["uart_outage"]

# wake i at real times ORIGIN + n P + offset_i (its board phase plus its skew)
order = sorted([((b["phase"] + b["skew"]) % P, i) for i, b in enumerate(plan["boards"])])
n = int((t0 - ORIGIN) // P)
done = False
while not done:
    if DRAINING and not any(node.state.queue for node in nodes):
        break
    for offset, i in order:
        t = ORIGIN + n * P + offset
        if t < t0:
            continue
        if t > t_end and not DRAINING:
            DRAINING = True  # up to 3 more periods for what is still queued
        if t > t_end + 3 * P:
            done = True
            break
        if DRAINING and not nodes[i].state.queue:
            continue
        wait = t - time.time()
        if wait > 0:
            time.sleep(wait)
        elif time.time() > ORIGIN + ((t - ORIGIN) // P + 1) * P - LATE:
            # so late that its report could leave in the next epoch: a lag of this
            # process (it runs every board), not the board's; the board sleeps on
            say("L", i, time.time())
            continue
        try:
            nodes[i].tick()
        except Exception as exc:
            say("E", i, repr(exc).replace(" ", "_"))
    n += 1
for i, node in enumerate(nodes):
    say("Q", i, len(node.state.queue))
say("END")
