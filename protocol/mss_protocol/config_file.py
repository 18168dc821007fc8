"""The fields every config file has, checked alike for every protocol (SPEC.md section 5).

A config is a JSON object.  The JSON types are the rule on both ends
(SPEC.md section 5, "JSON types"): an integer field is a JSON integer (a
Python ``int``: not ``true``/``false``, not a float such as ``64.0``, which
the board refuses too), ``epsilon`` is a number (an integer or a float, not
a bool), names are strings.  :func:`check_common` checks what every
protocol shares and returns the protocol name; the protocol's own loader
(``MssConfig.from_dict``, ``OracleConfig.from_dict``) then checks its
integers.  Every refusal is a :class:`ConfigError` naming the field.

``device`` is the board's own section (``mss_node.settings``): the host
does not read it.  ``issued`` (a pushed config's counter, ``mss_node.auth``)
must be a non-negative integer when present, as on the board.
"""
import json

from mss_device.frame import KINDS
from mss_device.params import FIELDS, IRR, MODULES, THRESHOLD_BITS
from mss_protocol import privacy, registry

FORMAT = "mss-config"
FORMAT_VERSION = 1
PROTOCOLS = tuple(MODULES)  # mss, ss and the one-output protocols
MSS_LISTS = ("moduli", "omegas", "thresholds", "rank_bits")


class ConfigError(ValueError):
    """A configuration that is not a valid configuration; names the field."""


def is_int(v):
    """A JSON integer: an int, not a bool (and not a float that equals one)."""
    return type(v) is int


def check_common(d, source="config"):
    """Check what every protocol's config shares; return its protocol name.

    A JSON object; ``format`` "mss-config" and ``version`` the integer 1;
    ``protocol`` one of PROTOCOLS (default mss); the fields of that protocol
    present (k, epsilon, config_id and its integers); each integer field an
    integer, MSS's lists lists of integers; ``epsilon`` a budget
    (:func:`mss_protocol.privacy.epsilon_problem`); ``threshold_bits``, if
    present, the integer 30; ``frame``, if present, a frame kind's name;
    ``config_id`` a string; ``issued``, if present, a non-negative integer;
    ``seed`` only for olh, ``irr`` only for grr, olh, hr and pgr.  Ranges, the
    id's value and the two layers' contents are the protocol's.
    """
    if not isinstance(d, dict):
        raise ConfigError(f"{source}: expected a JSON object")
    version = d.get("version")
    if d.get("format") != FORMAT or not is_int(version) or version != FORMAT_VERSION:
        raise ConfigError(f"{source}: not an {FORMAT} v{FORMAT_VERSION} file "
                          f"(format={d.get('format')!r}, version={version!r})")
    name = d.get("protocol", "mss")
    if not isinstance(name, str) or name not in MODULES:
        raise ConfigError(f"{source}: protocol must be one of {', '.join(PROTOCOLS)}, got {name!r}")
    lists = name not in FIELDS  # the device's tables: a one-output protocol's integers, else MSS's lists
    ints = MSS_LISTS if lists else FIELDS[name]
    for field in ("k", "epsilon", "config_id") + ints:
        if field not in d:
            raise ConfigError(f"{source}: missing field {field!r}")
    for field in ("k",) + (() if lists else ints):
        if not is_int(d[field]):
            raise ConfigError(f"{source}: {field} must be a JSON integer, got {d[field]!r}")
    if lists:
        for field in ints:
            if not isinstance(d[field], list) or not all(is_int(v) for v in d[field]):
                raise ConfigError(f"{source}: {field} must be a list of JSON integers, got {d[field]!r}")
    if why := privacy.epsilon_problem(d["epsilon"]):
        raise ConfigError(f"{source}: {why}")
    bits = d.get("threshold_bits", THRESHOLD_BITS)
    if not is_int(bits) or bits != THRESHOLD_BITS:
        raise ConfigError(f"{source}: threshold_bits must be {THRESHOLD_BITS}, got {bits!r}")
    if not isinstance(d.get("frame", "full"), str):
        raise ConfigError(f"{source}: frame must be one of {', '.join(KINDS)}, got {d['frame']!r}")
    if not isinstance(d["config_id"], str):
        raise ConfigError(f"{source}: config_id must be 8 lowercase hex digits, got {d['config_id']!r}")
    issued = d.get("issued", 0)
    if not is_int(issued) or issued < 0:
        raise ConfigError(f"{source}: issued must be a non-negative JSON integer, got {issued!r}")
    if "seed" in d and not registry.protocol_class(name).has_seed:
        raise ConfigError(f"{source}: seed: only {', '.join(seeded())} has a hash seed")
    if "irr" in d and name not in IRR:
        raise ConfigError(f"{source}: irr: only {', '.join(IRR)} have an instantaneous layer (one output "
                          f"per report), not {name}")
    return name


def seeded():
    """The protocols whose reports carry a hash seed (``Protocol.has_seed``: olh)."""
    return [name for name in registry.AVAILABLE if registry.protocol_class(name).has_seed]


def make_checked(name, k, epsilon):
    """``registry.make(name, k, epsilon)``, raising a ConfigError that names the
    protocol, k and epsilon when the protocol takes no such parameters (OLH above
    k = 32749, PGR and OLH beyond the device's draw, MSS below k = 4): a
    comparison over a grid (``mss bench``, ``mss audit``) says which cell it
    cannot run."""
    try:
        return registry.make(name, k, epsilon)
    except ValueError as exc:
        raise ConfigError(f"{name} at k = {k}, epsilon = {epsilon}: {exc}") from None


def check_id(d, cid_hex, source):
    """The file's ``config_id`` is the one its integers give (lower-case hex)."""
    if d["config_id"] != cid_hex:
        raise ConfigError(f"{source}: config_id {d['config_id']!r} does not match the "
                          f"parameters (expected {cid_hex})")


def frame_index(frame):
    """Index into mss_device.frame.KINDS of a frame kind name (or index)."""
    if is_int(frame) and 0 <= frame < len(KINDS):
        return frame
    if isinstance(frame, str) and frame in KINDS:
        return KINDS.index(frame)
    raise ConfigError(f"frame must be one of {', '.join(KINDS)}, got {frame!r}")


def read_json(path, what):
    """Parse a JSON file; a ConfigError names the file when it cannot be read."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: cannot read {what}: not JSON text (a binary file?)") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc}") from None
