"""The board's config checks alone, on an emulator: ``mss device-sim --check-only``.

    micropython -m mss_node.check_config CONFIG [--device ID]

Loads CONFIG with the board's own loader (``mss_node.settings.load``: the
protocol's checks and worst ratio, the device section, the cap, the budget) and prints
one JSON line: what it accepted, or ``{"ok": false, "error": ...}`` (the
board's message, naming the field) and exits 1.  ``--device`` stands in for
the board's unique id (the unix port has none) when the config sets no
``device.device_id``.  Not deployed: mss_aggregator.deploy.modules lists only
what ``mss_node.app`` imports.
"""
import json
import sys

from mss_device.check import epsilon
from mss_device.frame import KINDS
from mss_node import settings


def summary(s):
    """What the board accepted, from its Settings."""
    hi, lo = s.ratio
    return {"ok": True, "protocol": s.params.protocol, "k": s.params.k, "config_id": s.config_id,
            "frame": KINDS[s.params.frame], "transport": s.device["transport"], "device_id": s.device_id,
            "epsilon": epsilon(s.ratio), "ratio": [str(hi), str(lo)], "cap": s.device["max_epsilon"],
            "seed": s.params.seed, "irr_epsilon": s.params.irr_epsilon,
            "memoize": s.device["memoize"],
            "budget": None if s.budget is None else {k: s.budget[k] for k in ("epsilon", "days", "draws")}}


def main(argv):
    if "--device" in argv:
        device_id = argv[argv.index("--device") + 1]
        settings._unique_id = lambda: device_id
    try:
        out = summary(settings.load(argv[0]))
    except Exception as exc:  # whatever stops the board's loader leaves the board idle (mss_node.app)
        out = {"ok": False, "error": str(exc)}
    print(json.dumps(out))
    if not out["ok"]:
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
