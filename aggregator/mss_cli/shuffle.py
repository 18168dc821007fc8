"""``mss shuffle``: the anonymising shuffler between the fleet and ``mss aggregate --shuffled``."""
import click

from mss_cli.aggregate import (LINK_FLAGS, LORAWAN_SPEC, PLAN_WRITES_CLOCK, allow_list_option, broker_spec, check_id,
                             link_specs, lorawan_spec, read_campaign, serial_spec, tls_flags)
from mss_cli.common import (TOPIC_LEVEL, FloatRange, broker_password_option, broker_url, checked, console,
                            counters_line, counters_table, fail, flag_message, run_until_stopped, stop_signals,
                            tls_options, topic_level)
from mss_protocol.config_file import ConfigError
from mss_protocol.shuffled_batch import DEFAULT_COLLUDING


@click.command("shuffle")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Campaign config (mss plan --device-config); its device.period_s (required: the campaign "
                   "clock) closes epochs and bounds the epochs accepted. Protocol olh is refused (its reports "
                   "name their device).")
@click.option("--campaign", required=True, callback=checked(topic_level),
              help=f"The campaign: reports on mss/v1/<campaign>/<device>/report, batches on "
                   f"mss/v1/<campaign>/shuffled; {TOPIC_LEVEL}.")
@click.option("--broker", callback=checked(broker_spec),
              help="The fleet's broker, mqtt://[user:pass@]host:port (mqtts:// for TLS); with --lorawan the "
                   "network server's.")
@broker_password_option
@click.option("--lorawan", metavar=LORAWAN_SPEC, callback=lorawan_spec,
              help="Reports are the uplinks of this ChirpStack v4 or The Things Stack v3 application.")
@click.option("--serial", "serial_ports", multiple=True, metavar="PORT[,BAUD]", callback=checked(serial_spec),
              help="Serial port with framed reports; repeat for several.")
@click.option("--queue", "queue_path", required=True, type=click.Path(dir_okay=False),
              help="The durable queue (an SQLite file, created if missing): the devices seen per epoch as keyed "
                   "digests, the held reports without their devices, batches until their PUBACK.")
@click.option("--shuffle-key-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="The key shared with mss aggregate --shuffled (hex, at least 32 bytes: openssl rand -hex 32). "
                   "Default: $MSS_SHUFFLE_KEY.")
@click.option("--min-batch", type=click.IntRange(1, 10**9), default=100, show_default=True,
              help="Forward a batch only when the closed epochs hold reports of at least this many distinct "
                   "devices (a batch takes one report a device: its latest); fewer are held and merged into the "
                   "next epoch's batch, never forwarded small.")
@click.option("--assume-colluding", "colluding", type=click.IntRange(0, 10**9 - 1), default=DEFAULT_COLLUDING,
              show_default=True, metavar="C",
              help="Devices of each batch that may collude with the aggregator (compromised boards, the "
                   "operator's own test boards): carried in every batch, and the central guarantee that mss "
                   "estimate prints counts only the batch's other devices. The default 0 is the amplification "
                   "theorems' own assumption, and every guarantee printed says so; must be below --min-batch.")
@click.option("--forward-broker", callback=checked(broker_spec),
              help="Where the batches go (the aggregator's broker); default: --broker. On a broker whose "
                   "client id is the username (docs/mosquitto), the forwarder needs an account of its own "
                   "(mss provision --shuffler-user: USER-forward).")
@click.option("--forward-broker-password-file", type=click.Path(exists=True, dir_okay=False), metavar="PATH",
              help="Read the --forward-broker password from this file (the URL then names the user only).")
@click.option("--grace", type=FloatRange(0, 604800),  # a week
              default=60.0, show_default=True, metavar="S",
              help="Seconds after an epoch's end before it is closed (reports in flight still join its batch).")
@tls_options("the --broker and the --forward-broker connections")
@click.option("--client-id", callback=checked(check_id),
              help="MQTT client id at --broker (default mss-shuf-<campaign>-<random hex>, kept in the queue; "
                   "the forwarder's is it with -fwd).")
@allow_list_option
@click.option("--quiet", is_flag=True, help="No live counters.")
def shuffle_cmd(config_path, campaign, broker, broker_password_file, lorawan, serial_ports, queue_path,
                shuffle_key_file, min_batch, forward_broker, forward_broker_password_file, grace, tls_ca, tls_cert,
                tls_key, client_id, quiet, colluding, allow_list):
    """Collect the fleet's reports, check them with their devices' identities, and forward them
    without identity or header, in uniformly permuted batches authenticated with HMAC, until
    SIGINT/SIGTERM.

    A batch leaves once its epochs are closed and it holds reports of at least --min-batch
    distinct devices, one report a device.

    Nothing acknowledged is lost across a crash (the queue commits before the broker is
    acknowledged) and a batch made before a crash is forwarded again with its batch id.
    Only counters are printed: never a device id with anything of its report."""
    from mss_aggregator.campaign import NoClock
    from mss_aggregator.collect.collectors import ThreadDied
    from mss_aggregator.collect.links import MqttEndpoint, TlsFiles
    from mss_aggregator.shuffle.queue import QueueError
    from mss_aggregator.shuffle.service import Batching, Shuffler
    from mss_protocol.shuffled_batch import BatchError, load_key

    broker = broker_url(broker, broker_password_file)
    forward_broker = broker_url(forward_broker, forward_broker_password_file, "--forward-broker", environ={})
    links = link_specs(broker=broker, tls=(tls_ca, tls_cert, tls_key), client_id=client_id,
                       lorawan=lorawan, serial=serial_ports, allowed=allow_list)
    if not broker and not forward_broker:
        raise click.UsageError(LINK_FLAGS["forward-without-broker"])
    if colluding >= min_batch:
        raise click.BadParameter(f"must be below --min-batch ({min_batch}): a batch of --min-batch devices must "
                                 f"hold one that does not collude", param_hint="--assume-colluding")
    try:
        key = load_key(shuffle_key_file)
    except BatchError as exc:
        raise click.UsageError(str(exc).removeprefix("key: "))

    def log(msg):
        console.print(msg, highlight=False, markup=False, soft_wrap=True)

    forward = None if forward_broker is None else MqttEndpoint(forward_broker, TlsFiles(ca=tls_ca))
    campaign_file = read_campaign(config_path)
    try:
        with tls_flags():
            shuffler = Shuffler(campaign_file, queue_path, key, campaign, links=links, forward=forward,
                                batching=Batching(min_batch, grace, colluding), log=log)
    except NoClock as exc:
        fail(f"{exc}: {PLAN_WRITES_CLOCK}")
    except (ConfigError, QueueError, ValueError) as exc:
        fail(flag_message(exc))
    try:
        serve(shuffler, quiet=quiet, stopped=lambda counts: log(f"stopped; counters: {counters_line(counts)}"))
    except (QueueError, ThreadDied) as exc:
        fail(str(exc))


def serve(shuffler, quiet=False, stopped=None):
    """Run ``shuffler`` (a :class:`~mss_aggregator.shuffle.service.Shuffler`) until SIGINT/SIGTERM
    or a thread's death, showing the queue's counters unless ``quiet``; ``stopped`` is called with
    the final counters.  A queue failure raises QueueError, any other thread's death ThreadDied."""
    from mss_aggregator.shuffle.queue import QueueError

    reader = shuffler.queue.reader()  # the display's own connection
    title = f"mss shuffle: config {shuffler.cfg.config_id_hex}, queue {shuffler.queue.name}"
    stop = stop_signals()
    try:
        shuffler.start()
        run_until_stopped(shuffler.failures.event, stop,
                          None if quiet else lambda: counters_table(reader.counters(), title))
    finally:
        shuffler.stop()
        if stopped is not None:
            stopped(reader.counters())
        reader.close()
    if isinstance(shuffler.writer.error, QueueError):
        raise QueueError(f"{shuffler.writer.error}; stopped, and nothing unqueued was acknowledged (the broker "
                         f"redelivers it to the next run)")
    if shuffler.failures.first is not None:
        raise shuffler.failures.error()
