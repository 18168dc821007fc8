"""The Microchip RN2483 / RN2903 text commands (firmware: ``mss_node/modem/rn2483.py``).
Asleep it hears nothing but a break then 0x55 (auto-baud), which wakes it; ``sys sleep``
is answered ``ok`` when it wakes."""
from mss_aggregator.devices.modem.base import ModemEmulator

RN_VERSION = "RN2483 1.0.5 Oct 31 2018 15:06:52"  # as field modules print it (sys get ver)


KEYS = {"deveui": "dev_eui", "appeui": "join_eui", "appkey": "app_key"}  # mac set <name> <hex>


class Rn2483(ModemEmulator):
    SLEEP_COMMAND = "sys sleep "

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._saved = (self.dev_eui, self.join_eui, self.app_key)  # what mac save keeps over a power cycle

    def power_off(self):
        super().power_off()
        self.dev_eui, self.join_eui, self.app_key = self._saved

    def _timer_woke(self):
        self._say("ok")  # the answer to sys sleep

    def _while_asleep(self, text, now):
        if not (text.startswith("\x00") and text.lstrip("\x00").startswith("U")):
            self.lost += 1  # asleep, an RN2483 hears nothing but a break
            return False
        self._wakes(now)
        self._say("ok")  # the answer to sys sleep
        return True

    def _answer(self, text):
        if text.startswith("\x00"):  # a break (a NUL on the pty) then 0x55: auto-baud, not a command
            text = text.lstrip("\x00")
            text = text[1:] if text.startswith("U") else text
            if not text:
                return
        if text in ("mac get deveui", "mac get appeui"):  # no mac get appkey: invalid_param
            self._say(getattr(self, KEYS[text[8:]]).upper())
        elif text.startswith("mac set ") and text[8:].split(" ")[0] in KEYS:
            name, _, value = text[8:].partition(" ")
            self._say("ok" if self._set_key(KEYS[name], value) else "invalid_param")
        elif text == "mac save":
            self._saved = (self.dev_eui, self.join_eui, self.app_key)
            self._say("ok")
        elif text == "sys get ver":
            self._say(RN_VERSION)
        elif text.startswith("sys sleep "):
            ms = text[10:]
            if not (ms.isdigit() and 100 <= int(ms) <= 2 ** 32):
                self._say("invalid_param")
                return
            self._sleep(int(ms))  # "ok" when it wakes
        elif text == "mac join otaa":
            ok, fault = self._join()
            if fault == "busy":
                self._say("busy")
                return
            self._join_radio(ok)
            self._say("ok")
            self._say("accepted" if ok else "denied", delay=self.join_delay_s)
        elif text.startswith("mac tx uncnf "):
            port, _, hexdata = text[13:].partition(" ")
            outcome, down = self._uplink(int(port) if port.isdigit() else 0, hexdata)
            immediate = {"unjoined": "not_joined", "busy": "busy", "no_channel": "no_free_ch",
                         "duty_cycle": "no_free_ch", "param": "invalid_param"}
            if outcome in immediate:
                self._say(immediate[outcome])
                return
            self._say("ok")
            if outcome in ("length", "mac_err"):  # after ok: not sent
                self._say("invalid_data_len" if outcome == "length" else "mac_err", delay=self.tx_delay_s)
            elif outcome == "sent":
                self._say(f"mac_rx {down[0]} {down[1]}" if down else "mac_tx_ok", delay=self.tx_delay_s)
        else:
            self._say("invalid_param")


