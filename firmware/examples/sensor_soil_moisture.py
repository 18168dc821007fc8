# A sensor.py for a capacitive soil-moisture probe (the common "v1.2" board, or any probe whose
# output voltage falls as the soil gets wetter) on an ADC pin: the moisture in 10 % steps, so
# k = 10 (plan with mss plan --k 10 ...):
#
#     mss deploy --config cfg.json --sensor firmware/examples/sensor_soil_moisture.py ...
#
# Calibrate first, on the board and probe you deploy: read the ADC with the probe in dry air
# and with it in a glass of water up to its line, and put the two readings in DRY and WET:
#
#     mpremote exec "import machine; print(machine.ADC(machine.Pin(26)).read_u16())"
#
# The values below are only a starting point (a 3.3 V probe on a Pico's GP26: about 2.5 V dry,
# 1.1 V in water); probes differ by tens of percent.  On an ESP32 use an ADC1 pin (32-39) and
# machine.ADC(pin, atten=machine.ADC.ATTN_11DB), so that the 0-3.3 V range is read.
# POWER (optional): a GPIO that powers the probe only while it is read (a few mA saved between
# reports on a battery board); None: the probe is wired to 3V3.  Integers only, like the firmware.
import machine
import time

PIN = 26  # ADC0 on a Pico / Pico W
POWER = None  # e.g. 22: the GPIO feeding the probe's VCC
DRY = 49650  # read_u16() in dry air: 0 %
WET = 21850  # read_u16() in water: 100 %
K = 10  # buckets of 10 %: 0-9 %, ..., 90-100 % (100 % joins the last one)
SAMPLES = 8  # readings averaged: the ADC's noise is a few LSB of 12
_adc = None  # made on first use: the unix port (tests) has no ADC


def category_of(raw):
    """The bucket of an averaged 16-bit reading (read_u16): 0 (driest) .. K - 1 (wettest), clamped."""
    percent = (DRY - raw) * 100 // (DRY - WET)
    return min(max(percent * K // 100, 0), K - 1)


def read_category():
    global _adc
    power = None
    if POWER is not None:
        power = machine.Pin(POWER, machine.Pin.OUT, value=1)
        time.sleep_ms(100)  # let its output settle (check yours: read twice, compare)
    if _adc is None:
        _adc = machine.ADC(machine.Pin(PIN))
    total = 0
    for _ in range(SAMPLES):
        total += _adc.read_u16()
    if power is not None:
        power.value(0)
    return category_of(total // SAMPLES)
