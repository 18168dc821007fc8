"""The campaign file, read once: the library's :class:`~mss_aggregator.campaign.Campaign` with the
API's constructor name and a ``to_dict()``."""
from mss_aggregator import campaign as campaigns


class Campaign(campaigns.Campaign):
    """One campaign file (``mss plan --device-config``), read and checked once
    (:class:`mss_aggregator.campaign.Campaign`): what the services take.

    Parameters
    ----------
    source : str
        Its path (errors name it).
    cfg : object
        The protocol's config (``cfg.k`` categories, ``cfg.epsilon`` nats, ``cfg.name``).
    categories : mss_protocol.categories.Categories
        The categories' names and order.
    device : dict
        The ``device`` section as given (``setting(key)`` fills in the firmware's defaults).
    clock : dict or None
        ``{"period_s": seconds, "epoch_origin": unix seconds, "accept_past_epochs": epochs}``;
        None without ``device.period_s``.
    quarantine_max_rows : int
        Rows of unreadable messages a store keeps.
    """

    @classmethod
    def from_file(cls, path):
        """The campaign of the file at ``path``.

        Parameters
        ----------
        path : str or os.PathLike

        Returns
        -------
        Campaign

        Raises
        ------
        ConfigError
            Naming the file and the bad field.
        """
        return cls.read(path)

    def to_dict(self):
        """The campaign file's content as read.

        Returns
        -------
        dict
            The config's fields (``protocol``, ``k``, ``epsilon``, ...), ``device`` (the section
            as given) and ``config_id`` (hex).
        """
        return {**self.cfg.to_dict(), "device": dict(self.device), "config_id": self.cfg.config_id_hex}
