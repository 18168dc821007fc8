"""The RAK3172's RUI3 AT commands, in the old and the colon-separated event forms
(firmware: ``mss_node/modem/rak3172.py``).  In Stop1 the UART wakes it and the
command runs."""
from mss_aggregator.devices.modem.base import ModemEmulator

KEYS = {"DEVEUI": "dev_eui", "APPEUI": "join_eui", "APPKEY": "app_key"}  # AT+<name>=<hex> / =?


class Rak3172(ModemEmulator):
    SLEEP_COMMAND = "AT+SLEEP="

    def _while_asleep(self, text, now):
        self._wakes(now)
        return True

    def _answer(self, text):
        old = self.dialect == "rak3172-old"
        if text == "AT":
            self._say("OK")
        elif text == "AT+SLEEP" or text.startswith("AT+SLEEP="):
            ms = text[9:]
            if text != "AT+SLEEP" and not (ms.isdigit() and 1 <= int(ms) < 2 ** 32):
                self._say("AT_PARAM_ERROR")
                return
            self._sleep(int(ms) if ms else None)  # from now: the board may sleep on the answer
            self._say("OK")
        elif text[3:].split("=")[0] in KEYS and "=" in text:
            name, value = text[3:].split("=", 1)
            if value == "?":  # RUI3 reads back all three, the AppKey too
                held = getattr(self, KEYS[name]).upper()
                self._say(held if old else f"AT+{name}={held}", "OK")
            else:
                self._say("OK" if self._set_key(KEYS[name], value) else "AT_PARAM_ERROR")
        elif text == "AT+NJS=?":
            self._say(str(int(self.joined)) if old else f"AT+NJS={int(self.joined)}", "OK")
        elif text.startswith("AT+TIMEREQ="):
            arg = text[11:]
            if arg == "?":
                self._say(str(int(self._timereq)) if old else f"AT+TIMEREQ={int(self._timereq)}", "OK")
            elif arg not in ("0", "1"):
                self._say("AT_PARAM_ERROR")
            elif not self.joined:
                self._say("AT_NO_NETWORK_JOINED")
            else:
                self._timereq = arg == "1"
                self._say("OK")
        elif text == "AT+LTIME=?":
            d = self._rtc(0)
            if self.time_reply == "garbage":
                self._say("LTIME: 25h61m??s on 13/45/20x3", "OK")
            elif old:
                self._say(f"LTIME: {d:%H}h{d:%M}m{d:%S}s {d:%Y-%m-%d}", "OK")
            else:
                self._say(f"LTIME: {d:%H}h{d:%M}m{d:%S}s on {d:%m/%d/%Y}", "OK")
        elif text.startswith("AT+JOIN="):
            ok, fault = self._join()
            if fault == "busy":
                self._say("AT_BUSY_ERROR")
                return
            self._join_radio(ok)
            self._say("OK")
            self._say("+EVT:JOINED" if ok else ("+EVT:JOIN FAILED" if old else "+EVT:JOIN_FAILED_RX_TIMEOUT"),
                      delay=self.join_delay_s)
        elif text.startswith("AT+SEND="):
            port, _, hexdata = text[8:].partition(":")
            outcome, down = self._uplink(int(port) if port.isdigit() else 0, hexdata)
            refusal = {"unjoined": "AT_NO_NETWORK_JOINED", "busy": "AT_BUSY_ERROR",
                       "no_channel": "AT_BUSY_ERROR", "duty_cycle": "AT_BUSY_ERROR",
                       "length": "AT_PARAM_ERROR", "param": "AT_PARAM_ERROR", "mac_err": "AT_ERROR"}
            if outcome in refusal:
                self._say(refusal[outcome])
                return
            self._say("OK")
            lines = []
            if down:
                lines = (["+EVT:RX_1, RSSI -52, SNR 9", "+EVT:UNICAST", f"+EVT:{down[0]}:{down[1]}"] if old
                         else [f"+EVT:RX_1:-52:9:UNICAST:{down[0]}:{down[1]}"])
            timereq = None
            if self._timereq:
                timereq = "+EVT:TIMEREQ_OK" if self._device_time() else "+EVT:TIMEREQ_FAILED"
                if not self.timereq_after_done:
                    lines.append(timereq)
            if outcome == "sent":
                lines.append("+EVT:TX_DONE")
            if timereq and self.timereq_after_done:
                lines.append(timereq)
            if lines:
                self._say(*lines, delay=self.tx_delay_s)
        else:
            self._say("AT_ERROR")

