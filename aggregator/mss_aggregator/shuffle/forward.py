"""The shuffler's forwarder: close epochs, make batches, publish them at QoS 1.

Epoch e of the campaign clock (period P, origin O) is *closed* once the
clock is past its end plus the grace time g: now >= O + (e + 1) P + g, so
the last closed epoch is floor((now - g - O) / P) - 1.  Every half second
the forwarder

1. publishes each batch of the queue not yet acknowledged (oldest first,
   one MQTT message each, QoS 1, never retained) and, on its PUBACK, deletes
   it from the queue (:meth:`ShuffleQueue.forwarded`); a batch left by a
   crash, or without a PUBACK after RESEND_S seconds, is published again with
   its batch id, which the aggregator drops if it has it;
2. makes one batch of every held report of the closed epochs, if there are
   at least ``min_batch`` of them (:meth:`ShuffleQueue.make_batch`); fewer
   stay held and join the next closed epoch's.  Reports that arrive for an
   epoch already closed (a board's queue after an outage) are held like the
   others and leave with the next batch.
"""
import secrets
import threading
import time

import paho.mqtt.client as mqtt

from mss_aggregator.collect.collectors import RECONNECT_DELAY, check_client_id, parse_broker, tls_context
from mss_aggregator.collect.link_health import Client, LinkHealth

TICK = 0.5  # seconds between rounds
RESEND_S = 30.0  # a batch published this long ago without its PUBACK is published again (same bytes)


def last_closed(ingest, grace):
    """The last closed epoch of the ingest's campaign clock now (see the module's docstring)."""
    return ingest.current_epoch(ingest.clock() - grace) - 1


class Forwarder(threading.Thread):
    """Batches out of ``queue`` (a reader connection of the
    :class:`~mss_aggregator.shuffle.queue.ShuffleQueue`) to ``topic`` on the
    broker ``url``; ``ingest`` gives the campaign clock and its window (seen
    rows of epochs before it are pruned).  An exception ends the thread and is
    told to ``failures``."""

    def __init__(self, queue, ingest, url, topic, min_batch, grace, tls_ca=None, client_id=None, log=print,
                 failures=None):
        super().__init__(name="mss-forwarder", daemon=True)
        host, port, user, password, tls = parse_broker(url)
        self.queue, self.ingest, self.topic, self.log, self.failures = queue, ingest, topic, log, failures
        self.min_batch, self.grace = min_batch, grace
        self.host, self.port = host, port
        tls = bool(tls or tls_ca)
        self.health = LinkHealth(f"{host}:{port}", tls, log, *RECONNECT_DELAY)
        died = (lambda exc: failures.report(f"forwarder {host}:{port}", exc)) if failures else None
        client_id = check_client_id(client_id or f"mss-shuf-fwd-{secrets.token_hex(8)}")
        c = Client(mqtt.CallbackAPIVersion.VERSION2, client_id, protocol=mqtt.MQTTv311, health=self.health, died=died)
        if user:
            c.username_pw_set(user, password)
        if tls:
            c.tls_set_context(tls_context(tls_ca))
        c.on_connect = self._on_connect
        c.on_disconnect = lambda *a: None if self.stopping.is_set() else self.health.disconnected(a[3])
        c.reconnect_delay_set(*RECONNECT_DELAY)
        self.client = c
        self.inflight = {}  # batch id -> (paho's MQTTMessageInfo, when published), until its PUBACK
        self.window_start = None  # the first epoch of the window when the seen rows were last pruned
        self.stopping = threading.Event()

    def _on_connect(self, client, userdata, flags, reason, properties):
        if reason.is_failure:
            self.health.failed("broker", f"connection refused: {reason}")
            return
        self.health.connected()
        self.log(f"forwarding batches to {self.topic} at {self.host}:{self.port}")

    def run(self):
        try:
            self.client.connect_async(self.host, self.port, keepalive=30)
            self.client.loop_start()
            while not self.stopping.wait(TICK):
                self.round()
        except Exception as exc:
            if self.failures is None:
                raise
            self.failures.report("forwarder", exc)
        finally:
            self.client.disconnect()
            self.client.loop_stop()

    def round(self):
        """One round: forward what is made, then make what is due (forwarded next round)."""
        for batch_id in self.queue.unforwarded():
            info, sent = self.inflight.get(batch_id, (None, None))
            if info is not None and info.is_published():  # PUBACK received
                self.queue.forwarded(batch_id)
                del self.inflight[batch_id]
            elif info is None or time.monotonic() - sent > RESEND_S:  # never sent, or lost with a connection
                if not self.client.is_connected():
                    break  # the queue keeps it on disk
                info = self.client.publish(self.topic, self.queue.batch(batch_id), qos=1)
                self.inflight[batch_id] = (info, time.monotonic())
        start = self.ingest.current_epoch() - self.ingest.past_epochs
        if start != self.window_start:  # once an epoch: the window moved
            self.queue.prune(start - 1)  # an epoch's margin: a batch the writer judged by the window before
            self.window_start = start
        closed = last_closed(self.ingest, self.grace)
        if self.queue.held_through(closed) >= max(1, self.min_batch):
            made = self.queue.make_batch(closed, self.min_batch)
            if made:
                self.log(f"batch {made[0].hex()}: {made[1]} reports of epochs up to {closed}")

    def stop(self):
        self.stopping.set()
        self.join(10)
