"""``mss fleet``: many emulated devices, running the firmware, against a broker."""
import json
import os
import sys

import click
import numpy as np

from mss_aggregator import jsonout
from mss_aggregator.distributions import DistributionError, parse
from mss_cli.aggregate import broker_spec
from mss_cli.common import (SEED, TOPIC_LEVEL, FloatRange, broker_password_option, broker_url, checked, console,
                            error_line, fail, output_file, progress, tls_options, topic_level, writing)
from mss_iot import Campaign
from mss_protocol.config_file import ConfigError


MAX_FLEET = 10**5  # --devices: a device id is --id-prefix and its index, at most 5 digits


def _id_prefix(ctx, param, value):
    """--id-prefix, such that it and every index (fewer than MAX_FLEET) is a device id."""
    from mss_device.gateway import DEVICE_ID

    if not DEVICE_ID.match(f"{value}{MAX_FLEET - 1}"):
        raise click.BadParameter(f"{value!r}: device ids are it and their index, so it is 0 to "
                                 f"{64 - len(str(MAX_FLEET - 1))} of A-Z a-z 0-9 _ . : -")
    return value


FLEET_SHORT = 1  # mss fleet: the aggregator stored fewer reports than the fleet sent


@click.command("fleet")
@click.option("--broker", required=True, metavar="URL", callback=checked(broker_spec),
              help="The broker the devices report to: mqtt[s]://[user[:password]@]host[:port]; the user and "
                   "password every device logs in with, unless --user-template or --provisioned.")
@broker_password_option
@tls_options("the devices' connections (their device.mqtt.ca) and the clean-up of their retained messages",
             client_cert=False, ca_rule="with-mqtts")
@click.option("--campaign", default="default", show_default=True, callback=checked(topic_level),
              help=f"The devices publish under mss/v1/<campaign>/; {TOPIC_LEVEL}. With --provisioned: the "
                   "boards' own by default.")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), required=True,
              help="Campaign config (mss plan --device-config); the devices date their reports by its "
                   "device.period_s and epoch_origin (default the firmware's 3600 and 0), as the aggregator does.")
@click.option("-n", "--devices", type=click.IntRange(1, MAX_FLEET),
              help="How many devices to run (required, but with --provisioned: all its boards by default).")
@click.option("--epochs", type=click.IntRange(1, 10**4), default=1, show_default=True,
              help="Each device reports once in each of this many consecutive epochs of the config's clock, "
                   "those ending with the current one (its clock set back a period at a time: dated reports, "
                   "as the firmware makes them); at most the aggregator's window, accept_past_epochs + 1.")
@click.option("--user-template", metavar="TEMPLATE",
              help="Log each device in as its own broker user: TEMPLATE with {i} its index (0 .. N-1) or {n} "
                   "its number (1 .. N), e.g. 'dev{n}'; the user is also its device id and client id (the "
                   "shipped ACL's %u patterns). "
                   "Passwords: --password-file, else one shared one (--broker-password-file, "
                   "$MSS_BROKER_PASSWORD or mqtt://:PASSWORD@host).")
@click.option("--password-file", type=click.Path(exists=True, dir_okay=False), metavar="PATH",
              help="With --user-template: each device's password, one 'user:password' a line (what "
                   "mosquitto_passwd -U hashes); '#' comments and blank lines are skipped.")
@click.option("--provisioned", type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="Run the MQTT boards of mss provision --out DIR, each logging in as itself: its device id "
                   "and password from DIR/boards/*.json (the first --devices of them, in name order).")
@click.option("--store", "store_path", metavar="PATH|URL",
              help="Count what the aggregator stored in this store (its --store): the accepted reports of "
                   "these devices in these epochs, exact.")
@click.option("--aggregator-url", metavar="URL",
              help="Count what the aggregator stored from its dashboard (mss aggregate --http; the token from "
                   "$MSS_HTTP_TOKEN): the rise of /api/counters' accepted during the run, so reports of "
                   "other devices meanwhile count too.")
@click.option("--wait", "wait_s", type=FloatRange(0, 86400), default=15, show_default=True,
              help="With --store or --aggregator-url: seconds to wait for the aggregator to store what was "
                   "PUBACKed.")
@click.option("--dist", default="zipf:1.1", show_default=True,
              help="The distribution the devices' values are drawn from (as mss simulate --dist).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Seed of the values drawn.")
@click.option("--id-prefix", default="dev", show_default=True, callback=_id_prefix,
              help="Device ids are this plus the index (without --user-template).")
@click.option("--runtime", type=click.Choice(["micropython", "cpython"]), default="micropython",
              show_default=True, help="Where the firmware runs.")
@click.option("--parallel", type=click.IntRange(1, 1024), default=8, show_default=True,
              help="Devices running at once.")
@click.option("--truth", "truth_path", type=click.Path(dir_okay=False), callback=output_file,
              help="Write the devices' values.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@click.pass_context
def fleet_cmd(ctx, broker, broker_password_file, tls_ca, campaign, config_path, devices, epochs, user_template,
              password_file, provisioned, store_path, aggregator_url, wait_s, dist, seed, id_prefix, runtime, parallel,
              truth_path, as_json):
    """Start N (--devices) emulated devices running the firmware, each reporting once an epoch for --epochs
    epochs; count what the aggregator stored (--store or --aggregator-url), then delete the devices'
    retained status messages and sessions."""
    from mss_aggregator.devices.fleet import (BoardRun, Boards, FleetClock, clear_retained, draw_values, fleet_epochs,
                                              run_fleet, status_topic)
    from mss_aggregator.devices.runtime import RuntimeUnavailable

    broker, logins, devices, campaign = _fleet_logins(ctx)
    if store_path and aggregator_url:
        raise click.UsageError("--store and --aggregator-url: give one, the place to count what was stored")
    try:
        campaign_file = Campaign.read(config_path)
        cfg = campaign_file.cfg
        values = draw_values(parse(dist, cfg.k), devices, seed)
    except (ConfigError, DistributionError, ValueError) as exc:
        fail(str(exc))
    period, origin = _fleet_clock(campaign_file, epochs)
    stored = stored_counter(store_path, aggregator_url, cfg)
    sent = devices * epochs
    try:
        with progress(f"{devices} devices on {runtime}, {epochs} epoch(s) each", devices) as step:
            results = run_fleet(cfg, broker, campaign, values,
                                clock=FleetClock(period_s=period, epoch_origin=origin, epochs=epochs),
                                boards=Boards(id_prefix=id_prefix, logins=logins, ca=tls_ca),
                                run=BoardRun(runtime=runtime, parallel=parallel, on_done=step))
    except (ValueError, RuntimeUnavailable) as exc:
        fail(str(exc))
    span = fleet_epochs(period, origin, epochs)
    failed = sorted(d for d, (_, rc, _) in results.items() if rc != 0)
    acked = sent - epochs * len(failed)  # a device that failed may have sent some: counted as none
    count = None if stored is None else stored(set(results), set(span), acked, wait_s)
    logins_of = dict(zip((l[0] for l in logins), logins)) if logins else {}
    left = clear_retained(broker, [(d, logins_of.get(d), [status_topic(campaign, d)]) for d in sorted(results)],
                          parallel, ca=tls_ca)
    if truth_path:
        _write_truth(truth_path, cfg, campaign, results=results, values=values)
    _print_fleet({"devices": devices, "epochs": span, "sent": sent, "pubacked": acked, "stored": count,
                  "published": devices - len(failed), "failed": failed, "retained_left": left,
                  "config_id": cfg.config_id_hex, "campaign": campaign}, as_json)
    if failed:
        fail(f"devices that could not publish: {', '.join(failed[:10])}"
             + (f" (+{len(failed) - 10} more)" if len(failed) > 10 else "")
             + f"; last output of {failed[0]}: {results[failed[0]][2].strip().splitlines()[-1:]}")
    if count is not None and count < sent:
        error_line(f"the aggregator stored {count} of {sent} reports ({acked} PUBACKed): a broker acknowledges "
                   "what its ACL drops, so check that each device logs in as its own user (--user-template) "
                   "and that the aggregator runs this campaign and config")
        sys.exit(FLEET_SHORT)


def _fleet_logins(ctx):
    """(broker URL, logins or None, devices, campaign) of mss fleet's options: one login for all (the URL's),
    one a device from --user-template or --provisioned; the broker and --tls-ca checked before any device runs."""
    from mss_aggregator.collect.collectors import parse_broker
    from mss_aggregator.provision import ProvisionError, board_logins

    o, logins = ctx.params, None
    broker, devices, campaign = o["broker"], o["devices"], o["campaign"]
    if o["user_template"] and o["provisioned"]:
        raise click.UsageError("--user-template and --provisioned both name the devices' logins: give one")
    if (o["user_template"] or o["provisioned"]) and \
            ctx.get_parameter_source("id_prefix") is not click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--id-prefix names the devices of a shared login; their own logins are their ids")
    if o["password_file"] and not o["user_template"]:
        raise click.UsageError("--password-file needs --user-template (the users it has passwords for)")
    if o["provisioned"]:
        try:
            boards_campaign, logins = board_logins(o["provisioned"])
        except ProvisionError as exc:
            fail(f"--provisioned: {exc}")
        if devices is not None and devices > len(logins):
            raise click.BadParameter(f"{devices} devices, and {o['provisioned']} has {len(logins)} MQTT boards",
                                     param_hint="--devices")
        devices = devices or len(logins)
        logins = logins[:devices]
        if ctx.get_parameter_source("campaign") is click.core.ParameterSource.DEFAULT:
            campaign = boards_campaign
    elif devices is None:
        raise click.UsageError("Missing option '-n' / '--devices' (or give --provisioned DIR: all its boards)")
    elif o["user_template"]:
        logins = device_logins(o["user_template"], devices, broker, broker_password_file=o["broker_password_file"],
                               password_file=o["password_file"])
    else:
        broker = broker_url(broker, o["broker_password_file"])
    try:
        tls = parse_broker(broker)[4]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--broker")
    if tls != bool(o["tls_ca"]):
        raise click.UsageError("an mqtts:// --broker needs --tls-ca: the devices verify the broker's certificate "
                               "against it" if tls else "--tls-ca is for an mqtts:// --broker (TLS)")
    return broker, logins, devices, campaign


def _fleet_clock(campaign, epochs):
    """(period_s, epoch_origin) of the campaign's clock (the firmware's defaults without one), with
    --epochs checked against it: dated frames, within the aggregator's accept_past_epochs, from epoch 0."""
    from mss_aggregator.collect.ingest import PAST_EPOCHS
    from mss_aggregator.devices.fleet import fleet_epochs
    from mss_device.frame import kind_index

    clock = campaign.clock or {"period_s": campaign.setting("period_s"),
                               "epoch_origin": campaign.setting("epoch_origin"), "accept_past_epochs": PAST_EPOCHS}
    if epochs > 1 and campaign.cfg.frame == kind_index("compact"):
        raise click.BadParameter(f"{epochs} epochs need dated reports; {campaign.source} makes compact frames "
                                 "(no epoch: the aggregator dates them by arrival)", param_hint="--epochs")
    if epochs > clock["accept_past_epochs"] + 1:
        raise click.BadParameter(f"{epochs} epochs end {epochs - 1} periods back; the aggregator accepts "
                                 f"{clock['accept_past_epochs']} (accept_past_epochs): at most "
                                 f"{clock['accept_past_epochs'] + 1}", param_hint="--epochs")
    period, origin = clock["period_s"], clock["epoch_origin"]
    if fleet_epochs(period, origin, epochs)[0] < 0:
        raise click.BadParameter(f"{epochs} epochs end {epochs - 1} periods back, before the campaign's epoch 0 "
                                 f"(device.epoch_origin {origin}); now is epoch "
                                 f"{fleet_epochs(period, origin, 1)[0]}", param_hint="--epochs")
    return period, origin


def _write_truth(path, cfg, campaign, results, values):
    """--truth: each device's value and the true counts, for checking the estimate."""
    with writing("--truth", path), open(path, "w") as fh:
        json.dump({"config_id": cfg.config_id_hex, "campaign": campaign,
                   "values": {d: v for d, (v, _, _) in sorted(results.items())},
                   "counts": np.bincount(values, minlength=cfg.k).tolist()}, fh)


def _print_fleet(outcome, as_json):
    """mss fleet's outcome: its JSON, or what was stored (or PUBACKed) and the retained messages left."""
    o = outcome
    span, acked, sent, count = o["epochs"], o["pubacked"], o["sent"], o["stored"]
    if as_json:
        click.echo(jsonout.dumps(o))
    elif count is None:
        console.print(f"{acked} of {sent} reports PUBACKed ({o['devices']} devices, epochs {span[0]}..{span[-1]}); "
                      "what the aggregator stored is not counted: give --store or --aggregator-url",
                      highlight=False)
    else:
        console.print(f"{count} of {sent} reports stored ({acked} PUBACKed; {o['devices']} devices, epochs "
                      f"{span[0]}..{span[-1]})", highlight=False)
    for line in o["retained_left"]:
        console.print(f"[yellow]warning:[/yellow] retained message not deleted: {line}", highlight=False)


def device_logins(template, n, broker, broker_password_file, password_file):
    """[(user, password)] of the devices of --user-template: users from TEMPLATE, passwords from
    --password-file or the one shared password (usage errors name the flag; a file that lacks a
    user is a data error naming it and the user)."""
    from mss_aggregator.collect.collectors import parse_broker
    from mss_device.gateway import DEVICE_ID

    try:
        users = [template.format(i=i, n=i + 1) for i in range(n)]
    except (KeyError, IndexError, ValueError) as exc:
        raise click.BadParameter(f"{template!r}: {exc!r}; use {{i}} for the device's index (from 0), {{n}} for "
                                 "its number (from 1)",
                                 param_hint="--user-template")
    if len(set(users)) < n:
        raise click.BadParameter(f"{template!r} gives every device the same user; put {{i}} or {{n}} in it",
                                 param_hint="--user-template")
    bad = next((u for u in users if not DEVICE_ID.match(u)), None)
    if bad is not None:
        raise click.BadParameter(f"{bad!r} is not a device id (1 to 64 of A-Z a-z 0-9 _ . : -)",
                                 param_hint="--user-template")
    try:
        _, _, user, shared, _ = parse_broker(broker)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--broker")
    if user:
        raise click.BadParameter(f"it names user {user!r}; with --user-template each device logs in as its "
                                 "own user: give mqtt://host:port", param_hint="--broker")
    if password_file:
        passwords = read_passwords(password_file)
        missing = [u for u in users if u not in passwords]
        if missing:
            fail(f"--password-file {password_file}: no password for {', '.join(missing[:5])}"
                 + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""))
        return [(u, passwords[u]) for u in users]
    from mss_aggregator.credentials import PASSWORD_ENV, SecretError, read_secret

    try:
        if broker_password_file:
            shared = read_secret(broker_password_file, "--broker-password-file")
    except SecretError as exc:
        raise click.UsageError(str(exc))
    shared = shared or os.environ.get(PASSWORD_ENV) or None
    return [(u, shared) for u in users]


def read_passwords(path):
    """{user: password} of a 'user:password' file (mosquitto_passwd -U's input); a bad line exits 3 naming it."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--password-file {path}: cannot read it: {getattr(exc, 'strerror', None) or exc}")
    out = {}
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        user, colon, password = line.partition(":")
        if not colon or not user or not password:
            fail(f"--password-file {path} line {number}: expected user:password")
        out[user] = password
    return out


def stored_counter(store_path, aggregator_url, cfg):
    """None, or count(devices, epochs, target, wait_s): what the aggregator stored of the fleet's reports,
    polled until it reaches ``target`` or ``wait_s`` passed.  The dashboard's count is read now too:
    the run's reports are its rise."""
    import time

    if store_path:
        from mss_aggregator.collect.store import StoreError, open_store

        if "://" not in store_path and not os.path.exists(store_path):
            raise click.BadParameter(f"{store_path} does not exist (the aggregator's --store; start it first)",
                                     param_hint="--store")

        def now(devices, epochs):
            try:
                store = open_store(store_path)
                try:
                    return sum(1 for d, e, s in store.report_epochs()
                               if s == "accepted" and d in devices and e in epochs)
                finally:
                    store.close()
            except (StoreError, ConfigError) as exc:
                fail(f"--store {store_path}: {exc}")
    elif aggregator_url:
        start = accepted_at(aggregator_url)

        def now(devices, epochs):
            return accepted_at(aggregator_url) - start
    else:
        return None

    def count(devices, epochs, target, wait_s):
        deadline = time.monotonic() + wait_s
        n = now(devices, epochs)
        while n < target and time.monotonic() < deadline:
            time.sleep(0.3)
            n = now(devices, epochs)
        return n
    return count


def accepted_at(url):
    """The ``accepted`` counter of an aggregator's /api/counters (bad answers exit 3 naming --aggregator-url)."""
    import urllib.request

    from mss_aggregator.credentials import TOKEN_ENV

    request = urllib.request.Request(url.rstrip("/") + "/api/counters")
    if os.environ.get(TOKEN_ENV):
        request.add_header("Authorization", f"Bearer {os.environ[TOKEN_ENV]}")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(json.loads(answer.read())["counters"]["accepted"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fail(f"--aggregator-url {url}: cannot read /api/counters: {exc}")
