# A sensor.py for a Raspberry Pi Pico W (RP2040): its internal temperature sensor, in
# 2-degree buckets from -20 C, so k = 32 (plan with mss plan --k 32 ...):
#
#     mss deploy --config cfg.json --sensor firmware/examples/sensor_pico_w.py ...
#
# The sensor is ADC channel 4 (machine.ADC(4)); the RP2040 datasheet (section 4.9.5) gives
# T = 27 - (V - 0.706) / 0.001721 with V the voltage read against the 3.3 V reference.  It
# measures the chip, not the room: a board in its case reads a few degrees warm, and the
# ADC's own error is about +-2 C, one bucket.  Integers only, like the firmware.
import machine

LOW_C = -20  # bucket 0: below -18 C (and anything colder)
STEP_C = 2
K = 32  # buckets: the config's k; the last one holds 42 C and above
_adc = None  # made on first use: the unix port (tests) has no ADC


def category_of(raw):
    """The bucket of a 16-bit ADC reading (read_u16) of the temperature sensor."""
    mv = raw * 3300 // 65535
    milli_c = 27000 - (mv - 706) * 1000000 // 1721
    return min(max((milli_c - LOW_C * 1000) // (STEP_C * 1000), 0), K - 1)


def read_category():
    global _adc
    if _adc is None:
        _adc = machine.ADC(4)
    return category_of(_adc.read_u16())
