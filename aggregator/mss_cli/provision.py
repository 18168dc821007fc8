"""``mss provision``: the per-board configs, broker credentials and network-server device lists of a fleet."""
import click

from mss_cli.common import checked, console, fail, progress, topic_level

HELP = {"help_option_names": ["-h", "--help"]}


@click.command("provision", context_settings=HELP)
@click.argument("fleet", metavar="FLEET.csv", type=click.Path(exists=True, dir_okay=False))
@click.option("-c", "--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="The campaign config every board starts from (mss plan --device-config).")
@click.option("--campaign", required=True, callback=checked(topic_level),
              help="The campaign (mss/v1/<campaign>/...): set in every board's config and in the ACL.")
@click.option("-o", "--out", "out", type=click.Path(file_okay=False), required=True, metavar="DIR",
              help="Folder to write boards/, mosquitto/ and lorawan/ into (created; re-runs update it).")
@click.option("--aggregator-user", "aggregators", multiple=True, default=("aggregator",), show_default=True,
              metavar="USER", help="Broker account of an aggregator (reads every report); repeat for each "
                                   "worker of a shared subscription.")
@click.option("--shuffler-user", metavar="USER",
              help="Broker accounts of mss shuffle: USER reads every report, USER-forward writes the shuffled "
                   "batches (docs/privacy.md section 5).")
@click.option("--shuffled-aggregator-user", "shuffled_aggregators", multiple=True, metavar="USER",
              help="Broker account of mss aggregate --shuffled: reads the shuffled batches only; repeat for "
                   "each worker.")
@click.option("--rotate", is_flag=True,
              help="New passwords and AppKeys for every board and aggregator account (default: an earlier "
                   "run's are kept, those given in the CSV always win).")
@click.option("--application", "--chirpstack-app", "chirpstack_app", metavar="UUID",
              help="ChirpStack application id of the LoRaWAN devices: lorawan/chirpstack-devices.json is "
                   "written only with it and --device-profile (ChirpStack refuses a device without them).")
@click.option("--device-profile", "--chirpstack-profile", "chirpstack_profile", metavar="UUID",
              help="ChirpStack device-profile id of the LoRaWAN devices.")
@click.option("--chirpstack", "chirpstack_url", metavar="URL",
              help="Also register the LoRaWAN devices in ChirpStack v4 through its gRPC API at URL "
                   "(http://host:8080, https://host): created, or updated where they differ, never twice; "
                   "re-run after a failure to complete it. Needs --api-key-file, --application and "
                   "--device-profile.")
@click.option("--api-key-file", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="The ChirpStack API key (sent as 'authorization: Bearer <key>'), read from FILE.")
@click.option("--frequency-plan", metavar="ID",
              help="The Things Stack frequency plan of the LoRaWAN devices, e.g. EU_863_870_TTN.")
def provision_cmd(fleet, config_path, campaign, out, aggregators, shuffler_user, shuffled_aggregators, rotate,
                  chirpstack_app, chirpstack_profile, chirpstack_url, api_key_file, frequency_plan):
    """Write a fleet's board configs, Mosquitto password file and ACL, and LoRaWAN device lists.

    FLEET.csv has one row a board: device_id (or dev_eui for LoRaWAN), transport (mqtt, serial or
    lorawan), and optional columns: join_eui and app_key (LoRaWAN), and any field of the board
    config's device section, dotted (wifi.ssid, mqtt.host, mqtt.password, period_s, lorawan.uart,
    ...).  Each board's config is checked with the firmware's own loader; the first bad row exits 3
    naming its row and column.  Passwords are never printed: they are in the 0600 files written.
    With --chirpstack the LoRaWAN devices are also registered through ChirpStack's API.
    """
    from mss_aggregator.provision import ProvisionError, ShuffleAccounts, provision, read_fleet
    from mss_iot import Campaign
    from mss_protocol.config_file import ConfigError

    api_key = _chirpstack_flags(chirpstack_app, chirpstack_profile, chirpstack_url, api_key_file)
    if " " in campaign:  # a Mosquitto ACL line ends its topic at a space
        raise click.BadParameter(f"{campaign!r}: a Mosquitto ACL topic cannot hold a space", param_hint="--campaign")
    shuffle = ShuffleAccounts(shuffler_user, shuffled_aggregators)
    flags = {**{user: "--aggregator-user" for user in aggregators},
             **{user: "--shuffled-aggregator-user" for user in shuffled_aggregators}}
    if shuffler_user:
        flags.update({shuffler_user: "--shuffler-user", shuffle.forwarder: "--shuffler-user"})
    for user, flag in flags.items():
        try:
            topic_level(user, flag)
        except ValueError as exc:
            raise click.BadParameter(str(exc).removeprefix(f"{flag} "), param_hint=flag)
        if " " in user or ":" in user:
            raise click.BadParameter(f"{user!r}: a Mosquitto username holds no space or ':'", param_hint=flag)
    names = [*aggregators, *shuffled_aggregators, *([shuffler_user, shuffle.forwarder] if shuffler_user else [])]
    for user in set(names):
        if names.count(user) > 1:
            raise click.BadParameter(f"{user!r} names two broker accounts: each needs a username of its own",
                                     param_hint=flags[user])
    try:
        boards = read_fleet(fleet, Campaign.read(config_path).document, campaign)
        for b in boards:
            if b.device_id in flags:
                raise ProvisionError(f"{fleet} row {b.row}: column device_id: {b.device_id} is also the account "
                                     f"of {flags[b.device_id]}")
        written, accounts = provision(boards, out, campaign, aggregators=aggregators, rotate=rotate,
                                      chirpstack=(chirpstack_app, chirpstack_profile), frequency_plan=frequency_plan,
                                      shuffle=shuffle)
    except (ConfigError, ProvisionError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"--out {out}: cannot write it: {exc.strerror or exc}")
    _summary(boards, written, accounts, dict(shuffle.roles()))
    lorawan = [b for b in boards if b.transport == "lorawan"]
    _lorawan_notes(lorawan, chirpstack_app, frequency_plan)
    if lorawan and chirpstack_url:
        _register(lorawan, campaign, (chirpstack_app, chirpstack_profile), url=chirpstack_url, api_key=api_key)


def _lorawan_notes(lorawan, application, frequency_plan):
    """What the network servers' lists lack, and how to give it."""
    if lorawan and not application:
        click.echo("no ChirpStack device list written: it needs --application and --device-profile "
                   "(ChirpStack refuses a device without them)")
    if lorawan and not frequency_plan:
        click.echo("lorawan/tts-devices.json has no frequency_plan_id: give --frequency-plan (ttn-lw-cli "
                   "end-devices create needs it; the Console's import takes it as a fallback value)")


def _chirpstack_flags(application, profile, url, key_file):
    """The API key of --api-key-file; a usage error where the ChirpStack flags do not go together."""
    from mss_aggregator.credentials import SecretError, read_secret
    from mss_aggregator.network_server import RegisterError, endpoint

    if bool(application) != bool(profile):
        raise click.UsageError("--application and --device-profile go together: ChirpStack refuses a device "
                               "without either")
    if url and not (application and key_file):
        raise click.UsageError("--chirpstack needs --api-key-file, --application and --device-profile")
    if key_file and not url:
        raise click.UsageError("--api-key-file is the key of --chirpstack's API: give --chirpstack URL too")
    try:
        if url:
            endpoint(url)
        return read_secret(key_file, "--api-key-file") if key_file else None
    except RegisterError as exc:
        raise click.BadParameter(str(exc), param_hint="--chirpstack")
    except SecretError as exc:
        raise click.UsageError(str(exc))


def _register(lorawan, campaign, ids, url, api_key):
    """Register the LoRaWAN boards in ChirpStack at ``url``, with progress; exit 1 when it stops."""
    from mss_aggregator.network_server import RegisterError, register_chirpstack
    from mss_aggregator.provision import chirpstack_bodies

    try:
        with progress(f"ChirpStack {url}", len(lorawan)) as step:
            report = register_chirpstack(chirpstack_bodies(lorawan, campaign, *ids), url, api_key, on_device=step)
    except RegisterError as exc:
        fail(f"--chirpstack {url}: {exc}")
    click.echo(f"ChirpStack {url}: {len(lorawan)} devices registered ({report.summary()})")


TABLE_ROWS = 20  # above: one line per transport and secret origin, not a row a board


def _summary(boards, written, accounts, roles):
    from collections import Counter

    from rich.table import Table

    what = {"mqtt": "password", "lorawan": "AppKey"}
    if len(boards) > TABLE_ROWS:
        kinds = Counter((b.transport, b.secret) for b in boards)
        for transport in dict.fromkeys(b.transport for b in boards):
            secrets = ", ".join(f"{n} {how}" for (t, how), n in kinds.items() if t == transport and how)
            console.print(f"{sum(n for (t, _), n in kinds.items() if t == transport)} {transport} boards"
                          + (f" ({what[transport]}: {secrets})" if secrets else ""), highlight=False)
    else:
        table = Table(title=f"{len(boards)} boards")
        for col in ("row", "board", "transport", "secret"):
            table.add_column(col)
        for b in boards:
            kind = what.get(b.transport)
            table.add_row(str(b.row), b.name, b.transport, f"{kind} {b.secret}" if kind else "-")
        console.print(table)
    for user, how in accounts.items():
        console.print(f"{roles.get(user, 'aggregator')} account {user}: password {how}", highlight=False)
    click.echo(f"wrote {len(boards)} board configs to {written[0][0].parent}")
    for path, kind in written[len(boards):]:
        click.echo(f"wrote {path} ({kind})")
    if not any(b.transport == "mqtt" for b in boards) and not roles:
        click.echo("no MQTT board: no Mosquitto accounts written"
                   + (" (LoRaWAN reports come through the network server's broker, where mss aggregate "
                      "--lorawan logs in)" if any(b.transport == "lorawan" for b in boards) else ""))
