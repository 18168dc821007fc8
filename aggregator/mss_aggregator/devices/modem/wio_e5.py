"""The Seeed LoRa-E5 / Wio-E5 AT commands (firmware: ``mss_node/modem/wio_e5.py``).  A line
while it sleeps wakes it with ``+LOWPOWER: WAKEUP`` without being run."""
from mss_aggregator.devices.modem.base import ModemEmulator

IDS = {"DevEui": "dev_eui", "AppEui": "join_eui"}  # AT+ID=<name>[,"<hex>"]


class WioE5(ModemEmulator):
    SLEEP_COMMAND = "AT+LOWPOWER="

    def _while_asleep(self, text, now):
        self._wakes(now)
        self._say("+LOWPOWER: WAKEUP")  # the line that woke it is not run
        return False

    def _answer(self, text):
        if text == "AT":
            self._say("+AT: OK")
        elif text == "AT+LOWPOWER" or text.startswith("AT+LOWPOWER="):
            ms = text[12:]
            if text != "AT+LOWPOWER" and not ms.isdigit():
                self._say("+LOWPOWER: ERROR(-1)")
                return
            self._sleep(int(ms) if ms else None)
            self._say("+LOWPOWER: SLEEP")
        elif text.startswith("AT+ID=") and text[6:].split(",")[0] in IDS:
            name, comma, value = text[6:].partition(",")
            if comma and not self._set_key(IDS[name], value):
                self._say("+ID: ERROR(-1)")
                return
            held = getattr(self, IDS[name])
            self._say(f"+ID: {name}, {':'.join(held[i:i + 2].upper() for i in range(0, 16, 2))}")
        elif text.startswith("AT+KEY=APPKEY,"):  # no command reads it back
            self._say(f"+KEY: APPKEY {self.app_key.upper()}" if self._set_key("app_key", text[14:])
                      else "+KEY: ERROR(-1)")
        elif text.startswith("AT+PORT="):
            self.fport = int(text[8:]) if text[8:].isdigit() else self.fport
            self._say(f"+PORT: {self.fport}")
        elif text == "AT+LW=DTR":
            self._timereq = True
            self._say("+LW: DTR")
        elif text == "AT+RTC=UTCMS":
            d = self._rtc(1577836800)  # the module's RTC starts at 2020-01-01 at power-up
            if self.time_reply == "garbage":
                self._say(f"+RTC: {d:%Y/%m/%dT%H:%M:%SZ}")
            else:
                self._say(f"+RTC: {d:%Y-%m-%d %H:%M:%S}.{d.microsecond // 1000:03d}")
        elif text == "AT+JOIN":
            if self.joined:
                self._say("+JOIN: Joined already")
                return
            ok, fault = self._join()
            if fault == "busy":
                self._say("+JOIN: LoRaWAN modem is busy")
                return
            self._join_radio(ok)
            self._say("+JOIN: Start", "+JOIN: NORMAL")
            if ok:
                self._say("+JOIN: Network joined", "+JOIN: NetID 000013 DevAddr 26:01:1B:2C", "+JOIN: Done",
                          delay=self.join_delay_s)
            else:
                self._say("+JOIN: Join failed", "+JOIN: Done", delay=self.join_delay_s)
        elif text.startswith("AT+MSGHEX="):
            outcome, down = self._uplink(self.fport, text[10:].strip('"'))
            refusal = {"unjoined": "Please join network first", "busy": "LoRaWAN modem is busy",
                       "no_channel": "No free channel", "duty_cycle": "No band in 2340ms",
                       "length": f"Length error {min(self.max_payload, 11)}", "param": "Parameter error",
                       "mac_err": "No free channel"}
            if outcome in refusal:
                self._say(f"+MSGHEX: {refusal[outcome]}")
                return
            self._say("+MSGHEX: Start")
            if self._timereq:
                self._device_time()
            lines = []
            if down:
                lines = ["+MSGHEX: FPENDING", f'+MSGHEX: PORT: {down[0]}; RX: "{down[1]}"',
                         "+MSGHEX: RXWIN1, RSSI -70, SNR 5.5"]
            if outcome == "sent":
                lines.append("+MSGHEX: Done")
            if lines:
                self._say(*lines, delay=self.tx_delay_s)
        else:
            self._say("+AT: ERROR(-1)")

