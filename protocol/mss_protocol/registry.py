"""Every protocol by name: one line each.

``make(name, k, epsilon)`` returns an object with the interface of
:class:`mss_protocol.base.Protocol`; ``from_config(cfg)`` the protocol a
device configuration names.  Entries are "module:factory" paths, imported
on first use, so listing the names (``AVAILABLE``) costs nothing.
"""
from importlib import import_module

PROTOCOLS = {
    "mss": "mss_protocol.mss.protocol:MssProtocol.planned",
    "ss": "mss_protocol.ss:SubsetSelection",
    "pgr": "mss_protocol.pgr:PGR",
    "grr": "mss_protocol.grr:GRR",
    "rappor": "mss_protocol.unary:UnaryEncoding.oue",  # basic one-time RAPPOR, optimised (OUE)
    "sue": "mss_protocol.unary:UnaryEncoding.sue",
    "olh": "mss_protocol.olh:OLH",
    "hr": "mss_protocol.hr:HadamardResponse",
}
AVAILABLE = tuple(PROTOCOLS)


def factory(name):
    """The callable (k, epsilon) -> protocol registered as ``name``."""
    try:
        module, attr = PROTOCOLS[name].split(":")
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; use {', '.join(AVAILABLE)}") from None
    obj = import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def make(name, k, epsilon):
    """Protocol ``name`` with its parameters for (k, epsilon)."""
    return factory(name)(k, epsilon)


def make_checked(name, k, epsilon):
    """:func:`make`, raising a ConfigError that names the protocol, k and epsilon
    when the protocol takes no such parameters (OLH above k = 32749, PGR and
    OLH beyond the device's draw, MSS below k = 4): a comparison over a grid
    (``mss bench``, ``mss audit``) says which cell it cannot run."""
    from mss_protocol.mss.config import ConfigError

    try:
        return make(name, k, epsilon)
    except ValueError as exc:
        raise ConfigError(f"{name} at k = {k}, epsilon = {epsilon}: {exc}") from None


def from_config(cfg, name=None):
    """The protocol of a loaded device configuration (any protocol)."""
    from mss_protocol.mss.protocol import MssProtocol
    from mss_protocol.oracle_config import OracleConfig

    if isinstance(cfg, OracleConfig):
        return cfg.protocol
    return MssProtocol(cfg, name)
