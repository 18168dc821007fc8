"""Serial framing of reports (SPEC.md section 8), shared by device and gateway.

A frame is one ASCII line ``$MSS1,<report hex>,<crc hex>\\n`` where crc is
CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF) of the report bytes as 4
lowercase hex digits.  Lines are easy to pick out of a USB console that
also carries log output; anything else on the line is ignored by readers.
"""
PREFIX = "$MSS1,"


def crc16(data):
    """CRC-16/CCITT-FALSE of ``data``; small ints only."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def frame(report):
    return "%s%s,%04x\n" % (PREFIX, report.hex(), crc16(report))


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
