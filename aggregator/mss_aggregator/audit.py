"""Audit the privacy of one deployment or of the protocols at (k, epsilon): the application layer of
``mss audit`` (the command maps its options to an :class:`AuditRequest` and renders the report).

:func:`audit` runs, in order, the reconstruction risk of one report against the provable ceilings
(:func:`mss_aggregator.privacy.audit.reconstruction`), with :class:`Longitudinal` repeated reports,
linkability and, for a deployment, its privacy over the campaign, with a learned-attacker campaign
the metadata attack (:mod:`mss_aggregator.privacy.learned`), and with :class:`Empirical` the
empirical epsilon audit of every client's wire output.  The report is ``mss audit --json``'s dict;
:func:`mss_aggregator.privacy.audit.problems` says what makes it fail.
"""
from dataclasses import dataclass

from mss_aggregator.privacy import audit as privacy_audit

LONGITUDINAL_DEFAULT = ("mss", "grr")  # the protocols attacked over time without a config or a list


@dataclass(frozen=True)
class Longitudinal:
    """Repeated reports.

    Parameters
    ----------
    horizons : tuple of int
        The numbers of reports of one device the attacker holds.
    trials : int
        Simulated devices a protocol and mode.
    campaign_days : int
        A deployment's campaign, in days.
    link_pairs : int
        Report pairs of the linkability test.
    change : mss_aggregator.privacy.changing.Change, optional
        How the device's value changes over time (None: it never does).
    """
    horizons: tuple = privacy_audit.HORIZONS
    trials: int = 100
    campaign_days: int = 365
    link_pairs: int = 1000
    change: object = None


@dataclass(frozen=True)
class Empirical:
    """The empirical epsilon audit of every client's wire output.

    Parameters
    ----------
    trials : int
        Reports drawn per input value.
    firmware : bool
        Also the firmware's client, under the MicroPython unix port.
    control : bool
        Also the deliberately broken control client (MSS at 2 epsilon) the audit must catch.
    """
    trials: int = 20000
    firmware: bool = True
    control: bool = True


@dataclass(frozen=True)
class AuditRequest:
    """What to audit.

    Parameters
    ----------
    k : int
        Categories.
    epsilon : float
        epsilon-LDP of one report (nats).
    prior : numpy.ndarray, shape (k,), optional
        The attacker's prior over the values (sums to 1); None: uniform.
    prior_spec : str
        Its spec, as reported (``"uniform"``, ``"zipf:1.1"``, ...).
    names : tuple of str, optional
        The protocols (None: the config's, else every one).
    trials : int
        Devices of the simulated attack a protocol.
    seed : int
    config : object, optional
        A deployment's config (its protocol, k and epsilon).
    device : dict, optional
        The deployment's ``device`` section (period, memoize, budget).
    longitudinal : Longitudinal, optional
        Repeated reports, linkability and (with ``config``) the campaign.
    learned : object, optional
        A learned-attack campaign (:mod:`mss_aggregator.privacy.learned`).
    empirical : Empirical, optional
        The empirical epsilon audit.
    """
    k: int
    epsilon: float
    prior: object = None
    prior_spec: str = "uniform"
    names: tuple = None
    trials: int = 10000
    seed: int = 0
    config: object = None
    device: dict = None
    longitudinal: Longitudinal = None
    learned: object = None
    empirical: Empirical = None


class AuditRequestError(ValueError):
    """A request the audit refuses; ``field``: the :class:`AuditRequest` field at fault."""

    def __init__(self, field_name, message):
        super().__init__(message)
        self.field = field_name


def selection(request):
    """(names, skipped, longitudinal names, their skipped): the protocols that run at k, and those
    left out with their reasons (:func:`mss_aggregator.privacy.audit.skipped`)."""
    given = request.names is not None
    asked = (list(request.names) if given else [request.config.name] if request.config is not None
             else list(privacy_audit.PROTOCOLS))
    unknown = [p for p in asked if p not in privacy_audit.PROTOCOLS]
    if unknown:
        raise AuditRequestError("names", f"unknown protocols {', '.join(unknown)} (available: "
                                         f"{', '.join(privacy_audit.PROTOCOLS)})")
    names, skipped = privacy_audit.skipped(asked, request.k)
    over_time = names if given or request.config is not None else list(LONGITUDINAL_DEFAULT)
    long_names, long_skipped = privacy_audit.skipped(over_time, request.k)
    if not names:
        raise AuditRequestError("k", f"nothing to audit: {skipped[0]['reason']}")  # none runs at this k
    return names, skipped, long_names, long_skipped


def steps(request):
    """The progress steps :func:`audit` takes (one a protocol and part)."""
    names, _, long_names, _ = selection(request)
    n = len(names)
    if request.longitudinal is not None:
        n += 3 * len(long_names) + (len(long_names) if request.config is not None else 0)
    if request.empirical is not None:
        n += len(names) + 2
    return n + (7 if request.learned is not None else 0)


def audit(request, progress=None):
    """``mss audit --json``'s report of ``request``; ``progress()`` is called after each of
    :func:`steps` steps."""
    r, lo, em = request, request.longitudinal, request.empirical
    names, skipped, long_names, _ = selection(r)
    target = privacy_audit.Target(k=r.k, epsilon=r.epsilon, prior=r.prior, cfg=r.config)
    report = privacy_audit.reconstruction(target, prior_spec=r.prior_spec, names=names, trials=r.trials, seed=r.seed,
                                          progress=progress)
    report["skipped"] = skipped
    if lo is not None:
        report["longitudinal"] = privacy_audit.longitudinal(
            target, long_names, horizons=lo.horizons, trials=lo.trials, seed=r.seed, progress=progress)
        report["linkability"] = privacy_audit.linkability(
            target, long_names, pairs=lo.link_pairs, seed=r.seed, progress=progress)
        if r.config is not None:
            report["deployment"] = privacy_audit.deployment(
                target, long_names, device=r.device, campaign_days=lo.campaign_days, trials=lo.trials, seed=r.seed,
                progress=progress, change=lo.change)
    if r.learned is not None:
        from mss_aggregator.privacy.learned import learned_attack

        report["learned"] = learned_attack(r.config, r.device, campaign=r.learned, prior=r.prior, progress=progress)
    if em is not None:
        report["epsilon_audit"] = privacy_audit.empirical_epsilon(
            target, names, em.trials, seed=r.seed, firmware=em.firmware, control=em.control, progress=progress)
    return report
