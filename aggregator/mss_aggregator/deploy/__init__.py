"""Putting the firmware and a board's config onto MicroPython boards (``mss deploy``).

:mod:`.merge` builds the board's config (the campaign config, ``--set``, the
budget, the fleet key and cap, held configs) and checks it, and writes the
shared fields back to the campaign config; :mod:`.modules` lists the firmware
modules that config needs; :mod:`.flash` probes a board and copies them with
mpremote.  Every failure is a :class:`DeployError` carrying the exit status of
its step, so the command prints one line and exits with a status that names
the step.
"""

# exit status of each failed step (mss_cli.common: 2 usage error, 3 data error)
NO_BUDGET = 2  # a config without device.budget: a flag decides (--budget or --no-budget)
CONFIG = 3  # the merged config, a held one or --sensor is refused
WRITE_BACK = 4  # the campaign config cannot take the shared fields (--no-write-back and they differ, or unwritable)
BOARD = 5  # no board answers on the port (or mpremote is missing), or it cannot run what was asked
FLASH = 6  # a flashing step failed: mpy-cross, mpremote mip / cp / reset

ARCHS = ("", "x86", "x64", "armv6", "armv6m", "armv7m", "armv7em", "armv7emsp", "armv7emdp",
         "xtensa", "xtensawin", "rv32imc", "rv64imc")  # mpy-cross -march names; index: sys.implementation._mpy >> 10


class DeployError(Exception):
    """A step of a deploy failed: ``str(exc)`` says why in one line, ``status`` is its exit status;
    ``option``: the input at fault when one is (``"sets"``: the device settings, ``"budget"``,
    ``"fleet_key_file"``, ``"max_epsilon"``, ``"mpy"``, ``"arch"``: the deploy's own), and an
    ``example`` of a value that fixes it, for a caller to word with its own names for them."""

    def __init__(self, message, status, option=None, example=None):
        super().__init__(message)
        self.status, self.option, self.example = status, option, example
