"""A board's OTAA keys written into its LoRaWAN modem through the board (``mss deploy`` with keys).

The keys (DevEUI, JoinEUI, AppKey) are the ones ``mss provision`` wrote for the
network server, ``lorawan/tts-devices.json`` or ``chirpstack-devices.json`` under
its output folder (:func:`read_keys`); the board is the one whose config is ``boards/<name>.json``
there, ``<name>`` its TTS end-device id or its DevEUI.  The host never talks to
the modem: a short MicroPython script (:func:`board_script`), run on the board
with ``mpremote run`` once the firmware is on it, opens the modem's UART as the
firmware does (``mss_node.modem.open_modem`` on ``device.lorawan``), wakes it
with the dialect's own ``wake()`` and sends each command, printing the lines
each answer holds.  The script is a file of the host's temporary folder (mode
0600 by ``tempfile``), never a command-line argument, so the AppKey is in no
process list.

Two passes: the modem's keys are read back first, and a modem holding a DevEUI
or JoinEUI other than the board's (all zeros counts as none, as a new modem's) or, where the
modem lets it be read, another AppKey, is refused unless ``overwrite``; then the
keys are written and read back again, in a second run.  What each dialect allows:

* RAK3172, RUI3 (RAK3172 AT Command Manual, "Keys, IDs and EUI Management":
  ``AT+DEVEUI``, ``AT+APPEUI``, ``AT+APPKEY``, each ``=<hex>`` to write,
  ``=?`` to read, ``OK`` or ``AT_PARAM_ERROR``): all three read back, the
  AppKey too.
* Wio-E5 / LoRa-E5, Seeed AT firmware (LoRa-E5 AT Command Specification
  V1.0, ``AT+ID`` and ``AT+KEY``): ``AT+ID=DevEui,"<hex>"`` and
  ``AT+ID=AppEui,"<hex>"`` answer ``+ID: DevEui, 2C:F7:...`` (``AT+ID=DevEui``
  reads it); ``AT+KEY=APPKEY,"<hex>"`` answers ``+KEY: APPKEY <hex>`` (the key
  echoed: every line printed is masked) and there is no command reading it.
* RN2483 / RN2903 (Microchip RN2483 LoRa Technology Module Command Reference
  User's Guide, DS40001784, "mac set" / "mac get" / "mac save"):
  ``mac set deveui|appeui|appkey <hex>`` answer ``ok``, ``mac get deveui`` and
  ``mac get appeui`` read back, no ``mac get appkey`` exists; ``mac save``
  keeps them over a power cycle.

An AppKey the modem cannot read back is written every time (writing the same
key again changes nothing) and is not compared: the modem's answer to the
write is all that says it took it.
"""
import ast
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mss_aggregator.deploy import BOARD, CONFIG, DeployError
from mss_aggregator.deploy.modules import tool
from mss_node.lorawan_link import DEFAULTS as LORAWAN_DEFAULTS

PROVISIONED = ("lorawan/tts-devices.json", "lorawan/chirpstack-devices.json")  # under mss provision's output
DIGITS = {"dev_eui": 16, "join_eui": 16, "app_key": 32}  # hex digits of each key
TIMEOUT_MS = 3000  # per answer
RUN_TIMEOUT_S = 60
MARK = "mss-keys"  # the prefix of the script's lines


@dataclass(frozen=True)
class OtaaKeys:
    """One board's OTAA keys, lowercase hex; ``repr`` never shows the AppKey."""

    dev_eui: str
    join_eui: str
    app_key: str

    def __repr__(self):
        return f"OtaaKeys(dev_eui={self.dev_eui!r}, join_eui={self.join_eui!r}, app_key='***')"

    def secrets(self):
        """The AppKey as a modem or a file may print it (for masking)."""
        return [self.app_key, self.app_key.upper()]


@dataclass(frozen=True)
class Dialect:
    """A modem's key commands: ``read`` (field -> command), ``ends`` (prefixes ending an answer)."""

    read: dict
    ends: tuple

    def write(self, keys):
        """The commands writing ``keys``, in order."""
        raise NotImplementedError

    def value(self, field, lines):
        """The hex value of ``field`` in the answer ``lines`` to its read command, or None."""
        for line in lines:
            digits = line.split("=")[-1].split(",")[-1].replace(":", "").replace('"', "").strip().lower()
            if hex_text(digits, DIGITS[field]):
                return digits
        return None

    def refused(self, lines):
        """True if the answer ``lines`` to a write say it was not taken."""
        raise NotImplementedError


class Rak3172(Dialect):
    def write(self, keys):
        return [f"AT+DEVEUI={keys.dev_eui.upper()}", f"AT+APPEUI={keys.join_eui.upper()}",
                f"AT+APPKEY={keys.app_key.upper()}"]

    def refused(self, lines):
        return not lines or lines[-1] != "OK"


class WioE5(Dialect):
    def write(self, keys):
        return [f'AT+ID=DevEui,"{keys.dev_eui.upper()}"', f'AT+ID=AppEui,"{keys.join_eui.upper()}"',
                f'AT+KEY=APPKEY,"{keys.app_key.upper()}"']

    def refused(self, lines):
        return not lines or "ERROR" in lines[-1]


class Rn2483(Dialect):
    def write(self, keys):
        return [f"mac set deveui {keys.dev_eui.upper()}", f"mac set appeui {keys.join_eui.upper()}",
                f"mac set appkey {keys.app_key.upper()}", "mac save"]

    def refused(self, lines):
        return not lines or lines[-1] != "ok"


DIALECTS = {
    "rak3172": Rak3172({"dev_eui": "AT+DEVEUI=?", "join_eui": "AT+APPEUI=?", "app_key": "AT+APPKEY=?"},
                       ("OK", "AT_")),
    "wio-e5": WioE5({"dev_eui": "AT+ID=DevEui", "join_eui": "AT+ID=AppEui"}, ("+",)),
    "rn2483": Rn2483({"dev_eui": "mac get deveui", "join_eui": "mac get appeui"}, ("",)),
}
NAMES = {"dev_eui": "DevEUI", "join_eui": "JoinEUI", "app_key": "AppKey"}


def hex_text(text, digits):
    """``text`` as lowercase hex of ``digits`` digits, or None."""
    text = str(text or "").strip().lower()
    return text if len(text) == digits and all(c in "0123456789abcdef" for c in text) else None


def provisioned(doc):
    """((names the board goes by), (DevEUI, JoinEUI, AppKey) as written) of one device of mss
    provision's lists: The Things Stack's end device or a ChirpStack body; None if neither."""
    if not isinstance(doc, dict):
        return None
    if isinstance(doc.get("ids"), dict):  # tts-devices.json
        ids = doc["ids"]
        key = ((doc.get("root_keys") or {}).get("app_key") or {}).get("key")
        return ((ids.get("device_id"), str(ids.get("dev_eui", "")).lower()),
                (ids.get("dev_eui"), ids.get("join_eui"), key))
    if isinstance(doc.get("device"), dict):  # chirpstack-devices.json
        dev = doc["device"]
        return ((dev.get("name"), str(dev.get("devEui", "")).lower()),
                (dev.get("devEui"), dev.get("joinEui"), (doc.get("deviceKeys") or {}).get("nwkKey")))
    return None


def read_keys(path, name):
    """The :class:`OtaaKeys` of the board ``name`` (its TTS end-device id or DevEUI) in
    ``path``: mss provision's output folder (its ``lorawan/tts-devices.json``, always written,
    else ``lorawan/chirpstack-devices.json``) or one of those files."""
    path = Path(path)
    if path.is_dir():
        path = next((path / f for f in PROVISIONED if (path / f).exists()), path / PROVISIONED[0])
    docs, decoder, at = [], json.JSONDecoder(), 0
    try:
        text = path.read_text()
        while text[at:].strip():  # one JSON document (ChirpStack's list) or one after another (TTS)
            doc, at = decoder.raw_decode(text, len(text) - len(text[at:].lstrip()))
            docs.extend(doc if isinstance(doc, list) else [doc])
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DeployError(f"the keys file {path}: {exc}", CONFIG) from None
    for names, written in filter(None, map(provisioned, docs)):
        if name in names or name.lower() == names[1]:
            keys = [hex_text(value, n) for value, n in zip(written, DIGITS.values())]
            if None in keys:
                raise DeployError(f"the keys file {path}: {name}'s DevEUI, JoinEUI or AppKey is not hex of "
                                  "16, 16 and 32 digits", CONFIG)
            return OtaaKeys(*keys)
    raise DeployError(f"the keys file {path} has no device {name!r} (its end-device id or DevEUI)", CONFIG)


def board_script(lorawan, commands, ends):
    """MicroPython source that opens the modem of ``lorawan`` (the board's ``device.lorawan``,
    the firmware's defaults filled in), wakes it and sends ``commands``, printing
    ``mss-keys <i> <answer lines>`` for each."""
    cfg = dict(LORAWAN_DEFAULTS, **lorawan)
    return (f"from mss_node.modem import open_modem\nm = open_modem({cfg!r})\n"
            f"awake = m.wake()\nprint({MARK!r}, 'awake', int(awake))\n"
            f"for i, c in enumerate({list(commands)!r} if awake else []):\n"
            f" m.port.command(c)\n print({MARK!r}, i, m.port.until({TIMEOUT_MS}, *{tuple(ends)!r})[0])\n")


def answers(out, count):
    """The answer lines of each of ``count`` commands in the script's output ``out``."""
    found, awake = {}, False
    for line in out.splitlines():
        head, _, rest = line.strip().partition(" ")
        if head != MARK:
            continue
        i, _, lines = rest.partition(" ")
        if i == "awake":
            awake = lines == "1"
        elif i.isdigit():
            try:
                found[int(i)] = [str(x) for x in ast.literal_eval(lines)]
            except (ValueError, SyntaxError):
                pass
    if not awake:
        raise DeployError("the modem did not answer the board (check device.lorawan's uart, tx, rx, baud and "
                          "its wiring)", BOARD)
    if len(found) != count:
        raise DeployError(f"the board answered {len(found)} of {count} modem commands", BOARD)
    return [found[i] for i in range(count)]


def mpremote_runner(port, tmp):
    """A ``run(script) -> output`` running the script on the board at ``port`` (``mpremote run``
    of a file in the folder ``tmp``)."""
    def run(script):
        path = Path(tmp) / "modem_keys.py"
        path.write_text(script)
        path.chmod(0o600)
        try:
            done = subprocess.run([tool("mpremote"), "connect", port, "run", str(path)], capture_output=True,
                                  text=True, timeout=RUN_TIMEOUT_S)
        except FileNotFoundError:
            raise DeployError("mpremote is not installed (pip install mpremote)", BOARD) from None
        except subprocess.TimeoutExpired:
            raise DeployError(f"no answer from the board in {RUN_TIMEOUT_S} s", BOARD) from None
        finally:
            path.unlink()
        if done.returncode:
            lines = [x for x in (done.stderr or done.stdout).splitlines() if x.strip()]
            raise DeployError(f"the modem script failed on the board ({lines[-1] if lines else 'no output'})", BOARD)
        return done.stdout
    return run


def read_back(dialect, lorawan, run, first=()):
    """(the answer lines to each of the commands ``first``, {field: hex or None} of what the
    modem then answers for each field it lets be read), in one run of the board script."""
    d = DIALECTS[dialect]
    fields = list(d.read)
    commands = list(first) + [d.read[f] for f in fields]
    got = answers(run(board_script(lorawan, commands, d.ends)), len(commands))
    return got[:len(first)], {f: d.value(f, lines) for f, lines in zip(fields, got[len(first):])}


def differing(held, keys):
    """The names of the keys the modem holds (``held``, from :func:`read_back`) that differ from
    ``keys``; a field it did not answer, or all zeros, counts as none."""
    return [NAMES[f] for f, value in held.items() if value is not None and set(value) != {"0"}
            and value != getattr(keys, f)]


def write_keys(keys, lorawan, run, overwrite=False):
    """Write ``keys`` into the modem of ``lorawan`` (the board's ``device.lorawan``) with ``run``
    (script -> output, :func:`mpremote_runner`); return lines saying what was done, no key in
    them.  DeployError: the modem holds other keys and not ``overwrite``, refuses a write, or
    reads back other keys after the write."""
    dialect = lorawan.get("modem", LORAWAN_DEFAULTS["modem"])
    d = DIALECTS[dialect]
    before = read_back(dialect, lorawan, run)[1]
    other = differing(before, keys)
    if other and not overwrite:
        raise DeployError(f"the modem holds another {' and '.join(other)} than the board's (a modem of another "
                          "board?): overwrite its keys if this modem is the board's", CONFIG, option="overwrite_keys")
    commands = d.write(keys)
    written, after = read_back(dialect, lorawan, run, first=commands)  # the writes, then the read-back
    for command, lines in zip(commands, written):
        if d.refused(lines):
            what = command.split("=")[0] if "=" in command else " ".join(command.split()[:3])
            raise DeployError(f"the modem refused {what} ({lines[-1] if lines else 'no answer'})", BOARD)
    wrong = [NAMES[f] for f, value in after.items() if value != getattr(keys, f)]
    if wrong:
        raise DeployError(f"the modem reads back another {' and '.join(wrong)} after the write", BOARD)
    unread = [NAMES[f] for f in NAMES if f not in d.read]
    done = [f"{', '.join(NAMES[f] for f in after)} read back equal"
            + (f"; {', '.join(unread)} written (the {dialect} cannot read it back: not compared)" if unread else "")]
    if other:
        done.insert(0, f"overwrote the modem's {' and '.join(other)}")
    return done


def dry_run_lines(keys, lorawan):
    """The commands a deploy would send to the modem, the AppKey masked."""
    d = DIALECTS[lorawan.get("modem", LORAWAN_DEFAULTS["modem"])]
    masked = [c.replace(keys.app_key.upper(), "***") for c in d.write(keys)]
    return [f"read back: {'; '.join(d.read.values())}",
            f"write: {'; '.join(masked)}, then read back: {'; '.join(d.read.values())}"]
