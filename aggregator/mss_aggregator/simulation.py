"""Simulate a fleet through one configuration and measure its error: the application layer of
``mss simulate`` (the command maps its options to a :class:`SimulateRequest` and renders the
:class:`Simulation`); a notebook or a test calls it the same way.

The configuration is a campaign's (``config``), or planned from ``k`` and ``epsilon``: ``ss``
(SubsetSelection on the full domain), a one-output protocol by name, or ``mss``/``auto`` as ``mss
plan`` chooses for the request's ``max_bits`` and ``n``.  The devices' true values are drawn from
``dist`` (:func:`~mss_aggregator.distributions.parse`), their reports simulated and decoded
(:func:`mss_aggregator.compare.simulate.simulate`); the MSE per item is on frequencies.

Errors: :class:`SimulateRequestError` naming the request field at fault (a caller words it with
its own names), :class:`~mss_protocol.config_file.ConfigError` for a bad config,
:class:`~mss_protocol.mss.planner.PlanError` when nothing can be planned and
:class:`~mss_aggregator.distributions.DistributionError` for a bad ``dist``.
"""
from dataclasses import dataclass

from mss_aggregator.campaign import Campaign
from mss_aggregator.compare.simulate import simulate as simulate_protocol
from mss_aggregator.distributions import parse
from mss_aggregator.frames import require_pandas
from mss_protocol import configs, oracle_config, registry
from mss_protocol.choose import Limits, Question, choose

DEFAULT_DIST = "zipf:1.1"


class SimulateRequestError(ValueError):
    """A request that cannot be simulated; ``field``: the :class:`SimulateRequest` field at fault,
    ``config`` the request's loaded config when the fault is a disagreement with it."""

    def __init__(self, field_name, message, config=None):
        super().__init__(message)
        self.field, self.config = field_name, config


@dataclass(frozen=True)
class SimulateRequest:
    """One simulation.

    Parameters
    ----------
    n : int
        Simulated devices (one report each), >= 1.
    k : int, optional
        Domain size (categories); with ``epsilon`` plans a config, with ``config`` must agree.
    epsilon : float, optional
        Privacy budget of one report (epsilon-LDP, nats).
    config : object or str, optional
        A loaded config (:func:`mss_protocol.configs.load`) or the path of a config file
        (``mss plan --device-config``, read as a :class:`~mss_aggregator.campaign.Campaign`);
        None: planned from ``k`` and ``epsilon``.
    protocol : str
        ``auto`` (as ``mss plan`` chooses), ``mss``, ``ss`` or a one-output protocol's name;
        ignored with ``config`` (its own protocol).
    max_bits : int, optional
        Largest report body in bits, for ``auto``/``mss``.
    dist : str
        The devices' true values: ``zipf:S``, ``spike``, ``uniform`` or ``file:counts.csv``.
    seed : int
        Seed of the values and the reports.
    trials : int
        Independent fleets; the MSE is their mean.
    post : str
        Post-processing of the estimates (:data:`mss_protocol.postprocess.CHOICES`).
    """
    n: int
    k: int = None
    epsilon: float = None
    config: object = None
    protocol: str = "auto"
    max_bits: int = None
    dist: str = DEFAULT_DIST
    seed: int = 0
    trials: int = 1
    post: str = "none"


@dataclass
class Simulation:
    """The result of :func:`simulate`.

    Attributes
    ----------
    request : SimulateRequest
    config : object
        The configuration simulated (its ``name`` the protocol).
    mse : numpy.ndarray, shape (trials,)
        Mean squared error per item of each trial, on frequencies (unitless, in [0, 1]).
    predicted_mse : float
        The decoder's predicted MSE per item at the simulated distribution.
    decode_seconds : numpy.ndarray, shape (trials,)
        Wall-clock seconds each trial's decode took.
    truth : numpy.ndarray, shape (k,)
        The last trial's true frequencies (sum 1).
    estimate : mss_protocol.estimate.Estimate
        The last trial's estimates (arrays of shape (k,)).
    """
    request: SimulateRequest
    config: object
    mse: object
    predicted_mse: float
    decode_seconds: object
    truth: object
    estimate: object

    def to_dict(self):
        """``mss simulate --json``.

        Returns
        -------
        dict
            protocol, k, epsilon, n, trials, mse (mean over trials, per item), mse_std (their
            standard deviation, 0 for one trial), predicted_mse, decode_seconds (mean, seconds),
            bits_per_report ({max, mean}, bits), config_id (hex), eps_effective, dist, post, seed.
        """
        r, cfg, trials = self.request, self.config, self.request.trials
        return {
            "protocol": cfg.name, "k": cfg.k, "epsilon": cfg.epsilon, "n": r.n, "trials": trials,
            "mse": float(self.mse.mean()), "mse_std": float(self.mse.std(ddof=1)) if trials > 1 else 0.0,
            "predicted_mse": self.predicted_mse, "decode_seconds": float(self.decode_seconds.mean()),
            "bits_per_report": cfg.bits_per_report, "config_id": cfg.config_id_hex,
            "eps_effective": cfg.eps_effective, "dist": r.dist, "post": r.post, "seed": r.seed,
        }

    def to_frame(self):
        """The last trial item by item, as a pandas DataFrame (pandas is optional).

        Returns
        -------
        pandas.DataFrame, shape (k, 6)
            Columns ``item`` (0..k-1), ``truth`` (true frequency), ``estimate``, ``stderr``,
            ``ci_low``, ``ci_high`` (the marginal 95% interval); frequencies in [0, 1].
        """
        pd = require_pandas()
        est = self.estimate
        return pd.DataFrame({"item": range(self.config.k), "truth": self.truth, "estimate": est.estimate,
                             "stderr": est.stderr, "ci_low": est.ci_low, "ci_high": est.ci_high})


def simulation_config(request, plan_progress=None):
    """The configuration a request simulates: its ``config``, else planned from ``k`` and ``epsilon``.

    Parameters
    ----------
    request : SimulateRequest
    plan_progress : callable, optional
        A context manager factory, called with one line, around a planner search (``auto``, ``mss``).

    Returns
    -------
    object
        The loaded config (``k`` categories, ``epsilon`` nats, ``name`` the protocol,
        ``bits_per_report`` {max, mean} bits).

    Raises
    ------
    SimulateRequestError
        No k and epsilon nor config, or k/epsilon that disagree with the config (``.config``).
    """
    r = request
    if r.config is not None:
        cfg = Campaign.read(r.config).cfg if isinstance(r.config, str) else r.config
        if (r.k and r.k != cfg.k) or (r.epsilon and r.epsilon != cfg.epsilon):
            source = r.config if isinstance(r.config, str) else "the config"
            raise SimulateRequestError("k", f"k/epsilon disagree with {source} (k={cfg.k}, epsilon={cfg.epsilon})",
                                       config=cfg)
        return cfg
    if r.k is None or r.epsilon is None:
        raise SimulateRequestError("k", "give k and epsilon, or a config")
    cls = registry.protocol_class(r.protocol) if r.protocol in registry.AVAILABLE else None  # else auto
    if cls is not None and cls.config_kind == "oracle":  # fixed by (k, epsilon)
        return oracle_config.OracleConfig(r.protocol, r.k, r.epsilon)
    if cls is not None and not cls.searches_moduli:  # SS: its closed-form subset size, nothing to search
        return registry.make(r.protocol, r.k, r.epsilon).cfg
    if plan_progress is None:
        return configs.load_dict(choose(r.k, r.epsilon, r.protocol, limits=Limits(max_bits=r.max_bits),
                                        question=Question(n=r.n))["config"])
    with plan_progress(f"planning {r.protocol} for k={r.k}, epsilon {r.epsilon:g}"):
        return configs.load_dict(choose(r.k, r.epsilon, r.protocol, limits=Limits(max_bits=r.max_bits),
                                        question=Question(n=r.n))["config"])


def simulate(request, progress=None, plan_progress=None):
    """Simulate ``request.n`` devices ``request.trials`` times, decode and measure the error.

    Parameters
    ----------
    request : SimulateRequest
    progress : callable, optional
        Called with no argument after each trial.
    plan_progress : callable, optional
        A context manager factory called with one line while a config is planned.

    Returns
    -------
    Simulation
        MSE per trial (shape (trials,)), the prediction, decode seconds and the last trial's truth
        and estimates (shape (k,)).
    """
    cfg = simulation_config(request, plan_progress)
    probs = parse(request.dist, cfg.k)
    proto = registry.from_config(cfg)
    predicted = proto.variance(request.n, probs)  # at the simulated distribution
    sim = simulate_protocol(proto, probs, request.n, request.trials, seed=request.seed, post=request.post,
                            progress=progress)
    return Simulation(request, cfg, sim.mse, predicted, decode_seconds=sim.decode_seconds, truth=sim.truth,
                      estimate=sim.estimate)
