"""``mss aggregate``: collect reports from MQTT, a LoRaWAN network server and
serial ports into a store.  Its link options' checks (``broker_spec``, ``lorawan_spec``,
``link_specs``, ...) are also those of the other commands with links (shuffle, fleet,
demo, switch-config), which import them from here."""
import time
from contextlib import contextmanager
from dataclasses import dataclass

import click
from click.core import ParameterSource

from mss_cli.common import (TOPIC_LEVEL, FloatRange, broker_password_option, broker_url, checked, console,
                            counters_line, counters_table, fail, flag_message, run_until_stopped, stop_signals,
                            tls_options, topic_level)
from rich.markup import escape

from mss_node.settings import DEVICE_DEFAULTS
from mss_protocol.budget import describe
from mss_protocol.config_file import ConfigError
from mss_protocol.sealed import load_key


def check_id(value, flag):
    from mss_aggregator.collect.collectors import check_client_id

    return check_client_id(value, flag)


def http_spec(ctx, param, value):
    """--http's HOST:PORT, checked with its token later; an empty value is refused, never taken
    for no --http."""
    if value is not None and not value.strip():
        raise click.BadParameter("empty: give HOST:PORT, e.g. 127.0.0.1:8080")
    return value


def broker_spec(value, flag):
    from mss_aggregator.collect.collectors import parse_broker

    parse_broker(value)
    return value


def serial_spec(value, flag):
    from mss_aggregator.collect.collectors import parse_serial

    parse_serial(value, flag)
    return value


def lorawan_spec(ctx, param, value):
    """--lorawan's network-server application (None if not given; an empty value, e.g. an unset
    shell variable, is refused as any bad one, never taken for no --lorawan)."""
    from mss_aggregator.collect.lorawan import parse_spec

    try:
        return None if value is None else parse_spec(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc))


LORAWAN_SPEC = "chirpstack:APP|tts:APP@TENANT"


def allow_list_file(ctx, param, value):
    """--allow-list's :class:`~mss_aggregator.collect.allow_list.AllowList` (None without it); a
    file that is not one is a data error naming the flag, the file and the line."""
    from mss_aggregator.collect.allow_list import AllowList, AllowListError

    try:
        return None if value is None else AllowList.read(value)
    except AllowListError as exc:
        fail(f"--allow-list {exc}")


allow_list_option = click.option(
    "--allow-list", "allow_list", type=click.Path(dir_okay=False), metavar="FILE", callback=allow_list_file,
    help="Take reports of these device ids only (the fleet CSV mss provision reads, or one id a line; a "
         "LoRaWAN board's id is its DevEUI); any other id's report is quarantined as not_allowed and "
         "counted as rejected_not_allowed.")


@click.command("aggregate")
@click.option("--broker", callback=checked(broker_spec),
              help="mqtt://[user:pass@]host:port (mqtts:// for TLS); with --lorawan the network server's "
                   "broker (TTS: user APP@TENANT, password an API key). A bad URL is a usage error.")
@broker_password_option
@click.option("--lorawan", metavar=LORAWAN_SPEC, callback=lorawan_spec,
              help="Reports are the uplinks of this ChirpStack v4 or The Things Stack v3 application "
                   "(device id: the DevEUI; FPort: the config's device.lorawan.fport, default 1).")
@click.option("--lorawan-webhook", type=click.Choice(["chirpstack", "tts"]),
              help="Reports are the uplinks a network server POSTs to the --http server (no --broker): "
                   "ChirpStack v4's HTTP integration (JSON or Protobuf) to /lorawan/chirpstack, The Things "
                   "Stack's webhook (uplink messages) to /lorawan/tts, each with the header 'Authorization: "
                   "Bearer <token>' (--webhook-token-file); others are refused (401) and counted.")
@click.option("--webhook-token-file", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="With --lorawan-webhook: the token the network server sends (visible ASCII, no spaces: "
                   "openssl rand -hex 32), never in a URL.")
@click.option("--campaign", callback=checked(topic_level),
              help=f"The campaign: its topics are mss/v1/<campaign>/...; {TOPIC_LEVEL}. The store records "
                   "it and refuses another; default: the store's, for a new store 'default'.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Campaign config (mss plan --device-config); its device.period_s (required: the campaign "
                   "clock) bounds the epochs accepted and dates the default estimate, its aggregator "
                   "section sets accept_past_epochs (default device.queue_max, "
                   f"{DEVICE_DEFAULTS['queue_max']}) and quarantine_max_rows (default 10000).")
@click.option("--store", "store_path", required=True, metavar="PATH|URL",
              help="The campaign's store: an SQLite file (one worker) or "
                   "postgresql://user[:password]@host[:port]/db (shared by several workers).")
@tls_options("the --broker connection")
@click.option("--share-group", callback=checked(topic_level),
              help=f"Share the stream with other workers ($share/<group>/...); {TOPIC_LEVEL}.")
@click.option("--client-id", callback=checked(check_id),
              help="MQTT client id; keep it stable (default mss-agg-<campaign>-<random "
                   "hex>, generated once and kept in the store).")
@click.option("--serial", "serial_ports", multiple=True, metavar="PORT[,BAUD]",
              callback=checked(serial_spec),
              help="Serial port with framed reports (BAUD 1 to 2147483647, default 115200); "
                   "repeat for several.")
@click.option("--fleet-key-file", type=click.Path(dir_okay=False),
              help="Sign the published config with this fleet key (hex; the key mss deploy "
                   "gave the boards). Default: $MSS_FLEET_KEY; without either the config is "
                   "published unsigned and boards ignore it.")
@click.option("--shuffled", is_flag=True,
              help="Take a shuffler's batches only (mss shuffle): subscribe to mss/v1/<campaign>/shuffled alone, "
                   "refuse every batch the shuffle key does not authenticate, never see a device id; no "
                   "--serial or --lorawan. The store records it and refuses device reports.")
@click.option("--shuffle-key-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="With --shuffled: the key shared with the shuffler (hex, at least 32 bytes: openssl rand "
                   "-hex 32). Default: $MSS_SHUFFLE_KEY.")
@allow_list_option
@click.option("--quiet", is_flag=True, help="No live counters.")
@click.option("-v", "--verbose", is_flag=True,
              help="Print a line per message once stored, on stdout: its topic (or serial port), then "
                   "accepted/duplicate/extra with device, epoch, seq and length, or quarantined with "
                   "the reason (never a report's body).")
@click.option("--warn-idle", type=FloatRange(0, 525600),  # a year of minutes
              default=10.0, show_default=True, metavar="MIN",
              help="Warn once, naming the campaign and the topic subscribed, if no report has come "
                   "MIN minutes after the start (0: never).")
@click.option("--http", "http_bind", metavar="HOST:PORT", callback=http_spec,
              help="Serve the live dashboard, JSON API and /metrics here (e.g. 127.0.0.1:8080); with "
                   "--lorawan-webhook also the network server's POSTs.")
@click.option("--http-token", envvar="MSS_HTTP_TOKEN",
              help="Token the dashboard/API require (Bearer, or basic-auth password; visible ASCII, "
                   "no spaces); needed when --http is not on loopback. Default: $MSS_HTTP_TOKEN "
                   "(an argument is readable by every local user: prefer the variable or the file).")
@click.option("--http-token-file", type=click.Path(exists=True, dir_okay=False), metavar="PATH",
              help="Read the --http-token from this file instead.")
@click.option("--http-host", "http_hosts", multiple=True, metavar="NAME",
              help="Another name the dashboard is reached by (its Host header, e.g. through a "
                   "reverse proxy); repeat for several. Always served: loopback names, and off "
                   "loopback IP addresses and this machine's name.")
@click.option("--refresh", type=FloatRange(0.2, 3600), default=2.0, show_default=True,
              help="Seconds between dashboard decodes.")
def aggregate_cmd(broker, lorawan, campaign, config_path, store_path, tls_ca, tls_cert, tls_key, share_group,
                  client_id, serial_ports, fleet_key_file, quiet, verbose, warn_idle, http_bind, http_token,
                  http_token_file, http_hosts, refresh, broker_password_file, shuffled, shuffle_key_file, allow_list,
                  lorawan_webhook, webhook_token_file):
    """Collect reports from MQTT (or a LoRaWAN network server) and/or serial ports until SIGINT/SIGTERM.

    A thread that dies (a collector, the writer, the HTTP server, the dashboard's refresh) stops the
    command with exit 3
    and "error: <thread>: <cause>"."""
    from mss_aggregator.campaign import NoClock
    from mss_aggregator.collect.collectors import ThreadDied
    from mss_aggregator.collect.service import Aggregator
    from mss_aggregator.collect.store import ABANDONED, StoreError
    from mss_aggregator.credentials import SecretError
    from mss_aggregator.web.server import HttpError, check_bind, check_token

    broker = broker_url(broker, broker_password_file)
    env = click.get_current_context().get_parameter_source("http_token") == ParameterSource.ENVIRONMENT
    try:
        http_token, source = _http_token(http_token, http_token_file, "$MSS_HTTP_TOKEN" if env else "--http-token")
        if http_bind or source != "$MSS_HTTP_TOKEN":  # a blank token is refused on loopback too
            check_token(http_token, source)
    except (SecretError, HttpError) as exc:
        raise click.UsageError(str(exc))
    if http_bind:
        try:
            check_bind(http_bind, http_token)  # before connecting anything
        except HttpError as exc:
            raise click.BadParameter(flag_message(exc), param_hint="--http")
    if shuffle_key_file and not shuffled:
        raise click.UsageError("--shuffle-key-file is for --shuffled, the shuffler's batches")
    lorawan = webhook_link(lorawan_webhook, webhook_token_file, lorawan, http_bind)
    links = link_specs(broker=broker, tls=(tls_ca, tls_cert, tls_key), client_id=client_id,
                       share_group=share_group, lorawan=lorawan, serial=serial_ports, shuffled=shuffled,
                       allowed=allow_list)
    shuffle_key = _shuffle_key(shuffled, shuffle_key_file, fleet_key_file)

    def log(msg):  # one line per event, as written: error texts hold [brackets], logs are grepped
        console.print(msg, highlight=False, markup=False, soft_wrap=True)

    campaign_file = read_campaign(config_path)
    try:
        with tls_flags():
            agg = Aggregator(campaign_file, store_path, links, name=campaign, fleet_key=load_key(fleet_key_file),
                             shuffle_key=shuffle_key, log=log, verbose=click.echo if verbose else None)
    except NoClock as exc:
        fail(f"{exc}: {PLAN_WRITES_CLOCK}")
    except (ConfigError, StoreError, ValueError) as exc:
        fail(flag_message(exc))
    line, weak = describe(agg.cfg, agg.device)
    console.print(("[red]warning:[/red] " if weak else "") + escape(line), highlight=False, soft_wrap=True)
    try:
        serve(agg, Served(quiet=quiet, http=http_bind, token=http_token, refresh=refresh, hosts=http_hosts,
                          warn_idle=warn_idle),
              stopped=lambda counts: log(f"stopped; counters: {counters_line(counts)}"))
    except (HttpError, StoreError, ThreadDied) as exc:  # the --http port is taken; the store failed a write
        fail(f"--http {exc}" if isinstance(exc, HttpError) else str(exc), now=bool(ABANDONED))


# The library's link problems (mss_aggregator.collect.links.PROBLEMS) as this command line's flags say them
LINK_FLAGS = {
    "no-link": "give --broker and/or --serial",
    "lorawan-without-broker": "--lorawan needs --broker, the network server's MQTT broker",
    "tls-key-without-cert": "--tls-key needs --tls-cert, the certificate it goes with",
    "tls-without-broker": "--tls-ca and --tls-cert are for the --broker connection",
    "shared-without-broker": "--share-group is for the --broker connection",
    "shared-without-client-id": "--share-group needs a --client-id per worker (workers sharing one id would "
                                "disconnect each other)",
    "shuffled-device-link": "--shuffled takes the shuffler's batches only: --serial and --lorawan are device links, "
                            "whose reports name their device (give them to mss shuffle)",
    "shuffled-without-broker": "--shuffled needs --broker, the broker the shuffler publishes its batches to",
    "forward-without-broker": "--forward-broker is needed without --broker: where the batches go",
    "webhook-with-broker": "--lorawan-webhook takes the uplinks over HTTP: drop --broker (the network server's MQTT "
                           "integration is --lorawan with --broker, the other way)",
    "webhook-token": "--webhook-token-file: the token is visible ASCII characters, without spaces",
    "allowed-shuffled": "--allow-list is for device reports: a shuffler's batches name no device (give "
                        "--allow-list to mss shuffle)",
}


def link_specs(**given):
    """The :class:`~mss_aggregator.collect.links.Links` of the link options (``Links.of``'s
    arguments); a combination that cannot work is a usage error in this command line's flags."""
    from mss_aggregator.collect.links import LinkError, Links

    try:
        return Links.of(**given)
    except LinkError as exc:
        raise click.UsageError(LINK_FLAGS[exc.problem])


def webhook_link(kind, token_file, lorawan, http_bind):
    """--lorawan-webhook's :class:`~mss_aggregator.collect.links.Webhook` (``lorawan``, --lorawan's
    value, without it), or a usage error: no token file, no --http, --lorawan too."""
    from mss_aggregator.collect.links import LinkError, Webhook
    from mss_aggregator.collect.lorawan import webhook_server
    from mss_aggregator.credentials import SecretError, read_secret

    if kind is None:
        if token_file is not None:
            raise click.UsageError("--webhook-token-file is for --lorawan-webhook")
        return lorawan
    if lorawan is not None:
        raise click.UsageError("--lorawan-webhook and --lorawan are two ways to take one network server's "
                               "uplinks: give one")
    if http_bind is None:
        raise click.UsageError("--lorawan-webhook needs --http, the server the network server POSTs to")
    if token_file is None:
        raise click.UsageError("--lorawan-webhook needs --webhook-token-file, the token the network server sends")
    try:
        return Webhook(webhook_server(kind), read_secret(token_file, "--webhook-token-file"))
    except SecretError as exc:
        raise click.UsageError(str(exc))
    except LinkError as exc:
        raise click.UsageError(LINK_FLAGS[exc.problem])


@contextmanager
def tls_flags():
    """A TLS file that is not one (``collectors.TlsFileError``) as a data error naming its flag."""
    from mss_aggregator.collect.collectors import TlsFileError

    try:
        yield
    except TlsFileError as exc:
        if exc.part == "ca":
            fail(f"--tls-ca {exc.files[0]}: not a CA certificate file ({exc.why})")
        cert, key = exc.files
        fail(f"--tls-cert {cert}" + (f" / --tls-key {key}" if key else "")
             + f": not a certificate and its key ({exc.why})")


def read_campaign(path):
    """The :class:`~mss_aggregator.campaign.Campaign` of ``--config``; a data error if it is bad."""
    from mss_iot import Campaign

    try:
        return Campaign.read(path)
    except ConfigError as exc:
        fail(str(exc))


PLAN_WRITES_CLOCK = "mss plan ... --period S --device-config FILE writes it with the plan"  # after a NoClock


def _shuffle_key(shuffled, key_file, fleet_key_file):
    """The shuffle key of ``--shuffled`` (None without it), or a usage error: a config to publish
    with --shuffled, no key or a bad one."""
    from mss_protocol.shuffled_batch import BatchError, load_key

    if not shuffled:
        return None
    if fleet_key_file:
        raise click.UsageError("--shuffled publishes no config (the devices are the shuffler's side, not this "
                               "broker's): drop --fleet-key-file")
    try:
        return load_key(key_file)
    except BatchError as exc:
        raise click.UsageError(str(exc).removeprefix("key: "))


@dataclass(frozen=True)
class Served:
    """How ``mss aggregate`` runs: ``quiet`` (no live counters), ``http`` ("host:port": the
    dashboard, JSON API and /metrics, with ``token`` and ``hosts``, more names its Host header
    may give), the dashboard's ``refresh`` (s), ``warn_idle`` (minutes, None or 0: never)."""

    quiet: bool = False
    http: str | None = None
    token: str | None = None
    refresh: float = 2.0
    hosts: tuple = ()
    warn_idle: float | None = None


def _http_token(token, token_file=None, token_source="--http-token"):
    """(token, where it came from) of ``--http-token-file``, else ``token`` (the flag or
    ``$MSS_HTTP_TOKEN``, named by ``token_source``); (None, None) without either."""
    from mss_aggregator.credentials import SecretError, read_secret

    if token_file is not None:
        if token is not None and token_source == "--http-token":
            raise SecretError(f"--http-token-file {token_file}: the token is also given with --http-token; "
                              f"give it once")
        return read_secret(token_file, "--http-token-file"), f"--http-token-file {token_file}"
    return (token, token_source) if token is not None else (None, None)


def serve(agg, how, stopped=None):
    """Run ``agg`` (an :class:`~mss_aggregator.collect.service.Aggregator`) until SIGINT/SIGTERM or
    until a thread dies, as ``how`` (:class:`Served`) says; log
    :meth:`~mss_aggregator.collect.service.Aggregator.idle_warning` once if no report has come
    ``how.warn_idle`` minutes in; ``stopped``: called with the store's counters at the end.  A
    store failure raises StoreError, any other thread's death
    :class:`~mss_aggregator.collect.collectors.ThreadDied` ("<thread>: <cause>")."""
    from rich.console import Console

    from mss_aggregator.collect.store import StoreError, open_store

    web = view = reader = None
    stop = stop_signals()
    try:
        if how.http:
            from mss_aggregator.web.live import LiveView
            from mss_aggregator.web.server import WebServer

            view = LiveView(agg.store.location, interval=how.refresh, brokers=agg.brokers, no_clock=agg.no_clock,
                            device=agg.device, on_death=agg.failures.report)
            web = WebServer(view, how.http, how.token, hosts=how.hosts, log=agg.log, webhook=agg.webhook,
                            on_death=agg.failures.report).start()
            view.start()
            Console(stderr=True).print(f"dashboard: {web.url}  (API: {web.url}api/openapi.json, "
                                       f"metrics: {web.url}metrics)")
        agg.start()
        title = f"mss aggregate: config {agg.cfg.config_id_hex}, store {agg.store.name}"
        reader = open_store(agg.store.location)  # a second connection: the display never blocks the writer
        idle_at = [time.monotonic() + 60 * how.warn_idle if how.warn_idle else None]

        def tick():
            if idle_at[0] is not None and time.monotonic() >= idle_at[0]:
                idle_at[0] = None
                if not agg.seen["report"]:
                    agg.log(agg.idle_warning(how.warn_idle))
        run_until_stopped(agg.failures.event, stop, None if how.quiet else
                          lambda: counters_table(reader.counters(), title, agg.no_clock(), reader.skipped_epochs()),
                          tick)
    finally:
        agg.stop()
        if web is not None:
            web.stop()
        if view is not None:
            view.close()
        if reader is not None:
            try:
                if stopped is not None:
                    stopped(reader.counters())
            except StoreError:
                pass  # unreadable now: the error that stopped us says why
            reader.close()
    error = agg.writer.error
    if isinstance(error, StoreError):  # the writer stopped at the batch it could not commit
        raise StoreError(f"{error}; stopped, and nothing unstored was acknowledged (an MQTT broker "
                         f"redelivers it to the next run)")
    if agg.failures.first is not None:
        raise agg.failures.error()
