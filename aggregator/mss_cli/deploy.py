"""``mss deploy``: flash the firmware and a board's config onto MicroPython boards with mpremote.

The config is checked (mss_aggregator.deploy.merge) before any board is touched,
the fields both ends read are written back to the campaign config, then each
board is probed, staged and flashed in turn, with one result line each.  Exit
status of a failed step (the first board's that failed, all being tried): 2 a
usage error or a config without device.budget, 3 a config (or --sensor) refused,
4 the write-back refused or failed, 5 no board answers on a port, 6 a flashing
step failed (mpremote's last line is shown).  Secrets (mqtt.password,
wifi.password, the fleet key) are printed as *** on every line.
"""
import ast
import json
import shlex
import tempfile
from pathlib import Path

import click
from rich.markup import escape

from mss_aggregator.deploy import ARCHS
from mss_cli.common import FloatRange, console
from mss_protocol.privacy import MAX_EPSILON

HELP = {"help_option_names": ["-h", "--help"]}


def _budget(ctx, param, value):
    if value is None:
        return None
    from mss_protocol.budget import parse_budget

    try:
        return parse_budget(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc))


def _ports(port, ports_file):
    """The ports given (--port, then the lines of --ports-file), or mpremote's auto."""
    ports = list(port)
    if ports_file:
        for line in Path(ports_file).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                ports.append(line)
    return ports or ["auto"]


def _placeholder_sensor():
    """Whether firmware/sensor.py still is the placeholder: its read_category() only returns 0."""
    from mss_aggregator.deploy.modules import FIRMWARE

    tree = ast.parse((FIRMWARE / "sensor.py").read_text())
    body = next((n.body for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "read_category"), [])
    return (len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Constant)
            and body[0].value.value == 0)


def _warn_placeholder():
    console.print("[yellow]warning:[/yellow] no --sensor: the boards get firmware/sensor.py, whose read_category() "
                  "always returns 0 (every report says category 0); give --sensor FILE (firmware/examples/ has an "
                  "ADC soil-moisture and a Pico W temperature one)", highlight=False)


def _check_sensor(path):
    """--sensor must be Python defining read_category() at its top level (the app imports it)."""
    from mss_aggregator.deploy import CONFIG, DeployError

    try:
        tree = ast.parse(Path(path).read_text(), str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise DeployError(f"--sensor {path}: not a Python file the board can run ({exc})", CONFIG) from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == "read_category" for n in tree.body):
        raise DeployError(f"--sensor {path}: defines no read_category() (firmware/sensor.py shows the shape)",
                          CONFIG)


@click.command("deploy", context_settings=HELP)
@click.option("-c", "--config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="The board's config (mss plan --device-config, or mss provision's boards/ID.json): the boards "
                   "get it with --set merged in.")
@click.option("--campaign-config", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="The config mss aggregate reads (default: --config): the --set fields it reads too are "
                   "written back to it, and the board's may not differ from it.")
@click.option("-p", "--port", multiple=True, metavar="PORT",
              help="Serial port of a board (mpremote connect's name: /dev/ttyACM0, COM3, auto); repeat for "
                   "several boards, flashed one after another. Default: auto (the first board found).")
@click.option("--ports-file", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="A file of ports, one a line (# comments), flashed after the --port ones.")
@click.option("-s", "--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="A device field, e.g. transport=mqtt, mqtt.host=10.0.0.2, period_s=600 (JSON where it "
                   "parses, else a string). period_s, epoch_origin, queue_max, memoize, budget and "
                   "lorawan.fport/time_fport/config_fport are written back to --campaign-config.")
@click.option("--no-write-back", is_flag=True,
              help="Leave --campaign-config as it is, and refuse a --set of a shared field that would make the boards' "
                   "value differ from it.")
@click.option("--sensor", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="Copy FILE as the board's sensor.py (its read_category()); default: firmware/sensor.py.")
@click.option("--hold", multiple=True, type=click.Path(exists=True, dir_okay=False), metavar="CONFIG",
              help="Another config the board keeps, for a LoRaWAN downlink to switch to.")
@click.option("--fleet-key-file", type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="The fleet key (hex) pushed configs must be signed with, as given to mss aggregate.")
@click.option("--max-epsilon", type=FloatRange(0, MAX_EPSILON, min_open=True), metavar="E",
              help="The board refuses any config whose thresholds give more (default with a key: the largest "
                   "epsilon of --config and --hold).")
@click.option("--budget", callback=_budget, metavar="EPS/DAYS",
              help="device.budget: at most EPS spent on fresh draws in any DAYS days (e.g. 4/30).")
@click.option("--no-budget", is_flag=True,
              help="Deploy a config without device.budget (its privacy loss grows with every fresh report).")
@click.option("--mpy", is_flag=True, help="Compile the modules with mpy-cross first (smaller, faster to import).")
@click.option("--arch", type=click.Choice([a for a in ARCHS if a] + ["none"]),
              help="The board's -march for --mpy (armv6m: RP2040 / Pico W, xtensawin: ESP32). Default: read from "
                   "the board; none: a port without a native emitter.")
@click.option("--no-native", is_flag=True,
              help="Remove the @micropython.viper/native decorators (automatic when the board's arch is none).")
@click.option("--keys", "keys_path", type=click.Path(exists=True), metavar="PATH",
              help="mss provision's output folder (or its lorawan/tts-devices.json or chirpstack-devices.json): "
                   "write the OTAA keys (DevEUI, JoinEUI, AppKey) of the board of --config boards/<DevEUI>.json "
                   "into its modem through the board, and read back what the modem allows. The AppKey is never "
                   "printed.")
@click.option("--overwrite-keys", is_flag=True,
              help="With --keys: write them into a modem that holds another DevEUI, JoinEUI or AppKey (refused "
                   "without it).")
@click.option("-n", "--dry-run", is_flag=True,
              help="Print the steps, the modules and the board's config (secrets ***) without touching a board "
                   "or --config.")
def deploy_cmd(config_path, campaign_config, port, ports_file, sets, no_write_back, sensor, hold, fleet_key_file,
               max_epsilon, budget, no_budget, mpy, arch, no_native, keys_path, overwrite_keys, dry_run):
    """Flash the mss-iot firmware and a config onto MicroPython boards (mpremote).

    Without --set device_id each board's own id (machine.unique_id() in hex, read from it) is its
    device id and, on MQTT, its broker user. Only the firmware modules the config needs are copied."""
    from mss_aggregator.deploy import DeployError, merge

    if budget is not None and no_budget:
        raise click.UsageError("--budget and --no-budget: give one")
    ports = _ports(port, ports_file)
    if len(ports) > 1 and any(k == "device_id" for k, _ in _parsed(sets)):
        raise click.BadParameter(f"one device_id for {len(ports)} boards: each would report as the same device; "
                                 "leave it out (each board's unique_id is read) or deploy one board at a time",
                                 param_hint="--set")
    hidden = merge.given_secrets({}, sets)
    try:
        if sensor is not None:
            _check_sensor(sensor)
        campaign, aggregators, held = _read_configs(config_path, campaign_config, hold)
        hidden = merge.given_secrets(campaign.device, sets)
        cfg = merge.merged_config(campaign.document, str(config_path), sets, held=held,
                                  fleet_key_file=fleet_key_file, max_epsilon=max_epsilon, budget=budget,
                                  require_budget=not no_budget)
        hidden, modem_keys = _modem_keys(keys_path, overwrite_keys, config_path=config_path, cfg=cfg, boards=len(ports))
        campaign_config = campaign_config or config_path
        written, text = merge.write_back(aggregators.document, str(campaign_config), cfg,
                                         merge.shared_changes(sets, budget), refuse=no_write_back,
                                         check=aggregators.rewritten)
    except DeployError as exc:
        _fail(exc, hidden)

    placeholder = sensor is None and _placeholder_sensor()

    def write_back():
        """Once, before the first board is written to: a deploy that stops earlier leaves it as it was."""
        nonlocal text, placeholder
        if placeholder:
            placeholder = False
            _warn_placeholder()
        if text is not None and not dry_run:
            merge.write_atomically(campaign_config, text)
            click.echo(f"# wrote device.{', device.'.join(written)} back to {campaign_config} (the aggregator reads "
                       "them)")
        text = None

    if written and dry_run:
        click.echo(f"# would write device.{', device.'.join(written)} back to {campaign_config} (the aggregator "
                   "reads them)")
    status = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, board_port in enumerate(ports):
            try:
                _flash(Path(tmp) / str(i), board_port, cfg, sensor=sensor, held=hold, mpy=mpy, arch=arch,
                       no_native=no_native, dry_run=dry_run, hidden=hidden, before_copying=write_back, keys=modem_keys)
            except DeployError as exc:
                _error(f"{board_port}: {worded(exc)}", hidden)
                status = status or exc.status
    if status:
        raise SystemExit(status)


def _read_configs(config_path, campaign_config, hold):
    """(the campaign of --config, the one of --campaign-config (--config's without it), {each
    --hold: its JSON object}), each file read once; DeployError (exit 3) naming one that is not
    a campaign config the aggregator would read."""
    from mss_iot import Campaign
    from mss_aggregator.deploy import CONFIG, DeployError
    from mss_protocol.config_file import ConfigError

    try:
        campaign = Campaign.read(config_path)
        aggregators = Campaign.read(campaign_config) if campaign_config else campaign
    except ConfigError as exc:
        raise DeployError(str(exc), CONFIG) from None
    held = {}
    for path in hold:
        try:
            held[path] = Campaign.read(path).document
        except ConfigError as exc:
            raise DeployError(f"held config {exc}", CONFIG) from None
    return campaign, aggregators, held


def _parsed(sets):
    from mss_aggregator.deploy import DeployError, merge

    try:
        return merge.parse_sets(sets)
    except DeployError as exc:
        _fail(exc, [])


def _modem_keys(keys_path, overwrite, config_path, cfg, boards):
    """(the secrets of ``cfg`` and the keys, to mask in every line printed; (the board's OTAA keys
    from --keys, overwrite) or None without --keys); a usage error where the deploy cannot take
    them, DeployError where the file has none for the board."""
    from mss_aggregator.deploy import merge

    if keys_path is None:
        if overwrite:
            raise click.UsageError("--overwrite-keys without --keys: give the keys to write")
        return merge.secrets(cfg), None
    if cfg["device"].get("transport") != "lorawan":
        raise click.BadParameter("only a LoRaWAN board's modem takes OTAA keys (device.transport is "
                                 f"{cfg['device'].get('transport')!r})", param_hint="--keys")
    if boards > 1:
        raise click.BadParameter(f"one board's keys for {boards} boards: deploy each board with its own "
                                 "boards/<DevEUI>.json", param_hint="--keys")
    from mss_aggregator.deploy.keys import read_keys

    keys = read_keys(keys_path, Path(config_path).stem)
    return merge.secrets(cfg) + keys.secrets(), (keys, overwrite)


def _write_modem_keys(tmp, port, lorawan, modem_keys, dry_run, say):
    """Write (keys, overwrite) into the board's modem through the board, or say how (dry run)."""
    from mss_aggregator.deploy import keys

    if dry_run:
        for line in keys.dry_run_lines(modem_keys[0], lorawan):
            say(f"# modem keys, {line} (mpremote connect {port} run: a script opening device.lorawan's UART)")
        return
    for line in keys.write_keys(modem_keys[0], lorawan, keys.mpremote_runner(port, tmp), overwrite=modem_keys[1]):
        say(f"{port}: modem keys: {line}")


def _flash(tmp, port, cfg, sensor, held, mpy, arch, no_native, dry_run, hidden, before_copying, keys=None):
    """Probe, stage and flash one board (DeployError on a failed step); ``before_copying``
    runs once the board is probed and its config checked; ``keys`` (OTAA keys, overwrite) are
    written into its modem once the firmware is on it, before its reset."""
    from mss_aggregator.deploy import flash, merge
    from mss_aggregator.deploy.modules import FIRMWARE, OPT, external, modules

    def say(line):
        click.echo(merge.mask(line, hidden))

    tmp.mkdir()
    mpy_ver = uid = wifi = None
    own_id = "device_id" not in cfg["device"] and cfg["device"].get("transport") != "lorawan"
    if dry_run:
        read = ["device_id" + (" and mqtt.user" if cfg["device"].get("transport") == "mqtt" else "")
                + ": machine.unique_id() in hex"] if own_id else []
        read += ["-march: sys.implementation._mpy"] if mpy and arch is None else []
        read += ["Wi-Fi: network.WLAN"] if cfg["device"].get("transport") == "mqtt" else []
        say(f"# read from the board ({'; '.join(read or ['that it answers'])}) with mpremote connect {port} exec "
            f"{flash.PROBE!r}")
    else:
        mpy_ver, uid, wifi = flash.probe(port)
        if uid is None and own_id:
            raise merge.DeployError("the board has no machine.unique_id(): give --set device_id=ID", merge.CONFIG)
    board = merge.for_board(cfg, None if cfg["device"].get("transport") == "lorawan" else uid, wifi)
    files = modules(board)
    march, native = None, not no_native
    if mpy:
        if arch is not None:
            march = "" if arch == "none" else arch
        elif not dry_run:
            march = flash.board_arch(mpy_ver)
        if march == "":
            native = False  # no native emitter: the viper kernels run as plain Python
    lib = flash.stage(tmp, files, mpy and march is not None, arch=march, native=native)
    if dry_run:
        how = (f"mpy-cross -O{OPT}" + (f" -march={march}" if march else "") if mpy and march is not None
               else f"mpy-cross -O{OPT} -march=<the board's>" if mpy else "as .py")
        say(f"# {len(files)} modules, {how}{'' if native else ', @micropython.viper/native removed'}: "
            + " ".join(files))
    config_file = tmp / "config.json"
    config_file.write_text(json.dumps(board, indent=1))
    before_copying()
    cmds = flash.commands(port, lib, config_file, sensor=sensor or FIRMWARE / "sensor.py", extras=external(board),
                          held=held)
    for cmd in cmds:
        if cmd is cmds[-1] and keys:  # the reset: the modem script needs the firmware's modules
            _write_modem_keys(tmp, port, board["device"].get("lorawan") or {}, keys, dry_run=dry_run, say=say)
        say(shlex.join(cmd))
        if not dry_run:
            flash.run(cmd, " ".join(cmd[3:5]))
    device = board["device"]
    if dry_run:
        say(f"# config.json: {json.dumps(merge.shown(device))} config_id={board['config_id']}")
    else:
        say(f"{port}: flashed device_id {device.get('device_id', 'the modem DevEUI')}, config_id "
            f"{board['config_id']}, {len(files)} modules")


def _error(message, hidden):
    from mss_aggregator.deploy.merge import mask

    console.print(f"[red]error:[/red] {escape(mask(message, hidden))}", soft_wrap=True)  # one line, as written


FLAGS = {"sets": "--set", "budget": "--budget", "fleet_key_file": "--fleet-key-file", "max_epsilon": "--max-epsilon",
         "mpy": "--mpy", "arch": "--arch", "overwrite_keys": "--overwrite-keys"}
NO_BUDGET_ADVICE = ("write the config with mss plan --device-config (it adds device.memoize and a budget, 4 x epsilon "
                    "per 30 days unless --budget EPS/DAYS), or give --budget EPS/DAYS here (e.g. --budget 4/30), or "
                    "--no-budget to deploy without one")


def worded(exc):
    """A :class:`~mss_aggregator.deploy.DeployError` in this command's words, naming the option at fault."""
    if exc.option is None:
        return str(exc)
    if exc.option == "budget":
        return f"{exc}; {NO_BUDGET_ADVICE}"
    if exc.example:
        return f"{exc} ({FLAGS[exc.option]} {exc.example})"
    return f"{FLAGS[exc.option]}: {exc}"


def _fail(exc, hidden):
    _error(worded(exc), hidden)
    raise SystemExit(exc.status)
