"""The host's side of serial lines (SPEC.md section 8): the device id and
report bytes of a line the board wrote with :func:`mss_device.framing.frame`.
Host code only (it uses ``re``): a board never reads lines, so this module
is never deployed.  ``DEVICE_ID`` is the host's one definition of a device id
(MQTT topics and serial lines; the board checks the same set in
mss_node.settings).
"""
import re

from mss_device.framing import HEAD, crc16

DEVICE_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}\Z")
MARK = "$MSS"  # a line that does not start with it is console output
_REPORT = re.compile(r"(?:[0-9a-f]{2})+\Z")
_CRC = re.compile(r"[0-9a-f]{4}\Z")
_STATUS = re.compile(r"![a-z][a-z0-9-]{0,31}\Z")  # no-clock, skipped-<epoch>


class LineError(ValueError):
    """A line that starts with MARK but is not a good line: ``reason`` is
    ``frame`` (malformed) or ``checksum``; str() is ``"<reason>: <detail>"``."""

    def __init__(self, reason, detail):
        super().__init__("%s: %s" % (reason, detail))
        self.reason, self.detail = reason, detail


def split_lines(buffer):
    """(lines, rest) of ``buffer`` (bytes read from a port): each complete line, its LF
    taken off, and the bytes after the last LF, which are no line yet (SPEC.md section 8:
    they wait for their LF; a reader that stops or loses the port drops them)."""
    *lines, rest = buffer.split(b"\n")
    return lines, rest


def parse_status(line):
    """(device id, word) of a good status line ``$MSS2,<device id>,!<word>,<crc>`` (SPEC.md
    section 8: ``no-clock``, the board has no clock; ``skipped-<epoch>``, its budget is spent), else None (:func:`parse` says why not)."""
    if isinstance(line, (bytes, bytearray)):
        try:
            line = bytes(line).decode("ascii")
        except UnicodeDecodeError:
            return None
    line = line[:-1] if line.endswith("\n") else line
    line = line[:-1] if line.endswith("\r") else line
    fields = line.split(",")
    if (len(fields) != 4 or fields[0] + "," != HEAD or not DEVICE_ID.match(fields[1])
            or not _STATUS.match(fields[2]) or not _CRC.match(fields[3])
            or crc16(line[:-5].encode()) != int(fields[3], 16)):
        return None
    return fields[1], fields[2][1:]


def parse(line):
    """(device id, report bytes) of one line (str or bytes, with or without its
    LF; one CR before it is tolerated); None for console output (a line not
    starting with MARK); LineError otherwise."""
    if isinstance(line, (bytes, bytearray)):
        try:
            line = bytes(line).decode("ascii")
        except UnicodeDecodeError:
            if not line.startswith(MARK.encode()):
                return None
            raise LineError("frame", "not ASCII") from None
    if line.endswith("\n"):
        line = line[:-1]
    if line.endswith("\r"):
        line = line[:-1]
    if not line.startswith(MARK):
        return None
    if line.startswith("$MSS1,"):
        raise LineError("frame", "format 1 ($MSS1) carries no device id: reflash the board")
    if "\r" in line or "\n" in line:
        raise LineError("frame", "a CR or LF inside the line")
    fields = line.split(",")
    if len(fields) != 4 or fields[0] + "," != HEAD:
        raise LineError("frame", "not %s<device id>,<report hex>,<crc>" % HEAD)
    _, device_id, hex_, crc = fields
    if not DEVICE_ID.match(device_id):
        raise LineError("frame", "device id not 1-64 of A-Z a-z 0-9 _.:-")
    if not _REPORT.match(hex_):
        raise LineError("frame", "report not a non-empty even number of lowercase hex digits")
    if not _CRC.match(crc):
        raise LineError("frame", "crc not 4 lowercase hex digits")
    if crc16(line[:-5].encode()) != int(crc, 16):
        raise LineError("checksum", "CRC mismatch")
    return device_id, bytes.fromhex(hex_)
