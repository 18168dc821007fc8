"""The installed package, not the checkout: the wheel builds without a packaging
warning, holds every file of the source packages (the dashboard's static files and the
emulated devices' modules among them), installs into a fresh venv, and the installed copy serves the dashboard page over real HTTP.

The build runs on a copy of the sources (a stale ``build/`` in the checkout would leak
files into the wheel); setuptools comes from the build isolation (PyPI or pip's cache).
The venv reuses this environment's dependencies through a ``.pth`` line: the wheel is
installed with ``--no-deps``, so nothing else is downloaded."""
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "aggregator", "protocol", "firmware/lib")
PACKAGE_ROOTS = ("firmware/lib", "protocol", "aggregator")  # pyproject.toml's packages.find where


def source_files(src):
    """Every file of the packages in the source tree: what the wheel must hold (modules, the
    dashboard's static files, the emulated devices' modules)."""
    return {str(f.relative_to(src / root)) for root in PACKAGE_ROOTS for f in (src / root).glob("mss_*/**/*")
            if f.is_file() and "__pycache__" not in f.parts}


# run by the venv's python: the dashboard of a fresh store, served from the installed copy
SERVE = """
import sys, tempfile, urllib.request
from pathlib import Path
import mss_aggregator
assert Path(mss_aggregator.__file__).resolve().is_relative_to(Path(sys.prefix).resolve()), mss_aggregator.__file__
from mss_aggregator.collect.store import open_store
from mss_aggregator.ports import free_port
from mss_aggregator.web.live import LiveView
from mss_aggregator.web.server import WebServer
from mss_protocol.mss.config import MssConfig

path = Path(tempfile.mkdtemp()) / "s.sqlite"
open_store(path, MssConfig.build(16, 2.0, [5, 7])).close()
web = WebServer(LiveView(path, interval=60), f"127.0.0.1:{free_port()}").start()
for name in ("", "app.js", "style.css", "api/openapi.json"):
    with urllib.request.urlopen(web.url + name, timeout=10) as r:
        print(name or "/", r.status, r.headers.get("Content-Type"), len(r.read()))
web.stop()
"""


def test_wheel_installs_and_serves_the_dashboard(tmp_path):
    src = tmp_path / "src"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, src / name)
    # -v: pip shows the backend's output, where setuptools' warnings are
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(tmp_path / "dist"),
                            str(src)], capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    log = build.stdout + build.stderr
    warned = [line for line in log.splitlines() if "Warning" in line]  # BuildBackendWarning, SetuptoolsWarning, ...
    assert not warned, warned
    (wheel,) = (tmp_path / "dist").glob("mss_iot-*.whl")
    expected = source_files(src)
    assert {"mss_aggregator/web/static/index.html", "mss_aggregator/devices/cpython_umqtt/umqtt/simple.py",
            "mss_cli/main.py", "mss_node/modem/rak3172.py"} <= expected
    missing = expected - set(zipfile.ZipFile(wheel).namelist())
    assert not missing, sorted(missing)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # numpy, rich, ... from here; a path named in a .pth is not itself scanned for .pth files,
    # so this checkout's editable install stays out
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                              "--no-index", str(wheel)], capture_output=True, text=True, timeout=120)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]

    served = subprocess.run([python, "-c", SERVE], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert served.returncode == 0, served.stderr[-3000:]
    lines = served.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [["/", "200"], ["app.js", "200"], ["style.css", "200"],
                                                        ["api/openapi.json", "200"]], lines
    assert all(int(line.split()[-1]) > 100 for line in lines), lines  # the files themselves, not error bodies
    # the console script of the installed copy
    helped = subprocess.run([venv / "bin" / "mss", "-h"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "plan" in helped.stdout, helped.stderr
