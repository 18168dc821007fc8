"""A network server's uplinks POSTed to the aggregator's HTTP server: ChirpStack v4's HTTP
integration (either marshaler, JSON or protobuf) at ``/lorawan/chirpstack``, and The Things
Stack's webhooks at ``/lorawan/tts``.

These are the same events the network servers publish on their MQTT integrations, and they go
through the same ingest (:meth:`~.ingest.Ingest.receive_webhook`: every quarantine reason, the
allow-list, the extras cap, one report per device and epoch), through the service's one
:class:`~.collectors.Writer`.  What differs is the channel: nobody with write access to a broker
can forge them; each POST must carry ``Authorization: Bearer <token>`` (both network servers let
the operator set that header on the integration), compared in constant time.

* A POST without the header, or with another token, is refused (401) before its body is read,
  and counted (:meth:`WebhookReceiver.stats`: ``refused`` by ``no_token`` / ``bad_token``).
* ChirpStack appends ``?event=<type>`` to the URL: ``up`` is an uplink (also when the query
  names no event); every other event (join, status, ack, txack, log, location, integration) is
  answered 200 and counted as ``ignored``, never stored.  Every POST to ``/lorawan/tts`` is an
  uplink message (the webhook's other message types are left unticked).
* An uplink is answered only after the store's commit of the batch holding it (200,
  ``{"stored": true}``, a quarantined event too: it is stored, as a quarantine row); a commit
  that fails, or none within :data:`COMMIT_SECONDS`, is answered 503 so that the network server
  sends it again, and the store's de-duplication keeps a re-sent report counted once.
* A body longer than :data:`MAX_BODY` is refused (413) unread; a bigger event than 64 KiB is
  quarantined as on MQTT (``lorawan.MAX_DOCUMENT``).
"""
import hmac
import threading
import time
from urllib.parse import parse_qs

ROUTES = {"chirpstack": "/lorawan/chirpstack", "tts": "/lorawan/tts"}
MAX_BODY = 1 << 20  # bytes read from one POST; an uplink event is 1-2 KiB
COMMIT_SECONDS = 30.0  # the longest wait for the store's commit before answering 503
WAIT_STEP = 0.05  # seconds between looks at the writer while waiting for the commit
REFUSALS = ("no_token", "bad_token")
OUTCOMES = ("stored", "ignored", "not_stored")


class WebhookReceiver:
    """The POSTs of ``webhook`` (a :class:`~.links.Webhook`), handed to ``writer`` (the service's
    :class:`~.collectors.Writer`, whose ingest reads the network server's events).  The HTTP
    server calls :meth:`refusal` with the request's Authorization header, then :meth:`receive`."""

    def __init__(self, webhook, writer, commit_seconds=COMMIT_SECONDS):
        self.name = webhook.server.name
        self.path = ROUTES[self.name]
        self._token = webhook.token.encode()
        self.writer, self.commit_seconds = writer, commit_seconds
        self.source = f"webhook:{self.name}"
        self._lock = threading.Lock()
        self._refused = dict.fromkeys(REFUSALS, 0)
        self._posts = dict.fromkeys(OUTCOMES, 0)

    def refusal(self, authorization):
        """None if ``authorization`` (the header's value, or None) carries the token; else the
        reason it is refused (one of :data:`REFUSALS`), counted."""
        kind, _, given = (authorization or "").partition(" ")
        if kind.lower() != "bearer" or not given.strip():
            reason = "no_token"
        elif hmac.compare_digest(given.strip().encode("utf-8", "replace"), self._token):
            return None
        else:
            reason = "bad_token"
        with self._lock:
            self._refused[reason] += 1
        return reason

    def receive(self, query, body):
        """(HTTP status, JSON-able document) for an authenticated POST of ``body`` (bytes) with the
        URL's ``query`` (str): stored (after the commit), ignored (another ChirpStack event), or
        not stored (503: the network server retries)."""
        event = parse_qs(query).get("event", ["up"])[-1] if self.name == "chirpstack" else "up"
        if event != "up":
            self._count("ignored")
            return 200, {"ignored": f"event {event[:40]}: not an uplink"}
        done = threading.Event()
        self.writer.inbox.put((lambda: self.writer.ingest.receive_webhook(body, self.source), done.set))
        deadline = time.monotonic() + self.commit_seconds
        while not done.wait(WAIT_STEP):
            ended = self.writer.stopping.is_set() and not self.writer.is_alive()
            if (self.writer.error is not None or ended or time.monotonic() > deadline) and not done.is_set():
                self._count("not_stored")
                return 503, {"error": "not stored (the store failed or is stopping); send it again"}
        self._count("stored")
        return 200, {"stored": True}

    def _count(self, outcome):
        with self._lock:
            self._posts[outcome] += 1

    def stats(self):
        """{"network_server", "path", "refused": {reason: n}, "posts": {outcome: n}}: what
        ``/api/counters`` shows as ``webhook``."""
        with self._lock:
            return {"network_server": self.name, "path": self.path, "refused": dict(self._refused),
                    "posts": dict(self._posts)}
