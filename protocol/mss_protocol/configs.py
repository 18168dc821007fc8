"""The config of any protocol, from a dict or a file.

:func:`load_dict` checks the fields every config shares
(:func:`mss_protocol.config_file.check_common`) and hands the rest to the
protocol's own loader: :class:`~mss_protocol.mss.config.MssConfig` for mss
and ss, :class:`~mss_protocol.oracle_config.OracleConfig` for the
one-output protocols.  Every refusal is a
:class:`~mss_protocol.config_file.ConfigError` naming the field.
"""
from mss_protocol import registry
from mss_protocol.config_file import check_common, read_json
from mss_protocol.mss.config import MssConfig
from mss_protocol.oracle_config import OracleConfig


def load_dict(d, source="config"):
    """The config of any protocol: :class:`MssConfig` for mss and ss,
    :class:`OracleConfig` for the others."""
    name = check_common(d, source)
    kind = registry.protocol_class(name).config_kind  # "mss" (planned) or "oracle" (fixed by k, epsilon)
    return (MssConfig if kind == "mss" else OracleConfig).from_dict(d, source)


def load(path):
    """:func:`load_dict` of a JSON file (a ConfigError names the file)."""
    return load_dict(read_json(path, "config"), source=str(path))
