"""``mss provision``: the per-board configs, broker credentials and network-server device lists of a fleet."""
import click

from mss_cli.common import checked, console, fail, topic_level

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
@click.option("--chirpstack-app", metavar="UUID",
              help="ChirpStack application id written into lorawan/chirpstack-devices.json.")
@click.option("--chirpstack-profile", metavar="UUID",
              help="ChirpStack device-profile id written into lorawan/chirpstack-devices.json.")
@click.option("--frequency-plan", metavar="ID",
              help="The Things Stack frequency plan of the LoRaWAN devices, e.g. EU_863_870_TTN.")
def provision_cmd(fleet, config_path, campaign, out, aggregators, shuffler_user, shuffled_aggregators, rotate,
                  chirpstack_app, chirpstack_profile, frequency_plan):
    """Write a fleet's board configs, Mosquitto password file and ACL, and LoRaWAN device lists.

    FLEET.csv has one row a board: device_id (or dev_eui for LoRaWAN), transport (mqtt, serial or
    lorawan), and optional columns: join_eui and app_key (LoRaWAN), and any field of the board
    config's device section, dotted (wifi.ssid, mqtt.host, mqtt.password, period_s, lorawan.uart,
    ...).  Each board's config is checked with the firmware's own loader; the first bad row exits 3
    naming its row and column.  Passwords are never printed: they are in the 0600 files written.
    """
    from mss_aggregator.provision import ProvisionError, ShuffleAccounts, provision, read_fleet
    from mss_iot import Campaign
    from mss_protocol.config_file import ConfigError

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
