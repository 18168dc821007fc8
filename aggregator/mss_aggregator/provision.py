"""A fleet's per-board configs and credentials from one CSV file (``mss provision``).

One CSV row a board: ``device_id`` (MQTT and serial boards; a LoRaWAN row may
give it as its The Things Stack end-device id), ``dev_eui`` (LoRaWAN),
``transport`` (mqtt, serial or lorawan), and optional columns:

* ``join_eui`` and ``app_key`` (LoRaWAN: the OTAA keys the network server and
  the modem share; a missing AppKey is generated);
* any field of the board config's ``device`` section as the firmware reads it
  (``mss_node.settings``), dotted for a sub-section: ``wifi.ssid``,
  ``mqtt.host``, ``mqtt.password``, ``period_s``, ``lorawan.uart``, ...

Every board's config is the campaign config with that board's ``device``
section merged in, and is checked with the firmware's own loader
(``mss_node.settings.Settings``) before anything is written; a bad row is one
:class:`ProvisionError` naming the row and the column.  An MQTT board logs in
with its device id as its username (the ACL names it so) and a generated
password, kept across runs (read back from its config file) unless rotated.

Written under the output folder: ``boards/<id>.json``; ``mosquitto/passwd``
(hashed by the real ``mosquitto_passwd -U``), ``mosquitto/acl`` (one user
block a device: its own report and status topics, the campaign's config
topic; the aggregator accounts read every report and status; a shuffled
campaign's accounts, :class:`ShuffleAccounts`) and ``mosquitto/<account>.password``
for each host account; with LoRaWAN rows,
``lorawan/chirpstack-devices.json`` (the bodies of ChirpStack v4's
``POST /api/devices`` and ``POST /api/devices/{devEui}/keys``; only with the
application and device-profile ids, without which ChirpStack refuses a device;
:mod:`mss_aggregator.network_server` posts them through its gRPC API) and
``lorawan/tts-devices.json`` (The Things Stack's end-device JSON, one object
after another, as ``ttn-lw-cli end-devices create`` and the Console's import
read it).  Every file but the ACL is created mode 0600 (each holds a secret).
"""
import csv
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mss_aggregator.deploy import DeployError
from mss_aggregator.deploy.merge import check_mqtt, for_board, get, put
from mss_aggregator.files import write_atomically
from mss_node.settings import Settings

TRANSPORTS = ("mqtt", "serial", "lorawan")
LORAWAN_COLUMNS = ("dev_eui", "join_eui", "app_key")  # for the network server, not the board
TEXT = {"device_id", "wifi.ssid", "wifi.password", "mqtt.host", "mqtt.user", "mqtt.password", "mqtt.ca",
        "mqtt.cert", "mqtt.key", "mqtt.server_hostname", "serial.path", "lorawan.path"}  # never parsed as JSON
HEX = re.compile(r"[0-9A-Fa-f]+\Z")
TTS_ID = re.compile(r"[a-z0-9](?:-?[a-z0-9]){2,}\Z")  # TTS: lowercase letters, digits, single hyphens, 3-36
PASSWORD_BYTES = 24  # secrets.token_urlsafe: 32 characters
SECRET_MODE = 0o600


class ProvisionError(ValueError):
    pass


@dataclass(frozen=True)
class ShuffleAccounts:
    """The broker accounts of a shuffled campaign (docs/privacy.md section 5), none by default.

    ``shuffler``: its collector reads every report; its forwarder, a connection of its own, logs in
    as ``<shuffler>-forward`` (where the client id is the username, as in docs/mosquitto, one
    account cannot hold both connections) and writes the batches only.  ``aggregators``: the
    accounts of ``mss aggregate --shuffled`` (one a worker), which read the batches only: none of
    them reads a report, a status or the config."""
    shuffler: str = None
    aggregators: tuple = ()

    @property
    def forwarder(self):
        return f"{self.shuffler}-forward" if self.shuffler else None

    def roles(self):
        """[(username, role)] of the accounts to write."""
        own = [(self.shuffler, "shuffler"), (self.forwarder, "shuffler's forwarder")] if self.shuffler else []
        return own + [(user, "shuffled aggregator") for user in self.aggregators]


class Board:
    """One CSV row: its merged config, and what the broker and network server need."""

    def __init__(self, row, device_id, transport, config, password=None, lorawan=None):
        self.row, self.device_id, self.transport, self.config = row, device_id, transport, config
        self.password = password  # MQTT
        self.lorawan = lorawan  # {"dev_eui", "join_eui", "app_key", "tts_id"}
        self.secret = None  # where the password or AppKey came from: given, kept or generated

    @property
    def name(self):
        """The board's file name stem: its device id, or its DevEUI (a LoRaWAN board reports under it)."""
        return self.device_id or self.lorawan["dev_eui"]


def read_rows(path):
    """[(row number as a spreadsheet shows it, {column: cell})] of the CSV file; blank rows skipped."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            if not reader.fieldnames:
                raise ProvisionError(f"{path}: no header row")
            header = [c.strip() for c in reader.fieldnames]
            if len(set(header)) < len(header) or "" in header:
                raise ProvisionError(f"{path}: the header has an empty or repeated column name")
            rows = []
            for cells in reader:
                if None in cells:
                    raise ProvisionError(f"{path} row {reader.line_num}: more cells than the header has columns")
                row = {c.strip(): (v or "").strip() for c, v in cells.items()}
                if any(row.values()):
                    rows.append((reader.line_num, row))
    except OSError as exc:
        raise ProvisionError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ProvisionError(f"{path}: not a CSV file: {exc}") from None
    if "transport" not in header:
        raise ProvisionError(f"{path}: no transport column (mqtt, serial or lorawan a row)")
    if not {"device_id", "dev_eui"} & set(header):
        raise ProvisionError(f"{path}: no device_id or dev_eui column")
    if not rows:
        raise ProvisionError(f"{path}: no boards")
    return rows


def cell_value(column, text):
    """A cell as the device field's value: JSON (numbers, true, null, objects) where it parses and the
    field is not text, else the text itself (as ``mss deploy --set`` reads a value)."""
    if column in TEXT:
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def hex_field(where, column, text, digits):
    if len(text) != digits or not HEX.match(text):
        raise ProvisionError(f"{where}: column {column}: {text!r} is not {digits} hex digits")
    return text.lower()


def board(path, line, row, campaign_cfg, campaign):
    """The :class:`Board` of one CSV row, its config checked by the firmware's loader."""
    where = f"{path} row {line}"
    transport = row.get("transport", "")
    if transport not in TRANSPORTS:
        raise ProvisionError(f"{where}: column transport: {transport!r} is not mqtt, serial or lorawan")
    cfg = json.loads(json.dumps(campaign_cfg))  # a deep copy: every board starts from the campaign's
    device = cfg.setdefault("device", {})
    if not isinstance(device, dict):
        raise ProvisionError(f"{where}: the campaign config's device section is not an object")
    device["campaign"] = campaign
    device["transport"] = transport
    device_id = row.get("device_id") or None
    lorawan = None
    if transport == "lorawan":
        for column in ("mqtt.user", "mqtt.password"):
            if row.get(column):
                raise ProvisionError(f"{where}: column {column}: a LoRaWAN board has no broker login")
        eui = row.get("dev_eui", "")
        if not eui:
            raise ProvisionError(f"{where}: column dev_eui: a LoRaWAN board needs its DevEUI")
        lorawan = {"dev_eui": hex_field(where, "dev_eui", eui, 16),
                   "join_eui": hex_field(where, "join_eui", row.get("join_eui") or "0" * 16, 16),
                   "app_key": row.get("app_key") and hex_field(where, "app_key", row["app_key"], 32)}
        tts_id = device_id or f"eui-{lorawan['dev_eui']}"  # the TTS Console's default id
        if not TTS_ID.match(tts_id) or len(tts_id) > 36:
            raise ProvisionError(f"{where}: column device_id: {tts_id!r} is no TTS end-device id "
                                 "(3-36 lowercase letters, digits and single hyphens)")
        lorawan["tts_id"] = tts_id
        # the board reports under its modem's DevEUI (docs/lorawan.md section 3): no device_id in its config
        device.pop("device_id", None)
        device_id = None
    else:
        for column in LORAWAN_COLUMNS:
            if row.get(column):
                raise ProvisionError(f"{where}: column {column}: only a LoRaWAN board has one")
        if not device_id:
            raise ProvisionError(f"{where}: column device_id: a {transport} board needs its id "
                                 "(its broker username and its reports' device id)")
        device["device_id"] = device_id
    for column, text in row.items():
        if column in ("device_id", "transport") + LORAWAN_COLUMNS or not text:
            continue
        try:
            put(device, column, cell_value(column, text))
        except ValueError as exc:
            raise ProvisionError(f"{where}: column {column}: {exc}") from None
    password = None
    if transport == "mqtt":
        password = get(device, "mqtt.password")
        if password is not None and (not isinstance(password, str) or not password or "\n" in password):
            raise ProvisionError(f"{where}: column mqtt.password: a password is one line of text")
        try:  # what mss deploy checks: a broker and a network to reach it, mqtt.user the device id
            check_mqtt(device)
            for_board(cfg)
        except DeployError as exc:
            raise ProvisionError(f"{where}: column {column_of(str(exc), row)}: {exc}") from None
    try:
        Settings(cfg)
    except ValueError as exc:
        raise ProvisionError(f"{where}: column {column_of(str(exc), row)}: {exc}") from None
    return Board(row=line, device_id=device_id, transport=transport, config=cfg, password=password, lorawan=lorawan)


def column_of(message, row):
    """The CSV column the firmware's message names (the longest ``device.<column>`` in it), else
    ``(campaign config)``: the field came from there."""
    named = [c for c in row if f"device.{c}" in message]
    return max(named, key=len) if named else "(campaign config)"


def read_fleet(path, campaign_cfg, campaign):
    """The boards of the CSV file at ``path``; ProvisionError at the first bad row or a repeated id."""
    boards, seen = [], {}
    for line, row in read_rows(path):
        b = board(path=path, line=line, row=row, campaign_cfg=campaign_cfg, campaign=campaign)
        keys = [("device_id", b.device_id)] if b.device_id else []
        if b.lorawan:
            keys += [("dev_eui", b.lorawan["dev_eui"]), ("device_id", b.lorawan["tts_id"])]
        for column, key in keys:
            if key in seen:
                raise ProvisionError(f"{path} row {line}: column {column}: {key} is also the id of row {seen[key]}")
            seen[key] = line
        boards.append(b)
    return boards


def keep_secrets(boards, out, rotate):
    """Fill in each board's password (MQTT) or AppKey (LoRaWAN): given in the CSV, else kept from the
    files of an earlier run (unless ``rotate``), else generated; ``Board.secret`` says which."""
    keys = {} if rotate else earlier_app_keys(out)
    for b in boards:
        if b.transport == "mqtt":
            if b.password is not None:
                b.secret = "given"
            else:
                old = None if rotate else read_json(out / "boards" / f"{b.name}.json", {})
                old = ((old or {}).get("device") or {}).get("mqtt", {}).get("password")
                b.password, b.secret = (old, "kept") if old else (secrets.token_urlsafe(PASSWORD_BYTES), "generated")
                b.config["device"]["mqtt"]["password"] = b.password
        elif b.transport == "lorawan":
            lw = b.lorawan
            if lw["app_key"]:
                b.secret = "given"
            else:
                old = keys.get(lw["dev_eui"])
                lw["app_key"], b.secret = (old, "kept") if old else (secrets.token_hex(16), "generated")


def board_logins(out):
    """(campaign, [(device id, password)]) of the MQTT boards :func:`provision` wrote under ``out``
    (``boards/*.json``), in the order of their names (dev2 before dev10); a ProvisionError where a
    file is no board config, the boards name several campaigns, or there is no MQTT board."""
    def natural(path):
        return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.stem)]

    campaigns, logins = set(), []
    for path in sorted((Path(out) / "boards").glob("*.json"), key=natural):
        try:
            device = json.loads(path.read_text())["device"]
            if device.get("transport") == "mqtt":
                logins.append((device["device_id"], device["mqtt"]["password"]))
                campaigns.add(device["campaign"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ProvisionError(f"{path}: not a board config written by provision ({exc!r})") from None
    if not logins:
        raise ProvisionError(f"{Path(out) / 'boards'}: no MQTT board config in it")
    if len(campaigns) > 1:
        raise ProvisionError(f"{Path(out) / 'boards'}: boards of several campaigns ({', '.join(sorted(campaigns))})")
    return campaigns.pop(), logins


def read_json(path, default):
    """An earlier run's file, or ``default`` where there is none (or it cannot be read as JSON)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return default


def write(path, text, secret=False):
    """Write ``path`` whole or not at all, mode 0600 if ``secret``."""
    write_atomically(path, text, SECRET_MODE if secret else 0o644)


def aggregator_password(out, user, rotate):
    """(password, how) of a host account (an aggregator's, a shuffler's), kept in
    ``mosquitto/<user>.password``."""
    path = out / "mosquitto" / f"{user}.password"
    try:
        old = None if rotate else path.read_text().strip()
    except OSError:
        old = None
    if old:
        return old, "kept"
    password = secrets.token_urlsafe(PASSWORD_BYTES)
    write(path, password + "\n", secret=True)
    return password, "generated"


def acl(campaign, devices, aggregators, shuffle=ShuffleAccounts()):
    """The Mosquitto ACL of the campaign: explicit per-user blocks (a ``pattern`` without ``%u`` warns
    at every start, and an explicit block gives an unlisted account nothing)."""
    base = f"mss/v1/{campaign}"
    lines = [f"# mss provision: campaign {campaign}. With an acl_file, Mosquitto denies what no line grants.",
             "# The aggregator accounts read every report and status, and write the campaign's config."]
    for user in aggregators:
        lines += ["", f"user {user}", f"topic read {base}/+/report", f"topic read {base}/+/status",
                  f"topic readwrite {base}/config"]
    if shuffle.shuffler:
        lines += ["", "# The shuffler (mss shuffle) reads every report and, as its forwarder's account, writes",
                  "# the shuffled batches.", "", f"user {shuffle.shuffler}", f"topic read {base}/+/report",
                  "", f"user {shuffle.forwarder}", f"topic write {base}/shuffled"]
    if shuffle.aggregators:
        lines += ["", "# The shuffled aggregators (mss aggregate --shuffled) read the batches only."]
    for user in shuffle.aggregators:
        lines += ["", f"user {user}", f"topic read {base}/shuffled"]
    lines += ["", "# Each device (username = its device id = its client id): its own report and status,",
              "# and the campaign's config."]
    for d in devices:
        lines += ["", f"user {d}", f"topic write {base}/{d}/report", f"topic write {base}/{d}/status",
                  f"topic read {base}/config"]
    return "\n".join(lines) + "\n"


def mosquitto_passwd():
    exe = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
    if not os.path.exists(exe):
        raise ProvisionError("mosquitto_passwd not found: install mosquitto (make system-deps, or "
                             "apt-get install mosquitto)")
    return exe


def password_file(path, logins):
    """Mosquitto's password file of ``logins`` ({user: password}), hashed by ``mosquitto_passwd -U``
    (one run for the whole fleet); the plain text only ever sits in a 0600 file beside it."""
    exe = mosquitto_passwd()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".passwd.")
    try:
        with os.fdopen(fd, "w") as fh:  # mkstemp: mode 0600 from the start
            fh.writelines(f"{user}:{password}\n" for user, password in logins.items())
        done = subprocess.run([exe, "-U", tmp], capture_output=True, text=True)
        if done.returncode:
            raise ProvisionError(f"mosquitto_passwd -U failed: {(done.stderr or done.stdout).strip()}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def chirpstack_bodies(boards, campaign, application, profile):
    """ChirpStack v4 API bodies, one a LoRaWAN board: ``device`` for POST /api/devices
    (CreateDeviceRequest) and ``deviceKeys`` for POST /api/devices/{devEui}/keys (its ``nwkKey``
    is a LoRaWAN 1.0.x AppKey).  ChirpStack refuses a device without its application and device
    profile: a ProvisionError where either id is missing."""
    if not (application and profile):
        raise ProvisionError("a ChirpStack device needs its application id and its device-profile id")
    out = []
    for b in boards:
        lw = b.lorawan
        device = {"devEui": lw["dev_eui"], "name": lw["tts_id"], "joinEui": lw["join_eui"],
                  "description": f"mss-iot campaign {campaign}", "tags": {"campaign": campaign},
                  "applicationId": application, "deviceProfileId": profile}
        out.append({"device": device, "deviceKeys": {"nwkKey": lw["app_key"]}})
    return out


def chirpstack_devices(boards, campaign, application, profile):
    """:func:`chirpstack_bodies` as the text of ``lorawan/chirpstack-devices.json``."""
    return json.dumps(chirpstack_bodies(boards, campaign, application, profile), indent=1) + "\n"


def earlier_app_keys(out):
    """{DevEUI: AppKey} of an earlier run's LoRaWAN device lists under ``out`` (either one: the
    ChirpStack list is written only with its ids)."""
    keys = {}
    try:
        text = (out / "lorawan" / "tts-devices.json").read_text()
    except OSError:
        text = ""
    decoder, at = json.JSONDecoder(), 0
    try:
        while text[at:].strip():  # a JSON stream: one object after another
            doc, at = decoder.raw_decode(text, len(text) - len(text[at:].lstrip()))
            keys[doc["ids"]["dev_eui"].lower()] = doc["root_keys"]["app_key"]["key"].lower()
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    for d in read_json(out / "lorawan" / "chirpstack-devices.json", []):
        keys[d["device"]["devEui"]] = d["deviceKeys"]["nwkKey"]
    return keys


def tts_devices(boards, campaign, frequency_plan=None, mac="MAC_V1_0_3", phy="PHY_V1_0_3_REV_A"):
    """The Things Stack v3 end devices, OTAA, class A, as its bulk import reads them: a JSON stream
    (one object after another, format ``the-things-stack``), for ``ttn-lw-cli end-devices create
    --application-id APP < tts-devices.json`` or the Console's *Import end devices*, with the
    fields its JSON File Reference requires (ids.device_id, ids.dev_eui, ids.join_eui,
    lorawan_version, lorawan_phy_version, frequency_plan_id, supports_join and, OTAA,
    root_keys.app_key.key); without ``frequency_plan`` the Console's fallback value gives it."""
    docs = []
    for b in boards:
        lw = b.lorawan
        doc = {"ids": {"device_id": lw["tts_id"], "dev_eui": lw["dev_eui"].upper(),
                       "join_eui": lw["join_eui"].upper()},
               "name": lw["tts_id"], "description": f"mss-iot campaign {campaign}",
               "lorawan_version": mac, "lorawan_phy_version": phy, "supports_join": True,
               "root_keys": {"app_key": {"key": lw["app_key"].upper()}}}
        if frequency_plan:
            doc["frequency_plan_id"] = frequency_plan
        docs.append(json.dumps(doc, indent=1))
        # no payload formatter: the aggregator reads the raw frm_payload (docs/lorawan.md section 3)
    return "\n".join(docs) + "\n"


def provision(boards, out, campaign, aggregators=("aggregator",), rotate=False, chirpstack=(None, None),
              frequency_plan=None, shuffle=ShuffleAccounts()):
    """Write every file of the fleet under ``out``; [(path, what)] of what was written, and the
    host accounts' {user: how} ("kept" or "generated"): the aggregators', then ``shuffle``'s.
    A fleet without MQTT boards and without ``shuffle`` accounts gets no ``mosquitto/`` files and
    no host accounts: its reports reach the aggregator through the network server's broker."""
    out = Path(out)
    if any(chirpstack) and not all(chirpstack):
        raise ProvisionError("a ChirpStack device needs its application id and its device-profile id: "
                             "one without the other makes a list ChirpStack refuses")
    mqtt = [b for b in boards if b.transport == "mqtt"]
    # no MQTT board and no shuffler: the devices report through the network server, no broker accounts here
    own_broker = bool(mqtt or shuffle.roles())
    if own_broker:
        mosquitto_passwd()  # missing: refused before anything is written
    keep_secrets(boards, out, rotate)
    written = []
    for b in boards:
        path = out / "boards" / f"{b.name}.json"
        write(path, json.dumps(b.config, indent=1) + "\n", secret=True)  # passwords, Wi-Fi's, a fleet key
        written.append((path, f"{b.transport} board"))
    logins, how = {}, {}
    if not own_broker:
        aggregators = ()
    for user in [*aggregators, *(user for user, _ in shuffle.roles())]:
        logins[user], how[user] = aggregator_password(out, user, rotate)
    logins.update((b.device_id, b.password) for b in mqtt)
    if own_broker:
        password_file(out / "mosquitto" / "passwd", logins)
        written.append((out / "mosquitto" / "passwd", f"{len(logins)} logins"))
        write(out / "mosquitto" / "acl", acl(campaign, [b.device_id for b in mqtt], aggregators, shuffle))
        written.append((out / "mosquitto" / "acl", f"campaign {campaign}"))
    lorawan = [b for b in boards if b.transport == "lorawan"]
    if lorawan:
        lists = [("tts-devices.json", tts_devices(lorawan, campaign, frequency_plan))]
        if all(chirpstack):
            lists.insert(0, ("chirpstack-devices.json", chirpstack_devices(lorawan, campaign, *chirpstack)))
        else:  # ChirpStack refuses a device without both ids: no list it cannot take (an earlier one goes)
            (out / "lorawan" / "chirpstack-devices.json").unlink(missing_ok=True)
        for name, text in lists:
            write(out / "lorawan" / name, text, secret=True)
            written.append((out / "lorawan" / name, f"{len(lorawan)} LoRaWAN devices"))
    return written, how
