"""A store's estimate, decoded: the application layer of ``mss estimate --store`` (the command maps
its options to an :class:`EstimateRequest` and renders the :class:`StoreEstimate`); the API's
``open_store(...).estimate(epoch=...)``, a notebook or a service call it the same way.

Which reports are decoded is :mod:`.collect.scope`'s choice (one epoch, the default epoch, or every
epoch pooled with standard errors widened for memoized copies), a shuffled store's central
guarantee :mod:`.collect.central`'s; this module puts them together and refuses, with
:class:`EstimateError` saying what the store holds, a request that finds nothing to decode.
``StoreEstimate.to_dict()`` is ``mss estimate --json`` but its ``view`` (the table's display
choices: which items, in which order, which intervals).

Every estimate also carries its :class:`Integrity`: the worst shift that the reports of
``compromised`` untrusted devices could cause to any one item's estimate, and each item's
``certified_ci``, its statistical interval widened by that shift (docs/privacy.md, "The certified
interval").  With ``robust`` the estimate is :mod:`mss_protocol.robust`'s recovery for those devices'
crafted reports (docs/privacy.md, "Resistance"): its own widened interval, the certified interval
still around the plain decoder's.
"""
import dataclasses
import math
from dataclasses import dataclass

from mss_aggregator.collect import central as centrals
from mss_aggregator.collect import scope as scopes
from mss_protocol import registry
from mss_protocol import robust as robusts
from mss_protocol.integrity import Compromised


class EstimateError(ValueError):
    """Nothing to estimate, or a request the store cannot serve; ``field`` names the
    :class:`EstimateRequest` field at fault (None: the store is empty), ``store`` the store."""

    def __init__(self, field_name, message, store=None):
        super().__init__(message)
        self.field, self.store = field_name, store


#: The default: one untrusted device, the least an operator who publishes an estimate should state
#: (docs/privacy.md, "The certified interval").
DEFAULT_COMPROMISED = Compromised(count=1)


@dataclass(frozen=True)
class Integrity:
    """What ``compromised`` devices' crafted reports can do to one decoded estimate.

    Each compromised device places at most ``reports_each`` reports in the reports decoded (one per
    epoch: 1 for one epoch of device reports, the epochs pooled otherwise), every one of them chosen
    by an attacker who knows the protocol.  One report moves the sum over any r items of the
    estimates by at most ``shift_per_report(r) / n`` (the protocol's manipulation coefficient,
    :meth:`mss_protocol.base.Protocol.shift_per_report`, in units of frequency times n), so
    ``compromised * reports_each`` of them move any one item's (unbiased, raw) estimate by at most

        max_shift = compromised * reports_each * shift_per_report(1) / n,

    and an interval [lo, hi] for the honest reports' estimate becomes the certified interval
    [lo - max_shift, hi + max_shift].  Clipping to [0, 1] (``post``) moves no estimate further.

    Attributes
    ----------
    compromised : int
        Untrusted devices.
    reports_each : int
        The reports one device can have among those decoded (>= 1).
    shift_per_report : float or None
        The protocol's one-report shift of one item, in frequency times n; None where the
        protocol does not compute it (``unknown`` says why): no certified interval then.
    n : int
        Reports decoded.
    unknown : str or None
        Why there is no coefficient (e.g. MSS above the k it computes it for), else None.
    """
    compromised: int
    reports_each: int
    shift_per_report: float
    n: int
    unknown: str = None
    # devices left out as suspects (``exclude_suspects``: mss_aggregator.integrity.detect), None: not asked
    excluded_suspects: int = None

    @property
    def max_shift(self):
        """The largest change of any one item's estimate (a frequency, float; None without a
        coefficient)."""
        if self.shift_per_report is None:
            return None
        if not self.n:
            return 0.0
        return self.compromised * self.reports_each * self.shift_per_report / self.n

    def certified(self, low, high):
        """An interval widened by :attr:`max_shift` on both sides.

        Parameters
        ----------
        low, high : float or ndarray
            The statistical interval's ends (frequencies).

        Returns
        -------
        tuple or None
            (low - max_shift, high + max_shift), of the type given; None without a coefficient.
        """
        if self.max_shift is None:
            return None
        return low - self.max_shift, high + self.max_shift

    def document(self):
        """The ``integrity`` field of ``mss estimate --json``.

        Returns
        -------
        dict
            ``compromised`` (devices, int) and ``max_shift`` (a frequency, float; None where the
            protocol computes no coefficient); ``excluded_suspects`` (devices whose reports were left
            out, :mod:`mss_aggregator.integrity.detect`) when the estimate excluded suspects.
        """
        excluded = {} if self.excluded_suspects is None else {"excluded_suspects": self.excluded_suspects}
        return {"compromised": self.compromised, "max_shift": self.max_shift, **excluded}

    def headline(self):
        """What the untrusted devices can do, in one line.

        Returns
        -------
        str
            "3 compromised boards can move any item by at most +-0.0210: ..." (``mss estimate``
            prints it above the table, the dashboard under it).
        """
        if self.max_shift is None:
            line = f"no certified interval: {self.unknown}"
        elif not self.n:
            line = "no reports decoded: nothing to bound"
        else:
            line = self.bound_line()
        if self.excluded_suspects is None:
            return line
        return f"{line}; excluded {self.excluded_suspects} suspect devices' reports (mss suspects)"

    def bound_line(self):
        """The headline's bound alone (the text ``mss estimate`` and the dashboard print).

        Returns
        -------
        str
            How far the compromised boards can move any item, and what the certified interval does.
        """
        boards = "1 compromised board" if self.compromised == 1 else f"{self.compromised} compromised boards"
        each = "" if self.reports_each == 1 else f" ({self.reports_each} reports each, one an epoch)"
        return (f"{boards}{each} can move any item by at most +-{self.max_shift:.4f}: the certified interval "
                f"widens each 95% interval by that")


def integrity_of(protocol, n, compromised, reports_each=1):
    """The :class:`Integrity` of ``n`` reports of ``protocol`` of which ``compromised`` devices
    (an int) send ``reports_each`` each; without a coefficient where the protocol refuses to
    compute one (its ValueError is the ``unknown`` reason: MSS above the k it computes it for)."""
    try:
        shift, unknown = float(protocol.shift_per_report(1)), None
    except ValueError as exc:
        shift, unknown = None, str(exc)
    return Integrity(int(compromised), int(reports_each), shift, int(n), unknown=unknown)


def reports_per_device(scope):
    """The most reports one device can have among those ``scope`` decodes (int >= 1): one an epoch
    (the store accepts one per device id per epoch), so the epochs pooled; for one epoch, 1, or for
    a shuffled batch merged over several epochs the epochs it covers (the ``stderr_factor``'s
    square, :func:`.collect.scope.pooled_stderr_factor`)."""
    if scope.pooled:
        return max(1, int(scope.epochs))
    return max(1, math.ceil(scope.stderr_factor ** 2 - 1e-9))


def with_certified(rows, integrity, plain=None):
    """``rows`` (:meth:`mss_protocol.estimate.Estimate.rows`), each given ``certified_ci``:
    [ci_low - max_shift, ci_high + max_shift], or None without a coefficient (in place; returned).
    Rows of a robust estimate give ``plain``, the plain decoder's rows of the same items: the
    certified interval is around its interval (a bound on what the devices did to the plain
    decoder), and each row gains ``plain_estimate``."""
    for i, r in enumerate(rows):
        base = r if plain is None else plain[i]
        ends = integrity.certified(base["ci_low"], base["ci_high"])
        r["certified_ci"] = None if ends is None else list(ends)
        if plain is not None:
            r["plain_estimate"] = base["estimate"]
    return rows


def robust_estimate(protocol, plain, integrity):
    """The robust estimate of a decoded ``plain`` estimate, for the crafted reports ``integrity``
    states (``compromised * reports_each``): :func:`mss_protocol.robust.recover`.

    Parameters
    ----------
    protocol : mss_protocol.base.Protocol
    plain : mss_protocol.estimate.Estimate
        The plain decoder's (its ``raw``, ``stderr``, ``n`` and ``post``).
    integrity : Integrity

    Returns
    -------
    (mss_protocol.robust.Recovery, mss_protocol.estimate.Estimate)
        The recovery, and its estimate under ``plain.post`` (widened intervals).

    Raises
    ------
    ValueError
        The crafted reports are half the reports decoded or more, or the protocol computes no
        floor or coefficient at its k (MSS above k = 2048) or defines none (a protocol registered
        without ``report_floor``: its NotImplementedError's message).
    """
    try:
        recovery = robusts.recover(protocol, plain.raw, plain.stderr, n=plain.n,
                                   crafted=integrity.compromised * integrity.reports_each)
    except NotImplementedError as exc:
        raise ValueError(str(exc)) from None
    return recovery, recovery.estimate(plain.n, plain.post)


def decode_counts(counts, post="none", compromised=DEFAULT_COMPROMISED, robust=False):
    """A counts file's estimate (``mss estimate --counts``): decoded, its :class:`Integrity` (one
    report a device: a counts file has no epochs) and, with ``robust``, recovered.

    Parameters
    ----------
    counts : mss_protocol.counts.Counts
        Additive counts of one config (``total`` reports).
    post : str
        Post-processing (:data:`mss_protocol.postprocess.CHOICES`).
    compromised : Compromised
        The devices not trusted.
    robust : bool
        Recover the honest reports' estimate (:func:`robust_estimate`).

    Returns
    -------
    (estimate, Integrity, Recovery or None, plain estimate or None)
        ``plain`` is the plain decoder's estimate when ``estimate`` is the recovery's.

    Raises
    ------
    ValueError
        As :func:`robust_estimate`.
    """
    protocol = registry.from_config(counts.cfg)
    est = protocol.decode(counts, post=post)
    integrity = integrity_of(protocol, counts.total, compromised.devices(counts.total))
    if not robust:
        return est, integrity, None, None
    recovery, recovered = robust_estimate(protocol, est, integrity)
    return recovered, integrity, recovery, est


def robust_line(recovery):
    """The robust estimate in one line (``mss estimate --robust`` prints it above the table).

    Returns
    -------
    str
    """
    return (f"robust estimate ({recovery.method}, after LDPRecover; {recovery.crafted} crafted reports assumed): "
            f"{recovery.excess:.4f} of excess removed from {len(recovery.suspected)} detected items; each "
            f"interval widened by the recovery's move, the certified interval still the plain decoder's")


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
    compromised : Compromised
        The devices not trusted: the estimate's :class:`Integrity` (default :data:`DEFAULT_COMPROMISED`).
    robust : bool
        Recover the honest reports' estimate from what those devices' crafted reports may have done
        (:func:`robust_estimate`); the plain decoder's estimate otherwise.
    exclude_suspects : bool
        Leave out the reports of the devices ``mss suspects`` flags (:func:`mss_aggregator.integrity.detect.suspects`
        at its default false-alarm rate); the :class:`Integrity` says how many (``excluded_suspects``).
    """
    epoch: int = None
    all_epochs: bool = False
    post: str = "none"
    delta: float = None
    config: object = None
    categories: object = None
    source: str = "the config given"
    compromised: Compromised = DEFAULT_COMPROMISED
    robust: bool = False
    exclude_suspects: bool = False

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
    integrity : Integrity
        What the untrusted devices' reports can do to every item (``max_shift``, ``headline()``).
    robust : mss_protocol.robust.Recovery or None
        With ``EstimateRequest(robust=True)``: the recovery, ``estimate`` then being its estimate
        and ``plain`` the plain decoder's.
    plain : mss_protocol.estimate.Estimate or None
        The plain decoder's estimate when ``estimate`` is the robust one.
    """
    config: object
    estimate: object
    scope: object
    counters: dict
    categories: object
    central: dict = None
    post: str = "none"
    integrity: Integrity = None
    robust: object = None
    plain: object = None

    @property
    def n(self):
        """Reports decoded (int)."""
        return self.scope.counts.total

    def rows(self):
        """One dict per item: ``item``, ``label`` (when the items have names), ``estimate``,
        ``stderr``, ``ci_low``, ``ci_high``, ``detected``, ``sim_low``, ``sim_high``,
        ``detected_simultaneous`` (frequencies in [0, 1]; :meth:`mss_protocol.estimate.Estimate.rows`),
        ``certified_ci`` ([low, high]: the marginal interval widened by ``integrity.max_shift``).

        Returns
        -------
        list of dict, length k
        """
        rows = self.estimate.rows()
        if self.categories.labels:
            for r in rows:
                r["label"] = self.categories.name(r["item"])
        return with_certified(rows, self.integrity, None if self.plain is None else self.plain.rows())

    def to_dict(self):
        """``mss estimate --store ... --json`` but its ``view``.

        Returns
        -------
        dict
            ``n`` (reports), ``config_id`` (hex), the scope's ``epoch``, ``pooled``, ``epochs``,
            ``devices``, ``stderr_factor``, ``current_epoch``, ``selection``, ``memoized``,
            ``decoded``, then ``counters``, ``post``, ``estimates`` (:meth:`rows`, k dicts), for
            a shuffled store ``central``, and ``integrity`` (:meth:`Integrity.document`); a robust
            estimate's also ``robust`` (:meth:`mss_protocol.robust.Recovery.document`) and per item
            ``plain_estimate``.
        """
        shuffled = {} if self.central is None else {"central": self.central}
        recovered = {} if self.robust is None else {"robust": self.robust.document()}
        return {"n": self.n, "config_id": self.config.config_id_hex, **self.scope.document(),
                "counters": self.counters, "post": self.post, "estimates": self.rows(), **shuffled,
                "integrity": self.integrity.document(), **recovered}

    def to_frame(self):
        """The estimates as a pandas DataFrame (pandas is optional).

        Returns
        -------
        pandas.DataFrame, shape (k, 10 or 11)
            One row per item, the columns of :meth:`rows` (``certified_ci`` a [low, high] list).
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
        store of device reports; ``"robust"``: no robust estimate (the compromised devices' reports
        are half those decoded or more, or MSS above k = 2048).  The message says what the store holds.
    """
    r = request
    # what the store holds is read only for an error (it is three more queries)
    if r.config is not None and r.config.config_id != store.cfg.config_id:
        raise EstimateError("config", f"{r.source} is config {r.config.config_id_hex}, another campaign's: "
                                      f"{scopes.contents(store)}", store)
    excluded = None
    if r.exclude_suspects:  # the devices mss suspects flags, at the documented false-alarm rate
        from mss_aggregator.integrity.detect import suspects

        excluded = sorted(suspects(store).flagged)
        store.exclude_devices(excluded)
    try:
        scope = scopes.select(store, r.epoch, r.all_epochs)
    finally:
        store.exclude_devices(())
    if not scope.counts.total:
        held = scopes.contents(store)
        if not store.tally()[0]:  # an empty store: what it holds says it all
            raise EstimateError(None, held, store)
        if r.epoch is not None:
            what = f"epoch {r.epoch}"
        elif scope.epoch is not None and scope.epoch == scope.current_epoch:  # the default: the current epoch
            what = f"the current epoch, {scope.epoch}, nor in the one before"
        else:
            what = f"epoch {scope.epoch}, the default"
        raise EstimateError("epoch", f"no accepted reports in {what}. {held}", store)
    central = centrals.guarantee(store, scope, centrals.DELTA if r.delta is None else r.delta)
    if central is None and r.delta is not None:
        raise EstimateError("delta", f"{store.name} holds reports of devices, not a shuffler's batches: they "
                                     f"have no central guarantee, only eps-LDP", store)
    protocol = registry.from_config(store.cfg)
    est = scopes.decode(protocol, scope, r.post)
    names = r.categories if r.categories is not None else store.categories()
    integrity = integrity_of(protocol, scope.counts.total, r.compromised.devices(scope.devices),
                             reports_per_device(scope))
    if excluded is not None:
        integrity = dataclasses.replace(integrity, excluded_suspects=len(excluded))
    recovery = plain = None
    if r.robust:
        try:
            recovery, robust_est = robust_estimate(protocol, est, integrity)
        except ValueError as exc:
            raise EstimateError("robust", f"no robust estimate: {exc}", store) from None
        est, plain = robust_est, est
    return StoreEstimate(store.cfg, est, scope, store.counters(), categories=names, central=central, post=r.post,
                         integrity=integrity, robust=recovery, plain=plain)
