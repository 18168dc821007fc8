"""The budget's ledger kept in a second place (SPEC.md section 10, "Budget", "The second
copy"), so that deleting or corrupting state.json never refunds a spent budget.

Where: on an ESP32 an NVS blob (namespace ``mss``, keys ``ledger`` and ``ledger_n``, at
least its length: ``get_blob`` needs a buffer that large): NVS is a flash partition of its own, untouched by deleting files, a wiped
filesystem or a reflash of the firmware image (``esptool erase_flash`` erases it).
Elsewhere (RP2040, the unix port) the file ``ledger.json`` beside state.json, written
atomically (:mod:`mss_node.files`): it survives losing state.json, not a wiped filesystem.

What: one text, ``<digest> <bt>;<hi>,<lo>,<t>,...;...``: the board time of the write and
the ledger's groups (state.json's ``spent``), after the first 16 hex digits of its
SHA-256.  A copy that is absent, fails its digest or fails the checks of state.json's
ledger (:func:`mss_node.state.valid_ledger`) is ignored: it never refunds.  Written by
:mod:`mss_node.ledger` when the ledger grows (a fresh draw, before the write that queues
its report; a boot that found more in state.json than here): one more flash write a fresh
draw, none a re-send or a skip.
"""
import hashlib
from binascii import hexlify

from mss_node import files, log
from mss_node.state import valid_ledger

_DIGEST = 8  # bytes of SHA-256 kept: a torn or edited copy is found, not forged (whoever can write
# the flash can reflash the firmware too)


def encode(spent, bt):
    """The copy of ledger ``spent`` written at board time ``bt``: ``<digest> <text>``."""
    text = ";".join(["%d" % bt] + [",".join(["%d" % x for x in g]) for g in spent])
    return _digest(text) + " " + text


def decode(line):
    """(spent, bt) of a copy, or None if it is not one (torn, edited, not a ledger)."""
    if not isinstance(line, str):
        return None
    i = line.find(" ")
    text = line[i + 1:]
    if i < 0 or line[:i] != _digest(text):
        return None
    try:
        parts = text.split(";")
        bt = int(parts[0])
        spent = [[int(x) for x in p.split(",")] for p in parts[1:]]
    except ValueError:
        return None
    return (spent, bt) if valid_ledger(spent, bt) else None


def _digest(text):
    return hexlify(hashlib.sha256(text.encode()).digest()[:_DIGEST]).decode()


class Copy:
    """The second copy of the ledger of the board whose state file is ``state_path``."""

    def __init__(self, state_path):
        self.nvs = None
        try:
            from esp32 import NVS

            self.nvs = NVS("mss")
            self.where = "NVS mss/ledger"
        except (ImportError, OSError):  # not an ESP32 (or no NVS partition): a file beside state.json
            i = state_path.rfind("/")
            self.path = state_path[:i + 1] + "ledger.json"
            self.where = self.path

    def load(self):
        """(spent, bt) kept here, or None: none yet, or unreadable (said in the log)."""
        line = self._read()
        if line is None:
            return None
        kept = decode(line)
        if kept is None:
            log.warn("the ledger's second copy (%s) is corrupt: ignored" % self.where)
        return kept

    def save(self, spent, bt):
        line = encode(spent, bt)
        if self.nvs is None:
            files.save(self.path, line)
            return
        data = line.encode()
        try:
            n = self.nvs.get_i32("ledger_n")
        except OSError:
            n = 0
        if len(data) > n:  # the length first when it grows: a cut between the two never leaves it short
            self.nvs.set_i32("ledger_n", len(data))
        self.nvs.set_blob("ledger", data)  # NVS replaces an entry whole (power-loss safe)
        if len(data) < n:
            self.nvs.set_i32("ledger_n", len(data))
        self.nvs.commit()

    def _read(self):
        if self.nvs is None:
            return files.load(self.path)
        try:
            buf = bytearray(self.nvs.get_i32("ledger_n"))
            n = self.nvs.get_blob("ledger", buf)  # OSError: absent (or ledger_n damaged)
            return bytes(buf[:n]).decode()
        except (OSError, ValueError, UnicodeError):
            return None
