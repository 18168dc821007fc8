"""Switching the node to another config: a held one a LoRaWAN downlink names, or a
pushed one (:mod:`mss_node.auth`).  Loaded only on a board that can switch: one
that holds configs (``device.configs``) or has a fleet key.
"""
from mss_node import files, log, settings
from mss_node.reporter import Reporter


def adopt(node, d, what, issued=0):
    """Switch ``node`` to the config ``d`` (its own device section stays) if the loader
    accepts it and its reporter can be built; only then is anything written (config.json,
    state.json).  The epochs the old config reported stay used."""
    s = node.s
    merged = {}
    merged.update(d)
    merged["device"] = s.raw.get("device", {})
    merged["issued"] = issued or s.issued  # a held config keeps the counter
    try:
        new = settings.Settings(merged)
        new.device_id = s.device_id  # as found at boot (a LoRaWAN modem's DevEUI)
        reporter = Reporter(new.params, node.rng, new.device_id)
    except Exception as exc:  # ValueError naming the field; MemoryError: the board keeps its config
        if isinstance(exc, ImportError):  # a protocol the board was not flashed with
            exc = "this board does not carry protocol %r" % (d.get("protocol"),)
        log.warn("rejected %s: %s" % (what, exc))
        return
    files.save(node.config_path, merged)
    node.state.carry(s.config_id, new.config_id)
    node.s = new
    node.reporter = reporter
    log.info("now using config %s" % new.config_id)


def held(s, fport, data):
    """The held config (a dict) a downlink switches to, or None (logged why).  A switch is
    two bytes on ``config_fport``: the start of the config id of one of ``device.configs``."""
    lw = s.device["lorawan"]
    if fport != lw["config_fport"]:
        log.warn("ignored downlink on port %d (config port is %d)" % (fport, lw["config_fport"]))
        return None
    if data is None or len(data) != 2:
        log.warn("ignored malformed downlink on the config port (%s)"
                 % ("garbled" if data is None else "%d bytes, not 2" % len(data)))
        return None
    want = data.hex()
    if s.config_id.startswith(want):
        return None
    found = []
    for path in s.device["configs"]:
        d = files.load(path, None)
        if isinstance(d, dict) and str(d.get("config_id", "")).startswith(want):
            found.append(d)
    if len(found) != 1:
        log.warn("ignored config switch to %s: %s" % (
            want, "no held config has that id" if not found else "several held configs match"))
        return None
    return found[0]


def downlink(node, fport, data):
    d = held(node.s, fport, data)
    if d is not None:
        adopt(node, d, "held config")
