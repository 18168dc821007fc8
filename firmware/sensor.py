# Your sensor adapter: return the current category, an int in [0, k).
# The raw reading stays on the board; only a privatised report leaves it.
# Examples (replace the body of read_category with one of them):
#
#   Temperature in 2-degree buckets from -20 C (k = 32):
#       import esp32
#       c = (esp32.raw_temperature() - 32) * 5 // 9
#       return min(max((c + 20) // 2, 0), 31)
#
#   Button presses counted since boot, capped (k = 16):
#       return min(presses, 15)
#
#   Wi-Fi channel in use (k = 14):
#       import network
#       return network.WLAN(network.STA_IF).config("channel") - 1
#
# Returning anything else (None, a float, an out-of-range int) is logged
# and no report is sent for that period.
#
# Whole files to start from, for mss deploy --sensor FILE: firmware/examples/
# (sensor_pico_w.py: the Pico W's temperature; sensor_soil_moisture.py: a
# capacitive soil-moisture probe on an ADC pin).  This placeholder returns 0
# for ever: mss deploy warns when it flashes it.


def read_category():
    return 0
