"""A value that changes: the attacker, the change-time leak and the budget's skips (issue 45).

:func:`mss_aggregator.privacy.over_time.over_time` states a device's loss for a
**stable** value.  Given a change model (:class:`Change`) this module adds, for
fresh, memoized and budgeted reporting at each horizon, what a value that
changes concedes, all measured on simulated devices that follow the firmware's
rules (``mss_node.memo``: one memo a value, at most ``memo_max``, least recently
used forgotten; ``mss_node.ledger``: a fresh draw only while fewer than B draws
lie in the last window of D days + D/64 of board time, else a memo re-send or a
skipped epoch).  ``tests/test_changing.py`` runs the firmware's own functions
epoch by epoch and checks every figure here against them.

**The change model** (:class:`Change`): a Markov chain over the k categories,
one step an epoch (a reporting period), the first value drawn from its
stationary law.  ``every_days=D``: the value changes with probability
period / (D days) an epoch (on average every D days) to a uniformly chosen
other category (stationary law uniform); ``matrix``: a k x k row-stochastic
matrix, P[i][j] the probability of moving from i to j between two epochs.

**The attacker** names the device's **current value** at the horizon (not the
whole sequence) by the MAP rule under the known chain from everything the
device sent up to then:

* fresh reporting (no memo): the forward filter alpha_t = (alpha_{t-1} P) .
  P[y_t | x] (exact Bayes for the reports it uses), on the last ``L`` reports
  before the horizon (L bounded by a fixed amount of work, ``FRESH_CELLS``; a
  filter on fewer reports is a valid attacker, so the figure is a lower bound
  on the best one when L < T, flagged ``window``);
* memoized (and budgeted) reporting: a filter over what the change times and
  bodies show.  An epoch whose body equals the last one: the value stayed
  (alpha . diag P); a body that differs: it changed (alpha P with its diagonal
  removed), and the body that appears is a draw of the new value (times its
  likelihood; a body seen before, a return to a memoized value, is counted again
  as if drawn anew, an approximation of the exact joint filter that only changes
  which attacker is measured); a skipped epoch: no observation (alpha P).
  With an instantaneous layer the filter is run on the permanent draws
  themselves (the IRR reports are a post-processing of them, so this attacker
  sees more than the reports show).

Its success is simulated on ``trials`` devices: :func:`attacks.bounded_rate`
against the ceiling (95% Clopper-Pearson interval, the point capped at the
bound, a conflict past the 99.9% lower end), and judged by
:func:`ceilings.strength` against the chain's stationary law.

**The ceiling** is the epsilon-LDP ceiling (:func:`ceilings.ldp_prior`, stationary
prior) at the loss actually spent.  Fresh: T reports of values x_1..x_T (any two
sequences differ in at most T places) make the channel from the current value
x_T to the transcript (T eps_report)-LDP: P[y | x_T] is a mixture over the past
of laws within e^(T eps) of each other.  Memoized: given the pattern of fresh
draws, re-sends and skips, the transcript is D draws, each eps-LDP for its value,
so conditioned on the pattern the channel from x_T is (D eps)-LDP; when the
pattern says nothing about the current value's label (uniform jumps,
``every_days``; the chain is symmetric under relabelling) the prior given the
pattern is still the stationary law and the success is at most the mean over
devices of ldp_prior(pi, D_i eps) (D_i a device's fresh draws by then, at most
the budget's B ceil(days / D) and, without a layer, T eps_report: with one the
attacker sees the draws, so the ceiling is theirs).  For a transition matrix the
pattern itself can tell the value (a category that changes faster), which no
epsilon covers: ``ceiling_holds`` is then false and the figure is not held to
it (its bound is 1).

**The change-time leak**: the attacker dates a change at every epoch whose
report differs from the last epoch's (a new body, or a skip where there was a
report or the reverse).  ``change_time_tpr`` = P(an epoch at which the value
changed is so dated), ``change_time_fpr`` = the same for an epoch at which it did
not, ``change_time_advantage`` = tpr - fpr (0 for an attacker that guesses
without the reports, 1 for one that dates every change and nothing else).  With
an instantaneous layer two reports of one draw are equal with probability
p1^2 + (1 - p1)^2/(n - 1), of two different outputs 2 p1 q1 + (n - 2) q1^2
(the expectation is summed, not sampled).  Fresh reports: bodies compared in
pairs drawn by the real client (``PAIRS``).

**Skips and bias**: over ``devices`` simulated devices and the epochs up to the
horizon, ``skip_rate`` = skipped epochs / device epochs, and per category
``bias`` = (the share of reports whose value is x) - (the share of device
epochs whose value is x): the expectation of an unbiased decoder's estimate
over the devices that reported, minus the true frequency.  With uniform jumps
every category changes alike, so the bias is 0 up to noise; a category that
changes faster than the rest is under-represented.  Intervals (``skip_rate_ci``,
``bias_ci``): 95%, from 20 batches of devices (batch means).

Sources: RAPPOR's permanent randomised response (Erlingsson, Pihur & Korolova,
CCS 2014); loss that grows with the changes of the value (Joseph, Roth, Ullman &
Waggoner, NeurIPS 2018); basic composition (Dwork & Roth 2014, Theorem 3.16).
"""
import math
import random
from dataclasses import dataclass

import numpy as np

from mss_aggregator.privacy import attacks, ceilings
from mss_device.rng import ByteRng

DAY_S = 86400
DEVICES = 1000  # devices whose schedule gives the skip rate and the bias
TRIALS = 200  # devices the attacker and the change-dating test run on (the first of DEVICES)
FRESH_CELLS = 1 << 23  # (report, device, value) cells of the fresh filter a horizon
CLIENT_REPORTS = 20000  # reports drawn by one client call each where no vectorised sampler exists
PAIRS = 2000  # pairs of fresh bodies compared for the fresh change-dating test
BATCHES = 20  # batch means of the skip rate and the bias
SCHEDULE_CELLS = 1 << 23  # (device, value) cells of a schedule's memo tables: fewer devices at a large k
PAIR_CELLS = 4_000_000  # (pair, value) cells of the fresh bodies compared: fewer pairs at a large k
Z95 = 1.959963984540054
_NEVER = -(1 << 40)


@dataclass(frozen=True)
class Change:
    """How a device's value moves: ``every_days`` (uniform jumps on average every that many
    days) or ``matrix`` (k x k, one step an epoch).  ``label``: how it was given."""
    every_days: float = None
    matrix: tuple = None
    label: str = ""

    def chain(self, k, period_s):
        """The per-epoch :class:`Chain` for k categories reported every ``period_s`` seconds."""
        if self.matrix is not None:
            return Chain.of(np.array(self.matrix, dtype=float), k)
        c = min(1.0, period_s / (float(self.every_days) * DAY_S))
        m = np.full((k, k), c / (k - 1))
        np.fill_diagonal(m, 1.0 - c)
        return Chain(m, np.full(k, 1.0 / k), True, c)

    def doc(self):
        rows = None if self.matrix is None else [list(r) for r in self.matrix]
        return {"every_days": self.every_days, "matrix": rows, "label": self.label}


def check_matrix(matrix, k):
    """``matrix`` as a (k, k) float array, or ValueError: not k x k, a negative or non-finite
    entry, a row not summing to 1 (within 1e-6)."""
    try:
        m = np.array(matrix, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("a transition matrix must be k rows of k numbers") from None
    if m.shape != (k, k):
        raise ValueError(f"a transition matrix over k = {k} categories must be {k} x {k}, got "
                         f"{' x '.join(map(str, m.shape)) or 'a number'}")
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise ValueError("a transition matrix's entries must be probabilities (finite, >= 0)")
    bad = np.flatnonzero(np.abs(m.sum(axis=1) - 1) > 1e-6)
    if bad.size:
        raise ValueError(f"row {int(bad[0])} of the transition matrix sums to {m[bad[0]].sum():.6g}, not 1")
    return m / m.sum(axis=1, keepdims=True)


def load_matrix(path, k):
    """A k x k transition matrix from a JSON file (a list of rows, or {"matrix": rows}) or a
    CSV file (k lines of k numbers); ValueError naming what is wrong."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.lstrip().startswith(("[", "{")):
        import json

        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc}") from None
        rows = data.get("matrix") if isinstance(data, dict) else data
    else:
        rows = []
        for line in text.splitlines():
            if line.strip():
                try:
                    rows.append([float(v) for v in line.replace(";", ",").split(",")])
                except ValueError:
                    raise ValueError(f"a CSV line that is not numbers: {line.strip()[:40]!r}") from None
    return check_matrix(rows, k)


@dataclass(frozen=True)
class Chain:
    """A per-epoch chain: ``p`` (k, k), ``pi`` its stationary law, ``uniform`` (jumps to a
    uniform other category with probability ``c`` an epoch)."""
    p: np.ndarray
    pi: np.ndarray
    uniform: bool
    c: float = None

    @classmethod
    def of(cls, m, k):
        m = check_matrix(m, k)
        w, v = np.linalg.eig(m.T)
        one = np.abs(w - 1) < 1e-9
        if one.sum() == 1:  # one stationary law
            pi = np.abs(np.real(v[:, np.argmax(one)]))
        else:  # several (a chain that never leaves some set): the long-run law from a uniform start
            q = np.linalg.matrix_power(m, 1 << 20)
            pi = np.full(k, 1.0 / k) @ (q + q @ m) / 2
        return cls(m, pi / pi.sum(), False)

    @property
    def k(self):
        return self.p.shape[0]

    @property
    def stay(self):
        return np.diag(self.p)

    def start(self, n, rng):
        return rng.choice(self.k, size=n, p=self.pi)

    def step(self, x, rng):
        """One epoch of the chain for the values ``x`` (in place); the indices that moved."""
        stay = self.stay[x]
        moved = np.flatnonzero(rng.random(x.size) >= stay)
        if moved.size:
            if self.uniform:
                x[moved] = (x[moved] + rng.integers(1, self.k, size=moved.size)) % self.k
            else:
                off = self.p[x[moved]].copy()
                off[np.arange(moved.size), x[moved]] = 0.0
                cum = np.cumsum(off, axis=1)
                u = rng.random(moved.size) * cum[:, -1]
                x[moved] = np.minimum((cum < u[:, None]).sum(axis=1), self.k - 1)
        return moved

    def forward(self, alpha, steps=1):
        """alpha P^steps (rows of ``alpha`` are laws over the k values)."""
        if steps <= 0:
            return alpha
        if self.uniform:  # P = (1 - c) I + c/(k-1) (J - I): eigenvalue lam off the uniform vector
            lam = (1.0 - self.c * self.k / (self.k - 1)) ** steps
            return lam * alpha + (1 - lam) * alpha.sum(axis=-1, keepdims=True) / self.k
        return alpha @ np.linalg.matrix_power(self.p, steps)

    def moved(self, alpha):
        """alpha (P with its diagonal removed): the law after a step known to be a change."""
        if self.uniform:
            return (alpha.sum(axis=-1, keepdims=True) - alpha) / (self.k - 1)
        off = self.p.copy()
        np.fill_diagonal(off, 0.0)
        return alpha @ off


# -- the schedule: the firmware's memo and ledger over a fleet ----------------------------------
@dataclass(frozen=True)
class Rules:
    """The board's rules a schedule follows: ``memoize``, ``memo_max`` (values memoized, least
    recently used forgotten), ``draws`` fresh draws per ``window`` epochs (a draw at epoch s
    counts at epoch t while t - s < window; None: no budget)."""
    memoize: bool = True
    memo_max: int = 16
    draws: int = None
    window: int = None


def schedule(chain, reports, devices, trials, rng, rules, horizons=()):
    """Simulate ``devices`` devices over ``reports`` epochs (the value on ``chain``) under the
    board's ``rules`` (:class:`Rules`).

    Returns {"skips", "device_epochs", "by_cat_reports", "by_cat_all" (per horizon,
    cumulated; per batch of devices: (H, BATCHES[, k])), "draws" ((devices, H) fresh
    draws by each horizon), "x_at" ((trials, H) the values at the horizons), "log" (per
    trial device [(t, ident, x)] at each epoch where what it sends changes: ident the
    draw re-sent or made, -1 a skip), "changes" (per trial device the epochs its value
    changed), "draw_value" ({ident: value})}."""
    k = chain.k
    memoize, memo_max, draws, window = rules.memoize, rules.memo_max, rules.draws, rules.window
    horizons = sorted(set(horizons)) or [reports]
    hpos = {t: i for i, t in enumerate(horizons)}
    H = len(horizons)
    nb = min(BATCHES, devices)
    batch = np.arange(devices) * nb // devices
    x = chain.start(devices, rng)
    held = np.zeros((devices, k), dtype=bool)
    ident = np.full((devices, k), -1, dtype=np.int32)  # the draw memoized for each value
    lru = memoize and memo_max < k
    used = np.zeros((devices, k), dtype=np.int32) if lru else None
    count = np.zeros(devices, dtype=np.int64)
    ring = np.full((devices, draws), _NEVER, dtype=np.int64) if draws else None
    ptr = np.zeros(devices, dtype=np.int64)
    n_draws = np.zeros(devices, dtype=np.int64)
    next_id = 0
    ar = np.arange(devices)
    tr = min(trials, devices)
    prev = np.full(tr, -2, dtype=np.int64)
    log = [[] for _ in range(tr)]
    changes = [[] for _ in range(tr)]
    draw_value = {}
    skips = np.zeros(nb)
    dev_epochs = np.zeros(nb)
    rep_cat = np.zeros((nb, k))
    all_cat = np.zeros((nb, k))
    out = {"skips": np.zeros((H, nb)), "device_epochs": np.zeros((H, nb)), "by_cat_reports": np.zeros((H, nb, k)),
           "by_cat_all": np.zeros((H, nb, k)), "draws": np.zeros((devices, H), dtype=np.int64),
           "x_at": np.zeros((tr, H), dtype=np.int64)}
    per_batch = np.bincount(batch, minlength=nb).astype(float)
    for t in range(1, reports + 1):
        if t > 1:
            moved = chain.step(x, rng)
            for i in moved[moved < tr]:
                changes[i].append(t)
        if memoize:
            hit = held[ar, x]
        else:
            hit = np.zeros(devices, dtype=bool)
        need = ~hit
        if ring is not None:
            ok = (t - ring[ar, ptr]) >= window
            fresh = need & ok
        else:
            fresh = need
        skip = need & ~fresh
        f = np.flatnonzero(fresh)
        now = np.where(hit, ident[ar, x], -1)
        if f.size:
            ids = np.arange(next_id, next_id + f.size)
            next_id += f.size
            now[f] = ids
            n_draws[f] += 1
            if ring is not None:
                ring[f, ptr[f]] = t
                ptr[f] = (ptr[f] + 1) % draws
            if memoize:
                if lru:
                    full = f[count[f] >= memo_max]
                    if full.size:
                        age = np.where(held[full], used[full], np.iinfo(np.int32).max)
                        gone = np.argmin(age, axis=1)
                        held[full, gone] = False
                        count[full] -= 1
                held[f, x[f]] = True
                ident[f, x[f]] = ids
                count[f] += 1
            for i, d in zip(f[f < tr], ids[f < tr]):
                draw_value[int(d)] = int(x[i])
        if lru:
            sent = np.flatnonzero(~skip)
            used[sent, x[sent]] = t
        head = now[:tr]
        for i in np.flatnonzero(head != prev):
            log[i].append((t, int(head[i]), int(x[i])))
        prev = head
        skips += np.bincount(batch, weights=skip, minlength=nb)
        dev_epochs += per_batch
        rep = ~skip
        rep_cat += np.bincount(batch[rep] * k + x[rep], minlength=nb * k).reshape(nb, k)
        all_cat += np.bincount(batch * k + x, minlength=nb * k).reshape(nb, k)
        if t in hpos:
            h = hpos[t]
            out["skips"][h], out["device_epochs"][h] = skips, dev_epochs
            out["by_cat_reports"][h], out["by_cat_all"][h] = rep_cat, all_cat
            out["draws"][:, h] = n_draws
            out["x_at"][:, h] = x[:tr]
    out.update(log=log, changes=changes, draw_value=draw_value, horizons=horizons)
    return out


def skips_and_bias(sched):
    """Per horizon: {"skip_rate", "skip_rate_ci", "bias" (k,), "bias_ci" (k, 95% half-widths)}
    from :func:`schedule`'s counts (batch means over its batches of devices)."""
    out = []
    for h in range(len(sched["horizons"])):
        sk, de = sched["skips"][h], sched["device_epochs"][h]
        rc, ac = sched["by_cat_reports"][h], sched["by_cat_all"][h]
        rate = float(sk.sum() / de.sum())
        share_r = rc.sum(axis=0) / max(rc.sum(), 1)
        share_a = ac.sum(axis=0) / ac.sum()
        bias = share_r - share_a
        nb = sk.size
        b_rate = sk / de
        b_bias = rc / np.maximum(rc.sum(axis=1, keepdims=True), 1) - ac / ac.sum(axis=1, keepdims=True)
        se_rate = float(b_rate.std(ddof=1) / math.sqrt(nb)) if nb > 1 else 0.0
        se_bias = b_bias.std(axis=0, ddof=1) / math.sqrt(nb) if nb > 1 else np.zeros_like(bias)
        out.append({"skip_rate": rate, "skip_rate_ci": [max(0.0, rate - Z95 * se_rate), min(1.0, rate + Z95 * se_rate)],
                    "bias": [float(b) for b in bias], "bias_ci": [float(Z95 * s) for s in se_bias]})
    return out


# -- the attackers ---------------------------------------------------------------------------
def _draw(ch, x, device, seed, olh_seed):
    """One fresh report of x by the real client (olh with a device seed: that seed)."""
    if olh_seed:
        return ch.oracle.randomise(int(x), device, seed=seed)
    return ch.client(int(x), device)


def _body(ch, report):
    """What a memo keeps and a link attacker compares (OLH: y, its seed is not sent)."""
    return ch.link_key(ch.key(report))


def _stayed(a, log_stay):
    """a . exp(log_stay), normalised, in logs (a long stay underflows otherwise)."""
    with np.errstate(divide="ignore"):
        w = np.log(a) + log_stay
    w = np.exp(w - w.max())
    return w / w.sum()


def _lik(ll):
    return np.exp(ll - ll.max())


def memo_attack(ch, chain, sched, rng, device_seed=False, irr=None):
    """The memoized attacker (module docstring) on :func:`schedule`'s trial devices:
    {"hits" (H,), "tp" (H,), "changes" (H,), "fp" (H,), "quiet" (H,)}: hits at naming the
    value at each horizon, and the change-dating test's expected flags at change epochs
    (tp of changes) and at the other epochs 2..T (fp of quiet)."""
    device = ByteRng(random.Random(int(rng.integers(1 << 62))).randbytes)
    horizons = sched["horizons"]
    H = len(horizons)
    hits = np.zeros(H)
    tp, fp, nchg, quiet = np.zeros(H), np.zeros(H), np.zeros(H), np.zeros(H)
    stay_log = np.log(np.maximum(chain.stay, 1e-300))
    olh_seed = device_seed and ch.oracle.has_seed
    if irr is not None:
        same_eq = irr.p1 ** 2 + (1 - irr.p1) ** 2 / (irr.n - 1)
        diff_eq = 2 * irr.p1 * irr.q1 + (irr.n - 2) * irr.q1 ** 2
    for i, events in enumerate(sched["log"]):
        seed = None
        draws = {}  # ident -> (report, body)
        for _, d, x in events:
            if d >= 0 and d not in draws:
                r = _draw(ch=ch, x=x, device=device, seed=seed, olh_seed=olh_seed)
                if olh_seed and seed is None:
                    seed = r[:2]
                draws[d] = (r, _body(ch, r))
        chg = set(sched["changes"][i])
        # the change-dating test: flag probability at each epoch 2..T where what is sent changes
        flags = {}
        for (t0, d0, _), (t1, d1, _) in zip(events, events[1:]):
            if d0 < 0 or d1 < 0:
                p = 1.0
            else:
                equal = draws[d0][1] == draws[d1][1]
                if irr is None:
                    p = 0.0 if equal else 1.0
                else:
                    p = 1 - (same_eq if equal else diff_eq)
            flags[t1] = p
        # quiet runs of a report: with an IRR each epoch flags with 1 - same_eq
        runs = [(t0, d0, (events[j + 1][0] if j + 1 < len(events) else None)) for j, (t0, d0, _) in enumerate(events)]
        for h, T in enumerate(horizons):
            n_c = sum(1 for t in chg if t <= T)
            nchg[h] += n_c
            quiet[h] += (T - 1) - n_c
            for t, p in flags.items():
                if t <= T:
                    if t in chg:
                        tp[h] += p
                    else:
                        fp[h] += p
            if irr is not None:  # a run re-sending one draw holds no change (a memo is one value's)
                for t0, d0, t_end in runs:
                    if d0 >= 0 and t0 < T:
                        fp[h] += (1 - same_eq) * (min(T, (t_end - 1) if t_end is not None else T) - t0)
        # the attacker's filter over what was sent
        alpha = chain.pi.copy()
        t_last, d_last = None, None
        h = 0

        def ahead(a, d, steps):
            if steps <= 0:
                return a
            if d is not None and d >= 0:  # the same body re-sent: the value stayed
                return _stayed(a, steps * stay_log)
            a = chain.forward(a, steps)  # skipped epochs: no observation
            return a / a.sum()

        for t, d, _ in events:
            while h < H and horizons[h] < t:
                a = ahead(alpha, d_last, horizons[h] - t_last)
                hits[h] += int(np.argmax(a)) == sched["x_at"][i, h]
                h += 1
            if t_last is None:
                a = alpha
            else:
                a = ahead(alpha, d_last, t - 1 - t_last)
                if d >= 0 and d_last is not None and d_last >= 0:
                    if draws[d][1] == draws[d_last][1]:
                        a = _stayed(a, stay_log)  # nothing seen: the attacker reads a stay
                    else:
                        a = chain.moved(a)
                else:
                    a = chain.forward(a)
            if d >= 0 and (d_last is None or d_last < 0 or draws[d][1] != draws[d_last][1]):
                a = a * _lik(ch.loglik(draws[d][0]))  # a body that appears is a draw of the current value
            alpha = a / a.sum()
            t_last, d_last = t, d
        while h < H:
            a = ahead(alpha, d_last, horizons[h] - t_last)
            hits[h] += int(np.argmax(a)) == sched["x_at"][i, h]
            h += 1
    return {"hits": hits, "tp": tp, "changes": nchg, "fp": fp, "quiet": quiet}


def _sampler(ch, rng, device, seeds=None):
    """A function values -> (n, k) log-likelihoods of one fresh report each, and whether it
    is vectorised (else one client call a report); ``seeds``: olh's hash seed of each device
    (``seed: device``), else drawn afresh per report."""
    layered = ch.oracle.irr is not None
    # GRR: a faster sampler than the client's (its report is its value); a protocol without one
    # takes the real client below, the same law
    if ch.name == "grr" and not layered:
        o = ch.oracle

        def grr_ll(x):
            keep = rng.random(x.size) < o.p
            y = np.where(keep, x, (x + rng.integers(1, ch.k, size=x.size)) % ch.k)
            out = np.zeros((x.size, ch.k))
            out[np.arange(x.size), y] = ch.log_r
            return out
        return grr_ll, True
    if hasattr(ch, "sample_logliks") and not layered:
        if seeds is not None:
            return (lambda x: ch.sample_logliks(x, rng, seeds=seeds)), True
        return (lambda x: ch.sample_logliks(x, rng)), True
    return (lambda x: np.array([ch.loglik(ch.client(int(v), device)) for v in x])), False


def fresh_attack(ch, chain, horizons, trials, rng, fresh=None, device_seed=False):
    """The forward filter on fresh reports (module docstring): hits at naming the value at
    each horizon (H,) and the reports used (H,) (the last L before the horizon).
    ``fresh``: bool per epoch, False for a skipped epoch (a budget without memoize);
    ``device_seed``: olh's hash seed drawn once a device (``seed: device``)."""
    device = ByteRng(random.Random(int(rng.integers(1 << 62))).randbytes)
    seeds = None
    if device_seed and ch.oracle.has_seed and ch.oracle.irr is None:
        seeds = ch.oracle.sample_seeds(trials, rng)
    sample, fast = _sampler(ch, rng, device, seeds)
    k = chain.k
    cells = FRESH_CELLS // (trials * k * (1 if chain.uniform else k))
    most = max(1, cells if fast else CLIENT_REPORTS // trials)
    hits, used = [], []
    for T in horizons:
        L = min(T, most)
        x = chain.start(trials, rng)
        alpha = np.tile(chain.pi, (trials, 1))
        for s in range(T - L + 1, T + 1):
            if s > T - L + 1:
                chain.step(x, rng)
                alpha = chain.forward(alpha)
            if fresh is None or fresh[s - 1]:
                ll = sample(x)
                alpha = alpha * np.exp(ll - ll.max(axis=1, keepdims=True))
            alpha = alpha / alpha.sum(axis=1, keepdims=True)
        hits.append(int(np.count_nonzero(alpha.argmax(axis=1) == x)))
        used.append(L)
    return np.array(hits), used


def fresh_bodies_equal(ch, chain, pairs, rng, device_seed=False):
    """(P[two fresh bodies of one value are equal], P[of a value before and after a change]),
    from ``pairs`` pairs drawn by the real client (values from the chain)."""
    device = ByteRng(random.Random(int(rng.integers(1 << 62))).randbytes)
    olh_seed = device_seed and ch.oracle.has_seed
    same = diff = 0
    xs = chain.start(pairs, rng)
    ys = xs.copy()
    for j in range(pairs):  # a value after a change: one step of the chain known to move
        row = chain.moved(np.eye(1, chain.k, int(xs[j]))[0])
        ys[j] = rng.choice(chain.k, p=row / row.sum())
    for x, y in zip(xs, ys):
        seed = None
        r1 = _draw(ch=ch, x=x, device=device, seed=None, olh_seed=False)
        if olh_seed:
            seed = r1[:2]
            r1 = _draw(ch=ch, x=x, device=device, seed=seed, olh_seed=True)
        r2 = _draw(ch=ch, x=x, device=device, seed=seed, olh_seed=olh_seed)
        same += _body(ch, r1) == _body(ch, r2)
        r3 = _draw(ch=ch, x=y, device=device, seed=seed, olh_seed=olh_seed)
        diff += _body(ch, r1) == _body(ch, r3)
    return same / pairs, diff / pairs


# -- the figures ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Setup:
    """What the figures are of: the channels (``ch_report``: one report, the composed one with a
    layer; ``ch_prr``: the permanent draw), the layer (:class:`attacks.Irr` or None), one draw's
    and one report's epsilon, the budget (``draws`` per ``window`` epochs, or None; ``budget_eps``
    and ``budget_days`` for the cap), ``memoize``, ``memo_max`` and olh's ``device_seed``."""
    ch_report: object
    ch_prr: object
    layer: object
    eps_draw: float
    eps_report: float
    memoize: bool
    memo_max: int
    draws: int = None
    window: float = None
    budget_eps: float = None
    budget_days: int = None
    device_seed: bool = False


def figures(setup, chain, days, reports, modes, devices=DEVICES, trials=TRIALS, seed=0):
    """{mode: [per horizon {...}]} for ``modes`` (of "fresh", "memoized", "budgeted") at the
    horizons ``days`` (``reports`` epochs each): "success", "ci", "measured", "capped",
    "conflict", "bound", "ceiling", "ceiling_holds", "verdict", "window" (reports the fresh
    filter used, else None), "view" ("reports", or "draws": with an instantaneous layer the
    memoized attacker runs on the permanent draws), "fresh_draws" (mean over devices), "change_time_tpr",
    "change_time_fpr", "change_time_advantage", "skip_rate", "skip_rate_ci", "bias",
    "bias_ci" (module docstring)."""
    rng = np.random.default_rng(seed)
    k = chain.k
    devices = max(min(devices, SCHEDULE_CELLS // k), min(trials, 50))  # memory at a large k (stated)
    trials = min(trials, devices)
    pi = chain.pi
    no_info = ceilings.no_information(pi)
    out = {}
    pair_eq = None
    holds = chain.uniform
    for mode in modes:
        memo = mode == "memoized" or (mode == "budgeted" and setup.memoize)
        budgeted = mode == "budgeted"
        draws = setup.draws if budgeted else None
        window = setup.window if budgeted else None
        rows = []
        if memo:
            rules = Rules(True, setup.memo_max, draws, None if window is None else math.ceil(window))
            sched = schedule(chain=chain, reports=max(reports), devices=devices, trials=trials, rng=rng, rules=rules,
                             horizons=reports)
            att = memo_attack(ch=setup.ch_prr, chain=chain, sched=sched, rng=rng, device_seed=setup.device_seed,
                              irr=setup.layer)
            sb = skips_and_bias(sched)
            tr = len(sched["log"])
            for h, (d, t) in enumerate(zip(days, reports)):
                n = sched["draws"][:, h]
                # the attacker sees the reports (at most T eps_report), or with a layer the draws themselves
                cap = [t * setup.eps_report] if setup.layer is None else []
                if budgeted:
                    cap.append(setup.budget_eps * math.ceil(d / setup.budget_days))
                vals, cnt = np.unique(n, return_counts=True)
                ceiling = float(sum(c * ceilings.ldp_prior(pi, min([v * setup.eps_draw] + cap))
                                    for v, c in zip(vals, cnt)) / n.size)
                row = _row(hits=att["hits"][h], trials=tr, ceiling=ceiling, holds=holds, no_info=no_info)
                row.update(window=None, view="draws" if setup.layer is not None else "reports",
                           fresh_draws=float(n.mean()), **_dating(att["tp"][h], att["changes"][h],
                                                                              att["fp"][h], att["quiet"][h]),
                           **sb[h])
                rows.append(row)
        else:
            fresh = None
            if budgeted:
                fresh = attacks.schedule(max(reports), False, draws, window)
            ch = setup.ch_report
            hits, used = fresh_attack(ch=ch, chain=chain, horizons=reports, trials=trials, rng=rng, fresh=fresh,
                                      device_seed=setup.device_seed)
            if pair_eq is None:
                pair_eq = fresh_bodies_equal(ch=ch, chain=chain, pairs=max(200, min(PAIRS, PAIR_CELLS // k)), rng=rng,
                                             device_seed=setup.device_seed)
            for h, (d, t) in enumerate(zip(days, reports)):
                n = int(np.count_nonzero(fresh[:t])) if fresh is not None else t
                ceiling = ceilings.ldp_prior(pi, n * setup.eps_report)
                # no pattern depends on the value
                row = _row(hits=hits[h], trials=trials, ceiling=ceiling, holds=True, no_info=no_info)
                if fresh is None:
                    rr, differ = 1.0, 0.0
                else:
                    f = fresh[:t]
                    rr = float(np.mean(f[1:] & f[:-1])) if t > 1 else 0.0
                    differ = float(np.mean(f[1:] != f[:-1])) if t > 1 else 0.0
                tpr = rr * (1 - pair_eq[1]) + differ
                fpr = rr * (1 - pair_eq[0]) + differ
                skip = 0.0 if fresh is None else 1 - n / t
                row.update(window=used[h] if used[h] < t else None, view="reports", fresh_draws=float(n),
                           change_time_tpr=tpr, change_time_fpr=fpr, change_time_advantage=tpr - fpr,
                           skip_rate=skip, skip_rate_ci=[skip, skip], bias=[0.0] * k, bias_ci=[0.0] * k)
                rows.append(row)
        for row in rows:
            row.update(devices=devices, trials=trials)
        out[mode] = rows
    return out


def _row(hits, trials, ceiling, holds, no_info):
    fig = attacks.bounded_rate(hits, trials, ceiling if holds else None)
    return {"success": fig["success"], "ci": fig["ci"], "measured": fig["measured"], "capped": fig["capped"],
            "conflict": fig["conflict"], "bound": fig["bound"], "ceiling": ceiling, "ceiling_holds": holds,
            "verdict": ceilings.strength(fig["success"], no_info)}


def _dating(tp, changes, fp, quiet):
    tpr = tp / changes if changes else None
    fpr = fp / quiet if quiet else 0.0
    return {"change_time_tpr": tpr, "change_time_fpr": fpr,
            "change_time_advantage": None if tpr is None else tpr - fpr, "changes_seen": int(changes)}

