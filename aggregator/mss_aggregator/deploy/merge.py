"""A board's config: the campaign config with ``--set`` and the provisioning flags merged into
its ``device`` section, checked with the firmware's own loader and the checks that loader cannot
make (an MQTT board's broker, Wi-Fi and user), the secrets masked wherever it is printed, and the
fields both ends read written back to the campaign config the aggregator loads.

Nothing here reads a config file: the caller reads each once (``mss deploy``: as a
:class:`~mss_aggregator.campaign.Campaign`) and gives its JSON object (``Campaign.document``) and
its name (``source``, in errors); a write-back is checked by the caller's ``check``, the
aggregator's own reading of a campaign file (``Campaign.from_dict``)."""
import copy
import json
import sys
from pathlib import Path

from mss_aggregator import files
from mss_aggregator.deploy import CONFIG, NO_BUDGET, WRITE_BACK, DeployError
from mss_aggregator.deploy.modules import LIB
from mss_protocol.categories import FIELDS as HOST_ONLY

# device fields the aggregator (or mss switch-config) reads too: the campaign clock and its window
# (collect.ingest.campaign_clock), memoize and budget (mss_protocol.budget.check_device, the
# dashboard's loss so far) and the LoRaWAN ports
SHARED = ("period_s", "epoch_origin", "queue_max", "memoize", "budget",
          "lorawan.fport", "lorawan.time_fport", "lorawan.config_fport")
SECRETS = ("mqtt.password", "wifi.password", "fleet_key")  # never printed
MASK = "***"


def parse_sets(sets):
    """``--set KEY=VALUE`` items as [(dotted key under device, value)]: a value is JSON
    where it parses (600, true, {...}), else a string; a leading ``device.`` is allowed."""
    out = []
    for item in sets:
        key, sep, value = item.partition("=")
        key = key.strip().removeprefix("device.")
        if not sep or not key:
            raise DeployError(f"a device setting is KEY=VALUE, got {item!r}", CONFIG, option="sets")
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass  # a bare string
        out.append((key, value))
    return out


def get(device, key):
    """The value at a dotted ``key`` of ``device``, or None."""
    for part in key.split("."):
        device = device.get(part) if isinstance(device, dict) else None
    return device


def put(device, key, value):
    """Set the dotted ``key`` of ``device`` to ``value``, making the objects on the way;
    ValueError when one on the way is not an object."""
    *parents, leaf = key.split(".")
    for p in parents:
        device = device.setdefault(p, {})
        if not isinstance(device, dict):
            raise ValueError(f"device.{p} is not an object")
    device[leaf] = value


def merged_config(document, source, sets, held=None, fleet_key_file=None, max_epsilon=None, budget=None,
                  require_budget=False):
    """The board's config (a dict) from the campaign config ``document`` (its JSON object, named
    ``source`` in errors), checked; ``held`` {path: document} of the configs the board holds
    besides; DeployError names what is refused."""
    cfg, held = copy.deepcopy(document), held or {}
    for field in HOST_ONLY:  # the operator's names for the items: no board needs them in RAM
        cfg.pop(field, None)
    device = cfg.setdefault("device", {})
    if budget is not None:
        from mss_protocol.budget import budget_section

        device["budget"] = budget_section(*budget)
    if fleet_key_file or max_epsilon is not None:
        provision(device=device, cfg=cfg, held=held, fleet_key_file=fleet_key_file, max_epsilon=max_epsilon)
    if held:
        device["configs"] = sorted(set(device.get("configs", [])) | {Path(h).name for h in held})
    for key, value in parse_sets(sets):
        put(device, key, value)
    if require_budget and device.get("budget") is None:
        raise DeployError(
            f"{source} has no device.budget: this board would report every {device.get('period_s', 3600)} s "
            "and every fresh report adds to its privacy loss, without limit (docs/privacy.md section 3)", NO_BUDGET,
            option="budget")
    Settings = firmware_settings()
    try:
        # without a device_id the board's own (machine.unique_id, read at flashing) is checked later
        Settings(cfg if "device_id" in device else dict(cfg, device=with_probe_id(device)))
    except ValueError as exc:
        raise DeployError(f"{source}: {exc}", CONFIG) from None
    check_held(source, cfg, held, Settings)
    check_mqtt(device)
    return cfg


def firmware_settings():
    """The firmware's config loader (mss_node.settings.Settings), imported as the board does."""
    if str(LIB) not in sys.path:
        sys.path.insert(0, str(LIB))
    from mss_node.settings import Settings

    return Settings


def with_probe_id(device):
    """``device`` with a stand-in id where the board will have one of its own: a LoRaWAN board
    takes its modem's DevEUI at boot and refuses any id but that (SPEC.md section 4)."""
    if "device_id" in device or device.get("transport") == "lorawan":
        return device
    return dict(device, device_id="check")


def check_held(source, cfg, held, Settings):
    device = cfg["device"]
    prefixes = {cfg["config_id"][:4]: source}
    for path, d in held.items():
        try:
            Settings(dict(d, device=with_probe_id(device)))
        except ValueError as exc:
            raise DeployError(f"held config {path}: {exc}", CONFIG) from None
        if d["config_id"][:4] in prefixes:  # a 2-byte switch command must name one config
            raise DeployError(f"config ids of {path} and {prefixes[d['config_id'][:4]]} start alike "
                              "(a switch downlink names a config by its first 2 bytes)", CONFIG)
        prefixes[d["config_id"][:4]] = path


def check_mqtt(device):
    """What the loader accepts but an MQTT board cannot work with: no broker (the loader's
    default 127.0.0.1 is the board itself), a user the shipped ACL drops."""
    if device.get("transport") != "mqtt":
        return
    if not get(device, "mqtt.host"):
        raise DeployError("device.mqtt.host is not set: the board would connect to 127.0.0.1, itself; give the "
                          "broker's address", CONFIG, option="sets", example="mqtt.host=ADDRESS")
    check_user(device)


def check_user(device):
    """mqtt.user must be the device id (docs/mosquitto: the broker makes the username the
    client id and its ACL lets a user publish under its own id only: any other user's reports
    are dropped after a normal PUBACK).  No user: the device id is it."""
    user, device_id = get(device, "mqtt.user"), device.get("device_id")
    if device_id is None:  # read from the board at flashing, checked then
        return
    if user is None:
        put(device, "mqtt.user", device_id)
    elif user != device_id:
        raise DeployError(f"device.mqtt.user {user!r} is not device_id {device_id!r}: the broker's ACL "
                          "(docs/mosquitto) lets a user publish under its own id only and drops the others' "
                          "reports without a word; give the same value to both", CONFIG)


def for_board(cfg, device_id=None, has_wifi=None):
    """A copy of ``cfg`` for one board: ``device_id`` (read from it) where the config gives
    none, the user checked against it; an MQTT board with Wi-Fi (``has_wifi`` None: not known,
    assumed) needs wifi.ssid."""
    cfg = copy.deepcopy(cfg)
    device = cfg["device"]
    if device_id is not None and "device_id" not in device:
        device["device_id"] = device_id
        try:
            firmware_settings()(cfg)  # as the board will load it
        except ValueError as exc:
            raise DeployError(f"device_id {device_id!r} read from the board: {exc}", CONFIG) from None
    if device.get("transport") == "mqtt":
        if has_wifi is not False and not get(device, "wifi.ssid"):
            raise DeployError("device.wifi.ssid is not set: the board cannot join a network to reach "
                              f"{get(device, 'mqtt.host')}", CONFIG, option="sets",
                              example="wifi.ssid=NAME, wifi.password=...")
        check_user(device)
    return cfg


def provision(device, cfg, held, fleet_key_file, max_epsilon):
    """device.fleet_key (hex) from the key file, device.max_epsilon and max_ratio (exact)."""
    from mss_protocol.privacy import cap
    from mss_protocol.sealed import load_key

    if fleet_key_file:
        try:
            device["fleet_key"] = load_key(fleet_key_file).hex()
        except ValueError as exc:
            raise DeployError(f"fleet key {exc}", CONFIG, option="fleet_key_file") from None
    if max_epsilon is None:
        try:
            max_epsilon = max([cfg["epsilon"]] + [d["epsilon"] for d in held.values()])
        except (KeyError, TypeError) as exc:
            raise DeployError(f"no epsilon to take the epsilon cap from ({exc!r}): give the cap", CONFIG,
                              option="max_epsilon") from None
    try:
        device["max_ratio"] = cap(max_epsilon)
    except ValueError as exc:
        raise DeployError(f"epsilon cap {max_epsilon!r}: {exc}", CONFIG, option="max_epsilon") from None
    device["max_epsilon"] = max_epsilon


def given_secrets(device, sets):
    """The secrets of the campaign's ``device`` section and of ``--set`` before they are merged
    (to mask errors)."""
    try:
        given = parse_sets(sets)
    except DeployError:
        return []  # refused before anything is printed
    try:
        device = copy.deepcopy(device)
        for key, value in given:
            put(device, key, value)
    except (ValueError, TypeError, AttributeError):  # a --set through a non-object
        return [v for k, v in given if k in SECRETS and isinstance(v, str) and v]
    return secrets({"device": device})


def secrets(cfg):
    """The secret strings of ``cfg`` (passwords, the fleet key), to mask in any printed line."""
    return [s for s in (get(cfg.get("device") or {}, k) for k in SECRETS) if isinstance(s, str) and s]


def mask(text, hidden):
    """``text`` with every string of ``hidden`` replaced by ***."""
    for s in sorted(hidden, key=len, reverse=True):
        text = text.replace(s, MASK)
    return text


def shown(device):
    """The device section as printed: its secrets ***."""
    device = copy.deepcopy(device)
    for key in SECRETS:
        if get(device, key) is not None:
            put(device, key, MASK)
    return device


def shared_changes(sets, budget):
    """[(key, value)] of the shared fields this deploy sets (``--set``, ``--budget``)."""
    changes = [(k, v) for k, v in parse_sets(sets) if k in SHARED]
    if budget is not None:
        from mss_protocol.budget import budget_section

        changes.append(("budget", budget_section(*budget)))
    return changes


def write_back(document, source, cfg, changes, refuse=False, check=None):
    """The campaign config ``document`` (the JSON object of ``source``, the file the aggregator
    reads) with ``changes`` (the shared fields ``--set`` / ``--budget`` give the boards) put in,
    checked by ``check`` (the aggregator's reading of a campaign file's object; ValueError for one
    it refuses): (the keys written, the new text; None if nothing changes).  A shared field of the
    board's config ``cfg`` that would still differ from the campaign's is refused, naming it: one
    given with ``refuse`` (--no-write-back), or one the board's file (another file than the
    campaign's: ``mss provision``'s boards/ID.json) holds apart.  Nothing is written here
    (:func:`write_atomically`)."""
    raw = document
    written = [k for k, v in changes if get(raw.get("device", {}), k) != v]
    new = copy.deepcopy(raw)
    device = new.setdefault("device", {})
    if not refuse:
        for key, value in changes:
            put(device, key, value)
    given = {k for k, _ in changes}
    for key in SHARED:
        board, there = get(cfg["device"], key), get(device, key)
        if board != there:
            how = ("drop --no-write-back to write it there" if key in given else
                   f"give --set {key}=VALUE to write one value to both")
            raise DeployError(f"device.{key}: the boards would get {board!r} and the aggregator's {source} "
                              f"has {there!r}; both ends must read the same ({how})", WRITE_BACK)
    if refuse or not written:
        return [], None
    if check is not None:
        try:
            check(new)
        except ValueError as exc:
            raise DeployError(f"{source}: the aggregator would refuse it: {str(exc).removeprefix(f'{source}: ')}",
                              WRITE_BACK) from None
    return written, json.dumps(new, indent=1) + "\n"


def write_atomically(path, text):
    """Write the campaign config back whole or not at all (:func:`mss_aggregator.files.write_atomically`)."""
    try:
        files.write_atomically(path, text)
    except OSError as exc:
        raise DeployError(f"{path}: cannot write the shared fields back: {exc.strerror or exc}", WRITE_BACK) from None
