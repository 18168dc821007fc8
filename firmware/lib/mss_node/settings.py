"""Load and check config.json: the protocol config from ``mss plan`` plus a
``device`` section (campaign, period, transport, ...).  Any problem raises
ValueError naming the field, and the board stays idle instead of reporting.

The one loader of every config the board may use (config.json at boot, a
held config a downlink switches to, a pushed one once its signature holds):
the protocol integers must pass :func:`mss_device.check.verify` and, when
the board has a cap (``device.max_epsilon`` with its exact ``max_ratio``),
their worst likelihood ratio must not exceed it (SPEC.md section 5); with a
budget (``device.budget``) one fresh draw must fit it (SPEC.md section 10).
"""
import json

from mss_device import check
from mss_device.params import Params

DEVICE_DEFAULTS = {
    "campaign": "default",
    "device_id": None,  # default: hex of machine.unique_id()
    "period_s": 3600,  # one report per period (epoch)
    "epoch_origin": 0,  # unix time at which epoch 0 starts
    "poll_s": 5,  # main-loop tick
    "transport": "serial",  # "serial", "mqtt" or "lorawan"
    "queue_max": 32,  # unsent reports kept in flash
    "watchdog_ms": 0,  # 0: no watchdog
    "memoize": False,  # re-send one draw per value (SPEC.md, Memoized reports)
    "memo_max": 16,  # values memoized per config; the least recently used goes
    "configs": [],  # config files this board holds: a downlink can switch to one of them
    "wifi": {"ssid": None, "password": None, "off_between_reports": False},
    "sleep": "none",  # between reports: "none" (CPU on), "light" or "deep" (mss_node.power)
    "fleet_key": None,  # hex; signs pushed configs (mss_node.auth); never sent
    "max_epsilon": None,  # the cap on a config's privacy loss, with its exact form:
    "max_ratio": None,  # e^max_epsilon as a decimal string (mss deploy writes both)
    "budget": None,  # {"epsilon", "ratio", "days"}: fresh draws' loss per window (mss_node.ledger)
}
# Each transport's link module holds its section's DEFAULTS and check(section): only
# the one in use is loaded and checked; another transport's section is kept as given.
LINKS = {"serial": "mss_node.serial_link", "mqtt": "mss_node.mqtt_link", "lorawan": "mss_node.lorawan_link"}


def _unique_id():
    try:
        import machine

        return machine.unique_id().hex()
    except (ImportError, AttributeError):
        raise ValueError("device.device_id must be set on a port without machine.unique_id")


def _section(dev, key, defaults):
    """device.<key> (an object): its defaults updated with the given fields, unknown ones refused."""
    sub = dict(defaults)
    for sub_key in dev.get(key, {}):
        if sub_key not in defaults:
            raise ValueError("unknown field device.%s.%s" % (key, sub_key))
    sub.update(dev.get(key, {}))
    return sub


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
            self.ratio = check.verify(self.params, d["epsilon"])  # the worst likelihood ratio (hi, lo)
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
            if key not in DEVICE_DEFAULTS and key not in LINKS:
                raise ValueError("unknown field device.%s" % key)
            if (key in LINKS or key == "wifi") and not isinstance(given[key], dict):
                raise ValueError("config field device.%s has the wrong type: it must be an object" % key)
            dev[key] = given[key]
        dev["wifi"] = _section(dev, "wifi", DEVICE_DEFAULTS["wifi"])
        i = dev["device_id"]  # in MQTT topics, serial lines and OLH's seed (mss_device.gateway.DEVICE_ID)
        if i is not None and (type(i) is not str or not 0 < len(i) < 65
                              or i.strip("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-")):
            raise ValueError("device.device_id must be 1-64 of A-Z a-z 0-9 _.:-")
        for key in ("period_s", "poll_s", "queue_max", "watchdog_ms", "epoch_origin", "memo_max"):
            if type(dev[key]) is not int or dev[key] < 0:
                raise ValueError("device.%s must be a non-negative integer" % key)
        for key in ("period_s", "queue_max", "memo_max"):
            if dev[key] < 1:
                raise ValueError("device.%s must be at least 1" % key)
        if type(dev["memoize"]) is not bool:
            raise ValueError("device.memoize must be true or false")
        if dev["sleep"] not in ("none", "light", "deep"):
            raise ValueError("device.sleep must be none, light or deep")
        w = dev["wifi"]["off_between_reports"]  # Wi-Fi off while the board sleeps
        if w is not False and (w is not True or dev["sleep"] == "none"):
            raise ValueError("device.wifi.off_between_reports must be false, or true with device.sleep "
                             "light or deep")
        if dev["memoize"]:
            from mss_node.memo import check as check_memo

            check_memo(self.params)
        t = dev["transport"]
        if t not in LINKS:
            raise ValueError("device.transport must be serial, mqtt or lorawan")
        if self.params.frame == 1 and t != "lorawan":  # SPEC.md section 4: dated by arrival
            raise ValueError("config field frame compact needs device.transport lorawan")
        link = __import__(LINKS[t], None, None, ["check"])
        dev[t] = link.check(_section(dev, t, link.DEFAULTS))
        if t == "lorawan" and i is not None:  # SPEC.md section 4, "Device ids": the network server's id
            if len(i) != 16 or i.strip("0123456789abcdefABCDEF"):
                raise ValueError("device.device_id on lorawan must be the modem's DevEUI (16 hex digits) "
                                 "or absent: the network server names the board by its DevEUI")
            dev["device_id"] = i.lower()
        if not isinstance(dev["configs"], list) or not all(isinstance(p, str) for p in dev["configs"]):
            raise ValueError("device.configs must be a list of file names")
        self.fleet_key = None
        if dev["fleet_key"] is not None:  # only a board with a key checks signatures
            from mss_node.auth import fleet_key

            self.fleet_key = fleet_key(dev["fleet_key"])
        self.cap = None
        if dev["max_epsilon"] is not None or dev["max_ratio"] is not None:
            from mss_node.cap import cap  # only a board with a cap reads it

            self.cap = cap(dev["max_epsilon"], dev["max_ratio"], self.ratio)
        self.budget = None
        if dev["budget"] is not None:
            from mss_node.ledger import budget  # only a board with a budget keeps a ledger

            self.budget = budget(dev["budget"], self.ratio)
        self.issued = d.get("issued", 0)  # of the pushed config in use (mss_node.auth)
        if type(self.issued) is not int or self.issued < 0:
            raise ValueError("config field issued must be a non-negative integer")
        self.device = dev
        # on LoRaWAN the default id is the modem's DevEUI (the network server's id), set by the link
        self.device_id = dev["device_id"] or (None if t == "lorawan" else _unique_id())
        self.campaign = dev["campaign"]
        self.config_id = self.params.config_id.hex()


def load(path):
    try:
        with open(path) as fh:
            d = json.load(fh)
    except OSError:
        raise ValueError("no config file %s" % path)
    except ValueError:
        raise ValueError("config file %s is not valid JSON" % path)
    return Settings(d)
