"""What an attacker who controls some devices is assumed to hold (issue 47: manipulation).

The one home of the compromised-device count that ``mss plan`` (a protocol's worst shift,
:meth:`mss_protocol.base.Protocol.shift_per_report`) and ``mss estimate`` (the certified interval)
both take."""
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Compromised:
    """How many devices an attacker controls: a ``count``, or a ``share`` of the fleet (of the devices a
    plan is stated at, of the devices an estimate decoded; rounded up); give one.  ``mss plan`` excludes
    protocols by it (``shift_per_report``), ``mss estimate`` widens its intervals by it.

    Parameters
    ----------
    count : int, optional
        Devices (>= 0).
    share : float, optional
        A fraction of the fleet, in [0, 1).
    """
    count: int = None
    share: float = None

    def __post_init__(self):
        if (self.count is None) == (self.share is None):
            raise ValueError("give a count of compromised devices or a share of them, not both or neither")
        if self.count is not None and (isinstance(self.count, bool) or int(self.count) != self.count
                                       or self.count < 0):
            raise ValueError(f"a count of compromised devices is a whole number >= 0, not {self.count!r}")
        if self.share is not None and not 0 <= self.share < 1:
            raise ValueError(f"a share of compromised devices is in [0, 1), not {self.share!r}")

    def devices(self, decoded):
        """The compromised devices among ``decoded`` devices.

        Parameters
        ----------
        decoded : int
            The devices of the fleet (a plan's n, an estimate's devices decoded).

        Returns
        -------
        int
            The count, or the share of ``decoded`` rounded up (1% of 150 devices is 2).
        """
        if self.count is not None:
            return int(self.count)
        return math.ceil(self.share * decoded - 1e-9)
