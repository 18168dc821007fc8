#!/usr/bin/env python3
"""Flash the mss-iot firmware and a config onto a MicroPython board with mpremote.

    python tools/deploy.py --config cfg.json [--port /dev/ttyUSB0] [--mpy [--arch ARCH]]
                           [--no-native] [--set transport=mqtt --set mqtt.host=10.0.0.2 ...]
                           [--hold cfg-b.json ...] [--fleet-key-file fleet.key]
                           [--max-epsilon E] [--budget EPS/DAYS | --no-budget] [--dry-run]

``cfg.json`` comes from ``mss plan --device-config``; ``--set`` fills its
``device`` section (see firmware/README.md for the fields).  ``--hold``
copies another config onto the board and lists it in ``device.configs``:
a LoRaWAN downlink can then switch the board to it.  ``--fleet-key-file``
provisions the key pushed configs must be signed with (``device.fleet_key``)
and ``--max-epsilon`` the cap on their privacy loss (``device.max_epsilon``
and its exact ``max_ratio``; default with a key: the largest epsilon of the
configs flashed, the boot one and the held ones).  The merged config and
every held one are checked with the firmware's own loader, cap included,
before anything is copied.

A board reports every period, so a config without ``device.budget`` (the
most epsilon its fresh draws may spend in any window of days, enforced by the
board: docs/privacy.md section 3) is refused (exit 2) unless ``--no-budget``
says the operator accepts a loss that grows with every report; ``mss plan
--device-config`` writes one (with ``device.memoize``), and ``--budget
EPS/DAYS`` adds one here (``mss_protocol.budget.budget_section``).

Only the modules the merged config needs are copied
(``tools/firmware_modules.py``: the protocol's module, the transport's link,
the LoRaWAN modem's dialect, TLS, signed pushes, memoize, the cap, held
configs, and what those import); ``tools/firmware_size.py`` prints their
size for every protocol and transport.  With ``--mpy`` they are compiled
with ``mpy-cross -O3`` and ``-march=`` the board's native arch (needed by
``@micropython.viper`` code): ``--arch`` (x86, x64, armv6m for an RP2040,
armv7emsp for a Cortex-M4F, xtensawin for an ESP32, ...; ``none`` for a port
without a native emitter), else read from the board the way ``mpremote
mip`` does (``sys.implementation._mpy``: .mpy version in the low byte, arch
index from bit 10).  On a board without a native emitter (arch none) or
with ``--no-native``, the ``@micropython.viper`` / ``@micropython.native``
lines are removed first (the kernels are plain Python too).

Steps: mip install umqtt.simple (MQTT only), copy lib/mss_device and
lib/mss_node (the listed modules), boot.py, main.py, sensor.py, config.json
and the held configs, then reset the board.  --dry-run prints the mpremote
commands, the modules and the arch instead (without --arch: the command
that would read it).
"""
import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from firmware_modules import ARCHS, FIRMWARE, TOP_FILES, external, modules  # noqa: E402
from firmware_modules import compile_mpy as compile_mpy_file  # noqa: E402
from mss_protocol.categories import FIELDS as HOST_ONLY  # noqa: E402

MPY_VERSION = 6  # of the .mpy files mpy-cross writes


NO_BUDGET = 2  # exit status of a config refused for want of device.budget (a usage error: a flag decides)


def merged_config(config_path, sets, held=(), fleet_key_file=None, max_epsilon=None, budget=None,
                  require_budget=False):
    cfg = json.loads(Path(config_path).read_text())
    for field in HOST_ONLY:  # the operator's names for the items: no board needs them in RAM
        cfg.pop(field, None)
    device = cfg.setdefault("device", {})
    if budget is not None:
        from mss_protocol.budget import budget_section

        device["budget"] = budget_section(*budget)
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
    if require_budget and device.get("budget") is None:
        print(f"deploy: {config_path} has no device.budget: this board would report every "
              f"{device.get('period_s', 3600)} s and every fresh report adds to its privacy loss, without limit "
              "(docs/privacy.md section 3). Write the config with mss plan --device-config (it adds device.memoize "
              "and a budget, 4 x epsilon per 30 days unless --budget EPS/DAYS), or give --budget EPS/DAYS here "
              "(e.g. --budget 4/30), or --no-budget to deploy without one", file=sys.stderr)
        raise SystemExit(NO_BUDGET)
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


NATIVE = ("@micropython.viper", "@micropython.native")


def plain(src):
    """The source with its native-code decorators removed (the kernels are plain Python too)."""
    return "".join(line for line in src.splitlines(True) if line.strip() not in NATIVE)


def is_native(src):
    return any(line.strip() in NATIVE for line in src.splitlines())


def stage(tmp, files, compile_mpy, arch=None, native=True):
    """Copy (or compile) the listed modules of firmware/lib into tmp/lib; return it.

    ``arch`` (a ``-march`` name) goes to mpy-cross; without ``native`` a module
    with viper or native code is staged with those decorators removed."""
    lib = Path(tmp) / "lib"
    for rel in files:
        src = FIRMWARE / "lib" / rel
        dest = lib / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = src.read_text()
        if not native and is_native(text):
            src = Path(tmp) / "plain" / rel
            src.parent.mkdir(parents=True, exist_ok=True)
            src.write_text(plain(text))
        if compile_mpy:
            compile_mpy_file(src, dest.with_suffix(".mpy"), rel, arch)
        else:
            shutil.copy(src, dest)
    return lib


ARCH_PROBE = "import sys; print(getattr(sys.implementation, '_mpy', 0))"


def board_arch(port):
    """The board's -march name ('' if its port has no native emitter), read the way
    ``mpremote mip`` does: sys.implementation._mpy (arch index in bits 10 and up)."""
    out = subprocess.run(["mpremote", "connect", port, "exec", ARCH_PROBE], capture_output=True,
                         text=True, check=True).stdout.split()
    mpy = int(out[-1]) if out and out[-1].isdigit() else 0
    if mpy & 0xFF != MPY_VERSION:
        raise SystemExit(f"deploy: the board reads .mpy version {mpy & 0xFF} (sys.implementation._mpy = "
                         f"{mpy}), mpy-cross writes {MPY_VERSION}: deploy without --mpy")
    index = mpy >> 10
    if index >= len(ARCHS):
        raise SystemExit(f"deploy: unknown native arch {index} on the board: give --arch")
    return ARCHS[index]


def commands(port, lib, config_file, extras=(), held=()):
    base = ["mpremote", "connect", port]
    cmds = []
    for name in extras:
        cmds.append(base + ["mip", "install", name])
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
    ap.add_argument("--budget", metavar="EPS/DAYS",
                    help="device.budget: at most EPS spent on fresh draws in any DAYS days (e.g. 4/30)")
    ap.add_argument("--no-budget", action="store_true",
                    help="deploy a config without device.budget (its privacy loss grows with every fresh report)")
    ap.add_argument("--mpy", action="store_true", help="compile the modules with mpy-cross first")
    ap.add_argument("--arch", choices=[a for a in ARCHS if a] + ["none"],
                    help="the board's -march for --mpy (default: read from the board; none: a port "
                         "without a native emitter)")
    ap.add_argument("--no-native", action="store_true",
                    help="remove @micropython.viper/native decorators (automatic when the board's arch is none)")
    ap.add_argument("--dry-run", action="store_true", help="print the mpremote commands only")
    args = ap.parse_args(argv)
    budget = None
    if args.budget is not None:
        if args.no_budget:
            ap.error("--budget and --no-budget: give one")
        from mss_protocol.budget import parse_budget

        try:
            budget = parse_budget(args.budget)
        except ValueError as exc:
            ap.error(f"--budget {exc}")
    cfg = merged_config(args.config, args.set, args.hold, args.fleet_key_file, args.max_epsilon, budget,
                        require_budget=not args.no_budget)
    files = modules(cfg)
    arch, native = None, not args.no_native
    if args.mpy:
        if args.arch is not None:
            arch = "" if args.arch == "none" else args.arch
        elif args.dry_run:
            print(f"# -march: read from the board with {shlex.join(['mpremote', 'connect', args.port, 'exec', ARCH_PROBE])}")
        else:
            arch = board_arch(args.port)
        if arch == "":
            native = False  # no native emitter: viper kernels run as plain Python
    with tempfile.TemporaryDirectory() as tmp:
        lib = stage(tmp, files, args.mpy and arch is not None, arch, native)
        if args.dry_run:
            how = ("mpy-cross -O2" + (f" -march={arch}" if arch else "") if args.mpy and arch is not None
                   else "mpy-cross -O2 -march=<the board's>" if args.mpy else "as .py")
            print(f"# {len(files)} modules, {how}{'' if native else ', @micropython.viper/native removed'}: "
                  + " ".join(files))
        config_file = Path(tmp) / "config.json"
        config_file.write_text(json.dumps(cfg, indent=1))
        cmds = commands(args.port, lib, config_file, external(cfg), args.hold)
        for cmd in cmds:
            print(shlex.join(cmd))
            if not args.dry_run:
                subprocess.run(cmd, check=True)
        if args.dry_run:
            print(f"# config.json: {json.dumps(shown(cfg['device']))} config_id={cfg['config_id']}")


if __name__ == "__main__":
    main()
