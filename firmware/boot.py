# Runs first on the board: bring up Wi-Fi (the ESP32 RNG is only truly
# random with the radio on) and put lib/ on the path.  Must return.
import sys

if "lib" not in sys.path:
    sys.path.append("lib")

try:
    import json
    import network
    import time

    with open("config.json") as fh:
        wifi = json.load(fh).get("device", {}).get("wifi", {})
    if wifi.get("ssid"):
        sta = network.WLAN(network.STA_IF)
        sta.active(True)
        if not sta.isconnected():
            sta.connect(wifi["ssid"], wifi.get("password") or "")
            for _ in range(100):
                if sta.isconnected():
                    break
                time.sleep_ms(100)
        print("wifi:", sta.ifconfig() if sta.isconnected() else "not connected")
        if sta.isconnected():
            # epochs come from the clock: set it (an ESP32 starts at 2000).  Without Wi-Fi a
            # LoRaWAN board asks the network for the time (DeviceTimeReq) or paces its compact
            # reports (mss_node.pace); a full-frame board waits, saying so once a minute.
            import ntptime

            ntptime.settime()
except Exception as exc:  # boot.py must never stop the board from reaching main.py
    print("boot:", repr(exc))
