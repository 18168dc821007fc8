"""What the k categories are called and whether they are ordered: the config's
host-only ``labels`` and ``ordinal`` (SPEC.md section 5).

``labels``: a list of k distinct names (strings of 1 to 64 characters), item
v's name at index v; ``ordinal``: true when the items are ordered (temperature
buckets, a dial), so views keep the items' order instead of ranking them.
Both are for the people reading estimates: they are not in the config id,
the aggregator never sends them to a board and ``mss deploy`` leaves
them out of a board's config.json (a board never needs 4,096 names in RAM).
"""
from collections import Counter
from dataclasses import dataclass

from mss_protocol.config_file import ConfigError

FIELDS = ("labels", "ordinal")
MAX_LABEL = 64


@dataclass(frozen=True)
class Categories:
    k: int
    labels: tuple | None = None  # k names, or None: items are called by their numbers
    ordinal: bool = False

    def name(self, item):
        """Item ``item``'s label, or its number."""
        return self.labels[item] if self.labels else str(item)

    def to_dict(self):
        return {"labels": list(self.labels) if self.labels else None, "ordinal": self.ordinal}


def from_config(d, k, source="config"):
    """The :class:`Categories` of a config dict (k items); ConfigError names the bad field."""
    labels, ordinal = d.get("labels"), d.get("ordinal", False)
    if type(ordinal) is not bool:
        raise ConfigError(f"{source}: ordinal must be true or false, got {ordinal!r}")
    if labels is None:
        return Categories(k, None, ordinal)
    if not isinstance(labels, list) or len(labels) != k:
        got = f"{len(labels)} names" if isinstance(labels, list) else repr(labels)
        raise ConfigError(f"{source}: labels must be a list of k = {k} names, got {got}")
    for i, label in enumerate(labels):
        if not isinstance(label, str) or not 1 <= len(label) <= MAX_LABEL or not label.isprintable():
            raise ConfigError(f"{source}: labels[{i}] must be a printable string of 1 to {MAX_LABEL} "
                              f"characters, got {label!r}")
    if len(set(labels)) != k:
        dup = next(v for v, c in Counter(labels).items() if c > 1)
        raise ConfigError(f"{source}: labels must be distinct; {dup!r} names more than one item")
    return Categories(k, tuple(labels), ordinal)
