"""Plan a deployment: the protocol and its configuration for a domain, a privacy budget, a report
size and a link, with what it costs the boards and what it concedes over time.

The application layer of ``mss plan`` (the command maps its options to a :class:`PlanRequest` and
renders the :class:`Plan`); a notebook, a service or a test calls it the same way::

    >>> from mss_aggregator.plan import PlanRequest, Question, plan
    >>> p = plan(PlanRequest(k=16, epsilon=2.0, question=Question(n=1000)))
    >>> p.to_dict()["protocol"], p.to_dict()["n"]
    ('ss', 1000)

``Plan.to_dict()`` is ``mss plan --json``, field for field (other tools read those names).  A
request the planner cannot serve raises :class:`RequestError`, naming the request field at fault;
a plan that does not exist (nothing fits the limits) :class:`~mss_protocol.mss.planner.PlanError`;
an unreadable prior :class:`~mss_aggregator.distributions.DistributionError`.
"""
from dataclasses import dataclass, field, replace

from mss_aggregator.distributions import parse
from mss_aggregator.privacy.changing import Change
from mss_aggregator.privacy.over_time import CAMPAIGN_DAYS, Device, over_time
from mss_node.settings import DEVICE_DEFAULTS
from mss_protocol import budget as budgets
from mss_protocol import choose as choosing
from mss_protocol import energy, lorawan, shuffling
from mss_protocol.choose import (IRR_PROTOCOLS, MAX_DEVICE_MS, MSE_SLACK, N_DEFAULT, CentralTarget,
                                  choose)
from mss_protocol.config_file import seeded  # the protocols whose seed names the device (olh)
from mss_protocol.configs import load_dict
from mss_protocol.integrity import Compromised
from mss_protocol.mss.planner import PlanError, Search

# how often the operator needs a new estimate (s) unless told: with a link and no period, the period
ESTIMATE_EVERY_S = 86_400  # one estimate a day (docs/energy.md, "The period")
IRR_MSE_WARN = 10  # an instantaneous layer costing more than this factor in MSE is warned about
DEFAULT_BOARD = "rp2040"  # the board of device_ms (and with a link of the energy model) unless given
DEFAULT_MODEM = "rak3172"
OLH_NAMES_DEVICE = ("its hash seed is derived from the device id (protocol/SPEC.md section 3), so a report "
                    "names its device and no shuffler can hide it")
OLH_LEFT_OUT = "shuffled: its seed names the device (SPEC.md section 3)"  # the candidates' note


class RequestError(ValueError):
    """A request the planner refuses: ``field``, the :class:`PlanRequest` field at fault, dotted
    (``"hardware.board"``), ``reason`` in words, and the field it ``needs`` or ``excludes`` if the
    fault is a combination (a caller with its own names for the fields words it with them)."""

    def __init__(self, field_name, reason, needs=None, excludes=None):
        self.field, self.reason, self.needs, self.excludes = field_name, reason, needs, excludes
        super().__init__(reason + (f" ({field_name} needs {needs})" if needs else "")
                         + (f" ({field_name} excludes {excludes})" if excludes else ""))


@dataclass(frozen=True)
class Limits:
    """What one report may cost.

    Parameters
    ----------
    max_bytes : int, optional
        The whole report's size, in bytes (a LoRaWAN link's payload by default).
    max_bits : int, optional
        The body's size, in bits.
    frame : str, optional
        ``full``, ``compact`` or ``compact-epoch`` (OLH with a seed an epoch); None: full, on a
        LoRaWAN link compact.
    max_device_ms : float
        Time one report may take on the board, in milliseconds.
    max_shift : float, optional
        The largest change of one item's estimate (a frequency) that ``compromised`` devices may
        cause: a protocol whose worst shift is above it is left out.
    compromised : Compromised, optional
        How many devices may be compromised (a count or a share of the reports): each candidate
        then states ``worst_shift``, compromised x ``shift_per_report`` / n.
    """
    max_bytes: int = None
    max_bits: int = None
    frame: str = None
    max_device_ms: float = MAX_DEVICE_MS
    max_shift: float = None
    compromised: Compromised = None


@dataclass(frozen=True)
class Question:
    """What the estimate must resolve.

    Parameters
    ----------
    n : int, optional
        The fleet size (devices) the figures are stated at (None: a shuffled batch's size, or with
        ``detect``/``target_se`` the devices the chosen protocol needs, else
        :data:`~mss_protocol.choose.N_DEFAULT`).
    detect : float, optional
        The frequency (in (0, 1)) an item must have to be told from 0.
    target_se : float, optional
        The standard error to reach, on frequencies.
    prior : str
        The distribution the MSE is predicted at (a :func:`~mss_aggregator.distributions.parse`
        spec: ``"uniform"``, ``"zipf:1.1"``, ...).
    mse_slack : float
        auto's tie: MSEs within this fraction of the lowest tie (0.02: 2%), and the device time
        (with a link: the energy) decides.
    estimate_every_s : int, optional
        With a link, how often (s) the operator needs a new estimate, each from one report of every
        device (None: :data:`ESTIMATE_EVERY_S`); without a period, the period is the longer of it
        and the link's shortest (memoized re-sends of a stable value add nothing).
    """
    n: int = None
    detect: float = None
    target_se: float = None
    prior: str = "uniform"
    mse_slack: float = MSE_SLACK
    estimate_every_s: int = None


@dataclass(frozen=True)
class Hardware:
    """The boards.

    Parameters
    ----------
    link : mss_protocol.lorawan.Link, optional
        A LoRaWAN link (region, data rate), or None (MQTT, serial).
    board : str, optional
        The board of the device cost model (None: :data:`DEFAULT_BOARD`).
    modem : str, optional
        With a link, the modem of the energy model (None: :data:`DEFAULT_MODEM`).
    battery_mah : float, optional
        The battery, in mAh (a link's energy model only).
    cell : str, optional
        The battery's cell, a key of :data:`mss_protocol.energy.CELLS` (its voltage, self-discharge
        and shelf life; None: :data:`mss_protocol.energy.DEFAULT_CELL`).
    period_s : int, optional
        The reporting period, in seconds (None: with a link the longer of the question's
        ``estimate_every_s`` and the shortest its budget allows, else the firmware's default).
    resets_per_year : float, optional
        With a link, the resets a year each board rejoins after (None:
        :data:`mss_protocol.energy.RESETS_PER_YEAR`, an assumption); the campaign's joins, 1 + this x
        days / 365, are counted in the energy.
    """
    link: object = None
    board: str = None
    modem: str = None
    battery_mah: float = None
    period_s: int = None
    cell: str = None
    resets_per_year: float = None


@dataclass(frozen=True)
class Reporting:
    """How the boards spend privacy over time.

    Parameters
    ----------
    memoize : bool
        Re-send one draw per value (False: every report a fresh draw, no budget).
    budget : tuple, optional
        (epsilon in nats, days): the fresh draws allowed in a window (None: the default factor of
        epsilon).
    irr_epsilon : float, optional
        An instantaneous layer's epsilon on each memoized report (nats).
    campaign_days : int
        The campaign's length, in days.
    change : mss_aggregator.privacy.changing.Change, optional
        How the value changes (None: it never does).
    over_time : bool, optional
        State the privacy over time even at the default period (None: when the period is known:
        given, a link's, fresh reports or a change model).
    """
    memoize: bool = True
    budget: tuple = None
    irr_epsilon: float = None
    campaign_days: int = CAMPAIGN_DAYS
    change: Change = None
    over_time: bool = None


@dataclass(frozen=True)
class Shuffling:
    """Reports pass an anonymising shuffler in batches; the batch's central (eps_c, delta) is stated.

    Parameters
    ----------
    n : int
        Devices a batch.
    delta : float
        The central delta of a batch.
    central_epsilon : float, optional
        Plan at the largest epsilon a report whose batch meets this central epsilon (nats; the
        request's ``epsilon`` is then None).
    """
    n: int
    delta: float = shuffling.DEFAULT_DELTA
    central_epsilon: float = None


@dataclass(frozen=True)
class PlanRequest:
    """One planning question.

    Parameters
    ----------
    k : int
        Categories.
    epsilon : float, optional
        epsilon-LDP of one report, in nats (None with ``shuffle.central_epsilon``).
    protocol : str
        A :data:`~mss_protocol.choose.CHOICES` name, or ``auto``: the planner's choice.
    limits : Limits
    question : Question
    hardware : Hardware
    reporting : Reporting
    shuffle : Shuffling, optional
    seed : int
        The MSS moduli search's seed.
    use_cache : bool
        Whether the search may use its cache.
    """
    k: int
    epsilon: float = None
    protocol: str = "auto"
    limits: Limits = field(default_factory=Limits)
    question: Question = field(default_factory=Question)
    hardware: Hardware = field(default_factory=Hardware)
    reporting: Reporting = field(default_factory=Reporting)
    shuffle: Shuffling = None
    seed: int = 0
    use_cache: bool = True


@dataclass(frozen=True)
class Note:
    """A remark on the plan, in words; ``alarm``: it warns of a cost the operator should weigh;
    ``kind`` and ``values``: what it is about and its figures, for a caller that words it with its
    own names for the request's fields (``"payload"``, ``"shuffle_memoized"``)."""
    text: str
    alarm: bool = False
    kind: str = ""
    values: dict = field(default_factory=dict)


@dataclass
class Plan:
    """The plan of a :class:`PlanRequest`.

    Attributes
    ----------
    request : PlanRequest
    fields : dict
        ``mss plan --json``'s document (:meth:`to_dict`).
    epsilon : float
        The epsilon a report it was made at, nats (a central epsilon's, or the request's).
    frame : str
        The report's frame (a link's default, or the request's).
    max_bytes : int or None
        The report's size limit in bytes (a link's payload, or the request's).
    config : object
        The protocol's config (``k``, ``epsilon``, ``bits_per_report``).
    device : dict
        The ``device`` section :meth:`save_device_config` writes (period, sleep, memoize, budget).
    notes : list of Note
        Remarks on the plan.
    """
    request: PlanRequest
    fields: dict
    epsilon: float
    frame: str
    max_bytes: int
    config: object
    device: dict
    notes: list = field(default_factory=list)

    def to_dict(self):
        """``mss plan --json``: the chosen protocol's plan, its candidates, resolution, link, energy,
        shuffle and privacy over time (mss_protocol.choose.choose's fields and this module's)."""
        return self.fields

    def to_frame(self):
        """The protocols the planner weighed, one row each, as a pandas DataFrame (pandas is optional).

        Returns
        -------
        pandas.DataFrame, shape (candidates, columns)
            ``mss plan --json``'s ``candidates``: ``protocol``, ``body_bits`` (bits), ``frame_bytes``
            (bytes), ``predicted_mse`` (per item, on frequencies), ``device_ms`` (milliseconds on the
            board), ``decode_s`` (seconds), ``per_item_se``, ``half_width_95``,
            ``detectable_frequency``, ...
        """
        from mss_aggregator.frames import require_pandas

        return require_pandas().DataFrame(self.fields.get("candidates") or [])

    def save_device_config(self, path):
        """Write the config file devices and the aggregator load, with this plan's device section
        (period, sleep, memoize and budget; raises OSError)."""
        self.config.save(path, {"device": self.device})


def check(request):
    """Raise :class:`RequestError` if the request's parts contradict each other."""
    r, sh, rep, hw = request, request.shuffle, request.reporting, request.hardware
    if sh is not None and sh.central_epsilon is not None and r.epsilon is not None:
        raise RequestError("epsilon", "a central epsilon plans the epsilon per report",
                           excludes="shuffle.central_epsilon")
    if r.epsilon is None and (sh is None or sh.central_epsilon is None):
        raise RequestError("epsilon", "an epsilon per report is needed (or a central epsilon of a shuffled batch)")
    if sh is not None and r.protocol in seeded():
        raise RequestError("protocol", f"{r.protocol} cannot be shuffled: {OLH_NAMES_DEVICE}")
    if r.limits.max_shift is not None and r.limits.compromised is None:
        raise RequestError("limits.max_shift", "a shift limit is for a number of compromised devices",
                           needs="limits.compromised")
    if r.question.detect is not None and r.question.target_se is not None:
        raise RequestError("question.target_se", "a question is a frequency to detect or a standard error to "
                                                 "reach", excludes="question.detect")
    if not rep.memoize and rep.budget is not None:
        raise RequestError("reporting.budget", "a budget limits fresh draws of memoized reports",
                           excludes="reporting.memoize")
    if rep.irr_epsilon is not None and r.protocol not in ("auto",) + IRR_PROTOCOLS:
        raise RequestError("reporting.irr_epsilon", f"{r.protocol} has no instantaneous layer: only "
                                                    f"{', '.join(IRR_PROTOCOLS)} (one output a report) take one")
    if hw.link is None:
        for name in ("modem", "battery_mah", "cell", "resets_per_year"):
            if getattr(hw, name) is not None:
                raise RequestError(f"hardware.{name}", "the energy model is of a LoRaWAN board",
                                   needs="hardware.link")
        if r.question.estimate_every_s is not None:
            raise RequestError("question.estimate_every_s", "the estimate's interval sets a LoRaWAN battery "
                                                            "board's period", needs="hardware.link")
    else:
        board, modem = hw.board or DEFAULT_BOARD, hw.modem or DEFAULT_MODEM
        if board not in energy.BOARDS:
            raise RequestError("hardware.board", f"the energy model has no figures for {board} (docs/energy.md: "
                                                 f"{', '.join(energy.BOARDS)}); without a link the plan gives "
                                                 f"{board}'s device_ms")
        try:
            energy.check(hw.link, board, modem)
        except ValueError as exc:
            raise RequestError("hardware.modem", str(exc)) from None
        if hw.cell is not None and hw.cell not in energy.CELLS:
            raise RequestError("hardware.cell", f"unknown cell {hw.cell!r} (docs/energy.md: {', '.join(energy.CELLS)})")


def plan(request, progress=None):
    """The :class:`Plan` of ``request``; ``progress``: a :class:`mss_protocol.progress.Reporter`
    for MSS's moduli search (it says how far it is once it has taken 2 s), or None."""
    check(request)
    r, sh, q, hw, rep = request, request.shuffle, request.question, request.hardware, request.reporting
    target = None if sh is None or sh.central_epsilon is None else CentralTarget(sh.central_epsilon, sh.n, sh.delta)
    n = q.n
    if n is None:  # stated at the devices the chosen protocol needs, or at one shuffled batch
        n = None if (q.detect, q.target_se) != (None, None) else sh.n if sh is not None else N_DEFAULT
    # a memoized OLH report needs one hash seed a device (SPEC.md section 4): compact frames are then fine
    olh_seed = "device" if rep.memoize else "epoch"
    link, board, modem = hw.link, hw.board or DEFAULT_BOARD, hw.modem or DEFAULT_MODEM
    max_bytes, frame, notes = _report_size(request, olh_seed)
    prior = None if q.prior == "uniform" else parse(q.prior, r.k)
    # choose()'s groups (mss_protocol.choose), as this request fills them
    common = dict(limits=choosing.Limits(max_bytes=max_bytes, max_bits=r.limits.max_bits, frame=frame,
                                         max_device_ms=r.limits.max_device_ms, max_shift=r.limits.max_shift,
                                         compromised=r.limits.compromised),
                  question=choosing.Question(n=n, prior=prior, prior_label=q.prior, detect=q.detect,
                                             target_se=q.target_se, mse_slack=q.mse_slack),
                  hardware=choosing.Hardware(link=link, board=board, modem=modem, period_s=hw.period_s),
                  reporting=choosing.Reporting(olh_seed=olh_seed, irr_epsilon=rep.irr_epsilon),
                  search=Search(seed=r.seed, use_cache=r.use_cache, progress=progress))
    try:
        left_out = dict.fromkeys(seeded(), OLH_LEFT_OUT) if sh else None
        # a central epsilon: each candidate at the largest epsilon its own bound allows (choose.central_eps0)
        shuffled = replace(common["reporting"], exclude=left_out, central=target)
        result = choose(r.k, r.epsilon, r.protocol, **dict(common, reporting=shuffled))
        epsilon = r.epsilon if target is None else result["epsilon"]
        if sh is not None:
            # today's plan at epsilon = C, without a shuffler (OLH allowed): what the shuffler is worth
            local = None if sh.central_epsilon is None else choose(r.k, sh.central_epsilon, r.protocol, **common)
            result["shuffle"] = _shuffle_field(request, epsilon, result, local)
    except PlanError as exc:
        if link:
            raise PlanError(f"{exc} ({link.spec} carries {link.max_payload} bytes)") from None
        raise
    notes += _shuffle_notes(request)
    period = hw.period_s
    if link:
        period = _link_figures(request, result, board, modem)
    knows_period = period is not None or bool(link) or not rep.memoize or rep.change is not None or \
        bool(rep.over_time)
    result["period_s"] = period = period or DEVICE_DEFAULTS["period_s"]
    # a battery (LoRaWAN) board sleeps between reports in its port's best mode (rp2's deepsleep is
    # lightsleep then a reset: no lower, and a boot a report); a board on mains or Wi-Fi polls
    result["device_sleep"] = sleep = energy.BOARDS[board]["sleep"] if link else "none"
    cfg = load_dict(result["config"])
    section = None
    if rep.memoize:
        default = rep.budget is None
        section = budget_section(cfg, (budgets.DEFAULT_FACTOR * epsilon, budgets.DEFAULT_DAYS) if default
                                 else rep.budget, default)
    result.update(device_memoize=rep.memoize, device_budget=section)
    if getattr(cfg, "irr_epsilon", None) is not None:
        # the layer spreads y' over the whole alphabet: p* - q* = (p - q)(p1 - q1) (docs/privacy.md section 3)
        result["irr_mse_factor"] = cfg.protocol.variance(result["n"], prior) / cfg.protocol.prr.variance(
            result["n"], prior)
        if result["irr_mse_factor"] > IRR_MSE_WARN:
            notes.append(Note(f"the instantaneous layer (irr epsilon {rep.irr_epsilon:g}) multiplies "
                              f"{result['protocol']}'s predicted MSE by {result['irr_mse_factor']:.3g}: it "
                              f"re-randomises over all {cfg.protocol.irr.n} outputs; it pays on grr or olh with few "
                              "buckets", alarm=True))
    if knows_period:
        result["privacy_over_time"] = over_time(cfg, Device(period_s=period, memoize=rep.memoize, budget=section),
                                                prior=prior, campaign_days=rep.campaign_days, prior_label=q.prior,
                                                change=rep.change)
    if rep.change is not None and knows_period:
        result["hiding_options"] = _hiding(request, result, cfg, common)
    # the period, sleep, memoize and budget: a LoRaWAN transport also needs the modem's UART or path,
    # which a plan cannot know
    device = {"period_s": period, "sleep": sleep}
    if rep.memoize:
        device.update(memoize=True, budget=section)
    return Plan(request=request, fields=result, epsilon=epsilon, frame=frame, max_bytes=max_bytes, config=cfg,
                device=device, notes=notes)


def _report_size(request, olh_seed):
    """(max_bytes, frame, notes): the request's limits, on a LoRaWAN link at most its payload and by
    default a compact frame (compact-epoch for a seeded protocol with a seed an epoch)."""
    link, notes = request.hardware.link, []
    max_bytes, frame = request.limits.max_bytes, request.limits.frame
    if link:
        if max_bytes is not None and max_bytes != link.max_payload:
            used = min(max_bytes, link.max_payload)
            notes.append(Note(f"a size limit of {max_bytes} bytes and {link.spec}'s {link.max_payload}-byte payload: "
                              f"the smaller, {used}, is used", kind="payload",
                              values=dict(max_bytes=max_bytes, link=link.spec, payload=link.max_payload, used=used)))
        max_bytes = min(max_bytes or link.max_payload, link.max_payload)
        if frame is None:
            # LoRaWAN carries the device id (DevEUI) and a counter (FCnt) itself; OLH's seed
            # needs the drawing epoch on the wire (SPEC.md section 4)
            frame = "compact-epoch" if request.protocol in seeded() and olh_seed == "epoch" else "compact"
    frame = frame or "full"
    if frame == "compact":
        notes.append(Note("compact frames are dated by arrival: boards need device.transport lorawan"))
    return max_bytes, frame, notes


def _shuffle_field(request, eps0, result, local):
    """The plan's ``shuffle`` field: the central (eps_c, delta) of a shuffled batch of ``n``
    reports at the plan's epsilon (:func:`mss_protocol.shuffling.central_epsilon`, the protocol's own
    bound when GRR, OUE, SUE, SS or HR is chosen: shuffling.bound_args; epsilon, not the config's
    eps_effective <= epsilon: an upper bound), and with a central epsilon the pure-local plan
    ``local`` at epsilon = C beside it (ratio: local MSE over shuffled MSE, above 1 when shuffling pays)."""
    sh = request.shuffle
    cfg = load_dict(result["config"])  # the device config: its protocol's size (ss: w, hr: b)
    name, _, _, size = shuffling.config_bound(cfg)
    irr = request.reporting.irr_epsilon is not None
    c = shuffling.central_epsilon(eps0, sh.n, sh.delta, *shuffling.bound_args(name, request.k, irr, size))
    out = {"n": sh.n, "delta": sh.delta, "eps0": eps0, "eps_c": c.eps, "method": c.method}
    if local is not None:
        out.update(central_epsilon=sh.central_epsilon, local_protocol=local["protocol"],
                   local_mse=local["predicted_mse"], shuffled_mse=result["predicted_mse"],
                   ratio=local["predicted_mse"] / result["predicted_mse"])
    return out


def _shuffle_notes(request):
    """What a shuffled plan should know: memoized bodies are found by intersecting batches."""
    notes = []
    if request.shuffle is not None and request.reporting.memoize:
        notes.append(Note("memoized reports: one batch is (eps_c, delta)-DP, but a memoized body re-sent in every "
                          "epoch is found by intersecting batches, so over more than one batch the guarantee is the "
                          "memoized draw's epsilon, not eps_c composed (the estimate says so; fresh reports "
                          "compose; docs/privacy.md, the shuffle model)", kind="shuffle_memoized"))
    return notes


def _link_figures(request, result, board, modem):
    """A LoRaWAN plan's link budget and energy, added to ``result``; returns the period (the
    request's, checked against the link's budget, or the longer of the question's estimate interval
    and the shortest period the link allows: :func:`_period_basis` says why)."""
    hw = request.hardware
    link = hw.link
    budget = lorawan.budget(link, result["frame_bytes"])
    result.update(link=link.spec, airtime_ms=budget.pop("airtime_ms"),
                  reports_per_day=budget.pop("reports_per_day"), link_budget=budget)
    least = budget["min_period_s"]
    if hw.period_s is not None and hw.period_s < least:
        raise RequestError("hardware.period_s", f"{hw.period_s} s is shorter than {least} s, the shortest period "
                                                f"{link.spec} allows a {result['frame_bytes']}-byte report (TTN "
                                                "fair use, duty cycle)")
    every = request.question.estimate_every_s or ESTIMATE_EVERY_S
    period = hw.period_s or max(least, every)
    # the energy at the plan's period (the candidates' too: auto's order does not depend on it)
    for row in result["candidates"]:
        if "energy_mj_per_report" in row:
            row["energy_mj_per_report"] = energy.report(link, row["frame_bytes"], row["rp2040_ms"], board=board,
                                                        modem=modem, period_s=period,
                                                        board_ms=row["device_ms"])["energy_mj_per_report"]
    e = _energy(request, result, board, period)
    result.update(energy_mj_per_report=e["energy_mj_per_report"], energy_mj_per_day=e["energy_mj_per_day"],
                  battery_days=e["battery_days"], battery_load_days=e["battery_load_days"],
                  battery_limit=e["battery_limit"], energy_breakdown=e["energy_breakdown"],
                  energy_times_s=e["times_s"], energy_model=e["energy_model"])
    campaign = request.reporting.campaign_days
    result.update(campaign_days=campaign, join=e["join"], joins_per_year=_resets(hw),
                  joins_over_campaign=e["joins_per_day"] * campaign, join_mj_per_day=e["join_mj_per_day"])
    result["period_basis"] = basis = _period_basis(request, result, e, least)
    if basis["estimate_every_given"] and period > basis["estimate_every_s"]:
        result["warnings"] = result["warnings"] + [
            f"period_s {period} > estimate_every_s {basis['estimate_every_s']}: a device reports once every "
            f"{period} s, so an estimate every {basis['estimate_every_s']} s holds only about "
            f"{basis['estimate_every_s'] / period:.2g} of the fleet's reports"]
    if e["battery_days"] is not None and e["battery_days"] < campaign:
        result["warnings"] = result["warnings"] + [battery_warning(request, result, e)]  # not the chooser's list
    return period


def _period_basis(request, result, e, least):
    """The plan's ``period_basis``: why the period is what it is.  Each estimate takes one report
    from each of the n devices, so the period serves an estimate every ``estimate_every_s`` when it
    is not longer; memoized re-sends of a stable value add nothing to an estimate, so a shorter one
    only costs energy (``energy_mj_per_day_at_min_period`` against ``energy_mj_per_day``).  With a
    devices-needed figure N, ``served``: n >= N (each estimate resolves the question), else no
    period serves it with memoized reports (a device's report is the same draw every period)."""
    q, hw, period = request.question, request.hardware, e["period_s"]
    every = q.estimate_every_s or ESTIMATE_EVERY_S
    at_least = e if period == least else _energy(request, result, e["energy_model"]["board"], least)
    needed = result.get("devices_needed")
    return {"period_s": period, "source": "request" if hw.period_s is not None else
            "estimate_every" if every >= least else "min_period", "estimate_every_s": every,
            "estimate_every_given": q.estimate_every_s is not None, "min_period_s": least,
            "energy_mj_per_day": e["energy_mj_per_day"],
            "energy_mj_per_day_at_min_period": at_least["energy_mj_per_day"],
            "n": result["n"], "devices_needed": needed, "served": None if needed is None else result["n"] >= needed}


def _resets(hw):
    """The resets a year each board rejoins after: the request's, else the library's assumption."""
    return energy.RESETS_PER_YEAR if hw.resets_per_year is None else hw.resets_per_year


def _energy(request, result, board, period):
    """:func:`mss_protocol.energy.report` of the plan's report on ``board`` every ``period`` s, with
    the campaign's joins (:func:`mss_protocol.energy.with_joins`: the first and one a reset)."""
    hw = request.hardware
    e = energy.report(hw.link, result["frame_bytes"], result["rp2040_ms"], board=board, modem=hw.modem or DEFAULT_MODEM,
                      period_s=period, battery=_battery(hw),
                      board_ms=result["device_ms"] if board == result["board"] else None)
    return energy.with_joins(e, hw.link, energy.joins_per_day(request.reporting.campaign_days, _resets(hw)))


def _battery(hw):
    """The request's :class:`mss_protocol.energy.Battery` (its capacity, its cell or the default)."""
    return energy.Battery(hw.battery_mah, hw.cell or energy.DEFAULT_CELL)


def battery_warning(request, result, e):
    """The plan's warning when the battery ends before the campaign: both figures by their JSON names,
    and what would make it last (another board and its sleep mode, a longer period, a larger battery
    of each cell), each computed with :func:`mss_protocol.energy.report` and the campaign's joins at the
    plan's other figures."""
    hw, days, campaign = request.hardware, e["battery_days"], request.reporting.campaign_days
    m = e["energy_model"]
    board, modem = m["board"], m["modem"]
    sleep_share = 100 * e["energy_breakdown"]["sleep"] / e["energy_mj_per_report"]
    why = (f"the {m['cell']} cell's shelf life ({m['shelf_life_days']} days) caps it"
           if e["battery_limit"] == "shelf life" else f"{m['sleep']} sleep is {sleep_share:.0f} % of the energy")
    fixes = []
    for other in energy.BOARDS:
        try:
            energy.check(hw.link, other, modem)
        except ValueError:  # a pair the model refuses (the RN2483 on a deep-sleeping board)
            continue
        if other != board:
            alt = _energy(request, result, other, e["period_s"])
            if alt["battery_days"] >= campaign:
                fixes.append(f"board {other} ({energy.BOARDS[other]['sleep']} sleep): {alt['battery_days']:.0f} days")
    period = _period_for(request, result, e)
    fixes.append(f"a period of {period} s or longer" if period else
                 f"no period on the {board} (its {m['sleep']} sleep and the cell's self-discharge alone end "
                 "the battery first)")
    for cell in energy.CELLS:
        mah = energy.capacity_for_days(e, campaign, cell)
        if mah is not None and (cell != m["cell"] or mah > m["battery_mah"]):
            fixes.append(f"a {mah:.0f} mAh {cell} battery")
    return (f"battery_days {days:.1f} < campaign_days {campaign}: the battery ends first ({why}); it lasts the "
            f"campaign with " + "; or ".join(fixes))


def _period_for(request, result, e):
    """The shortest whole period (s) at which the plan's battery lasts the campaign (checked with the
    model itself), or None."""
    campaign, board = request.reporting.campaign_days, e["energy_model"]["board"]
    period = energy.period_for_days(e, campaign)
    if period is None or period > 365 * lorawan.DAY_S:
        return None
    period = max(int(period) + 1, e["period_s"])
    for _ in range(8):  # the sleep command's digits grow now and then with the period
        days = _energy(request, result, board, period)["battery_days"]
        if days >= campaign:
            return period
        period = int(period * 1.001) + 1
    return None


def budget_section(cfg, spec, default):
    """device.budget for ``cfg`` at ``spec`` (epsilon, days; ``default``: the default factor of
    epsilon), refused (:class:`RequestError`) when no fresh draw would fit it or the board's ledger
    could not hold the draws it allows."""
    section = budgets.budget_section(*spec)
    n = budgets.draws_per_window(section, budgets.worst_ratio(cfg))
    how = (f"the default budget ({budgets.DEFAULT_FACTOR} x epsilon)" if default
           else f"a budget of {spec[0]:g} per {spec[1]} days")
    if n == 0:
        raise RequestError("reporting.budget", f"{how} is below one fresh draw of the config (eps_effective "
                                               f"{cfg.eps_effective:.6g}): the board could never report; give at "
                                               "least that")
    if n > budgets.SPENT_MAX:
        raise RequestError("reporting.budget", f"{how} allows {n} fresh draws (eps_effective "
                                               f"{cfg.eps_effective:.6g}) in {spec[1]} days, more than the "
                                               f"{budgets.SPENT_MAX} a board's ledger holds: give a smaller budget")
    return section


def _hiding(request, result, cfg, common):
    """The plan's ``hiding_options`` (mss_aggregator.privacy.over_time.hiding_options): each IRR
    protocol planned as a request for it with an instantaneous layer would plan it, the shuffler at n."""
    from mss_aggregator.privacy.over_time import Fleet, hiding_options

    rep, q = request.reporting, request.question

    def plan_for(name, e1):
        try:
            return choose(cfg.k, float(cfg.epsilon), name, **dict(
                common, reporting=replace(common["reporting"], irr_epsilon=e1, olh_seed="device"),
                question=replace(common["question"], n=result["n"], detect=None, target_se=None),
                search=replace(common["search"], progress=None)))
        except PlanError as exc:
            raise ValueError(str(exc)) from None

    def central(m):
        delta = request.shuffle.delta if request.shuffle is not None else shuffling.DEFAULT_DELTA
        c = shuffling.central_epsilon(float(cfg.epsilon), m, delta)
        return c.eps, c.method

    fleet = Fleet(cfg=cfg, n=result["n"], prior=common["question"].prior, period_s=result["period_s"],
                  campaign_days=rep.campaign_days, detectable=result["detectable_frequency"], slack=q.mse_slack,
                  detect=q.detect)
    return hiding_options(result["privacy_over_time"], fleet, rep.change, plan_for, central=central,
                          irr_epsilon=rep.irr_epsilon)
