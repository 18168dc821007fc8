"""A store's estimate, decoded: the application layer of ``mss estimate --store`` (the command maps
its options to an :class:`EstimateRequest` and renders the :class:`StoreEstimate`); the API's
``open_store(...).estimate(epoch=...)``, a notebook or a service call it the same way.

Which reports are decoded is :mod:`.collect.scope`'s choice (one epoch, the default epoch, or every
epoch pooled with standard errors widened for memoized copies), a shuffled store's central
guarantee :mod:`.collect.central`'s; this module puts them together and refuses, with
:class:`EstimateError` saying what the store holds, a request that finds nothing to decode.
``StoreEstimate.to_dict()`` is ``mss estimate --json`` but its ``view`` (the table's display
choices: which items, in which order, which intervals).
"""
from dataclasses import dataclass

from mss_aggregator.collect import central as centrals
from mss_aggregator.collect import scope as scopes
from mss_protocol import registry


class EstimateError(ValueError):
    """Nothing to estimate, or a request the store cannot serve; ``field`` names the
    :class:`EstimateRequest` field at fault (None: the store is empty), ``store`` the store."""

    def __init__(self, field_name, message, store=None):
        super().__init__(message)
        self.field, self.store = field_name, store


@dataclass(frozen=True)
class EstimateRequest:
    """What to decode.

    Parameters
    ----------
    epoch : int, optional
        This epoch's reports (a u32); None: the default epoch (:func:`.collect.scope.default_epoch`).
    all_epochs : bool
        Every epoch's reports, pooled (exclusive with ``epoch``).
    post : str
        Post-processing of the estimates (:data:`mss_protocol.postprocess.CHOICES`).
    delta : float, optional
        A shuffled store's central delta per batch; None: :data:`.collect.central.DELTA` (given,
        it is refused for a store of device reports, which has no central guarantee).
    config : object, optional
        The config the caller expects (its config id must be the store's); None: the store's.
    categories : mss_protocol.categories.Categories, optional
        The items' names and order; None: what the aggregator recorded in the store.
    source : str
        How errors name ``config`` (a file's path).
    """
    epoch: int = None
    all_epochs: bool = False
    post: str = "none"
    delta: float = None
    config: object = None
    categories: object = None
    source: str = "the config given"

    def __post_init__(self):
        if self.epoch is not None and self.all_epochs:
            raise ValueError("give an epoch or all_epochs, not both")


@dataclass
class StoreEstimate:
    """One decoded scope of a store (:func:`estimate_store`).

    Attributes
    ----------
    config : object
        The store's config (``k`` categories, ``epsilon`` nats, ``config_id_hex``).
    estimate : mss_protocol.estimate.Estimate
        ``estimate``, ``raw``, ``stderr``, ``ci_low``, ``ci_high``: arrays of shape (k,), frequencies
        (standard errors already widened by ``scope.stderr_factor``).
    scope : mss_aggregator.collect.scope.Scope
        What was decoded and why: ``counts``, ``epoch`` (None pooled), ``devices``,
        ``stderr_factor`` (>= 1), ``selection`` (in words), ``summary()``.
    counters : dict
        The store's counters (received, accepted, rejected...: messages).
    categories : mss_protocol.categories.Categories
        The items' names and order.
    central : dict or None
        A shuffled store's central guarantee (``eps``, ``delta``, ...); None for device reports.
    post : str
        The post-processing applied.
    """
    config: object
    estimate: object
    scope: object
    counters: dict
    categories: object
    central: dict = None
    post: str = "none"

    @property
    def n(self):
        """Reports decoded (int)."""
        return self.scope.counts.total

    def rows(self):
        """One dict per item: ``item``, ``label`` (when the items have names), ``estimate``,
        ``stderr``, ``ci_low``, ``ci_high``, ``detected``, ``sim_low``, ``sim_high``,
        ``detected_simultaneous`` (frequencies in [0, 1]; :meth:`mss_protocol.estimate.Estimate.rows`).

        Returns
        -------
        list of dict, length k
        """
        rows = self.estimate.rows()
        if self.categories.labels:
            for r in rows:
                r["label"] = self.categories.name(r["item"])
        return rows

    def to_dict(self):
        """``mss estimate --store ... --json`` but its ``view``.

        Returns
        -------
        dict
            ``n`` (reports), ``config_id`` (hex), the scope's ``epoch``, ``pooled``, ``epochs``,
            ``devices``, ``stderr_factor``, ``current_epoch``, ``selection``, ``memoized``,
            ``decoded``, then ``counters``, ``post``, ``estimates`` (:meth:`rows`, k dicts) and, for
            a shuffled store, ``central``.
        """
        shuffled = {} if self.central is None else {"central": self.central}
        return {"n": self.n, "config_id": self.config.config_id_hex, **self.scope.document(),
                "counters": self.counters, "post": self.post, "estimates": self.rows(), **shuffled}

    def to_frame(self):
        """The estimates as a pandas DataFrame (pandas is optional).

        Returns
        -------
        pandas.DataFrame, shape (k, 9 or 10)
            One row per item, the columns of :meth:`rows`.
        """
        from mss_aggregator.frames import require_pandas

        return require_pandas().DataFrame(self.rows())


def estimate_store(store, request=EstimateRequest()):
    """Decode the reports of ``store`` that ``request`` selects.

    Parameters
    ----------
    store : mss_aggregator.collect.store.Store
        An open store (:func:`mss_aggregator.collect.store.open_store`); left open.
    request : EstimateRequest

    Returns
    -------
    StoreEstimate

    Raises
    ------
    EstimateError
        ``field`` ``"config"``: the expected config is another campaign's; None: the store holds no
        accepted report; ``"epoch"``: none in the epoch selected; ``"delta"``: a central delta for a
        store of device reports.  The message says what the store holds.
    """
    r = request
    # what the store holds is read only for an error (it is three more queries)
    if r.config is not None and r.config.config_id != store.cfg.config_id:
        raise EstimateError("config", f"{r.source} is config {r.config.config_id_hex}, another campaign's: "
                                      f"{scopes.contents(store)}", store)
    scope = scopes.select(store, r.epoch, r.all_epochs)
    if not scope.counts.total:
        held = scopes.contents(store)
        if not store.tally()[0]:  # an empty store: what it holds says it all
            raise EstimateError(None, held, store)
        what = f"epoch {scope.epoch} ({scope.selection})" if r.epoch is None else f"epoch {r.epoch}"
        raise EstimateError("epoch", f"no accepted reports in {what}: {held}", store)
    central = centrals.guarantee(store, scope, centrals.DELTA if r.delta is None else r.delta)
    if central is None and r.delta is not None:
        raise EstimateError("delta", f"{store.name} holds reports of devices, not a shuffler's batches: they "
                                     f"have no central guarantee, only eps-LDP", store)
    protocol = registry.from_config(store.cfg)
    est = scopes.decode(protocol, scope, r.post)
    names = r.categories if r.categories is not None else store.categories()
    return StoreEstimate(store.cfg, est, scope, store.counters(), categories=names, central=central, post=r.post)
