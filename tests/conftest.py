import fcntl
import itertools
import os
import sys
from pathlib import Path

import pytest

# rich wraps at 80 columns, even inside a path, and the tests look for paths in the
# commands' messages: under pytest-xdist tmp paths are longer (a popen-gw<N> folder),
# enough to push some over.  One line per message: COLUMNS for every test (below; the
# subprocesses inherit it and rich reads it when it prints) and, in an xdist worker,
# already here: its environment has COLUMNS=80, which a console made at import (the
# CLI's, run in-process by CliRunner) would keep.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["COLUMNS"] = "1000"


@pytest.fixture(autouse=True, scope="session")
def _fresh_plan_cache(tmp_path_factory):
    """Plans are computed afresh in every test session (no stale cache can hide a regression),
    in one folder for all of its pytest-xdist workers (the session's, which holds each
    worker's basetemp popen-gw<N>): a plan at k = 22000 costs 20-30 s of CPU, and several
    modules ask for the same ones.  A test that doctors entries uses a folder of its own."""
    base = tmp_path_factory.getbasetemp()
    folder = base.parent / "plans" if os.environ.get("PYTEST_XDIST_WORKER") else base / "plans"
    folder.mkdir(exist_ok=True)
    mp = pytest.MonkeyPatch()
    mp.setenv("MSS_CACHE_DIR", str(folder))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _no_service_left_running():
    """A test that fails between starting a service process (collect_helpers.spawn) and stopping
    it would leave it running into the other tests: kill it."""
    yield
    helpers = sys.modules.get("collect_helpers")
    for proc in list(helpers.LIVE) if helpers else ():
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        helpers.LIVE.discard(proc)


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # see the top of this file


# Modules whose tests share an expensive module-scoped fixture: under --dist load or
# loadgroup all of such a module's tests go to one worker, so the fixture is made
# once; every other test is scheduled on its own.  make test uses --dist worksteal
# (faster on 2 cores, see the Makefile), which keeps a module's tests on one worker
# unless another runs dry and takes some: the fixture is then made once more there.  A module list
# here, not xdist_group marks: pytest 9.2's structured node ids broke --dist
# loadgroup, which silently ignores the marks (pytest-dev/pytest-xdist#1386).
ONE_WORKER_MODULES = {
    "tests/firmware/test_end_to_end_matrix.py",  # the whole matrix runs at once (940 boards)
    "tests/firmware/test_mcu_cost.py",  # one QEMU session measures every case
    "tests/firmware/test_wire_distribution.py",  # 40,000 MicroPython reports
    "tests/test_decoder.py",  # 12 decoded trials of 100,000 devices per epsilon
}


# Tests of 15 s or more on one core (pytest --durations): each worker runs its share of
# them first, so that under --dist worksteal the idle workers take the short tests around
# them instead of one worker finishing a long test alone at the end.
HEAVY = ("tests/test_planner.py::test_variance_ratio_target[22000",
         "tests/test_docs_figures.py::test_codec_auto_labels_are_current[k22000",
         "tests/test_predicted_mse.py::test_predicted_mse_matches_simulation[pgr",
         "tests/test_energy.py::test_auto_ranks_by_energy",
         "tests/test_reconstruction.py::test_no_protocol_exceeds_the_ceiling",
         "tests/test_store_shared.py::test_two_workers_share_the_stream_and_survive_kill_9",
         "tests/test_baselines.py::test_mse_matches_analytic_variance",
         "tests/test_subset_selection.py::test_ss_mse_matches_analytic",
         "tests/test_decoder.py")  # its 100,000-device trials: a module fixture (kept on one worker)


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: the shares are of what runs
def pytest_collection_modifyitems(config, items):
    """Deal the HEAVY tests round-robin to the front of each worker's share (a module of
    ONE_WORKER_MODULES as one unit).

    worksteal first hands worker w the w-th contiguous slice of this order, of
    len(rest) // (workers - w) tests (rest: those not handed out yet), and a worker
    that runs dry steals from the end of another's queue; with every HEAVY test at
    the front of the whole order, one worker would run them all, one after another.
    The order is the same in every worker (xdist requires it); without xdist, one share."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    units = {}  # a HEAVY test alone, or all of a ONE_WORKER_MODULES module's (its fixture made once)
    for item in items:
        if item.nodeid.startswith(HEAVY):
            module = item.nodeid.split("::", 1)[0]
            units.setdefault(module if module in ONE_WORKER_MODULES else item.nodeid, []).append(item)
    units = list(units.values())
    light = iter([item for item in items if not item.nodeid.startswith(HEAVY)])  # in collection order
    left, order = len(items), []
    for w in range(workers):
        size = left // (workers - w)
        mine = [item for unit in units[w::workers] for item in unit]
        order += mine + list(itertools.islice(light, max(0, size - len(mine))))
        left -= size
    items[:] = order + list(light)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Scheduler(LoadGroupScheduling):
        """xdist's loadgroup (the largest work units first), with each module of
        ONE_WORKER_MODULES one unit."""

        def _split_scope(self, nodeid):
            module = nodeid.split("::", 1)[0]
            return module if module in ONE_WORKER_MODULES else super()._split_scope(nodeid)

    return Scheduler(config, log)


# Modules that keep real time with all of the CPU they get (the end-to-end matrix: 940
# boards in a few MicroPython processes wake once a 2 s period, a wake that runs late is
# skipped, and the test wants reports in most periods).  Under pytest-xdist the other
# workers wait while such a module runs, as they would in a serial run: each test
# holds a shared lock on "room" while it runs (its fixtures' setup and teardown
# included), an exclusive module takes it exclusively from its first test to its last.
# It first closes "gate", which every test passes on its way in, so that a stream of
# short tests cannot keep it waiting for ever.
EXCLUSIVE_MODULES = {"tests/firmware/test_end_to_end_matrix.py",
                     "tests/test_field_demo.py"}  # 24 boards in real time, 4 s epochs
_held = {}  # the exclusive module being run on this worker -> its open lock files


def _lock(config, name):
    # in the session's folder, which its workers share (each has basetemp <it>/popen-gw<N>)
    return open(Path(config.option.basetemp).parent / f"mss-{name}.lock", "a")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    module = item.nodeid.split("::", 1)[0]
    if module in EXCLUSIVE_MODULES:
        if module not in _held:
            gate, room = _lock(item.config, "gate"), _lock(item.config, "room")
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(room, fcntl.LOCK_EX)
            _held[module] = (gate, room)
        try:
            yield
        finally:
            if nextitem is None or nextitem.nodeid.split("::", 1)[0] != module:
                for f in _held.pop(module):
                    f.close()  # releases its lock
        return
    gate, room = _lock(item.config, "gate"), _lock(item.config, "room")
    try:
        fcntl.flock(gate, fcntl.LOCK_EX)  # wait while an exclusive module waits or runs
        fcntl.flock(gate, fcntl.LOCK_UN)
        fcntl.flock(room, fcntl.LOCK_SH)
        yield
    finally:
        gate.close()
        room.close()
