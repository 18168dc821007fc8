#!/usr/bin/env python3
"""The .mpy size of the firmware a board carries, for every protocol and transport.

    python tools/firmware_size.py [--opt 3] [--json out.json]

A board holds only the modules its config needs (mss_aggregator.deploy.modules,
the list mss deploy copies): compiled as mss deploy --mpy does (``mpy-cross
-O3``; ``--opt 2`` for -O2, line numbers kept), plus
boot.py, main.py and sensor.py (counted compiled too); the viper kernels
as armv6m machine code (RP2040).  Target: <= 16 KB
(16384 B) per board.  umqtt.simple (micropython-lib, installed with
``mpremote mip``) comes on top of MQTT boards and is listed apart.
"""
import argparse
import json
import tempfile
from pathlib import Path

from mss_aggregator.deploy.modules import FIRMWARE, LIB, OPT, TOP_FILES, compile_mpy, modules

TARGET = 16384
ARCH = "armv6m"  # the viper kernels' machine code is counted for an RP2040 (Pico W)
PROTOCOLS = ("mss", "ss", "grr", "rappor", "sue", "olh", "hr", "pgr")
TRANSPORTS = {
    "serial": {"transport": "serial"},
    "mqtt": {"transport": "mqtt"},
    "mqtt+tls": {"transport": "mqtt", "mqtt": {"tls": True}},
    "lorawan:rak3172": {"transport": "lorawan", "lorawan": {"modem": "rak3172"}},
    "lorawan:wio-e5": {"transport": "lorawan", "lorawan": {"modem": "wio-e5"}},
    "lorawan:rn2483": {"transport": "lorawan", "lorawan": {"modem": "rn2483"}},
}
OPTION_MODULES = (("fleet_key: auth", "mss_node/auth.py"), ("+ switch (also with held configs)", "mss_node/switch.py"),
                  ("memoize: memo", "mss_node/memo.py"), ("max_epsilon: cap", "mss_node/cap.py"),
                  ("sleep light/deep: power", "mss_node/power.py"), ("budget: ledger", "mss_node/ledger.py"))
UMQTT = Path(__file__).resolve().parent.parent / "build" / "mplib" / "umqtt" / "simple.py"


class Sizes:
    """Compiled size of each file, compiled once."""

    def __init__(self, tmp, opt):
        self.tmp = Path(tmp)
        self.opt = opt
        self.cache = {}

    def __call__(self, src, rel):
        if rel not in self.cache:
            out = self.tmp / (rel.replace("/", "_") + ".mpy")
            compile_mpy(src, out, rel, arch=ARCH, opt=self.opt)  # viper kernels: machine code of the board
            self.cache[rel] = out.stat().st_size
        return self.cache[rel]

    def board(self, cfg):
        files = modules(cfg)
        total = sum(self(LIB / rel, rel) for rel in files) + sum(self(FIRMWARE / n, n) for n in TOP_FILES)
        return total, files


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opt", type=int, default=OPT, help=f"mpy-cross -O level (default {OPT}, as deploy)")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    res = {"target": TARGET, "opt": args.opt, "boards": [], "modules": {}}
    with tempfile.TemporaryDirectory() as tmp:
        size = Sizes(tmp, args.opt)
        print(f"{'':8}" + "".join(f"{t:>18}" for t in TRANSPORTS))
        for p in PROTOCOLS:
            row = f"{p:8}"
            for name, dev in TRANSPORTS.items():
                total, files = size.board({"protocol": p, "device": dev})
                ok = total <= TARGET
                row += f"{total:>12} {'PASS' if ok else 'MISS':>5}"
                res["boards"].append({"protocol": p, "transport": name, "mpy_bytes": total,
                                      "pass": ok, "files": files})
            print(row)
        res["modules"] = dict(sorted(size.cache.items()))
        if UMQTT.is_file():
            res["umqtt.simple"] = size(UMQTT, "umqtt/simple.py")
            print(f"umqtt.simple (micropython-lib, on top of every mqtt board): {res['umqtt.simple']} B")
        else:
            print(f"umqtt.simple: not measured ({UMQTT} missing: sh tools/get_umqtt.sh)")
        print(f"mpy-cross -O{args.opt}; target <= {TARGET} B per board (boot.py, main.py, sensor.py included, "
              "compiled); options add their modules: " + ", ".join(
                  f"{name} {size(LIB / rel, rel)} B" for name, rel in OPTION_MODULES))
    passed = sum(b["pass"] for b in res["boards"])
    print(f"{passed} of {len(res['boards'])} boards within the target")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
