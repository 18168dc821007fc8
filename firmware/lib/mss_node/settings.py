"""Load and check config.json: the protocol config from ``mss plan`` plus a
``device`` section (campaign, period, transport, ...).  Any problem raises
ValueError naming the field, and the board stays idle instead of reporting.
"""
import json

from mss_device.params import Params

DEVICE_DEFAULTS = {
    "campaign": "default",
    "device_id": None,  # default: hex of machine.unique_id()
    "period_s": 3600,  # one report per period (epoch)
    "epoch_origin": 0,  # unix time at which epoch 0 starts
    "poll_s": 5,  # main-loop tick
    "transport": "serial",  # "serial" or "mqtt"
    "queue_max": 32,  # unsent reports kept in flash
    "watchdog_ms": 0,  # 0: no watchdog
    "memoize": False,  # re-send one draw per value (SPEC.md, Memoized reports)
    "memo_max": 16,  # values memoized per config; the least recently used goes
    "mqtt": {"host": "127.0.0.1", "port": 1883, "user": None, "password": None,
             "keepalive": 60, "timeout_s": 5, "backoff_max_s": 300},
    "serial": {"uart": None, "baud": 115200, "tx": None, "rx": None, "path": None},
    "wifi": {"ssid": None, "password": None},
}


def _unique_id():
    try:
        import binascii
        import machine

        return binascii.hexlify(machine.unique_id()).decode()
    except (ImportError, AttributeError):
        raise ValueError("device.device_id must be set on a port without machine.unique_id")


class Settings:
    def __init__(self, d):
        try:
            self._load(d)
        except (TypeError, AttributeError, KeyError) as exc:
            raise ValueError("config has a field of the wrong type (%r)" % (exc,))

    def _load(self, d):
        if not isinstance(d, dict):
            raise ValueError("config must be a JSON object")
        try:
            self.params = Params(d)
        except KeyError as exc:
            raise ValueError("config field %s is missing" % exc)
        except (TypeError, AttributeError):
            raise ValueError("config has a field of the wrong type")
        self.raw = d
        dev = {}
        dev.update(DEVICE_DEFAULTS)
        given = d.get("device") or {}
        if not isinstance(given, dict):
            raise ValueError("config field device must be an object")
        for key in given:
            if key not in DEVICE_DEFAULTS:
                raise ValueError("unknown field device.%s" % key)
            if isinstance(DEVICE_DEFAULTS[key], dict):
                sub = dict(DEVICE_DEFAULTS[key])
                sub.update(given[key])
                dev[key] = sub
            else:
                dev[key] = given[key]
        for key in ("period_s", "poll_s", "queue_max", "watchdog_ms", "epoch_origin", "memo_max"):
            if type(dev[key]) is not int or dev[key] < 0:
                raise ValueError("device.%s must be a non-negative integer" % key)
        for key in ("period_s", "queue_max", "memo_max"):
            if dev[key] < 1:
                raise ValueError("device.%s must be at least 1" % key)
        if type(dev["memoize"]) is not bool:
            raise ValueError("device.memoize must be true or false")
        if dev["memoize"] and self.params.protocol == "olh":
            raise ValueError("device.memoize cannot be used with olh: its hash seed changes every epoch")
        if dev["transport"] not in ("serial", "mqtt"):
            raise ValueError("device.transport must be serial or mqtt")
        self.device = dev
        self.device_id = dev["device_id"] or _unique_id()
        self.campaign = dev["campaign"]
        self.config_id = self.params.config_id.hex()

    def topic(self, leaf):
        if leaf == "config":
            return "mss/v1/%s/config" % self.campaign
        return "mss/v1/%s/%s/%s" % (self.campaign, self.device_id, leaf)


def load(path):
    try:
        with open(path) as fh:
            d = json.load(fh)
    except OSError:
        raise ValueError("no config file %s" % path)
    except ValueError:
        raise ValueError("config file %s is not valid JSON" % path)
    return Settings(d)
