"""The campaign file, read once: :class:`Campaign`.

A campaign file (``mss plan --device-config``) is the protocol's config with a ``device``
section (what the boards read: their period, memoize, budget, LoRaWAN ports) and an optional
``aggregator`` section (``accept_past_epochs``, ``quarantine_max_rows``).  :meth:`Campaign.read`
reads and checks all of it, in one place: the config, its category names, the device section as
the boards check it (memoize, budget), the campaign clock and the window of epochs accepted, the
aggregator's fields.  The services (:class:`~mss_aggregator.collect.service.Aggregator`,
:class:`~mss_aggregator.shuffle.service.Shuffler`) take the result; what a board does not set is
the firmware's own default (:data:`mss_node.settings.DEVICE_DEFAULTS`, the LoRaWAN link's
``DEFAULTS``), never restated here.

Errors are :class:`~mss_protocol.config_file.ConfigError` naming the file and the field;
:class:`NoClock` when the file has no ``device.period_s`` and the caller needs the clock.
"""
import copy
from dataclasses import dataclass, field

from mss_aggregator.collect.ingest import campaign_clock, count_field
from mss_aggregator.collect.lorawan import config_port
from mss_aggregator.collect.store import QUARANTINE_MAX_ROWS
from mss_node.lorawan_link import DEFAULTS as LORAWAN_DEFAULTS
from mss_node.settings import DEVICE_DEFAULTS
from mss_protocol import categories as categories_of
from mss_protocol.budget import check_device
from mss_protocol.config_file import ConfigError, read_json
from mss_protocol.configs import load_dict
from mss_protocol.frames import dev_eui


class NoClock(ConfigError):
    """A campaign file without ``device.period_s`` where the clock is needed."""


@dataclass(frozen=True)
class Campaign:
    """One campaign file, checked.  ``source``: its path (errors name it); ``cfg`` the
    protocol's config; ``categories`` their names and order; ``device`` the ``device`` section
    as given (``{}`` without one; :meth:`setting` fills in the firmware's defaults); ``clock``
    ``{"period_s", "epoch_origin", "accept_past_epochs"}`` or None without ``device.period_s``
    (:meth:`require_clock`); ``quarantine_max_rows``; ``document`` the file's JSON object as
    given, only for what writes files from it (``mss provision`` copies it into each board's
    config): what reads the campaign takes the fields above."""

    source: str
    cfg: object
    categories: object
    device: dict = field(default_factory=dict)
    clock: dict | None = None
    quarantine_max_rows: int = QUARANTINE_MAX_ROWS
    document: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def read(cls, path):
        """The campaign of the file at ``path``; ConfigError naming it and the bad field."""
        return cls.from_dict(read_json(path, "config"), str(path))

    @classmethod
    def from_dict(cls, raw, source="config"):
        """The campaign of a campaign file's dict; ``source`` names it in errors."""
        cfg = load_dict(raw, source=source)
        names = categories_of.from_config(raw, cfg.k, source)
        try:
            clock = campaign_clock(raw)  # first: it checks that the sections are objects
            device = raw.get("device") or {}
            check_device(device, cfg)  # memoize, budget: as the boards read them
            quarantine = count_field(raw.get("aggregator") or {}, "quarantine_max_rows", QUARANTINE_MAX_ROWS,
                                     "aggregator")
        except ValueError as exc:
            raise ConfigError(f"{source}: {exc}") from None
        return cls(source, cfg, names, device=dict(device), clock=clock, quarantine_max_rows=quarantine,
                   document=copy.deepcopy(raw))

    def rewritten(self, raw):
        """The campaign this file would be with ``raw`` (a JSON object) written to it, checked as
        :meth:`read` checks it; ConfigError naming the file and the bad field."""
        return type(self).from_dict(raw, self.source)

    def setting(self, key):
        """``device.<key>`` as the boards run it: given, else the firmware's default."""
        return self.device.get(key, DEVICE_DEFAULTS[key])

    def require_clock(self, needs):
        """The clock, or :class:`NoClock` saying why the caller (``needs``) cannot do without it."""
        if self.clock is None:
            raise NoClock(f"{self.source}: no device.period_s, the boards' reporting period in seconds: {needs}; "
                          f"add it (the firmware's default is {DEVICE_DEFAULTS['period_s']}, with epoch_origin "
                          f"{DEVICE_DEFAULTS['epoch_origin']})")
        return self.clock

    def lorawan_port(self, key):
        """``device.lorawan.<key>`` (``fport``, ``config_fport``, ``time_fport``) as the boards run
        it: given, else the firmware's default; ConfigError for a bad one."""
        try:
            return config_port(self.device, key, LORAWAN_DEFAULTS[key])
        except ValueError as exc:
            raise ConfigError(f"{self.source}: {exc}") from None

    def lorawan_ports(self):
        """(fport, time_fport): the FPorts of reports and of time probes (an
        :class:`~mss_aggregator.collect.ingest.Ingest`'s ``ports``); ConfigError for a bad one."""
        return self.lorawan_port("fport"), self.lorawan_port("time_fport")

    def check_links(self, links):
        """ConfigError if the reports cannot come by ``links`` (a
        :class:`~mss_aggregator.collect.links.Links`) as this campaign's boards send them:
        a compact frame is dated by arrival, which only a LoRaWAN network server's receive time
        makes safe (SPEC.md section 4; a shuffler's bodies are dated by the batch); a LoRaWAN
        board reports under its modem's DevEUI and seeds OLH with it, so a ``device.device_id``
        that is not a DevEUI would be decoded with another seed (SPEC.md section 4, "Device
        ids"; the board refuses such a config too)."""
        if self.cfg.frame == 1 and links.off_lorawan():
            raise ConfigError(f"{self.source}: frame compact is dated by arrival, which only a LoRaWAN "
                              f"network server's receive time makes safe: collect it from a network server "
                              f"only, or plan the boards with compact-epoch")
        given = self.device.get("device_id")
        if links.lorawan and given is not None:
            try:
                dev_eui(given)
            except ValueError:
                raise ConfigError(f"{self.source}: device.device_id {str(given)[:64]!r} is not a DevEUI: a LoRaWAN "
                                  "board reports under its modem's DevEUI and seeds with it; leave device.device_id "
                                  "out (or set it to the DevEUI, 16 hex digits)") from None
