"""Emulated LoRaWAN modems on real ptys, one module per command dialect as the
firmware's ``mss_node/modem/`` has: :mod:`.rak3172` (also ``rak3172-old``, the
older manual's event forms), :mod:`.wio_e5`, :mod:`.rn2483`; :mod:`.base` holds
what they share (:class:`~.base.ModemEmulator`, :class:`~.base.ModemPool`).
:func:`emulator` makes the modem of a dialect.  The network servers the
modems' uplinks go to are :mod:`mss_aggregator.devices.network_server`.
"""
from mss_aggregator.devices.modem.rak3172 import Rak3172
from mss_aggregator.devices.modem.rn2483 import Rn2483
from mss_aggregator.devices.modem.wio_e5 import WioE5

EMULATORS = {"rak3172": Rak3172, "rak3172-old": Rak3172, "wio-e5": WioE5, "rn2483": Rn2483}
DIALECTS = tuple(EMULATORS)
SLEEP_COMMANDS = {dialect: cls.SLEEP_COMMAND for dialect, cls in EMULATORS.items()}


def emulator(dialect, dev_eui, **kw):
    """The emulated modem of ``dialect`` (one of DIALECTS) with DevEUI ``dev_eui``;
    ``kw`` as :class:`~.base.ModemEmulator` takes them."""
    if dialect not in EMULATORS:
        raise ValueError(f"dialect must be one of {', '.join(DIALECTS)}, got {dialect!r}")
    return EMULATORS[dialect](dialect, dev_eui, **kw)
