"""The API's entry points to the library's workflows: each takes the workflow's request object, or
its fields as keywords, and returns its result object (``to_dict()`` is the command's ``--json``)."""
from dataclasses import dataclass, replace


def request_of(kind, request, fields):
    """``request`` as given, or a ``kind`` built from keyword ``fields`` (not both)."""
    if request is None:
        return kind(**fields)
    if fields:
        raise TypeError(f"give a {kind.__name__} or its fields as keywords, not both")
    return request


def plan(request=None, progress=None, **fields):
    """Plan a deployment: the protocol and configuration for a domain, a privacy budget, a report
    size and a link, with what it costs the boards and what it concedes over time (``mss plan``).

    Parameters
    ----------
    request : PlanRequest, optional
        The question; or give its fields as keywords: ``k`` (int, categories), ``epsilon`` (float,
        epsilon-LDP of one report, nats), ``protocol`` (``"auto"`` or a protocol's name),
        ``limits`` (:class:`Limits`: ``max_bytes`` bytes, ``max_bits`` bits, ``max_device_ms``
        milliseconds), ``question`` (:class:`Question`: fleet size ``n``, ``detect`` or
        ``target_se`` as frequencies), ``hardware`` (:class:`Hardware`: board, modem, LoRaWAN link,
        battery in mAh, period in seconds), ``reporting`` (:class:`Reporting`: memoize, budget
        (epsilon, days), campaign days), ``shuffle`` (:class:`Shuffling`: batch size ``n``, central
        ``delta``).
    progress : callable, optional
        Called with no argument as the MSS moduli search advances.

    Returns
    -------
    Plan
        ``to_dict()`` is ``mss plan --json`` (protocol, config, n, predicted MSE per item, bits per
        report, device cost in ms, privacy over time...); ``save_device_config(path)`` writes the
        campaign file the boards and the aggregator load.

    Raises
    ------
    RequestError
        The request's fields contradict each other; ``.field`` names the one at fault.
    PlanError
        Nothing fits the limits.

    Examples
    --------
    >>> import mss_iot
    >>> p = mss_iot.plan(k=16, epsilon=2.0, question=mss_iot.Question(n=1000))
    >>> p.to_dict()["protocol"]
    'ss'
    """
    from mss_aggregator.plan import PlanRequest
    from mss_aggregator.plan import plan as plan_request

    return plan_request(request_of(PlanRequest, request, fields), progress)


def simulate(request=None, progress=None, **fields):
    """Simulate a fleet through one configuration, decode its reports and measure the error
    (``mss simulate``).

    Parameters
    ----------
    request : SimulateRequest, optional
        The simulation; or give its fields as keywords: ``n`` (int, devices), ``k`` and ``epsilon``
        (plan a config) or ``config`` (a loaded config or a campaign file's path), ``protocol``,
        ``max_bits`` (bits), ``dist`` (``"zipf:1.1"``, ``"uniform"``, ...), ``seed``, ``trials``,
        ``post``.
    progress : callable, optional
        Called with no argument after each trial.

    Returns
    -------
    Simulation
        ``mse`` of shape (trials,) (per item, on frequencies), ``predicted_mse``,
        ``decode_seconds`` of shape (trials,) in seconds, ``truth`` and ``estimate`` of the last
        trial (shape (k,)); ``to_dict()`` is ``mss simulate --json``, ``to_frame()`` the last
        trial item by item (k rows).

    Examples
    --------
    >>> import mss_iot
    >>> sim = mss_iot.simulate(k=8, epsilon=1.0, n=1000, protocol="grr")
    >>> sim.to_dict()["protocol"], sim.mse.shape
    ('grr', (1,))
    """
    from mss_aggregator.simulation import SimulateRequest
    from mss_aggregator.simulation import simulate as simulate_request

    return simulate_request(request_of(SimulateRequest, request, fields), progress)


@dataclass
class AuditReport:
    """The result of :func:`audit`.

    Attributes
    ----------
    request : AuditRequest
        What was audited.
    report : dict
        ``mss audit --json``'s document: ``k``, ``epsilon``, ``ceiling`` (the provable bound on
        an attacker's success at guessing one report's value, a probability), ``bounds``,
        ``rows`` (one per protocol: exact and simulated success probabilities, with their 95%
        intervals), ``skipped``, and the optional parts' ``longitudinal``, ``linkability``,
        ``deployment``, ``learned``, ``epsilon_audit``.
    """
    request: object
    report: dict

    def to_dict(self):
        """``mss audit --json``.

        Returns
        -------
        dict
            :attr:`report`.
        """
        return self.report

    def problems(self):
        """What makes the audit fail (``mss audit`` exits non-zero on any).

        Returns
        -------
        list of str
            One sentence a problem; empty when the audit passes.
        """
        from mss_aggregator.privacy.audit import problems

        return problems(self.report)

    def to_frame(self):
        """The reconstruction rows, one a protocol, as a pandas DataFrame (pandas is optional).

        Returns
        -------
        pandas.DataFrame, shape (protocols, columns)
            ``protocol``, ``eps_effective`` (nats), ``bayes_exact`` and ``empirical`` (success
            probabilities), ``empirical_ci`` ([low, high]) and the rest of each row's fields.
        """
        from mss_aggregator.frames import require_pandas

        return require_pandas().DataFrame(self.report["rows"])


def audit(request=None, progress=None, **fields):
    """Audit the privacy of the protocols at (k, epsilon), or of one deployment (``mss audit``).

    Parameters
    ----------
    request : AuditRequest, optional
        What to audit; or give its fields as keywords: ``k`` (int, categories), ``epsilon``
        (float, nats), ``prior_spec`` (the attacker's prior: ``"uniform"``, ``"zipf:S"``, ...),
        ``names`` (protocols; default every one, or the config's), ``trials``
        (simulated attacks a protocol), ``seed``, ``config`` and ``device`` (a deployment: its
        config and device section), ``longitudinal`` (:class:`Longitudinal`), ``empirical``
        (:class:`Empirical`).
    progress : callable, optional
        Called with no argument after each step.

    Returns
    -------
    AuditReport
        ``to_dict()`` is ``mss audit --json``; ``problems()`` what fails it; ``to_frame()`` one row
        a protocol.

    Raises
    ------
    AuditRequestError
        Unknown protocols, or none that runs at k; ``.field`` names the request field.

    Examples
    --------
    >>> import mss_iot
    >>> r = mss_iot.audit(k=8, epsilon=1.0, names=("grr",), trials=500)
    >>> r.problems(), r.to_dict()["rows"][0]["protocol"]
    ([], 'grr')
    """
    from mss_aggregator.audit import AuditRequest
    from mss_aggregator.audit import audit as audit_request

    request = with_prior(request_of(AuditRequest, request, fields))
    return AuditReport(request, audit_request(request, progress))


def with_prior(request):
    """``request`` with its prior: the parsed ``prior_spec`` (``"uniform"``, ``"zipf:1.1"``...)
    where none is given, as ``mss audit --prior`` parses it."""
    if request.prior is not None:
        return request
    from mss_aggregator.distributions import parse

    return replace(request, prior=parse(request.prior_spec, request.k))
