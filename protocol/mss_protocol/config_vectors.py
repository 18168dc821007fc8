"""Configs every loader must refuse (or must accept), named: ``protocol/vectors/configs/refused.json``.

SPEC.md section 5, "What a loader checks".  Each entry is a config a second
implementation's loaders must judge as the file says::

    {"name": "configs", "configs": [{"what", "config", "host", "host_message", "board"}, ...]}

``host`` and ``board`` are "refuse" or "accept": the host's loader
(``mss_protocol.configs.load_dict``) and the board's
(``mss_node.settings.Settings``, the device column, the ``device`` section
included: caps).  ``host_message`` is a regular expression the host's
refusal matches: it names the field.  Every config but the deliberately
wrong ids carries the config id its integers give, so only the check under
test can refuse it.  The host refuses whatever the board refuses and may
refuse more (thresholds off the rule, epsilon above MAX_EPSILON, a format it
does not know); only the ``device`` section (the cap) is the board's alone.
Cases with a ``device`` section are judged with it as given; the others get
the section a board needs to reach its protocol checks (:func:`on_board`)::

    python -m mss_protocol.all_vectors --write protocol/vectors   # this file too
    python -m mss_protocol.all_vectors --check protocol/vectors
"""
import json
import math
import re
from pathlib import Path

from mss_device.params import FIELDS, config_id, oracle_config_id
from mss_protocol.config_file import ConfigError
from mss_protocol.configs import load_dict
from mss_protocol.mss.config import MssConfig
from mss_protocol.oracle_config import NAMES, OracleConfig
from mss_protocol.privacy import MAX_EPSILON, ONE, cap, threshold
from mss_protocol.subset_selection import rank_bits

PATH = Path(__file__).resolve().parents[1] / "vectors" / "configs" / "refused.json"


def retag(d):
    """d with the config id its integers give (the device's own functions)."""
    name = d.get("protocol", "mss")
    if name in FIELDS:
        irr = d["irr"]["t"] if "irr" in d else None
        cid = oracle_config_id(name=name, k=d["k"], values=[d[f] for f in FIELDS[name]], seed=d.get("seed", "epoch"),
                               irr=irr)
    else:
        cid = config_id(d["k"], d["moduli"], d["omegas"], d["thresholds"])
    return dict(d, config_id=cid.hex())


def mss(k, eps, moduli, omegas, thresholds=None):
    """An MSS config dict from any integers (the host would refuse most of them)."""
    thresholds = thresholds or [threshold(m, w, eps) for m, w in zip(moduli, omegas)]
    return retag({"format": "mss-config", "version": 1, "protocol": "mss", "k": k, "epsilon": eps,
                  "moduli": moduli, "omegas": omegas, "thresholds": thresholds, "threshold_bits": 30,
                  "rank_bits": [rank_bits(m, w) for m, w in zip(moduli, omegas)], "frame": "full"})


BASES = {f"{n}": OracleConfig(n, 64, 2.0).to_dict() for n in NAMES}
BASES.update({
    "mss": MssConfig.build(64, 2.0, [59, 61, 63]).to_dict(),
    "mss-big": MssConfig.build(40000, 6.0, [39997, 39989]).to_dict(),
    "ss": MssConfig.subset_selection(16, 2.0).to_dict(),
    "pgr-300": OracleConfig("pgr", 300, 6.0).to_dict(),
    "grr-compact": OracleConfig("grr", 64, 2.0, "compact").to_dict(),
    "olh-compact-epoch": OracleConfig("olh", 64, 2.0, "compact-epoch").to_dict(),
    "mss-compact": MssConfig.build(64, 2.0, [59, 61, 63]).with_frame("compact").to_dict(),
    # the two optional layers (SPEC.md section 5): olh's seed per device, the instantaneous layer
    "olh-seed-device": OracleConfig("olh", 64, 2.0, seed="device").to_dict(),
    "olh-seed-device-compact": OracleConfig("olh", 64, 2.0, "compact", seed="device").to_dict(),
    "grr-irr": OracleConfig("grr", 64, 3.0, irr_epsilon=1.0).to_dict(),
    "olh-irr": OracleConfig("olh", 64, 3.0, seed="device", irr_epsilon=1.0).to_dict(),
    "hr-irr": OracleConfig("hr", 64, 3.0, irr_epsilon=1.0).to_dict(),
    "pgr-irr": OracleConfig("pgr", 64, 3.0, irr_epsilon=1.0).to_dict(),
})
IRR = BASES["grr-irr"]["irr"]  # a layer to put where none may be


def on_board(d):
    """``d`` with the device section a board needs to get to its protocol checks: an id
    (the unix port has no machine.unique_id), LoRaWAN for compact frames (SPEC.md section 4),
    where the board takes its modem's DevEUI instead."""
    if not isinstance(d, dict) or "device" in d:
        return d
    if d.get("frame") == "compact":
        return dict(d, device={"transport": "lorawan", "lorawan": {"path": "/dev/null"}})
    return dict(d, device={"device_id": "x"})


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


def _hr_block(k, eps, b):
    """hr at (k, eps) with block size ``b`` (K and t as that b gives them), its id retagged."""
    from mss_protocol.hr import layout

    blocks, K = layout(k, b)
    return retag({"format": "mss-config", "version": 1, "protocol": "hr", "k": k, "epsilon": eps, "K": K,
                  "block": b, "t": threshold(2 * blocks, 1, eps), "threshold_bits": 30, "frame": "full"})


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
    # olh's seed: "epoch" (default) or "device"; no other protocol has one
    "olh-seed-public": (_re("olh", seed="public"), r"seed must be one of epoch, device", True),
    "olh-seed-int": (_re("olh", seed=1), r"seed must be one of epoch, device", True),
    "olh-seed-epoch": (_re("olh", seed="epoch"), None, False),  # the default, named: accepted
    "olh-seed-device-compact-epoch": (_re("olh-seed-device", frame="compact-epoch"), None, False),
    "seed-on-grr": (_re("grr", seed="device"), r"seed: only olh has a hash seed", True),
    "seed-epoch-on-hr": (_re("hr", seed="epoch"), r"seed: only olh has a hash seed", True),
    "seed-on-mss": (_with("mss", seed="device"), r"seed: only olh has a hash seed", True),
    # the instantaneous layer: grr, olh, hr, pgr only; {epsilon, t}, t the rule's for (n_out, irr.epsilon)
    "irr-on-rappor": (_re("rappor", irr=IRR), r"irr: only grr, olh, hr, pgr", True),
    "irr-on-sue": (_re("sue", irr=IRR), r"irr: only grr, olh, hr, pgr", True),
    "irr-on-mss": (_with("mss", irr=IRR), r"irr: only grr, olh, hr, pgr", True),
    "irr-on-ss": (_with("ss", irr=IRR), r"irr: only grr, olh, hr, pgr", True),
    "irr-null": (_with("grr", irr=None), r"irr must be an object", True),
    "irr-number": (_with("hr-irr", irr=1.0), r"irr must be an object", True),
    "irr-list": (_with("pgr-irr", irr=[1.0, 5]), r"irr must be an object", True),
    "irr-t-missing": (_with("grr-irr", irr={"epsilon": 1.0}), r"missing field 'irr\.t'", True),
    "irr-eps-missing": (_re("grr-irr", irr={"t": IRR["t"]}), r"missing field 'irr\.epsilon'", True),
    "irr-t-zero": (_re("grr-irr", irr=dict(IRR, t=0)), r"irr\.t = 0 is not", True),
    "irr-t-2**30": (_re("olh-irr", irr=dict(BASES["olh-irr"]["irr"], t=ONE)), r"irr\.t = 1073741824 is not", True),
    "irr-t-float": (_re("grr-irr", irr=dict(IRR, t=float(IRR["t"]))), r"irr\.t must be a JSON integer", True),
    "irr-t-bool": (_with("grr-irr", irr=dict(IRR, t=True)), r"irr\.t must be a JSON integer", True),
    "irr-t-off-rule": (_re("hr-irr", irr=dict(BASES["hr-irr"]["irr"], t=BASES["hr-irr"]["irr"]["t"] + 1)),
                       r"irr\.t = \d+ is not the instantaneous layer's value", False),
    "irr-t-contradicts-eps": (_re("pgr-irr", irr=dict(BASES["pgr-irr"]["irr"], t=ONE - 1)),
                              r"irr\.t = 1073741823 is not", True),
    "irr-eps-bool": (_with("grr-irr", irr=dict(IRR, epsilon=True)), r"irr\.epsilon must be a positive", True),
    "irr-eps-string": (_with("grr-irr", irr=dict(IRR, epsilon="1.0")), r"irr\.epsilon must be a positive", True),
    "irr-eps-zero": (_with("grr-irr", irr=dict(IRR, epsilon=0)), r"irr\.epsilon must be a positive", True),
    "irr-eps-above-max": (_with("grr-irr", irr=dict(IRR, epsilon=21.0)), r"irr\.epsilon 21\.0 is above", False),
    "irr-id-without-layer": (_with("grr-irr", irr=dict(IRR, t=IRR["t"] - 1)), r"irr\.t = \d+ is not", True),
    "irr-wrong-id": (dict(BASES["grr-irr"], config_id=BASES["grr"]["config_id"]), r"config_id .* does not match",
                     True),
}


def _capped(d, max_epsilon, ratio_of=None):
    """``d`` on a board capped at ``max_epsilon`` (``device.max_ratio`` that of ``ratio_of``)."""
    return dict(d, device={"device_id": "x", "max_epsilon": max_epsilon,
                           "max_ratio": cap(max_epsilon if ratio_of is None else ratio_of)})


# name -> (config with its device section, host message or None, the board refuses it)
CAPS = {
    "cap-mss-above": (_capped(MssConfig.build(64, 4.0, [59, 61, 63]).to_dict(), 2.0), None, True),
    "cap-mss-at": (_capped(MssConfig.build(64, 2.0, [59, 61, 63]).to_dict(), 2.0), None, False),
    "cap-olh-above": (_capped(OracleConfig("olh", 64, 3.0).to_dict(), 2.0), None, True),
    "cap-pgr-at": (_capped(OracleConfig("pgr", 64, 2.0).to_dict(), 2.0), None, False),
    "cap-sue-just-above": (_capped(OracleConfig("sue", 64, 2.0000001).to_dict(), 2.0), None, True),
    "cap-ratio-not-its-epsilon": (_capped(OracleConfig("grr", 64, 1.0).to_dict(), 2.0, 3.0), None, True),
    "cap-ratio-missing": (dict(BASES["grr"], device={"device_id": "x", "max_epsilon": 2.0}), None, True),
    "olh-compact-capped": (dict(_capped(_re("olh", frame="compact"), 2.0)), r"frame: olh cannot use compact",
                           True),
    "compact-on-mqtt": (dict(BASES["grr-compact"], device={"device_id": "x", "transport": "mqtt"}), None, True),
    # device.transport defaults to serial whatever the frame: a compact config must say lorawan
    "compact-default-transport": (dict(BASES["grr-compact"], device={"device_id": "x"}), None, True),
    # hr: a block size whose p = q is no candidate (SPEC.md section 1): at eps = 1e-12, k = 5 the
    # rule's b is 2 (b = 8 and 4 give t = 2**30 / (2B) exactly); the config with b = 8 is refused
    "hr-p-equals-q-skipped": (OracleConfig("hr", 5, 1e-12).to_dict(), None, False),
    "hr-p-equals-q-block": (_hr_block(5, 1e-12, 8), r"K = 8 is not hr's value", False),
    # memoize: olh only with its seed per device (an epoch seed changes every epoch)
    "memoize-olh-seed-epoch": (dict(BASES["olh"], device={"device_id": "x", "memoize": True}), None, True),
    "memoize-olh-seed-device": (dict(BASES["olh-seed-device"], device={"device_id": "x", "memoize": True}), None,
                                False),
    "memoize-pgr-irr": (dict(BASES["pgr-irr"], device={"device_id": "x", "memoize": True}), None, False),
    "cap-grr-irr-prr-above": (_capped(OracleConfig("grr", 64, 3.0, irr_epsilon=1.0).to_dict(), 2.0), None, True),
}


def host_verdict(d):
    """None if the host's loader accepts ``d``, else its ConfigError (nothing else is raised)."""
    try:
        load_dict(d)
    except ConfigError as exc:
        return exc
    return None


def board_verdict(d):
    """None if the board's loader (on this Python) accepts ``d``, else its message."""
    from mss_node.settings import Settings

    try:
        Settings(on_board(d))
    except Exception as exc:  # as the board's main loop: any exception leaves it idle
        return str(exc)
    return None


def make():
    out = []
    for what, (d, message, board_refuses) in list(TABLE.items()) + list(CAPS.items()):
        host = host_verdict(d)
        out.append({"what": what, "config": d, "host": "accept" if host is None else "refuse",
                    "host_message": message, "board": "refuse" if board_refuses else "accept"})
    return {"name": "configs", "configs": out}


def write(path=PATH):
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(make(), indent=1) + "\n")


def check(path=PATH):
    """Mismatch messages (empty when both loaders judge every config as the file says)."""
    errors = []
    for case in json.loads(Path(path).read_text())["configs"]:
        what, d = case["what"], case["config"]
        host, board = host_verdict(d), board_verdict(d)
        if (host is None) != (case["host"] == "accept"):
            errors.append(f"{path}: {what}: the host would {'accept' if host is None else 'refuse'} it ({host})")
        elif host is not None and case["host_message"] and not re.search(case["host_message"], str(host)):
            errors.append(f"{path}: {what}: the host's refusal {host} does not match {case['host_message']!r}")
        if (board is None) != (case["board"] == "accept"):
            errors.append(f"{path}: {what}: the board would {'accept' if board is None else 'refuse'} it ({board})")
        if board is not None and host is None and not (isinstance(d, dict) and "device" in d):  # caps: board's
            errors.append(f"{path}: {what}: the board refuses ({board}) but the host accepts")
    return errors
