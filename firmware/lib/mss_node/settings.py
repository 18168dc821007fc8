"""Load and check config.json: the protocol config from ``mss plan`` plus a
``device`` section (campaign, period, transport, ...).  Any problem raises
ValueError naming the field, and the board stays idle instead of reporting.

The one loader of every config the board may use (config.json at boot, a
held config a downlink switches to, a pushed one once its signature holds):
the protocol integers must pass :func:`mss_device.check.verify` and, when
the board has a cap (``device.max_epsilon`` with its exact ``max_ratio``),
their worst likelihood ratio must not exceed it (SPEC.md section 5).
"""
import json
import math

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
    "mqtt": {"host": "127.0.0.1", "port": None, "user": None, "password": None,
             "keepalive": 60, "timeout_s": 5, "backoff_max_s": 300,
             "tls": False, "ca": None, "cert": None, "key": None, "server_hostname": None},
    # port None: 1883, or 8883 with tls; ca, cert, key: files on the board (PEM or DER);
    # server_hostname: the name the broker's certificate must carry (default: host)
    "serial": {"uart": None, "baud": 115200, "tx": None, "rx": None, "path": None},
    # baud None: the modem's default; path: a tty instead of a UART (tests, emulators)
    "lorawan": {"modem": "rak3172", "uart": None, "baud": None, "tx": None, "rx": None, "path": None,
                "fport": 1, "config_fport": 2, "join_timeout_s": 30, "tx_timeout_s": 20,
                "retry_s": 30, "backoff_max_s": 3600},
    "configs": [],  # config files this board holds: a downlink can switch to one of them
    "wifi": {"ssid": None, "password": None},
    "fleet_key": None,  # hex; signs pushed configs (mss_node.auth); never sent
    "max_epsilon": None,  # the cap on a config's privacy loss, with its exact form:
    "max_ratio": None,  # e^max_epsilon as a decimal string (tools/deploy.py writes both)
}
KEY_MIN_HEX = 32  # a fleet key of at least 16 bytes


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
            if key not in DEVICE_DEFAULTS:
                raise ValueError("unknown field device.%s" % key)
            if isinstance(DEVICE_DEFAULTS[key], dict):
                if not isinstance(given[key], dict):
                    raise ValueError("config field device.%s has the wrong type: it must be an object" % key)
                for sub_key in given[key]:
                    if sub_key not in DEVICE_DEFAULTS[key]:
                        raise ValueError("unknown field device.%s.%s" % (key, sub_key))
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
        if dev["transport"] not in ("serial", "mqtt", "lorawan"):
            raise ValueError("device.transport must be serial, mqtt or lorawan")
        if dev["transport"] == "lorawan":
            _check_lorawan(dev["lorawan"])
        dev["mqtt"] = _mqtt(dev["mqtt"])
        if not isinstance(dev["configs"], list) or not all(isinstance(p, str) for p in dev["configs"]):
            raise ValueError("device.configs must be a list of file names")
        self.fleet_key = _fleet_key(dev["fleet_key"])
        self.cap = _cap(dev["max_epsilon"], dev["max_ratio"])
        if self.cap is not None and not check.within(self.ratio, self.cap):
            raise ValueError("config thresholds give epsilon %.6g, above device.max_epsilon %.6g"
                             % (check.epsilon(self.ratio), dev["max_epsilon"]))
        self.issued = d.get("issued", 0)  # of the pushed config in use (mss_node.auth)
        if type(self.issued) is not int or self.issued < 0:
            raise ValueError("config field issued must be a non-negative integer")
        self.device = dev
        # on LoRaWAN the default id is the modem's DevEUI (the network server's id), set by the link
        self.device_id = dev["device_id"] or (None if dev["transport"] == "lorawan" else _unique_id())
        self.campaign = dev["campaign"]
        self.config_id = self.params.config_id.hex()

    def topic(self, leaf):
        if leaf == "config":
            return "mss/v1/%s/config" % self.campaign
        return "mss/v1/%s/%s/%s" % (self.campaign, self.device_id, leaf)


def _mqtt(m):
    """device.mqtt with its port resolved.  A TLS field is never ignored: set
    without ``tls`` it is an error, and ``tls`` needs the CA to pin."""
    m = dict(m)
    if type(m["tls"]) is not bool:
        raise ValueError("device.mqtt.tls must be true or false")
    for key in ("ca", "cert", "key", "server_hostname"):
        if m[key] is None:
            continue
        if not isinstance(m[key], str) or not m[key]:
            raise ValueError("device.mqtt.%s must be a non-empty string" % key)
        if not m["tls"]:
            raise ValueError("device.mqtt.%s is set but device.mqtt.tls is false" % key)
    if m["tls"] and m["ca"] is None:
        raise ValueError("device.mqtt.tls needs device.mqtt.ca (the file of the CA that signed "
                         "the broker's certificate)")
    if (m["cert"] is None) != (m["key"] is None):
        raise ValueError("device.mqtt.cert and device.mqtt.key go together (a client certificate "
                         "and its key)")
    if m["port"] is None:
        m["port"] = 8883 if m["tls"] else 1883
    if type(m["port"]) is not int or not 0 < m["port"] < 65536:
        raise ValueError("device.mqtt.port must be a port number, 1 to 65535")
    return m


def _check_lorawan(lw):
    from mss_node.modem import DIALECTS

    if lw["modem"] not in DIALECTS:
        raise ValueError("device.lorawan.modem must be one of %s" % ", ".join(DIALECTS))
    if lw["uart"] is None and not lw["path"]:
        raise ValueError("device.lorawan needs the modem's uart (number) or path")
    for key in ("fport", "config_fport"):
        if type(lw[key]) is not int or not 1 <= lw[key] <= 223:
            raise ValueError("device.lorawan.%s must be an application port, 1 to 223" % key)
    if lw["fport"] == lw["config_fport"]:
        raise ValueError("device.lorawan.fport and config_fport must differ")
    for key in ("join_timeout_s", "tx_timeout_s", "retry_s", "backoff_max_s"):
        if type(lw[key]) is not int or lw[key] < 1:
            raise ValueError("device.lorawan.%s must be a positive integer" % key)


def _fleet_key(text):
    """The key's bytes, or None.  Messages never show the key."""
    if text is None:
        return None
    try:
        key = bytes.fromhex(text)
    except (TypeError, ValueError):
        key = b""
    if len(key) * 2 < KEY_MIN_HEX:
        raise ValueError("device.fleet_key must be at least %d hex digits" % KEY_MIN_HEX)
    return key


def _cap(eps, ratio):
    """(num, den) of device.max_ratio, exactly; None without a cap.  max_epsilon is
    what the operator chose (logs); max_ratio, e^max_epsilon written by the host to 60
    digits, is what is compared, so the two must agree (to float precision here)."""
    if eps is None and ratio is None:
        return None
    if type(eps) not in (int, float) or not eps > 0 or not isinstance(ratio, str):
        raise ValueError("device.max_epsilon (a positive number) needs device.max_ratio "
                         "(e^max_epsilon as a decimal string; tools/deploy.py --max-epsilon writes both)")
    parts = ratio.split(".")
    digits = "".join(parts)
    if len(parts) > 2 or not digits.isdigit() or int(digits) == 0:
        raise ValueError("device.max_ratio must be a decimal number such as 7.389056")
    # ln of 0.<digits> * 10^len(whole): no float ever holds the whole number (float32 ports)
    if abs(math.log(float("0." + digits)) + len(parts[0]) * math.log(10) - eps) > check.EPS_SLACK:
        raise ValueError("device.max_ratio is not e^max_epsilon")
    return int(digits), 10 ** (len(digits) - len(parts[0]))


def load(path):
    try:
        with open(path) as fh:
            d = json.load(fh)
    except OSError:
        raise ValueError("no config file %s" % path)
    except ValueError:
        raise ValueError("config file %s is not valid JSON" % path)
    return Settings(d)
