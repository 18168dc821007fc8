"""The gateway's side of serial framing (SPEC.md section 8): report bytes from a
line the board wrote with :func:`mss_device.framing.frame`.  Host code only: a board
never reads frames, so this module is never deployed.
"""
from mss_device.framing import PREFIX, crc16


def parse(line):
    """Report bytes of a frame line; ValueError('checksum'/'frame') otherwise."""
    if isinstance(line, (bytes, bytearray)):
        line = line.decode("ascii", "replace")
    line = line.strip()
    if not line.startswith(PREFIX):
        raise ValueError("frame: not an MSS frame")
    parts = line[len(PREFIX):].split(",")
    if len(parts) != 2 or len(parts[1]) != 4:
        raise ValueError("frame: malformed frame")
    try:
        report = bytes.fromhex(parts[0])
        crc = int(parts[1], 16)
    except ValueError:
        raise ValueError("frame: bad hex")
    if crc16(report) != crc:
        raise ValueError("checksum: CRC mismatch")
    return report
