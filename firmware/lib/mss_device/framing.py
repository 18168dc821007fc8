"""Serial framing of reports (SPEC.md section 8): what the board writes
(the gateway reads lines with :func:`mss_device.gateway.parse`).

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
