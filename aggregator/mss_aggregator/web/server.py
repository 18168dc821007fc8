"""The aggregator's web face: a live dashboard, a JSON API and Prometheus metrics.

Routes (described by ``/api/openapi.json``):

* ``/`` -- the dashboard (static HTML + a small script drawing plain SVG;
  nothing is fetched from elsewhere, field deployments are often offline);
* ``/api/estimates``, ``/api/counters``, ``/api/config`` -- JSON from the
  :class:`~mss_aggregator.web.live.LiveView` snapshot;
* ``/metrics`` -- Prometheus text format (prometheus-client);
* ``POST /lorawan/chirpstack`` or ``POST /lorawan/tts`` -- with a ``webhook``
  (:class:`~mss_aggregator.collect.webhook.WebhookReceiver`), a network server's
  uplinks, behind the webhook's own token (``Authorization: Bearer``), not the
  dashboard's, and not under the Host check (a browser never holds that token, so
  DNS rebinding gains nothing; a network server calls the name it was given).

Served by the standard library's threading HTTP server: a handful of routes
on loopback need no framework.  Loopback is the default; binding anywhere
else requires a token, accepted as ``Authorization: Bearer <token>`` or as
the password of HTTP basic auth (so a browser can log in).  A token is one or
more visible ASCII characters (no spaces): an empty or blank one is refused,
wherever it comes from.  Whatever the token, a request is served only under a
Host name the server answers to (no DNS rebinding): on loopback the loopback
names, elsewhere also IP addresses and this machine's name; ``hosts`` adds
names (e.g. the one a reverse proxy passes on).

A client that resets its connection (or breaks the pipe, or fails TLS) is
counted (``connection_resets`` in ``/api/counters``' ``http``,
``mss_http_connection_resets_total``), not logged; any other error in a
request is counted as ``errors`` and logged in one line.
"""
import base64
import hmac
import inspect
import ipaddress
import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

from mss_aggregator import jsonout
from mss_aggregator.collect.store import EXTRA_MAX
from mss_aggregator.collect.webhook import MAX_BODY
from mss_aggregator.remedies import with_remedy

STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
          "/app.js": ("app.js", "text/javascript; charset=utf-8"),
          "/style.css": ("style.css", "text/css; charset=utf-8"),
          "/api/openapi.json": ("openapi.json", "application/json")}


class HttpError(ValueError):
    pass


LOOPBACK_NAMES = ("localhost", "127.0.0.1")


def parse_bind(text):
    """'host:port' -> (host, port); a bad value raises HttpError naming it."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise HttpError(f"a bind address is HOST:PORT, e.g. 127.0.0.1:8080 (got {text!r})")
    if ":" in host or host.startswith("["):
        raise HttpError(f"{text}: IPv6 addresses are not supported; use 127.0.0.1 or an IPv4 address")
    return host or "127.0.0.1", int(port)


def is_loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() == "localhost"  # host names are case-insensitive


def check_token(token, source=None):
    """``token`` if it is one (None: no token); HttpError (naming ``source``, where it came from,
    when given) if it is empty, blank or holds anything but visible ASCII (it travels in an HTTP
    header)."""
    if token is None:
        return None
    where = f"{source}: " if source else ""
    if not token.strip():
        raise HttpError(f"{where}the token is empty or blank; give one, e.g. "
                        f"python -c 'import secrets; print(secrets.token_urlsafe(24))'")
    if not all("!" <= c <= "~" for c in token):
        raise HttpError(f"{where}a token is visible ASCII characters, without spaces")
    return token


def check_bind(bind, token):
    """(host, port) of the bind address ``bind`` (HOST:PORT), refusing a bad token anywhere and
    an address beyond loopback without one (HttpError; the latter's ``remedy`` says what to do)."""
    host, port = parse_bind(bind)
    check_token(token)
    if not is_loopback(host) and token is None:
        raise with_remedy(HttpError, f"{bind} is reachable from other hosts", "token-needed")
    return host, port


def host_names(bind_host, hosts=()):
    """The test of a request's Host header (name, no port) for a server bound to
    ``bind_host``: it (e.g. 127.0.0.2), loopback names and ``hosts`` always; off loopback also IP
    addresses, the bind name and this machine's name.  Never the token's business:
    a page on another name (DNS rebinding) is refused either way."""
    names = {n.lower().rstrip(".") for n in (*LOOPBACK_NAMES, bind_host, *hosts)}  # its own address too
    anywhere = not is_loopback(bind_host)
    if anywhere:
        names |= {bind_host.lower(), socket.gethostname().lower()}

    def allowed(host):
        host = host.lower().rstrip(".")
        if host in names:
            return True
        if anywhere:
            try:
                ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
                return True
            except ValueError:
                pass
        return False
    return allowed


# the store's counters (Store.counters) that are no outcome of a received report: their sum, received,
# the capped rows, and a shuffled store's batches (BATCH_OUTCOMES: store counter -> outcome)
BATCH_OUTCOMES = {"batches": "stored", "duplicate_batches": "duplicate"}
NO_OUTCOMES = ("received", "rejected", "quarantine_dropped", "extra_dropped", *BATCH_OUTCOMES)


class MetricsCollector:
    """Exports the store's counters (as counters: they only grow) and the
    latest decode, read from the snapshot at scrape time."""

    def __init__(self, live):
        self.live = live

    def collect(self):
        snap = self.live.counters()
        cfg = self.live.cfg
        info = InfoMetricFamily("mss_config", "The campaign's protocol configuration")
        info.add_metric([], {"config_id": cfg.config_id_hex, "k": str(cfg.k), "epsilon": repr(cfg.epsilon),
                             "eps_effective": repr(cfg.eps_effective),
                             "protocol": cfg.name,
                             "moduli": ",".join(map(str, getattr(cfg, "moduli", ())))})
        yield info
        yield CounterMetricFamily("mss_reports_received", "Reports received", value=snap["counters"]["received"])
        reports = CounterMetricFamily("mss_reports", "Reports by outcome (they sum to received)",
                                      labels=["outcome"])
        for name, value in snap["counters"].items():
            # rejected is the sum of the rejected_<reason> series; the *_dropped counters are no outcomes,
            # and a shuffler's batches are no reports (they have their own counter, below)
            if name not in NO_OUTCOMES:
                reports.add_metric([name], value)
        yield reports
        if snap["counters"].keys() & BATCH_OUTCOMES.keys():  # a shuffled store's (present once non-zero)
            batches = CounterMetricFamily("mss_shuffled_batches", "A shuffler's batches by outcome: stored, "
                                          "or a re-published one counted as duplicate (mss aggregate --shuffled)",
                                          labels=["outcome"])
            for name, outcome in BATCH_OUTCOMES.items():
                batches.add_metric([outcome], snap["counters"].get(name, 0))
            yield batches
        yield CounterMetricFamily("mss_quarantine_dropped", "Rejected reports whose quarantine row the "
                                  "cap left out (aggregator.quarantine_max_rows)",
                                  value=snap["counters"].get("quarantine_dropped", 0))
        yield CounterMetricFamily("mss_extra_dropped", "Extra reports (a device's further ones in an epoch) "
                                  f"counted but not stored past the cap of {EXTRA_MAX} a device and epoch",
                                  value=snap["counters"].get("extra_dropped", 0))
        yield CounterMetricFamily("mss_state_resets", "Times a device's full-frame sequence number went back "
                                  "(its state file started again: deleted, corrupt, a reflash)",
                                  value=snap["state_resets"]["events"])
        yield GaugeMetricFamily("mss_state_reset_devices", "Devices whose sequence number went back at least once",
                                value=snap["state_resets"]["devices"])
        est = self.live.estimates(top=1)  # only its n, epoch and decode time
        yield GaugeMetricFamily("mss_estimate_reports", "Reports behind the current estimates", value=est["n"])
        if est["epoch"] is not None:
            yield GaugeMetricFamily("mss_estimate_epoch", "The epoch the current estimates decode",
                                    value=est["epoch"])
        yield GaugeMetricFamily("mss_decode_seconds", "Seconds of the last decode", value=est["decode_seconds"])
        epochs = snap["devices_per_epoch"]
        yield GaugeMetricFamily("mss_devices_last_epoch", "Devices with a report in the latest epoch",
                                value=epochs[-1]["devices"] if epochs else 0)
        yield GaugeMetricFamily("mss_snapshot_timestamp_seconds", "When the snapshot was taken",
                                value=snap["updated"])
        skipped = CounterMetricFamily("mss_skipped_epochs", "Epochs boards skipped (device.budget spent and no "
                                      "memo of their value), each device and epoch once, by link", labels=["link"])
        for link, n in snap["skipped_epochs"].items():
            skipped.add_metric([link], n)
        yield skipped
        yield from broker_metrics(snap["brokers"])


class HttpMetrics:
    """The HTTP server's own counters (:meth:`WebServer.stats`), and its webhook's (None: none)."""

    def __init__(self, stats, webhook=None):
        self.stats, self.webhook = stats, webhook

    def collect(self):
        stats = self.stats()
        yield CounterMetricFamily("mss_http_connection_resets", "HTTP connections the client reset, "
                                  "broke or failed TLS on", value=stats["connection_resets"])
        yield CounterMetricFamily("mss_http_errors", "HTTP requests that failed otherwise (logged)",
                                  value=stats["errors"])
        if self.webhook is not None:
            hook = self.webhook.stats()
            refused = CounterMetricFamily("mss_webhook_refused", "Network-server webhook POSTs refused (401): "
                                          "no bearer token, or another one", labels=["reason"])
            for reason, n in hook["refused"].items():
                refused.add_metric([reason], n)
            posts = CounterMetricFamily("mss_webhook_posts", "Authenticated webhook POSTs by outcome: stored "
                                        "(answered after the commit), ignored (not an uplink), not_stored (503)",
                                        labels=["outcome"])
            for outcome, n in hook["posts"].items():
                posts.add_metric([outcome], n)
            yield from (refused, posts)


def broker_metrics(brokers):
    """Per broker: connected (0/1), failed connection attempts by cause, when the last one failed."""
    up = GaugeMetricFamily("mss_broker_connected", "1 while connected to the broker", labels=["broker"])
    failures = CounterMetricFamily("mss_broker_connect_failures", "Failed connection attempts by cause",
                                   labels=["broker", "cause"])
    last = GaugeMetricFamily("mss_broker_last_failure_timestamp_seconds", "When the last attempt failed",
                             labels=["broker"])
    for b in brokers:
        up.add_metric([b["broker"]], int(b["connected"]))
        for cause, n in b["failures"].items():
            failures.add_metric([b["broker"], cause], n)
        if b["last_error_at"] is not None:
            last.add_metric([b["broker"]], b["last_error_at"])
    yield from (up, failures, last)


def query_names(method):
    """The query parameters a route takes: the keyword parameters of the LiveView method behind it."""
    return [name for name, p in inspect.signature(method).parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD]


def webhook_answer(webhook, request):
    """(status, JSON-able document, extra headers) of a POST ``request`` (the handler: its path,
    headers and body) to ``webhook`` (a :class:`~mss_aggregator.collect.webhook.WebhookReceiver`,
    or None): 404 elsewhere, 401 without its token, 411/413 without a Content-Length or over
    MAX_BODY (these four with the body unread, the connection closed), else its answer."""
    path, _, query = request.path.partition("?")
    if webhook is None or path != webhook.path:
        request.close_connection = True
        return 404, {"error": f"no such resource {path}"}, ()
    refused = webhook.refusal(request.headers.get("Authorization"))
    if refused is not None:
        request.close_connection = True
        return 401, {"error": f"unauthorised ({refused})"}, [("WWW-Authenticate", 'Bearer realm="mss-iot"')]
    length = request.headers.get("Content-Length", "")
    if not length.isdigit() or int(length) > MAX_BODY:
        request.close_connection = True
        return 411 if not length.isdigit() else 413, {"error": f"give a Content-Length of at most {MAX_BODY} "
                                                               "bytes"}, ()
    code, doc = webhook.receive(query, request.rfile.read(int(length)))
    return code, doc, [("Retry-After", "10")] if code == 503 else ()


def make_handler(live, token, registry, host_ok, stats, webhook=None):
    more = {} if webhook is None else {"webhook": webhook.stats}
    api = {"/api/estimates": (live.estimates, query_names(live.estimates)),
           "/api/config": (live.config_doc, query_names(live.config_doc)),
           "/api/counters": (lambda **query: dict(live.counters(**query), http=stats(),
                                                  **{k: v() for k, v in more.items()}),
                             query_names(live.counters))}

    class Handler(BaseHTTPRequestHandler):
        server_version = "mss-aggregate"
        timeout = 30  # an idle client does not hold a thread for ever

        def _host_ok(self):
            """Only the names the server answers to (:func:`host_names`), token or not."""
            host = self.headers.get("Host", "")
            if host.startswith("["):  # [v6] or [v6]:port
                return host_ok(host.partition("]")[0] + "]")
            return host_ok(host.rpartition(":")[0] if ":" in host else host)

        def log_message(self, fmt, *args):  # quiet: the operator's console shows the counters
            pass

        def _authorised(self):
            if token is None:
                return True
            auth = self.headers.get("Authorization", "")
            kind, _, value = auth.partition(" ")
            if kind == "Bearer":
                given = value
            elif kind == "Basic":
                try:
                    given = base64.b64decode(value).decode().partition(":")[2]
                except (ValueError, UnicodeDecodeError):
                    given = ""
            else:
                given = ""
            return hmac.compare_digest(given.encode(), token.encode())

        def _send(self, code, body, ctype, extra=()):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for k, v in extra:
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self):
            self.do_GET()

        def do_POST(self):
            """A network server's webhook (its own token); nothing else is POSTed."""
            code, doc, extra = webhook_answer(webhook, self)
            self._send(code, jsonout.dumps(doc).encode(), "application/json", extra)

        def do_GET(self):
            path, _, query = self.path.partition("?")
            if not self._host_ok():
                self._send(403, b'{"error": "use http://127.0.0.1 or http://localhost"}', "application/json")
            elif not self._authorised():
                self._send(401, b'{"error": "unauthorised"}', "application/json",
                           [("WWW-Authenticate", 'Basic realm="mss-iot"')])
            elif path in api:
                call, names = api[path]
                params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
                unknown = next((name for name in params if name not in names), None)
                try:
                    if unknown is not None:  # by its name, never as the Python call it would make
                        raise ValueError(f"unknown parameter {unknown[:40]!r}; {path} takes "
                                         + (", ".join(names) if names else "none"))
                    doc = call(**params)
                except ValueError as exc:  # the message names the parameter (LiveView's checks)
                    self._send(400, jsonout.dumps({"error": f"bad query: {exc}"}).encode(), "application/json")
                    return
                self._send(200, jsonout.dumps(doc).encode(), "application/json")
            elif path == "/metrics":
                self._send(200, generate_latest(registry), "text/plain; version=0.0.4; charset=utf-8")
            elif path in STATIC:
                name, ctype = STATIC[path]
                self._send(200, resources.files("mss_aggregator.web").joinpath("static", name).read_bytes(), ctype)
            else:
                self._send(404, jsonout.dumps({"error": f"no such resource {path}"}).encode(),
                           "application/json")

    return Handler


# a client that went away mid-request: counted, not logged
CLIENT_GONE = (ConnectionError, ssl.SSLError, TimeoutError)  # ConnectionError: reset, aborted, broken pipe


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64  # socketserver's 5 turns a browser's parallel requests into SYN retries

    def __init__(self, address, handler, log):
        self.log, self.lock = log, threading.Lock()
        self.counts = {"connection_resets": 0, "errors": 0}
        super().__init__(address, handler)

    def handle_error(self, request, client_address):
        """Called in the handler's thread with the exception being handled (instead of
        socketserver's traceback on stderr)."""
        exc = sys.exc_info()[1]
        kind = "connection_resets" if isinstance(exc, CLIENT_GONE) else "errors"
        with self.lock:
            self.counts[kind] += 1
        if kind == "errors":
            who = ":".join(map(str, client_address[:2])) if client_address else "?"
            self.log(f"http: {who}: {type(exc).__name__}: {exc}")


def _stderr(msg):
    print(msg, file=sys.stderr, flush=True)


class WebServer:
    """The dashboard/API server in a background thread.  ``hosts``: more Host names to
    answer to (:func:`host_names`); ``log``: where a failed request's one line goes;
    ``on_death(thread, exc)``: told if the serving thread ends on an exception; ``webhook``: a
    :class:`~mss_aggregator.collect.webhook.WebhookReceiver` whose POSTs it takes (None: none)."""

    def __init__(self, live, bind, token=None, hosts=(), log=_stderr, on_death=None, webhook=None):
        host, port = check_bind(bind, token)
        self.on_death = on_death
        registry = CollectorRegistry()
        registry.register(MetricsCollector(live))
        registry.register(HttpMetrics(self.stats, webhook))
        handler = make_handler(live=live, token=token, registry=registry, host_ok=host_names(host, hosts),
                               stats=self.stats, webhook=webhook)
        try:
            self.httpd = Server((host, port), handler, log)
        except OSError as exc:  # the port is taken, the address is not ours, ...
            raise HttpError(f"{bind}: {exc.strerror or exc}") from None
        self.port = self.httpd.server_address[1]
        self.url = f"http://{host}:{self.port}/"
        self.thread = threading.Thread(target=self._serve, name="mss-http", daemon=True)

    def _serve(self):
        try:
            self.httpd.serve_forever()
        except Exception as exc:
            if self.on_death is None:
                raise
            self.on_death("http server", exc)

    def stats(self):
        """{"connection_resets", "errors"}: requests that ended in an exception, by kind."""
        with self.httpd.lock:
            return dict(self.httpd.counts)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        if self.thread.is_alive():  # shutdown() waits for serve_forever, which a dead thread never ends
            self.httpd.shutdown()
        self.httpd.server_close()
