"""The shuffler's forwarder: close epochs, make batches, publish them at QoS 1.

Epoch e of the campaign clock (period P, origin O) is *closed* once the
clock is past its end plus the grace time g: now >= O + (e + 1) P + g, so
the last closed epoch is floor((now - g - O) / P) - 1.  Every half second
the forwarder

1. publishes each batch of the queue not yet acknowledged (oldest first,
   one MQTT message each, QoS 1, never retained) and, on a PUBACK whose
   reason code is Success (0), deletes it from the queue
   (:meth:`ShuffleQueue.forwarded`); a batch left by a crash, or without a
   PUBACK after RESEND_S seconds, is published again with its batch id, which
   the aggregator drops if it has it;
2. makes one batch of every held report of the closed epochs, if there are
   at least ``min_batch`` of them (:meth:`ShuffleQueue.make_batch`); fewer
   stay held and join the next closed epoch's.  Reports that arrive for an
   epoch already closed (a board's queue after an outage) are held like the
   others and leave with the next batch.

It speaks MQTT 5 because MQTT 3.1.1 cannot say no: Mosquitto acknowledges a
publish its ACL denies with a plain PUBACK (3.1.1 has no reason code) and drops
it, so a 3.1.1 forwarder deleted a batch nobody received (issue 44).  Under
MQTT 5 the PUBACK carries a reason code (Mosquitto: 0x87 Not authorized;
0x10 No matching subscribers when no session subscribes to the topic, not even
the aggregator's persistent one: the broker delivered it to nobody).  A batch
whose PUBACK is anything but Success stays in the queue, is logged once per
batch and answer, counted (``forwards_refused``, on the live table) and
published again after a back-off of REFUSED_RETRY_S doubling up to RESEND_S.
"""
import secrets
import threading
import time

import paho.mqtt.client as mqtt

from mss_aggregator.collect.collectors import RECONNECT_DELAY, check_client_id, tls_context
from mss_aggregator.collect.link_health import Client, LinkHealth

TICK = 0.5  # seconds between rounds
RESEND_S = 30.0  # a batch published this long ago without its PUBACK is published again (same bytes)
REFUSED_RETRY_S = 1.0  # after a refusing PUBACK, first retry; doubling up to RESEND_S


def last_closed(ingest, grace):
    """The last closed epoch of the ingest's campaign clock now (see the module's docstring)."""
    return ingest.current_epoch(ingest.clock() - grace) - 1


class Forwarder(threading.Thread):
    """Batches out of ``queue`` (a reader connection of the
    :class:`~mss_aggregator.shuffle.queue.ShuffleQueue`) to ``topic`` on the
    broker ``endpoint`` (a :class:`~mss_aggregator.collect.links.MqttEndpoint`; no
    client id: a random one), made as ``batching`` says (a
    :class:`~mss_aggregator.shuffle.service.Batching`: ``min_batch``, ``grace``); ``ingest``
    gives the campaign clock and its window (seen rows of epochs before it are pruned).  An
    exception ends the thread and is told to ``failures``."""

    def __init__(self, queue, ingest, endpoint, topic, batching, log=print, failures=None):
        super().__init__(name="mss-forwarder", daemon=True)
        host, port, user, password, tls = endpoint.address()
        self.queue, self.ingest, self.topic, self.log, self.failures = queue, ingest, topic, log, failures
        self.min_batch, self.grace = batching.min_batch, batching.grace
        self.host, self.port = host, port
        self.health = LinkHealth(f"{host}:{port}", tls, log, *RECONNECT_DELAY)
        died = (lambda exc: failures.report(f"forwarder {host}:{port}", exc)) if failures else None
        client_id = check_client_id(endpoint.client_id or f"mss-shuf-fwd-{secrets.token_hex(8)}")
        c = Client(mqtt.CallbackAPIVersion.VERSION2, client_id, protocol=mqtt.MQTTv5, health=self.health, died=died)
        if user:
            c.username_pw_set(user, password)
        if tls:
            c.tls_set_context(tls_context(endpoint.tls))
        c.on_connect = self._on_connect
        c.on_publish = self._on_publish
        c.on_disconnect = lambda *a: None if self.stopping.is_set() else self.health.disconnected(a[3])
        c.reconnect_delay_set(*RECONNECT_DELAY)
        self.client = c
        self.inflight = {}  # batch id -> (its message id, when published), until its PUBACK
        self.pubacks = {}  # message id -> the PUBACK's reason code (set by paho's thread, read by round())
        self.pubacks_lock = threading.Lock()
        self.refused = {}  # batch id -> (the refusal last logged, next publish no earlier than, back-off)
        self.window_start = None  # the first epoch of the window when the seen rows were last pruned
        self.stopping = threading.Event()

    def _on_connect(self, client, userdata, flags, reason, properties):
        if reason.is_failure:
            self.health.failed("broker", f"connection refused: {reason}")
            return
        self.health.connected()
        self.log(f"forwarding batches to {self.topic} at {self.host}:{self.port}")

    def _on_publish(self, client, userdata, mid, reason_code, properties):
        with self.pubacks_lock:
            self.pubacks[mid] = reason_code

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
        with self.pubacks_lock:
            pubacks, self.pubacks = self.pubacks, {}
        now = time.monotonic()
        for batch_id in self.queue.unforwarded():
            mid, sent = self.inflight.get(batch_id, (None, None))
            if mid in pubacks:
                del self.inflight[batch_id]
                self.acknowledged(batch_id, pubacks.pop(mid), now)
            elif mid is not None and now - sent <= RESEND_S:
                continue  # waiting for its PUBACK
            elif now < self.refused.get(batch_id, (None, 0.0))[1]:
                continue  # refused: waiting out its back-off
            elif self.client.is_connected():  # else the queue keeps it on disk
                info = self.client.publish(self.topic, self.queue.batch(batch_id), qos=1)
                if info.rc in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):  # NO_CONN: paho sends it on reconnect
                    self.inflight[batch_id] = (info.mid, now)
                else:  # paho's own refusal (a packet too large for the broker)
                    self.refuse(batch_id, mqtt.error_string(info.rc), now)
        start = self.ingest.current_epoch() - self.ingest.past_epochs
        if start != self.window_start:  # once an epoch: the window moved
            self.queue.prune(start - 1)  # an epoch's margin: a batch the writer judged by the window before
            self.window_start = start
        closed = last_closed(self.ingest, self.grace)
        if self.queue.held_through(closed) >= max(1, self.min_batch):
            made = self.queue.make_batch(closed, self.min_batch)
            if made:
                self.log(f"batch {made[0].hex()}: {made[1]} reports of epochs up to {closed}")

    def acknowledged(self, batch_id, reason_code, now):
        """The PUBACK of ``batch_id``: Success deletes it, any other reason code keeps it."""
        if reason_code.value != 0:  # 0x10 No matching subscribers is no failure to MQTT, but nobody got it
            self.refuse(batch_id, f"{reason_code} (0x{reason_code.value:02x})", now)
            return
        self.queue.forwarded(batch_id)
        if self.refused.pop(batch_id, None):
            self.log(f"batch {batch_id.hex()}: forwarded to {self.topic}")

    def refuse(self, batch_id, why, now):
        """Keep ``batch_id``, count the refusal, log it unless this batch was last refused so,
        and wait a back-off (doubled each time) before publishing it again."""
        logged, _, delay = self.refused.get(batch_id, (None, None, REFUSED_RETRY_S / 2))
        delay = min(2 * delay, RESEND_S)
        self.refused[batch_id] = (why, now + delay, delay)
        self.queue.forward_refused()
        if why != logged:
            self.log(f"batch {batch_id.hex()}: {self.host}:{self.port} refused it on {self.topic}: {why}; "
                     f"kept in the queue and published again (every {RESEND_S:g} s at most)")

    def stop(self):
        self.stopping.set()
        self.join(10)
