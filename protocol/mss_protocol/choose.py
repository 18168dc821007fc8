"""Choose the protocol and parameters for a domain, a budget and a link (``mss plan``).

Every protocol of :mod:`.registry` is a candidate.  For each one the
whole frame (header of the frame kind + body; MSS: its longest block) is
measured against ``max_bytes`` / ``max_bits``; MSS and SS are planned
within the body budget by :mod:`.mss.planner`, the one-output protocols
are fixed by (k, epsilon) (:mod:`.oracle_config`).  Each is scored by its
predicted per-item MSE at ``n`` reports and the prior (SPEC.md section 7).
``auto`` considers those that fit, that a device can run and whose device
time is within ``max_device_ms`` (with ``max_shift`` and ``compromised``: whose
worst shift of one item's estimate, compromised x ``shift_per_report(1)`` / n,
:meth:`mss_protocol.base.Protocol.shift_per_report`, is within ``max_shift``),
and returns the fastest on the device of those whose MSE is within
``mse_slack`` (default 2%) of the lowest: a 2%
larger MSE is made good by 2% more devices, while the device time decides
a battery's life (at k = 1024, eps = 1 SubsetSelection takes 48 ms a
report, OLH 1.5 ms at 1.005x its MSE).  Those MSE ties are broken towards
robustness where the device time does not decide: of the candidates within
the slack whose device time is within ``COST_TIE`` (1%) of the fastest of
them (the device model is within 1.12x of every measured configuration,
docs/device-cost.md, so it cannot order them), ``auto`` takes the smallest
``shift_per_report`` (a coefficient not computed, MSS above k = 2048, counts
as the largest), then the fastest (at k = 1024, eps = 4 SubsetSelection,
8.21 ms, shift 2.1, rather than MSS, 8.20 ms at 1.002x its MSE, shift 7.2).
Given a LoRaWAN ``link``, those
within the slack are ranked by energy per report instead
(:func:`mss_protocol.energy.report` on the ``board`` and ``modem``; energies
within 1% tie and go to robustness the same way, then the lower device time):
a longer frame costs airtime and UART time, and on
LoRaWAN airtime costs more than the device's milliseconds (k = 256, eps = 5:
SubsetSelection's 3-byte frame, lower MSE, beats a 4-byte MSS frame 0.005 ms
faster on the device).  The energy is compared at ``period_s`` (default
energy.RANK_PERIOD_S): the sleep over a period common to all candidates
adds the same to each but for their awake times, so the order does not
depend on it.  A protocol asked for by name is planned whatever its device
time (``device_ok`` says).

Every candidate that fits also states its resolution at ``n``
(:mod:`.resolution`): ``per_item_se``, ``half_width_95`` and
``detectable_frequency``.  Given a question, ``detect`` (the smallest
frequency to see) or ``target_se`` (a per-item standard error), each states
``devices_needed``, and ``auto`` ranks by it instead of the MSE at n, with
the same slack and tie rules (devices within ``mse_slack`` of the fewest:
the fastest on the device, with a link the least energy): the devices are
what the question costs, and for ``target_se`` they are the MSE times a
constant, so the order is the MSE's; for ``detect`` they weigh the variance
at the frequency asked about, not at the prior.  With ``n=None`` the plan is
stated at the devices the chosen protocol needs (the ranking does not
depend on n).
Under a budget above k = QUICK_K, ``auto`` plans MSS with the quick search
(greedy moduli sets only: the full search takes minutes there and has never
come near the one-output protocols); ``--protocol mss`` searches fully.

Two figures are models:

* ``device_ms``: per-report time on ``board`` (default an RP2040, Cortex-M0+
  at 125 MHz), :func:`mss_protocol.device_cost.device_ms`: Cortex-M0, M3 or
  RV32 instruction counts measured under emulation (``tools/bench_mcu.py``),
  fitted per protocol; ``rp2040_ms`` the same on an RP2040;
* ``decode_s``: the aggregator's work for ``n`` reports on one core: parsing
  each report (:func:`ingest_us`, fitted to ``tools/bench_codecs.py``: MSS
  and SS unrank a subset, 0.25 ms a report at k = 1024, eps = 1 and 53 ms at
  k = 22000, eps = 1) plus the decode from counts, from the number of array
  cells it touches (:func:`decode_cells`) at DECODE_CELLS_PER_S.
"""
import hashlib
import json
import math
import os
from dataclasses import dataclass, replace

from mss_device.frame import HEADER, KINDS
from mss_protocol import device_cost, energy, privacy, registry, resolution, shuffling
from mss_protocol.config_file import ConfigError, frame_index
from mss_protocol.integrity import Compromised
from mss_protocol.irr import PROTOCOLS as IRR_PROTOCOLS  # one output a report: an instantaneous layer applies
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import PlanError, Search, cache_dir, plan as plan_mss
from mss_protocol.mss.variance import ss_mse
from mss_protocol.oracle_config import NAMES, OracleConfig
from mss_protocol.subset_selection import rank_bits

CHOICES = ("auto", "mss", "ss") + NAMES
DECODE_CELLS_PER_S = 1e8
QUICK_K = 256
MAX_DEVICE_MS = 100.0  # default per-report budget on an RP2040
MSE_SLACK = 0.02  # auto: MSEs within 2% of the lowest tie, the device time (with a link: the energy) decides
# auto: device times (with a link: energies) within 1% of the least among the MSE ties tie too, and the
# smaller shift_per_report decides (the device model is within 1.12x of what it measures: it cannot order them)
COST_TIE = 0.01
N_DEFAULT = 10000  # the fleet size a plan is stated at unless given
FIGURES = ("per_item_se", "half_width_95", "detectable_frequency", "devices_needed")


@dataclass(frozen=True)
class Limits:
    """What a report may cost: the whole frame within ``max_bytes`` (header included) and the body
    within ``max_bits`` (None: no limit), the ``frame`` kind (full, compact, compact-epoch), the
    device time ``auto`` allows a report (``max_device_ms``, None: no budget), and what
    ``compromised`` devices (a :class:`Compromised`) may do: a protocol whose worst shift of one
    item's estimate, compromised x shift_per_report(1) / n, exceeds ``max_shift`` is left out."""

    max_bytes: int = None
    max_bits: int = None
    frame: str = "full"
    max_device_ms: float = MAX_DEVICE_MS
    max_shift: float = None
    compromised: Compromised = None


def shift_per_report(cfg):
    """The manipulation coefficient shift_per_report(1) of ``cfg``'s protocol
    (:meth:`mss_protocol.base.Protocol.shift_per_report`), None where it is not computed."""
    try:
        return float(registry.from_config(cfg).shift_per_report(1))
    except ValueError:
        return None


@dataclass(frozen=True)
class Question:
    """What the plan is stated at and ranked by: ``n`` reports (None: at the devices the chosen
    protocol needs, which needs ``detect`` or ``target_se``), the ``prior`` (k,) of the values
    (None: uniform) and its ``prior_label``, the smallest frequency to see (``detect``) or the
    per-item standard error wanted (``target_se``), and the MSE slack of ``auto``'s ties."""

    n: int = N_DEFAULT
    prior: object = None
    prior_label: str = "uniform"
    detect: float = None
    target_se: float = None
    mse_slack: float = MSE_SLACK


@dataclass(frozen=True)
class Hardware:
    """The device: a ``board`` (a key of :data:`mss_protocol.device_cost.CORES`), and with a LoRaWAN
    ``link`` (:class:`mss_protocol.lorawan.Link`) its ``modem`` and the report ``period_s`` the
    energy is stated at (None: energy.RANK_PERIOD_S)."""

    link: object = None
    board: str = "rp2040"
    modem: str = "rak3172"
    period_s: int = None


@dataclass(frozen=True)
class Reporting:
    """How devices report: OLH's hash seed (``olh_seed``, "epoch" or "device"), an instantaneous
    layer at ``irr_epsilon`` on every one-output protocol, a :class:`CentralTarget` (``central``)
    under a shuffler, and the protocols left out ({protocol: why}, ``exclude``)."""

    olh_seed: str = "epoch"
    irr_epsilon: float = None
    central: object = None
    exclude: dict = None
EPS0_CACHE_VERSION = 1  # bump when central_eps0's search or the bounds change what it finds
EPS0_GRID = 10_000  # a central epsilon's eps0 is planned on a grid of 1/EPS0_GRID, rounded down (still meets it)


@dataclass(frozen=True)
class CentralTarget:
    """Plan every candidate at the largest epsilon a report whose shuffled batch of ``n`` reports is
    (``eps_c``, ``delta``)-DP under that candidate's own proven bound (:func:`central_eps0`).

    Parameters
    ----------
    eps_c : float
        The central epsilon of a batch, nats.
    n : int
        Reports in a shuffled batch, one a device.
    delta : float
        The central delta of a batch.
    """
    eps_c: float
    n: int
    delta: float = shuffling.DEFAULT_DELTA

    def generic_eps0(self):
        """The largest eps0 on the grid meeting the target under the bound valid for every
        eps0-LDP randomiser (Feldman, McMillan, Talwar 2021): any candidate may be planned there."""
        return _grid_floor(shuffling.largest_eps0(self.eps_c, self.n, self.delta))

    def central(self, eps0, cfg):
        """The :class:`~mss_protocol.shuffling.Central` of a batch of ``cfg``'s reports at ``eps0``,
        under the bound of the device config (shuffling.config_bound: the aggregator's path)."""
        bound = shuffling.bound_args(*shuffling.config_bound(cfg))
        return shuffling.central_epsilon(eps0, self.n, self.delta, *bound)


def _grid_floor(eps):
    return math.floor(eps * EPS0_GRID) / EPS0_GRID


def _eps0_path(target, cache_key):
    key = json.dumps([EPS0_CACHE_VERSION, target.eps_c, target.n, target.delta, cache_key])
    return cache_dir() / ("eps0-" + hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")


def _cached_eps0(path):
    try:
        return float(json.loads(path.read_text())["eps0"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store_eps0(path, eps0):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # lock-free readers never see half a file
        tmp.write_text(json.dumps({"eps0": eps0}))
        os.replace(tmp, path)
    except OSError:  # a read-only cache folder: the search runs again next time
        pass


def central_eps0(target, plan_at, cache_key=None):
    """(eps0, planned, central): the largest eps0 on the grid (1/EPS0_GRID) at which the candidate
    ``plan_at(eps0)`` plans (a tuple whose first item is its device config) meets ``target`` under
    the config's own bound, that plan, and its :class:`~mss_protocol.shuffling.Central`.

    GRR, OUE and SUE: :func:`mss_protocol.shuffling.largest_eps0` under their bound.  SS and HR,
    whose bound depends on the size the plan picks at eps0 (subset size w, block size b): a
    bisection on the grid, the size planned at each trial eps0 and the bound evaluated at it (the
    size need not be monotone in eps0, so the bisection may miss a larger eps0 but never returns
    one that fails).  Whatever the search, the eps0 returned is checked at its own plan and size;
    if it failed the target it would be replaced by the generic bound's eps0 (valid for every
    randomiser, hence every size), so the guarantee stated always holds.  The other protocols
    (MSS, PGR, an instantaneous layer) have the generic bound.

    ``cache_key``: a JSON-able value naming everything ``plan_at`` depends on, or None; the eps0
    found is then kept on disk beside the MSS plans (:func:`mss_protocol.mss.planner.cache_dir`)
    and, read back, checked at its plan and size exactly as a search's (the search runs again if
    it fails), so a cached answer never states a guarantee that does not hold."""
    path = None if cache_key is None else _eps0_path(target, cache_key)
    cached = None if path is None else _cached_eps0(path)
    if cached is not None:
        try:
            planned = plan_at(cached)
            central = target.central(cached, planned[0])
            if central.eps <= target.eps_c:
                return cached, planned, central
        except (PlanError, ConfigError, ValueError):
            pass  # no longer plans there: search
    generic = target.generic_eps0()
    planned = plan_at(generic)
    name, k, irr, _ = shuffling.config_bound(planned[0])
    own = shuffling.bound_args(name, k, irr)
    sized = not irr and name in shuffling.SIZED
    if sized:
        def meets(eps0):
            try:
                return target.central(eps0, plan_at(eps0)[0]).eps <= target.eps_c
            except (PlanError, ConfigError, ValueError):  # nothing to plan there (the size does not fit)
                return False

        lo, hi = round(generic * EPS0_GRID), round(shuffling.EPS0_MAX * EPS0_GRID)
        if meets(hi / EPS0_GRID):
            lo = hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if meets(mid / EPS0_GRID) else (lo, mid)
        eps0 = lo / EPS0_GRID
    elif own[0] is not None:
        eps0 = _grid_floor(shuffling.largest_eps0(target.eps_c, target.n, target.delta, protocol=own[0], k=own[1]))
    else:
        eps0 = generic
    if eps0 != generic:
        planned = plan_at(eps0)
    central = target.central(eps0, planned[0])
    if central.eps > target.eps_c:  # the exact check (never seen): the generic bound's eps0 meets it
        eps0, planned = generic, plan_at(generic)
        central = target.central(eps0, planned[0])
    if path is not None:
        _store_eps0(path, eps0)
    return eps0, planned, central


def decode_cells(cfg, n):
    """Array cells the decoder touches for n reports (:meth:`~mss_protocol.base.Protocol.decode_cells`)."""
    return registry.from_config(cfg).decode_cells(n)


def ingest_us(cfg):
    """Microseconds to parse and check one report of ``cfg`` on the host
    (:meth:`~mss_protocol.base.Protocol.ingest_us`)."""
    return registry.from_config(cfg).ingest_us()


@dataclass(frozen=True)
class _Fit:
    """A candidate's room: ``budget_bits`` for the body (None: no limit), the frame kind's index
    (``frame``), and ``quick``: MSS's quick search (greedy moduli sets only)."""

    budget_bits: int
    frame: int
    quick: bool


def _candidate(name, k, eps, fit, question, reporting, search):
    """(config, predicted MSE, plan dict or None), or raise PlanError / ConfigError."""
    budget_bits, frame, irr_epsilon = fit.budget_bits, fit.frame, reporting.irr_epsilon
    if irr_epsilon is not None and name not in IRR_PROTOCOLS:
        raise PlanError(f"no instantaneous layer (one output a report: {', '.join(IRR_PROTOCOLS)} only)")
    cls = registry.protocol_class(name)
    if k < cls.min_k:
        raise PlanError(cls.min_k_why.format(k=k))
    if cls.config_kind == "mss":
        res = plan_mss(k, eps, max_bits=budget_bits, n=question.n, prior=question.prior,
                       prior_label=question.prior_label, protocol=name,
                       how=replace(search, per_band=0 if fit.quick else 3))
        return MssConfig.from_dict(res["config"]).with_frame(frame), res["predicted_mse"], res
    cfg = OracleConfig(name, k, eps, frame=frame, seed=reporting.olh_seed if cls.has_seed else "epoch",
                       irr_epsilon=irr_epsilon)
    bits = cfg.bits_per_report["max"]
    if budget_bits is not None and bits > budget_bits:
        raise PlanError(f"too long ({bits} bits)")
    return cfg, float(cfg.protocol.variance(question.n, question.prior)), None


def choose(k, eps, protocol="auto", limits=Limits(), question=Question(), hardware=Hardware(),
           reporting=Reporting(), search=Search()):
    """The ``mss plan --json`` dict: the chosen protocol's plan, its ``frame``,
    ``frame_bytes`` and ``body_bits``, ``device_ms`` on ``board`` (a key of
    :data:`mss_protocol.device_cost.CORES`) and ``device_ok`` (within
    ``max_device_ms``, None: no budget), and ``candidates`` (every protocol
    considered, with why it was left out where it was).  With a ``link``
    (:class:`mss_protocol.lorawan.Link`) each candidate that fits also has
    ``energy_mj_per_report`` on ``board`` + ``modem`` at ``period_s``, and
    ``auto`` ranks by it (module docstring).  ``olh_seed``: OLH's hash seed, "epoch"
    (compact frames refused: the seed needs the drawing epoch) or "device" (one seed a
    device, which memoized reports need; compact frames allowed).  ``irr_epsilon``: an
    instantaneous layer at that epsilon on every one-output protocol (grr, olh, hr,
    pgr; the others are left out), its MSE that of the composed channel.  ``detect``
    (a frequency in (0, 1]) or ``target_se`` (> 0): each candidate's ``devices_needed``,
    ranked by (module docstring); ``n=None``: the plan at the chosen's devices needed.
    The chosen protocol's resolution figures (``FIGURES``) and ``warnings`` (a list of
    strings, :func:`mss_protocol.resolution.warnings`) are top-level fields too.
    ``progress``: the MSS planner's hook (:func:`mss_protocol.mss.planner.search`,
    e.g. a :class:`mss_protocol.progress.Reporter`); ``memo``: a dict of the plans made
    (:func:`mss_protocol.mss.planner.plan`), so that none is searched twice in a call;
    ``exclude``: {protocol: why} left out of the plan (their row states why), e.g. OLH
    under a shuffler (its seed names the device).  ``central``: a :class:`CentralTarget` (``eps``
    then None): every candidate, and SubsetSelection as the yardstick, is planned at its own
    largest eps0 (:func:`central_eps0`; the candidate's ``eps0``, ``eps_c`` and ``central_method``
    say which and under what bound), then ranked as usual.

    The options come grouped: ``limits`` (:class:`Limits`: max_bytes, max_bits, frame,
    max_device_ms), ``question`` (:class:`Question`: n, prior, prior_label, detect, target_se,
    mse_slack), ``hardware`` (:class:`Hardware`: link, board, modem, period_s), ``reporting``
    (:class:`Reporting`: olh_seed, irr_epsilon, central, exclude) and ``search``
    (:class:`~mss_protocol.mss.planner.Search`: seed, use_cache, progress, memo).  Example::

        choose(16, 2.0, "auto", Limits(max_bytes=11, frame="compact"))["protocol"]"""
    detect, target_se = question.detect, question.target_se
    if detect is not None and target_se is not None:
        raise PlanError("give detect or target_se, not both")
    if limits.max_shift is not None and limits.compromised is None:
        raise PlanError("a shift limit needs the number of compromised devices it is for")
    if search.memo is None:  # SS is planned as the yardstick and as a candidate; n=None: twice more
        search = replace(search, memo={})
    if question.n is None:
        if detect is None and target_se is None:
            raise PlanError("n=None states the plan at the devices a question needs: give detect or target_se")
        needed = choose(k, eps, protocol, limits=limits, question=replace(question, n=N_DEFAULT), hardware=hardware,
                        reporting=reporting, search=search)["devices_needed"]
        question = replace(question, n=needed)
    n, prior, prior_label = question.n, question.prior, question.prior_label
    seed, use_cache = search.seed, search.use_cache
    max_bytes, max_bits, frame, max_device_ms = limits.max_bytes, limits.max_bits, limits.frame, limits.max_device_ms
    link, board, modem, period_s = hardware.link, hardware.board, hardware.modem, hardware.period_s
    olh_seed, irr_epsilon, central, exclude = (reporting.olh_seed, reporting.irr_epsilon, reporting.central,
                                               reporting.exclude)
    for given in (eps, irr_epsilon):  # below MIN_PLAN_EPSILON a variance is a division by zero
        if given is not None and (why := privacy.plan_epsilon_problem(given)):
            raise PlanError(why)
    if protocol not in CHOICES:
        raise PlanError(f"protocol must be one of {', '.join(CHOICES)}, got {protocol!r}")
    try:
        kind = frame_index(frame)
    except ConfigError as exc:
        raise PlanError(str(exc)) from None
    head = HEADER[kind]
    budget = max_bits
    if max_bytes is not None:
        if max_bytes <= head:
            raise PlanError(f"a report of at most {max_bytes} bytes leaves no room for a body after the "
                            f"{head}-byte {KINDS[kind]} header")
        budget = min(budget or 1 << 30, 8 * (max_bytes - head))
    names = [name for name in CHOICES[1:] if protocol in ("auto", name)]
    # SubsetSelection at the same n and prior (under a central target at its own eps0): the yardstick of every ratio
    def yardstick(e):
        res = plan_mss(k, e, n=n, prior=prior, prior_label=prior_label, protocol="ss", how=search)
        return MssConfig.from_dict(res["config"]), res

    try:
        key = ["ss-yardstick", k, n, prior_label, seed] if use_cache else None
        ss = (yardstick(eps) if central is None else central_eps0(central, yardstick, cache_key=key)[1])[1]
    except PlanError:  # no device runs SS here (k > 2**23): the yardstick is its analytic MSE
        var, omega = ss_mse(k, eps if central is None else central.generic_eps0(), n)
        ss = {"predicted_mse": var, "ss_omega": omega, "ss_bits": rank_bits(k, omega)}
    ss_var = ss["predicted_mse"]
    rows, found = [], []
    for name in names:
        row = {"protocol": name, "body_bits": None, "frame_bytes": None, "predicted_mse": None,
               "variance_ratio_vs_ss": None, "device_ms": None, "rp2040_ms": None, "decode_s": None,
               **dict.fromkeys(FIGURES), "shift_per_report": None, "compromised": None, "worst_shift": None}
        if exclude and name in exclude:
            rows.append(dict(row, excluded=exclude[name]))
            continue
        try:
            quick = protocol == "auto" and budget is not None and k > QUICK_K

            def plan_at(e):
                return _candidate(name, k, e, fit=_Fit(budget_bits=budget, frame=kind, quick=quick),
                                  question=question, reporting=reporting, search=search)

            if central is None:
                cfg, mse, res = plan_at(eps)
            else:
                key = [name, k, budget, kind, n, prior_label, seed, quick, olh_seed, irr_epsilon] if use_cache else None
                at, (cfg, mse, res), bound = central_eps0(central, plan_at, cache_key=key)
                row.update(eps0=at, eps_c=bound.eps, central_method=bound.method)
        except (PlanError, ConfigError, ValueError) as exc:
            rows.append(dict(row, excluded=str(exc)))
            continue
        bits = cfg.bits_per_report["max"]
        row.update(body_bits=int(bits), frame_bytes=head + (int(bits) + 7) // 8, predicted_mse=float(mse),
                   variance_ratio_vs_ss=float(mse / ss_var),
                   device_ms=device_cost.device_ms(cfg, board), rp2040_ms=device_cost.device_ms(cfg),
                   decode_s=n * ingest_us(cfg) / 1e6 + decode_cells(cfg, n) / DECODE_CELLS_PER_S)
        row.update(resolution.figures(registry.from_config(cfg), mse, n, prior=prior, detect=detect,
                                      target_se=target_se))
        row.update(integrity_figures(cfg, n, limits))
        if quick and registry.protocol_class(name).searches_moduli:
            row["search"] = "quick"  # greedy moduli sets only (see the module docstring)
        # (what no device can run, the constructors refused above: mss_protocol.limits)
        if protocol == "auto" and max_device_ms is not None and row["device_ms"] > max_device_ms:
            row["excluded"] = f"{row['device_ms']:.3g} ms a report on {board} > --max-device-ms {max_device_ms:g}"
        elif (why := shift_problem(row, limits)):
            row["excluded"] = why
        else:
            if link is not None:
                row["energy_mj_per_report"] = energy.report(
                    link, row["frame_bytes"], row["rp2040_ms"], board=board, modem=modem,
                    period_s=period_s or energy.RANK_PERIOD_S, board_ms=row["device_ms"])["energy_mj_per_report"]
            score = float(mse) if row["devices_needed"] is None else row["devices_needed"]
            found.append((score, row["device_ms"], len(found), cfg, res, row))
        rows.append(row)
    if not found:
        raise PlanError("no protocol fits: " + "; ".join(f"{r['protocol']}: {r['excluded']}" for r in rows))
    least = min(t[0] for t in found)
    near = [t for t in found if t[0] <= least * (1 + question.mse_slack)]

    def cost(t):  # the device time; with a link the energy a report
        return t[1] if link is None else t[5]["energy_mj_per_report"]

    def rank(t):  # the most robust (a coefficient not computed: last), then the fastest; with a link the least energy
        shift = t[5]["shift_per_report"]
        fastest = (t[1], t[0], t[2])
        return (math.inf if shift is None else shift,) + (fastest if link is None else (cost(t),) + fastest)

    cheapest = min(cost(t) for t in near)
    _, _, _, cfg, res, best = min((t for t in near if cost(t) <= cheapest * (1 + COST_TIE)), key=rank)
    res = _result(k, eps if central is None else best["eps0"], (cfg, res, best), rows=rows, ss=ss,
                  question=question, limits=limits)
    res.update(shift_per_report=best["shift_per_report"], worst_shift=best["worst_shift"],
               compromised=best["compromised"], max_shift=limits.max_shift)
    res.update(board=board, max_device_ms=max_device_ms, mse_slack=question.mse_slack,
               device_ok=None if max_device_ms is None else res["device_ms"] <= max_device_ms,
               detect=detect, target_se=target_se, **{f: best[f] for f in FIGURES},
               warnings=resolution.warnings(k, n, best, detect=detect, target_se=target_se))
    return res


def integrity_figures(cfg, n, limits):
    """A candidate's ``shift_per_report`` (one crafted report's largest change of one item's n fhat),
    and with ``limits.compromised`` those devices' count (``compromised``) and ``worst_shift``,
    compromised x shift_per_report / n: the largest change of one item's estimate they can make."""
    shift = shift_per_report(cfg)
    out = {"shift_per_report": shift, "compromised": None, "worst_shift": None}
    if limits.compromised is not None:
        out["compromised"] = m = limits.compromised.devices(n)
        out["worst_shift"] = None if shift is None else m * shift / n
    return out


def shift_problem(row, limits):
    """Why ``row`` is left out under ``limits.max_shift``, else None."""
    if limits.max_shift is None:
        return None
    if row["worst_shift"] is None:
        return "its manipulation coefficient is not computed here, so no shift limit can be checked"
    if row["worst_shift"] > limits.max_shift:
        return (f"{row['compromised']} compromised devices can move one item's estimate by "
                f"{row['worst_shift']:.3g} > the shift limit {limits.max_shift:g}")
    return None


def _result(k, eps, chosen, rows, ss, question, limits):
    """The plan dict of ``chosen`` (config, plan dict or None, its candidate row)."""
    cfg, res, best = chosen
    n, prior_label, max_bits, max_bytes = question.n, question.prior_label, limits.max_bits, limits.max_bytes
    kind = frame_index(limits.frame)
    if res is None:  # a one-output protocol: the MSS-only fields are null
        ss_var = ss["predicted_mse"]
        res = {"k": k, "epsilon": float(eps), "eps_effective": cfg.eps_effective, "moduli": None,
               "omegas": None, "bits_per_report": cfg.bits_per_report, "protocol": cfg.name,
               "prior": prior_label, "n": n, "predicted_mse": best["predicted_mse"],
               "predicted_mse_rel_error": 0.0, "predicted_mse_parts": None, "ss_variance": ss_var,
               "ss_omega": ss["ss_omega"], "ss_bits": ss["ss_bits"],
               "variance_ratio_vs_ss": best["predicted_mse"] / ss_var, "max_bits": max_bits,
               "candidates_considered": len(rows), "frontier": None}
    res = dict(res)
    res.update(config_id=cfg.config_id_hex, config=cfg.to_dict(), max_bytes=max_bytes,
               frame=KINDS[kind], frame_bytes=best["frame_bytes"], body_bits=best["body_bits"],
               device_ms=best["device_ms"], rp2040_ms=best["rp2040_ms"], decode_s=best["decode_s"], candidates=rows)
    return res
