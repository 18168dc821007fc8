"""A learned attacker on the metadata around the reports (``mss audit --learned``).

epsilon bounds what the *bodies* of a device's reports say about its value,
given the pattern of fresh draws and re-sends (SPEC.md section 10: between two
value histories with the same pattern the likelihood ratio of everything sent
is at most e^(D eps), D the fresh draws).  It says nothing about the pattern
itself, nor about anything else an observer of the broker or the LoRaWAN
network server records: when a body changes, which epochs are skipped, when a
report arrives, how long it is.  The DP figure is a poor proxy for what an
attacker reconstructs (Hayes, Mahloujifar & Balle, "Bounding Training Data
Reconstruction in DP-SGD", NeurIPS 2023), and features left in an
"obfuscated" representation are recovered by a model trained on examples
(Sensitive Feature Distillation); here the representation is that metadata.
So this module measures instead of bounding:

1. **Simulated campaigns** (:func:`simulate`).  ``devices`` devices report
   once an epoch for ``days`` days under the config's regime, exactly as the
   firmware decides (``mss_node.app.draw``, ``mss_node.memo.report``,
   ``mss_node.ledger``): with ``device.memoize`` a value's first draw is
   re-sent while its memo lasts (LRU over ``memo_max`` values), without it
   every report is drawn afresh; with ``device.budget`` a fresh draw is made
   only while the draws of the last window number fewer than the budget
   allows (:func:`mss_protocol.budget.draws_per_window`, exact; for one config
   the same test as the ledger's product of worst ratios, the window the
   board's ``mss_node.ledger.window_ms``, board time advancing one period an
   epoch), else the epoch is skipped and the link says so.  Each fresh draw's
   body is drawn from the protocol's own law (the client's vectorised sampler
   where it has one, as :func:`.attacks.longitudinal`; else the client), so
   two draws with identical bodies are identical.  Values follow a Markov
   chain: in each epoch a device's value changes with probability
   period / (``change_days`` days) to a value drawn from the prior, or, with a
   public signal, to that epoch's public value with probability ``follow``.
2. **What the observer has** (:func:`features`), by group: ``bodies`` (the
   last report's support decoded to one indicator per category, and the
   supports summed over the last ``view`` reports), ``body changes`` (per
   epoch of the view: a body unlike the one before; their count; the ages of
   the last three), ``skipped epochs`` (per epoch of the view, their count, the
   last one's age), ``arrival times`` (the offset into the epoch at which each
   report of the view arrives: the board wakes ``phase`` into every epoch,
   drawn once per boot from its random bytes, ``mss_node.power.Rest``, or at a
   main-loop tick without sleep, plus a network delay; nothing in the
   firmware's schedule depends on the value), ``report sizes`` (the bytes of
   each report, from the firmware's own ``Reporter``; constant for every
   frame kind) and, when given, ``public signal`` (its value now and at the
   last three body changes and the last skip: the latter belong to both
   groups, and leave with either).
3. **The attacker**: scikit-learn's multinomial logistic regression on
   standardised features (:func:`make_model`, fixed ``random_state``) trained on
   ``train`` of the devices to name each
   device's value at the last epoch, scored on the held-out rest; its success
   with a 95% Clopper-Pearson interval (:func:`.attacks.rate`), never capped:
   metadata is not covered by the ceiling, which is the point of measuring.
4. **Beside it**: ``formal``, what ``mss plan`` / ``mss audit --longitudinal``
   print for the same horizon (the exact Bayes success of the stable-value
   attacker, :func:`.model.horizon_figures`); ``ceiling``, the eps-LDP ceiling
   for the same prior at the loss the held-out devices' reports spent (their
   fresh draws x one draw's epsilon, averaged over them); ``no_information``.
5. **What leaked**: every group is left out in turn and the model trained
   again; ``drop_in_success`` is the success lost.  Where the learned success's
   interval lies above ``formal``, ``leaked`` names the group whose removal
   costs most (the public signal is side information, never named; where
   groups are redundant and none costs, the one that alone, with the public
   signal, succeeds best).

scikit-learn is an optional extra (``pip install 'mss-iot[learned]'``): it
is imported only here, inside :func:`require_sklearn`.
"""
import math
import random
from dataclasses import dataclass

import numpy as np

from mss_aggregator.privacy import attacks, ceilings, model
from mss_device.rng import ByteRng

DAY_S = 86400
GROUPS = ("bodies", "body changes", "skipped epochs", "arrival times", "report sizes", "public signal")
PUBLIC = "public signal"
VIEW = 24  # epochs of per-epoch features (the last day at hourly reports)
LAST_EVENTS = 3  # ages (and public values) of the last body changes
FORMAL_TRIALS = 200  # devices of the formal figure's simulation (fresh reports)
SIZE_SAMPLES = 8  # firmware reports per value sampled for the sizes
INSTALL_HINT = "pip install 'mss-iot[learned]'"


class LearnedUnavailable(ImportError):
    """scikit-learn is not installed."""


def require_sklearn():
    """scikit-learn's modules the attacker uses; :class:`LearnedUnavailable` naming the extra without it."""
    try:
        from sklearn import impute, linear_model, pipeline, preprocessing
    except ImportError as exc:
        raise LearnedUnavailable(f"the learned attacker needs scikit-learn ({INSTALL_HINT})") from exc
    return impute, linear_model, pipeline, preprocessing


MODEL = ("sklearn: SimpleImputer (a report's missing arrival and size: the mean), StandardScaler, "
         "LogisticRegression(C=0.1) (multinomial)")


def make_model(seed):
    """The attacker: multinomial logistic regression on standardised features.  Measured against
    HistGradientBoostingClassifier on the test campaigns (tests/test_learned_attacker.py): equal where
    the metadata leaks (0.80 and 0.79-0.80), better on a stable value (0.436 against 0.407-0.409, the
    Bayes rule 0.44 on the same devices): with a thousand training devices the trees fit the noise
    of the arrival times.  The Bayes posterior of one body is log-linear in its support indicators,
    which this model holds exactly."""
    impute, linear_model, pipeline, preprocessing = require_sklearn()
    return pipeline.make_pipeline(impute.SimpleImputer(keep_empty_features=True), preprocessing.StandardScaler(),
                                  linear_model.LogisticRegression(C=0.1, max_iter=500, random_state=seed))


@dataclass(frozen=True)
class Campaign:
    """What is simulated: ``devices`` devices over ``days`` days of ``period_s``
    epochs; values change every ``change_days`` days on average; ``public``: a
    public signal (int array, one category an epoch, at least the campaign's
    epochs) that a changing value follows with probability ``follow``;
    ``jitter_s``: the mean network delay (exponential); ``fresh_delay_s``: extra
    delay of a fresh draw's report (the randomiser and the ledger copy's write;
    0: not modelled)."""
    devices: int = 3000
    days: int = 30
    change_days: float = 7.0
    public: object = None
    follow: float = 0.8
    jitter_s: float = 0.2
    fresh_delay_s: float = 0.0
    train: float = 0.7
    seed: int = 0


@dataclass(frozen=True)
class Regime:
    """The device's reporting: ``memoize``, ``budget`` (a device.budget dict or None),
    ``period_s``, ``memo_max``, ``sleep`` ("none": a report at a main-loop tick of
    ``poll_s``; else a wake ``phase`` into the epoch) and ``poll_s``."""
    period_s: int = 3600
    memoize: bool = False
    budget: object = None
    memo_max: int = 16
    sleep: str = "none"
    poll_s: int = 5

    @classmethod
    def of_device(cls, device):
        """The regime of a config's ``device`` section (firmware defaults where absent)."""
        from mss_node.settings import DEVICE_DEFAULTS

        d = dict(DEVICE_DEFAULTS, **(device or {}))
        return cls(period_s=int(d["period_s"]), memoize=bool(d["memoize"]), budget=d["budget"],
                   memo_max=int(d["memo_max"]), sleep=d["sleep"], poll_s=int(d["poll_s"]))


def read_public_signal(path, k):
    """A public signal file -> int array, one category in [0, k) an epoch of the campaign
    (epoch 0 its first).  CSV: one row an epoch, ``epoch,value`` (a header row
    allowed; epochs 0, 1, 2, ... in order) or ``value`` alone; JSON: a list of
    values or {"values": [...]}.  ValueError naming what is wrong."""
    import csv
    import json

    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.lstrip().startswith(("[", "{")):
        data = json.loads(text)
        values = data.get("values") if isinstance(data, dict) else data
        if not isinstance(values, list):
            raise ValueError(f"{path}: JSON must be a list of values or {{\"values\": [...]}}")
    else:
        values = []
        for i, row in enumerate(csv.reader(text.splitlines())):
            row = [c.strip() for c in row if c.strip()]
            if not row or (i == 0 and not row[-1].lstrip("-").isdigit()):
                continue  # a header, a blank line
            if len(row) == 2 and int(row[0]) != len(values):
                raise ValueError(f"{path}: row {i + 1}: epoch {row[0]}, expected {len(values)} "
                                 "(epochs in order from 0)")
            values.append(row[-1])
    try:
        out = np.array([int(v) for v in values], dtype=np.int64)
    except (TypeError, ValueError):
        raise ValueError(f"{path}: every value must be an integer category") from None
    if out.size == 0 or out.min() < 0 or out.max() >= k:
        raise ValueError(f"{path}: values must be categories in [0, {k}) (got {out.size} values)")
    return out


def _draw(ch, values, rng, device, seeds=None):
    """(keys (n,), supports bool (n, k)) of one fresh draw of each of ``values``: the
    vectorised law where the channel has one, else the real client.  Identical bodies
    have identical keys.  ``seeds``: olh's hash seeds of these devices (``seed: device``)."""
    values = np.asarray(values, dtype=np.int64)
    if values.size == 0:
        return np.zeros(0, dtype=object), np.zeros((0, ch.k), dtype=bool)
    if hasattr(ch, "sample_outputs"):
        u = ch.sample_outputs(values, rng) if seeds is None else ch.sample_outputs(values, rng, seeds=seeds)
        return u.astype(object), ch.members(u)
    if hasattr(ch, "sample_logliks"):  # MSS, SS: the support is the body (a residue subset of a block)
        sup = ch.sample_logliks(values, rng) > 0
        return np.array([s.tobytes() for s in np.packbits(sup, axis=1)], dtype=object), sup
    reports = [ch.client(int(x), device) for x in values]
    keys = np.empty(len(reports), dtype=object)
    for i, r in enumerate(reports):
        keys[i] = ("report", ch.key(r))
    return keys, np.array([ch.support(r)[0] for r in reports])


def report_sizes(cfg, k, seed=0):
    """{value: [bytes of reports]}: ``SIZE_SAMPLES`` reports a value (up to 64 values) from the
    firmware's own Reporter, as the link carries them."""
    from mss_device.params import Params
    from mss_device.rng import ByteRng
    from mss_node.reporter import Reporter

    rep = Reporter(Params(cfg.to_dict()), ByteRng(random.Random(seed).randbytes), "0123456789abcdef")
    values = range(k) if k <= 64 else np.linspace(0, k - 1, 64).astype(int)
    return {int(v): [len(rep.report(int(v), 0, i)) for i in range(SIZE_SAMPLES)] for v in values}


def simulate(cfg, regime, campaign, prior=None):
    """The observer's record of ``campaign.devices`` devices of ``cfg`` under ``regime``
    (module docstring): {"values" (n, E) the true values, "sent" (n, E) bool, "skip"
    (n, E), "fresh" (n, E), "change" (n, E) (a sent body unlike the device's last one),
    "arrival" (n, E) s into the epoch (NaN: nothing sent), "size" (n, E) bytes (NaN),
    "support" (n, V, k) the view's sent supports (False where nothing was sent), "epochs" E,
    "view" V, "draws_per_window", "window_epochs"}."""
    from mss_node.ledger import window_ms
    from mss_protocol import budget as budgets

    k, n = cfg.k, campaign.devices
    prior = np.full(k, 1.0 / k) if prior is None else np.asarray(prior, dtype=float)
    ch, layer = model.prr_channel(cfg.name, k, cfg.epsilon, cfg)
    if layer is not None:
        raise ValueError("the learned attacker does not model an instantaneous layer (irr) yet")
    E = max(2, int(campaign.days * DAY_S // regime.period_s))
    V = min(VIEW, E)
    rng = np.random.default_rng(campaign.seed)
    device = ByteRng(random.Random(campaign.seed).randbytes)
    public = campaign.public
    if public is not None and len(public) < E:
        raise ValueError(f"the public signal covers {len(public)} epochs, the campaign {E}")
    draws = window = None
    if regime.budget:
        draws = budgets.draws_per_window(regime.budget, budgets.worst_ratio(cfg))
        window = -(-window_ms(regime.budget["days"]) // (regime.period_s * 1000))  # live while t - s < window
    sizes = report_sizes(cfg, k, campaign.seed)
    size_of = np.array([np.mean(sizes.get(v, sizes[min(sizes, key=lambda u: abs(u - v))])) for v in range(k)])
    # the wake schedule: a phase per boot (sleep) or a tick (no sleep), value-free
    if regime.sleep == "none":
        phase = rng.uniform(0, regime.poll_s, n)
    else:
        phase = rng.integers(0, max(1, min(regime.period_s // 10, 3600)), n).astype(float)
    h = min(1.0, regime.period_s / (campaign.change_days * DAY_S))
    value = rng.choice(k, size=n, p=prior)
    values = np.zeros((n, E), dtype=np.int64)
    sent, skip, fresh, change = (np.zeros((n, E), dtype=bool) for _ in range(4))
    arrival, size = np.full((n, E), np.nan), np.full((n, E), np.nan)
    support = np.zeros((n, V, k), dtype=bool)
    memo_key = np.full((n, k), None, dtype=object)
    memo_row = np.full((n, k), -1, dtype=np.int64)  # row of the memo's support in ``table``
    table = np.zeros((max(64, 2 * n), k), dtype=bool)
    used = 0
    memo_used = np.full((n, k), -1, dtype=np.int64)  # epoch last used; -1: no memo
    last_key = np.full(n, None, dtype=object)
    live = np.zeros(n, dtype=np.int64)  # draws in the window
    rows = np.arange(n)
    seeds = ch.oracle.sample_seeds(n, rng) if model.device_seed_of(cfg.name, cfg) else None
    for t in range(E):
        if t:
            moves = rng.random(n) < h
            new = rng.choice(k, size=n, p=prior)
            if public is not None:
                new = np.where(rng.random(n) < campaign.follow, public[t], new)
            value = np.where(moves, new, value)
        values[:, t] = value
        if window is not None and t >= window:
            live -= fresh[:, t - window]
        has_memo = memo_used[rows, value] >= 0 if regime.memoize else np.zeros(n, dtype=bool)
        need = ~has_memo
        allowed = live < draws if draws is not None else np.ones(n, dtype=bool)
        f = need & allowed
        skip[:, t] = need & ~allowed
        fresh[:, t] = f
        live += f
        keys = np.full(n, None, dtype=object)
        sup_now = np.zeros((n, k), dtype=bool)
        idx = np.flatnonzero(f)
        kk, ss = _draw(ch=ch, values=value[idx], rng=rng, device=device,
                       seeds=None if seeds is None else tuple(x[idx] for x in seeds))
        keys[idx] = kk
        sup_now[idx] = ss
        if regime.memoize:
            hm = np.flatnonzero(has_memo)
            keys[hm] = memo_key[hm, value[hm]]
            sup_now[hm] = table[memo_row[hm, value[hm]]]
            if used + idx.size > table.shape[0]:
                table = np.vstack([table, np.zeros((max(table.shape[0], idx.size), k), dtype=bool)])
            table[used:used + idx.size] = ss
            memo_key[idx, value[idx]] = kk
            memo_row[idx, value[idx]] = np.arange(used, used + idx.size)
            used += idx.size
            memo_used[rows[f | has_memo], value[f | has_memo]] = t
            for i in np.flatnonzero((memo_used >= 0).sum(axis=1) > regime.memo_max):
                v = int(np.argmin(np.where(memo_used[i] >= 0, memo_used[i], E + 1)))  # least recently used
                memo_used[i, v] = -1  # forgotten (mss_node.memo.remember)
                memo_key[i, v] = None
        s = ~skip[:, t]
        sent[:, t] = s
        change[:, t] = s & (keys != last_key) & np.array([x is not None for x in last_key])
        last_key = np.where(s, keys, last_key)
        delay = phase + rng.exponential(campaign.jitter_s, n) + campaign.fresh_delay_s * f
        arrival[:, t] = np.where(s, delay, np.nan)
        size[:, t] = np.where(s, size_of[value], np.nan)
        if t >= E - V:
            support[:, t - (E - V)] = sup_now & s[:, None]
    return {"values": values, "sent": sent, "skip": skip, "fresh": fresh, "change": change, "arrival": arrival,
            "size": size, "support": support, "epochs": E, "view": V, "draws_per_window": draws,
            "window_epochs": window, "sizes": sorted({b for v in sizes.values() for b in v})}


def _ages(mask, last):
    """(n, last) epochs before the end of the last ``last`` True epochs of each row (E where fewer),
    and their epoch indices (-1 where fewer)."""
    n, E = mask.shape
    ages, at = np.full((n, last), float(E)), np.full((n, last), -1, dtype=np.int64)
    for i in range(n):
        hits = np.flatnonzero(mask[i])[::-1][:last]
        ages[i, :hits.size] = E - 1 - hits
        at[i, :hits.size] = hits
    return ages, at


def _onehot(cats, k):
    """(n,) categories (-1: none) -> (n, k) indicators."""
    out = np.zeros((cats.size, k))
    ok = cats >= 0
    out[np.flatnonzero(ok), cats[ok]] = 1.0
    return out


def features(record, k, public=None):
    """[(tags, (n, f) array)]: the observer's feature blocks, each tagged with the groups
    it belongs to (a block leaves when any of its groups is left out)."""
    E, V = record["epochs"], record["view"]
    sent, skip, change = record["sent"], record["skip"], record["change"]
    sup = record["support"].astype(float)
    last = np.zeros(sup.shape[::2])
    for j in range(V):  # the last sent body in the view
        last = np.where(sup[:, j].any(axis=1)[:, None], sup[:, j], last)
    change_ages, change_at = _ages(change, LAST_EVENTS)
    skip_ages, skip_at = _ages(skip, 1)
    arr = record["arrival"]
    with np.errstate(invalid="ignore"):
        arr_stats = np.column_stack([np.nanmean(arr, axis=1), np.nanstd(arr, axis=1)])
        size_stats = np.column_stack([np.nanmean(record["size"], axis=1), np.nanstd(record["size"], axis=1)])
    blocks = [({"bodies"}, np.hstack([last, sup.sum(axis=1)])),
              ({"body changes"}, np.hstack([change[:, -V:], change.sum(axis=1, keepdims=True), change_ages])),
              ({"skipped epochs"}, np.hstack([skip[:, -V:], skip.sum(axis=1, keepdims=True), skip_ages])),
              ({"arrival times"}, np.hstack([arr[:, -V:], arr_stats])),
              ({"report sizes"}, np.hstack([record["size"][:, -V:], size_stats]))]
    if public is not None:
        pub = np.asarray(public)
        blocks.append(({PUBLIC}, _onehot(np.full(sent.shape[0], pub[E - 1]), k)))
        for j in range(LAST_EVENTS):
            at = change_at[:, j]
            blocks.append(({PUBLIC, "body changes"}, _onehot(np.where(at >= 0, pub[np.maximum(at, 0)], -1), k)))
        at = skip_at[:, 0]
        blocks.append(({PUBLIC, "skipped epochs"}, _onehot(np.where(at >= 0, pub[np.maximum(at, 0)], -1), k)))
    return blocks


def _fit_score(blocks, keep, y, split, seed):
    """Hits of the classifier on the held-out devices with the blocks whose groups are all in ``keep``."""
    cols = [b for tags, b in blocks if tags <= keep]
    if not cols:
        return None
    X = np.hstack(cols)
    model = make_model(seed)
    model.fit(X[:split], y[:split])
    return int(np.count_nonzero(model.predict(X[split:]) == y[split:]))


def formal_figure(cfg, regime, prior, reports, seed=0):
    """What plan / audit --longitudinal print for the same horizon: the Bayes success of the
    stable-value attacker after ``reports`` reports under the regime (exact for one draw)."""
    from mss_protocol import budget as budgets

    ch, irr = model.prr_channel(cfg.name, cfg.k, cfg.epsilon, cfg)
    draws = window = None
    if regime.budget:
        draws = budgets.draws_per_window(regime.budget, budgets.worst_ratio(cfg))
        window = regime.budget["days"] * DAY_S / regime.period_s
    drawing = model.Drawing(draw_eps=float(cfg.eps_effective), memoize=regime.memoize, irr=irr, draws=draws,
                            window=window, device_seed=model.device_seed_of(cfg.name, cfg))
    f = model.horizon_figures(ch=ch, prior=prior, reports=[reports], drawing=drawing, trials=FORMAL_TRIALS, seed=seed,
                              max_draws=model.MAX_DRAWS)
    return {"success": float(f["success"][0]), "ci": [float(c) for c in f["ci"][0]], "exact": bool(f["exact"][0]),
            "fresh_draws": int(f["fresh_draws"][0]), "lower_bound": bool(f["lower_bound"][0])}


def learned_attack(cfg, device, campaign=None, prior=None, progress=None):
    """The learned attacker against the deployment ``cfg`` + ``device`` (module docstring).

    Returns {"success", "ci" (95% Clopper-Pearson), "hits", "test_devices", "ceiling",
    "formal" ({"success", "ci", "exact", "fresh_draws", "lower_bound"}), "no_information",
    "public_only" (the public signal alone, or None), "features": [{"name", "drop_in_success",
    "alone"}], "leaked" (a group name or None), "beats_formal", "above_ceiling", "campaign"
    (what was simulated), "observed" (skip and change rates, report sizes seen)}."""
    campaign = campaign or Campaign()
    regime = Regime.of_device(device)
    k = cfg.k
    prior = np.full(k, 1.0 / k) if prior is None else np.asarray(prior, dtype=float)
    require_sklearn()
    rec = simulate(cfg, regime, campaign, prior)
    if progress:
        progress()
    blocks = features(rec, k, campaign.public)
    y = rec["values"][:, -1]
    split = int(round(campaign.train * campaign.devices))
    n_test = campaign.devices - split
    groups = [g for g in GROUPS if any(g in tags for tags, _ in blocks)]
    every = set(groups)
    hits = _fit_score(blocks=blocks, keep=every, y=y, split=split, seed=campaign.seed)
    success, ci = attacks.rate(hits, n_test)
    rows = []
    for g in groups:
        h = _fit_score(blocks=blocks, keep=every - {g}, y=y, split=split, seed=campaign.seed)
        rows.append({"name": g, "drop_in_success": success - (h / n_test if h is not None else 0.0), "alone": None})
        if progress:
            progress()
    public_only = None
    if campaign.public is not None:
        public_only = attacks.rate(_fit_score(blocks=blocks, keep={PUBLIC}, y=y, split=split,
                                              seed=campaign.seed), n_test)[0]
    eps = float(cfg.eps_effective)
    draws = rec["fresh"][split:].sum(axis=1)
    ceiling = float(np.mean([ceilings.ldp_prior(prior, d * eps) for d in draws]))
    formal = formal_figure(cfg=cfg, regime=regime, prior=prior, reports=rec["epochs"], seed=campaign.seed)
    beats = ci[0] > formal["success"]
    leaked = None
    if beats:
        named = [r for r in rows if r["name"] != PUBLIC]
        best = max(named, key=lambda r: r["drop_in_success"])
        if best["drop_in_success"] * n_test >= 1:
            leaked = best["name"]
        else:  # redundant groups: none costs alone; the one that alone (with the public signal) does best
            for r in named:
                r["alone"] = _fit_score(blocks=blocks, keep={r["name"], PUBLIC}, y=y, split=split,
                                        seed=campaign.seed) / n_test
            leaked = max(named, key=lambda r: r["alone"])["name"]
    return {"success": success, "ci": [float(c) for c in ci], "hits": hits, "test_devices": n_test,
            "train_devices": split, "ceiling": ceiling, "formal": formal,
            "no_information": ceilings.no_information(prior), "public_only": public_only,
            "features": rows, "leaked": leaked, "beats_formal": bool(beats), "above_ceiling": bool(ci[0] > ceiling),
            "target": "the value at the last epoch",
            "model": MODEL,
            "campaign": {"devices": campaign.devices, "days": campaign.days, "epochs": rec["epochs"],
                         "view_epochs": rec["view"], "change_days": campaign.change_days,
                         "public_signal": campaign.public is not None,
                         "follow": campaign.follow if campaign.public is not None else None,
                         "jitter_s": campaign.jitter_s, "fresh_delay_s": campaign.fresh_delay_s,
                         "seed": campaign.seed, "period_s": regime.period_s, "memoize": regime.memoize,
                         "budget": None if not regime.budget else {"epsilon": regime.budget["epsilon"],
                                                                   "days": regime.budget["days"]},
                         "draws_per_window": rec["draws_per_window"], "sleep": regime.sleep},
            "observed": {"skip_rate": float(rec["skip"].mean()), "change_rate": float(rec["change"].mean()),
                         "fresh_draws_per_device": float(rec["fresh"].sum(axis=1).mean()),
                         "report_sizes": rec["sizes"]}}
