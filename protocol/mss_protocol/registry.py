"""Every protocol by name: one line each.

``make(name, k, epsilon)`` returns an object with the interface of
:class:`mss_protocol.base.Protocol`; ``from_config(cfg)`` the protocol a
device configuration names.
"""
from mss_protocol.grr import GRR
from mss_protocol.hr import HadamardResponse
from mss_protocol.mss.protocol import MssProtocol
from mss_protocol.olh import OLH
from mss_protocol.pgr import PGR
from mss_protocol.ss import SubsetSelection
from mss_protocol.unary import UnaryEncoding

PROTOCOLS = {
    "mss": MssProtocol.planned,
    "ss": SubsetSelection,
    "pgr": PGR,
    "grr": GRR,
    "rappor": lambda k, eps: UnaryEncoding(k, eps, "oue"),  # basic one-time RAPPOR, optimised (OUE)
    "sue": lambda k, eps: UnaryEncoding(k, eps, "sue"),
    "olh": OLH,
    "hr": HadamardResponse,
}
AVAILABLE = tuple(PROTOCOLS)


def make(name, k, epsilon):
    """Protocol ``name`` with its parameters for (k, epsilon)."""
    try:
        factory = PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; use {', '.join(AVAILABLE)}") from None
    return factory(k, epsilon)


def from_config(cfg, name=None):
    """The protocol of a loaded device configuration."""
    return MssProtocol(cfg, name)
