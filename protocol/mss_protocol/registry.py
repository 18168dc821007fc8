"""Every protocol by name: one line each.

``make(name, k, epsilon)`` returns an object with the interface of
:class:`mss_protocol.base.Protocol`; ``from_config(cfg)`` the protocol a
device configuration names.  Entries are "module:factory" paths, imported
on first use, so listing the names (``AVAILABLE``) costs nothing.

A protocol outside this package joins with :func:`register` (its host
module, its device module and its config integers), called by hand or by an
installed package's entry point in the group ``mss_iot.protocols`` (a
callable taking no argument that calls :func:`register`), which every
process loads when it first imports this module, before any command lists
the protocols.
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
ENTRY_POINTS = "mss_iot.protocols"


def register(name, factory, device_module, fields):
    """Add the protocol ``name`` to the host and to the device tables.

    Parameters
    ----------
    name : str
        The registry name, the ``protocol`` field of its configs.
    factory : str or callable
        "module:attr" of, or the callable itself, (k, epsilon) -> a
        :class:`mss_protocol.base.Protocol` (an :class:`~mss_protocol.support.SupportOracle`
        for a one-output protocol).
    device_module : str
        The dotted name of its device module (``Client``, ``check``, ``ratios``,
        ``outputs``: ``mss_device.grr`` is one), entered in ``mss_device.params.MODULES``.
    fields : tuple of str
        Its config integers in canonical order (``mss_device.params.FIELDS``), the
        values of ``Protocol.device_values()``.

    Examples
    --------
    >>> register("grr2", "mss_protocol.grr:GRR", "mss_device.grr", ("t",))  # doctest: +SKIP
    """
    global AVAILABLE
    from mss_device import params

    if name in PROTOCOLS:
        raise ValueError(f"protocol {name!r} is registered already")
    PROTOCOLS[name] = factory
    params.MODULES[name] = device_module
    params.FIELDS[name] = tuple(fields)
    AVAILABLE = tuple(PROTOCOLS)


def factory(name):
    """The callable (k, epsilon) -> protocol registered as ``name``."""
    try:
        entry = PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; use {', '.join(AVAILABLE)}") from None
    if callable(entry):
        return entry
    module, attr = entry.split(":")
    obj = import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def protocol_class(name):
    """The class of protocol ``name`` (its factory, or the class of a classmethod factory):
    what it says before it is built (``min_k``, ``has_seed``)."""
    obj = factory(name)
    return getattr(obj, "__self__", obj)


def make(name, k, epsilon):
    """Protocol ``name`` with its parameters for (k, epsilon)."""
    return factory(name)(k, epsilon)


def from_config(cfg, name=None):
    """The protocol of a loaded device configuration (any protocol).

    A one-output config made its protocol when it was loaded
    (``OracleConfig.protocol``, from :func:`make`); an MSS or SS config is
    decoded by ``MssProtocol``, imported on first use as every entry above is
    (``mss.protocol`` imports the counts, whose loader imports the one-output
    configs, which import this module)."""
    if hasattr(cfg, "protocol"):
        return cfg.protocol
    return import_module("mss_protocol.mss.protocol").MssProtocol(cfg, name)


def _load_entry_points():
    """Register the protocols of the installed packages (module docstring)."""
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINTS):
        point.load()()


_load_entry_points()
