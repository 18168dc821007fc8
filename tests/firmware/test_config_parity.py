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
* the host's loader, ``mss_protocol.oracle_config.load_dict``: it refuses
  (with a ConfigError, never another exception) whenever the board does,
  naming the field in the table's cases.  The host may refuse more
  (thresholds other than the rule's, epsilon above MAX_EPSILON, a format or
  version it does not know, upper-case ids).
"""
import json
import math
import random
import re

import pytest

from hostile import mss, retag
from micropython_runner import run
from mss_node import check_config
from mss_node.settings import Settings
from mss_protocol.config_file import ConfigError
from mss_protocol.mss.config import MssConfig
from mss_protocol.oracle_config import NAMES, OracleConfig, load_dict
from mss_protocol.privacy import MAX_EPSILON, ONE, threshold

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

BASES = {f"{n}": OracleConfig(n, 64, 2.0).to_dict() for n in NAMES}
BASES.update({
    "mss": MssConfig.build(64, 2.0, [59, 61, 63]).to_dict(),
    "mss-big": MssConfig.build(40000, 6.0, [39997, 39989]).to_dict(),
    "ss": MssConfig.subset_selection(16, 2.0).to_dict(),
    "pgr-300": OracleConfig("pgr", 300, 6.0).to_dict(),
    "grr-compact": OracleConfig("grr", 64, 2.0, "compact").to_dict(),
    "olh-compact-epoch": OracleConfig("olh", 64, 2.0, "compact-epoch").to_dict(),
    "mss-compact": MssConfig.build(64, 2.0, [59, 61, 63]).with_frame("compact").to_dict(),
})


def on_board(d):
    """``d`` with the device section a board needs to get to its protocol checks: an id
    (the unix port has no machine.unique_id), LoRaWAN for compact frames (SPEC.md section 4)."""
    if not isinstance(d, dict) or "device" in d:
        return d
    dev = {"device_id": "x"}
    if d.get("frame") == "compact":
        dev.update(transport="lorawan", lorawan={"path": "/dev/null"})
    return dict(d, device=dev)


def _with(base, **fields):
    return dict(BASES[base], **fields)


def _re(base, **fields):
    return retag(_with(base, **fields))


def _without(base, field):
    d = dict(BASES[base])
    del d[field]
    return d


def _pgr_big_q():
    """k = 1024, eps = 12.5 by the rule: q = 268343 (K = q + 1 <= 2**23, but q > 2**15)."""
    q, eps = 268343, 12.5
    return retag({"format": "mss-config", "version": 1, "protocol": "pgr", "k": 1024, "epsilon": eps,
                  "q": q, "d": 2, "t": threshold(q + 1, 1, eps), "threshold_bits": 30, "frame": "full"})


def _mss_one_modulus(k, label):
    """SS's one block (omega 1: cheap at any k), labelled ``label``."""
    return dict(mss(k, 2.0, [k], [1]), protocol=label)


# name -> (config, the host's message must match, the board refuses it too)
TABLE = {
    "k-float": (_re("grr", k=64.0), r"k must be a JSON integer, got 64\.0", True),
    "k-bool": (_re("rappor", k=True), r"k must be a JSON integer, got True", True),
    "t-float": (_re("grr", t=float(BASES["grr"]["t"])), r"\bt must be a JSON integer", True),
    "tq-bool": (_re("rappor", tq=True), r"tq must be a JSON integer", True),
    "q-float": (_re("pgr", q=float(BASES["pgr"]["q"])), r"\bq must be a JSON integer", True),
    "modulus-float": (_re("mss", moduli=[59.0, 61, 63]), r"moduli must be a list of JSON integers", True),
    "omega-bool": (_re("ss", omegas=[True]), r"omegas must be a list of JSON integers", True),
    "rank-bits-float": (_with("mss", rank_bits=[float(b) for b in BASES["mss"]["rank_bits"]]),
                        r"rank_bits must be a list of JSON integers", True),
    "rank-bits-missing": (_without("mss", "rank_bits"), r"missing field 'rank_bits'", True),
    "rank-bits-wrong": (_with("mss", rank_bits=[b + 1 for b in BASES["mss"]["rank_bits"]]),
                        r"rank_bits .* do not match", True),
    "version-true": (_with("grr", version=True), r"version=True", False),
    "version-float": (_with("mss", version=1.0), r"version=1\.0", False),
    "threshold-bits-29": (_with("grr", threshold_bits=29), r"threshold_bits must be 30", False),
    "threshold-bits-29-mss": (_with("mss", threshold_bits=29), r"threshold_bits must be 30", False),
    "threshold-bits-float": (_with("sue", threshold_bits=30.0), r"threshold_bits must be 30", False),
    "pgr-q-above-2**15": (_pgr_big_q(), r"q = 268343 > 2\*\*15", True),
    "pgr-q-32771": (_re("pgr", q=32771), r"\bq = 32771 is not pgr's value", True),
    "grr-k-2**23+2": (_re("grr", k=(1 << 23) + 2), r"k - 1 = 8388609 > 2\*\*23", True),
    "grr-k-2**23+1": (retag(OracleConfig("grr", (1 << 23) + 1, 2.0).to_dict()), None, False),
    "olh-k-above-P": (_re("olh", k=32750), r"k <= 32749", True),
    "olh-P": (_re("olh", P=32771), r"\bP = 32771 is not olh's value", True),
    "olh-compact": (_re("olh", frame="compact"), r"frame: olh cannot use compact frames", True),
    "hr-K-2**24": (_re("hr", k=1 << 23, K=1 << 24), r"K = 16777216 > 2\*\*23", True),
    "rappor-k-2**30": (_re("rappor", k=ONE), r"k must be an integer in \[2, 2\*\*30\)", True),
    "ss-k-2**23+1": (_mss_one_modulus((1 << 23) + 1, "ss"), r"modulus k = 8388609 exceeds 2\*\*23", True),
    "ss-label-two-moduli": (_re("mss", protocol="ss"), r"protocol 'ss' does not match moduli", True),
    "mss-label-one-modulus": (_mss_one_modulus(16, "mss"), r"protocol 'mss' does not match moduli \[16\]", True),
    "no-label-one-modulus": (retag({k: v for k, v in BASES["ss"].items() if k != "protocol"}),
                             r"protocol 'mss' does not match", True),
    "eps-above-max": (_with("grr", epsilon=21.0), r"epsilon 21\.0 is above 20\.7944", False),
    "eps-just-above-max": (_with("mss", epsilon=math.nextafter(MAX_EPSILON, 99)), r"is above 20\.7944", False),
    "eps-bool": (_with("grr", epsilon=True), r"epsilon must be a positive finite number", True),
    "eps-string": (_with("grr", epsilon="2.0"), r"epsilon must be a positive finite number", True),
    "eps-zero": (_with("mss", epsilon=0), r"epsilon must be a positive finite number", True),
    "eps-negative": (_with("hr", epsilon=-2.0), r"epsilon must be a positive finite number", True),
    "eps-10**400": (_with("grr", epsilon=10 ** 400), r"epsilon", True),
    "eps-missing": (_without("olh", "epsilon"), r"missing field 'epsilon'", True),
    "eps-int": (_with("grr", epsilon=2), None, False),  # an integer is a number: accepted
    "k-missing": (_without("sue", "k"), r"missing field 'k'", True),
    "t-missing": (_without("grr", "t"), r"missing field 't'", True),
    "config-id-missing": (_without("mss", "config_id"), r"missing field 'config_id'", True),
    "config-id-int": (_with("grr", config_id=5), r"config_id must be 8 lowercase hex digits", True),
    "config-id-upper": (_with("grr", config_id=BASES["grr"]["config_id"].upper()), r"config_id .* does not match",
                        False),
    "config-id-wrong": (_with("hr", config_id="00000000"), r"config_id '00000000' does not match", True),
    "frame-int": (_with("grr", frame=0), r"frame must be one of", True),
    "frame-unknown": (_with("mss", frame="tiny"), r"frame must be one of", True),
    "protocol-unknown": (_with("grr", protocol="nope"), r"protocol must be one of", True),
    "protocol-list": (_with("grr", protocol=["grr"]), r"protocol must be one of", True),
    "protocol-null": (_with("grr", protocol=None), r"protocol must be one of", True),
    "not-an-object": ([1, 2], r"expected a JSON object", True),
    "moduli-string": (_with("mss", moduli="596163"), r"moduli must be a list", True),
    "moduli-not-coprime": (_re("mss", moduli=[60, 62], omegas=[15, 15], thresholds=[10 ** 8] * 2,
                               rank_bits=[1, 1]), r"not coprime", True),
    "omega-above-half": (_re("mss", omegas=[30, 15, 15]), r"omega 30 for modulus 59", True),
    "threshold-zero": (_re("mss", thresholds=[0] + BASES["mss"]["thresholds"][1:]), r"threshold 0", True),
    "threshold-2**30": (_re("ss", thresholds=[ONE]), r"threshold 1073741824", True),
    "threshold-above-rule": (_re("mss", thresholds=[t + 1 for t in BASES["mss"]["thresholds"]]),
                             r"exceeds the epsilon budget", False),
    "threshold-contradicts-eps": (_re("mss", thresholds=[ONE - 1] * 3), r"exceeds the epsilon budget", True),
    "grr-t-off-rule": (_re("grr", t=BASES["grr"]["t"] - 1), r"\bt = \d+ is not grr's value", False),
    "issued-negative": (_with("mss", issued=-1), r"issued must be a non-negative JSON integer", True),
    "issued-float": (_with("grr", issued=3.0), r"issued must be a non-negative JSON integer", True),
    "format-missing": (_without("grr", "format"), r"not an mss-config v1 file", False),
}

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
