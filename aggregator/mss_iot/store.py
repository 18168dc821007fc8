"""A campaign's store, read: :func:`open_store` gives a :class:`CampaignStore` whose
:meth:`~CampaignStore.estimate` is ``mss estimate --store``'s workflow
(:mod:`mss_aggregator.estimates`) and whose :meth:`~CampaignStore.estimates` are ``mss export``'s
per-epoch rows (:func:`mss_aggregator.export.estimate_rows`): the same numbers, field for field."""
from dataclasses import dataclass

from mss_aggregator import estimates as workflow
from mss_aggregator import export as exports
from mss_aggregator.collect import store as stores

EpochEstimate = workflow.StoreEstimate  # the API's name for one decoded scope of a store


def open_store(location):
    """Open a campaign's store to read its estimates and counts.

    Parameters
    ----------
    location : str or os.PathLike
        An SQLite file's path, or a ``postgresql://`` URL (the store ``mss aggregate --store``
        writes).

    Returns
    -------
    CampaignStore
        Close it with ``close()``, or use it in a ``with`` block.

    Raises
    ------
    StoreError
        Not a store, or a store of a newer format.
    """
    return CampaignStore(stores.open_store(str(location)))


@dataclass
class EstimateTable:
    """Every epoch's estimates, each epoch decoded alone (``mss export --what estimates``).

    Attributes
    ----------
    rows : list of dict
        One per (epoch, item), epochs ascending: ``epoch``, ``item``, ``label`` (when the store
        records the items' names), ``estimate`` and ``stderr`` (frequencies in [0, 1]), the
        marginal 95% interval ``ci_low``/``ci_high`` and ``detected``, the simultaneous one
        ``sim_low``/``sim_high`` and ``detected_simultaneous``, ``n`` (the epoch's reports),
        ``devices`` and ``stderr_factor`` (>= 1).
    epochs : list of int
        The epochs, ascending.
    """
    rows: list
    epochs: list

    def to_dict(self):
        """The table as plain values.

        Returns
        -------
        dict
            ``{"epochs": [...], "rows": [...]}`` (:attr:`rows`: epochs x k dicts).
        """
        return {"epochs": self.epochs, "rows": self.rows}

    def to_frame(self):
        """The rows as a pandas DataFrame (pandas is optional).

        Returns
        -------
        pandas.DataFrame, shape (epochs * k, columns)
            The columns of :attr:`rows`; ``df.pivot(index="epoch", columns="item",
            values="estimate")`` is the (epochs, k) matrix of estimates.
        """
        from mss_aggregator.frames import require_pandas

        return require_pandas().DataFrame(self.rows)


class CampaignStore:
    """A campaign's store (:func:`open_store`), read-only here.

    Attributes
    ----------
    store : mss_aggregator.collect.store.Store
        The library's store (SQLite or PostgreSQL).
    cfg : object
        The campaign's config (``cfg.k`` categories, ``cfg.epsilon`` nats).
    name : str
        The store's file, or a PostgreSQL URL's host and database (never a password).
    """

    def __init__(self, store):
        self.store, self.cfg, self.name = store, store.cfg, store.name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Close the store's connection."""
        self.store.close()

    def campaign(self):
        """The campaign's name the aggregator recorded.

        Returns
        -------
        str or None
        """
        return self.store.campaign()

    def epochs(self):
        """The epochs holding accepted reports (a shuffled store: a batch's reports).

        Returns
        -------
        list of int
            Epoch numbers (u32: ``(unix seconds - epoch_origin) // period_s``), ascending.
        """
        return exports.store_epochs(self.store)

    def counts(self, epoch=None):
        """The accepted reports' additive counts (the sufficient statistic the decoders read).

        Parameters
        ----------
        epoch : int, optional
            One epoch's reports; None: every epoch's, summed.

        Returns
        -------
        mss_protocol.counts.Counts
            ``total`` reports; ``n`` (shape (l,)) the reports a block, ``block(j)`` the counts of
            block j (shape (m_j,)); ``to_dict()``; ``merge(other)`` adds another site's.
        """
        return self.store.counts(epoch)

    def estimate(self, epoch=None, all_epochs=False, post="none", delta=None, compromised=None, robust=False,
                 exclude_suspects=False):
        """Frequency estimates of one epoch (or of every epoch pooled), as ``mss estimate --store``.

        Parameters
        ----------
        epoch : int, optional
            This epoch's reports; None: the fuller of the campaign clock's last complete epoch and
            the current one (each device counts once).
        all_epochs : bool
            Pool every epoch's reports (standard errors widened for memoized copies).
        post : str
            ``"none"`` (unbiased), ``"clip"`` or ``"simplex"``.
        delta : float, optional
            A shuffled store's central delta per batch (its (eps_c, delta) is stated); None: the
            default (1e-6), any other value refused for a store of device reports.
        compromised : mss_aggregator.estimates.Compromised, optional
            The devices not trusted (a count or a share); None: the documented default
            (:data:`~mss_aggregator.estimates.DEFAULT_COMPROMISED`, one device).
        robust : bool
            The robust estimate for those devices' crafted reports (``mss estimate --robust``,
            :mod:`mss_protocol.robust`): ``robust`` says how, ``plain`` is the plain decoder's.
        exclude_suspects : bool
            Leave out the reports of the devices :meth:`suspects` flags (``mss estimate
            --exclude-suspects``); ``integrity.excluded_suspects`` says how many.

        Returns
        -------
        EpochEstimate
            ``estimate`` arrays of shape (k,) (frequencies), ``scope`` (what was decoded and why),
            ``central`` (a shuffled store's guarantee, else None), ``integrity`` (``max_shift``: the
            most the untrusted devices can move an item; each row's ``certified_ci``); ``to_dict()``
            is ``mss estimate --json`` but its ``view`` (the table's display choices), ``to_frame()``
            k rows.

        Raises
        ------
        EstimateError
            Nothing to estimate (an empty store, an epoch without reports), saying what there is;
            ``.field`` names the argument at fault.
        """
        request = workflow.EstimateRequest(epoch, all_epochs, post, delta,
                                           compromised=compromised or workflow.DEFAULT_COMPROMISED, robust=robust,
                                           exclude_suspects=exclude_suspects)
        return workflow.estimate_store(self.store, request)

    def suspects(self, alpha=None):
        """The devices whose reports no honest device would likely have sent, as ``mss suspects``.

        Parameters
        ----------
        alpha : float, optional
            The false-alarm rate per honest device; None: the documented default (0.01,
            :data:`mss_aggregator.integrity.detect.DEFAULT_ALPHA`).

        Returns
        -------
        mss_aggregator.integrity.detect.Suspects
            ``flagged`` {device_id: [Evidence]} (each: the test, its statistic, threshold and
            p-value), ``pairs`` the item pairs the population test flagged; ``to_dict()`` is
            ``mss suspects --json``.
        """
        from mss_aggregator.integrity.detect import DEFAULT_ALPHA, suspects

        return suspects(self.store, DEFAULT_ALPHA if alpha is None else alpha)

    def estimates(self, epochs=None, post="none"):
        """Every epoch's estimates, each epoch decoded alone (the rows ``mss export`` writes).

        Parameters
        ----------
        epochs : iterable of int, optional
            Only these epochs; None: every epoch with accepted reports.
        post : str
            ``"none"``, ``"clip"`` or ``"simplex"``.

        Returns
        -------
        EstimateTable
            ``rows`` (one per epoch and item), ``to_frame()`` a DataFrame of shape (epochs * k, 14).
        """
        chosen = self.epochs() if epochs is None else sorted(set(epochs))
        rows = exports.estimate_rows(self.store, chosen, post)
        return EstimateTable(rows, sorted({r["epoch"] for r in rows}))
