"""The host refuses every config the board refuses (SPEC.md section 5, "What a loader checks").

Hundreds of hostile and edge configs -- a table of named cases (floats and
bools for integers, threshold_bits 29, PGR q above 2**15, GRR k = 2**23 + 2,
OLH k > P, the ss/mss label against the moduli, epsilon above MAX_EPSILON or
not a number, k = 2**30, missing and mistyped fields, ...) and seeded random
mutations of one valid config per protocol -- go through

* the board's loader, ``mss_node.settings.Settings`` via
  ``mss_node.check_config.summary`` (what ``mss device-sim --check-only``
  runs), under the real MicroPython unix port in one process, and under
  CPython: the two agree;
* the host's loader, ``mss_protocol.configs.load_dict``: it refuses
  (with a ConfigError, never another exception) whenever the board does,
  naming the field in the table's cases.  The host may refuse more
  (thresholds other than the rule's, epsilon above MAX_EPSILON, a format or
  version it does not know, upper-case ids).
"""
import json
import random
import re

import pytest

from micropython_runner import run
from mss_node import check_config
from mss_node.settings import Settings
from mss_protocol.config_file import ConfigError
from mss_protocol.config_vectors import BASES, TABLE, on_board, retag
from mss_protocol.configs import load_dict
from mss_protocol.oracle_config import NAMES
from mss_protocol.privacy import ONE

BOARD = r"""
import json, sys
from mss_node import check_config
from mss_node.settings import Settings
out = []
for d in json.load(open(sys.argv[1])):
    try:
        out.append(check_config.summary(Settings(d)))
    except Exception as exc:
        out.append({"ok": False, "error": str(exc)})
print(json.dumps(out))
"""

VALUES = [0, 1, -1, 2, 3, 16, 64, 64.0, 2.0, True, False, None, "64", [], {}, 32749, 32750, 1 << 15,
          (1 << 15) + 1, 1 << 23, (1 << 23) + 1, (1 << 23) + 2, ONE - 1, ONE, 1 << 53, 1e308, 20.79, 21.0]
EXTRA = ("issued", "threshold_bits", "frame", "protocol")


def _mutations(n, seed=22):
    """n configs: a base with one field (or one list entry) replaced by an edge value,
    their config id then recomputed (so the other checks are reached) three times in four."""
    rnd = random.Random(seed)
    out = []
    while len(out) < n:
        base = BASES[rnd.choice(sorted(BASES))]
        d = dict(base)
        field = rnd.choice(sorted(set(d) - {"device"}) + list(EXTRA))
        value = rnd.choice(VALUES + ["compact", "compact-epoch", "ss", "mss"] + list(NAMES))
        if isinstance(d.get(field), list) and d[field] and rnd.random() < 0.7:
            d[field] = list(d[field])
            d[field][rnd.randrange(len(d[field]))] = value
        else:
            d[field] = value
        if rnd.random() < 0.75:
            try:
                d = retag(d)
            except (TypeError, ValueError, KeyError):
                pass
        out.append(d)
    return out


CASES = [(name, d) for name, (d, _, _) in TABLE.items()]
CASES += [(f"valid-{name}", d) for name, d in BASES.items()]
CASES += [(f"random-{i}", d) for i, d in enumerate(_mutations(1500))]


def _host(d):
    """None if the host accepts ``d``, else its ConfigError (any other exception fails the test)."""
    try:
        load_dict(d)
    except ConfigError as exc:
        return exc
    return None


def _cpython_board(d):
    try:
        return check_config.summary(Settings(d))
    except Exception as exc:  # as the board's main loop: any exception leaves it idle
        return {"ok": False, "error": str(exc)}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    """The board's verdict on every case under MicroPython (one process) and CPython."""
    path = tmp_path_factory.mktemp("parity") / "cases.json"
    path.write_text(json.dumps([on_board(d) for _, d in CASES]))
    out = run(BOARD, args=[str(path)], timeout=600, heapsize="32M")  # the cases and verdicts: ~4 MB
    assert out.returncode == 0, out.stderr[-2000:]
    micro = json.loads(out.stdout)
    assert len(micro) == len(CASES)
    return micro, [_cpython_board(on_board(d)) for _, d in CASES]


def test_micropython_and_cpython_boards_agree(verdicts):
    micro, cpy = verdicts
    for (name, _), m, c in zip(CASES, micro, cpy):
        assert m["ok"] == c["ok"], (name, m, c)
        if m["ok"]:
            assert m == c, name


def test_the_host_refuses_whatever_the_board_refuses(verdicts):
    micro, _ = verdicts
    both = host_more = 0
    for (name, d), board in zip(CASES, micro):
        host = _host(d)
        if not board["ok"]:
            assert host is not None, f"{name}: the board refuses ({board['error']}) but the host accepts"
            both += 1
        elif host is not None:
            host_more += 1
    assert both >= 700 and host_more >= 100, (both, host_more)  # the mutations reach both kinds


@pytest.mark.parametrize("name", list(TABLE))
def test_each_case_is_refused_by_the_host_naming_the_field(name, verdicts):
    d, why, board_refuses = TABLE[name]
    board = verdicts[0][[n for n, _ in CASES].index(name)]
    assert (not board["ok"]) == board_refuses, (name, board)
    host = _host(d)
    if why is None:
        assert host is None and board["ok"], (name, host, board)
    else:
        assert host is not None and re.search(why, str(host)), (name, str(host))


def test_valid_configs_pass_both(verdicts):
    micro, _ = verdicts
    for (name, d), board in zip(CASES, micro):
        if name.startswith("valid-"):
            assert board["ok"] and _host(d) is None, (name, board)
            assert board["config_id"] == d["config_id"] and board["protocol"] == d["protocol"]
