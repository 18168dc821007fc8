"""Serial lines (SPEC.md section 8): what the board writes (the host reads
them with :func:`mss_device.gateway.parse`).

One ASCII line a report, ``$MSS2,<device id>,<report hex>,<crc>\\n``: crc is
CRC-16/CCITT-FALSE of the ASCII bytes before the last comma, 4 lowercase
hex digits.  The device id (checked by mss_node.settings) is on the line
because OLH's hash seed is derived from it and several boards may share a
port.
"""
HEAD = "$MSS2,"


def crc16(data):
    """CRC-16/CCITT-FALSE of ``data`` (bytes); small ints only."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def frame(device_id, report):
    """The line of ``report`` (bytes) sent by ``device_id``, its LF included."""
    return _line(device_id, report.hex())


def status_line(device_id, word):
    """The line of a status ``word`` (``no-clock``: the board has no clock, its reports
    wait for the time), written ``!<word>`` where a report's hex is (SPEC.md section 8)."""
    return _line(device_id, "!" + word)


def _line(device_id, field):
    line = "%s%s,%s" % (HEAD, device_id, field)
    return "%s,%04x\n" % (line, crc16(line.encode()))
