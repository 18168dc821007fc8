"""Choose MSS moduli and subset sizes for (k, epsilon[, bit budget]).

The search (a randomised, seeded version of the paper's Algorithms 2-3
with the exact MSE as the criterion, mss-protocol-notes.md section 4):

1. candidates are sets of l pairwise-coprime integers (composites allowed)
   drawn from bands [lo, hi) of the domain, plus the greedy set of the l
   largest mutually coprime integers below k;
2. each gets SS-optimal omega_j, capped when a bit budget is given so that
   ceil(log2 l) + ceil(log2 C(m_j, omega_j)) <= max_bits;
   (above ``LARGE_K`` without a bit budget: the greedy sets and one set
   from [0.95 k, k) per l, and only sets whose residue graph has no
   component above the exact limit, so planning k = 2^20 takes seconds);
3. with ``protocol="auto"``, SubsetSelection on the full domain (the
   one-block case m_0 = k) is a candidate too (``"ss"``: the only one);
4. candidates that cannot identify f are dropped: sum_j (m_j - 1) + 1 < k
   bounds rank(A) below k (coprime is not enough: [3, 4, 7] at k = 16), and
   a normal matrix singular, or singular to rounding (a non-positive
   predicted MSE), is refused; the rest are
   scored by the predicted per-item MSE of :mod:`.variance` at a prior
   (randomisation noise with the exact within-block covariances, plus the
   variance of which devices land in which block), first at a coarse
   tolerance, then the best few exactly or at 0.3%;
5. the most accurate candidate wins; the (bits, MSE) Pareto frontier of
   all scored candidates is reported.

Results are cached on disk (``MSS_CACHE_DIR`` or ~/.cache/mss-iot/plans),
keyed by the planner version and every input (one process searches a key
at a time: the others wait on a lock file beside its entry, then read it),
and in a caller's ``memo``
dict (``mss plan --no-cache`` plans each (k, epsilon, budget) once a run).
The search runs with one BLAS thread (:func:`.linalg.blas_threads`: its
LAPACK calls are on components of at most a few thousand items) and says how
far it is to a ``progress(what, done, total)`` hook (:mod:`mss_protocol.progress`).
"""
import contextlib
import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

try:
    import fcntl
except ImportError:  # not POSIX: no lock, two processes may search the same plan
    fcntl = None

from mss_protocol import privacy
from mss_protocol.config_file import ConfigError
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.linalg import ResidueComponents, SingularError, blas_threads
from mss_protocol.mss.variance import predicted_mse, ss_mse
from mss_protocol.subset_selection import optimal_omega, rank_bits

PLANNER_VERSION = 7
MAX_MODULI = 10
# Above this k an unconstrained search keeps to moduli near k: their residue
# graph has small components (exact MSE in seconds), and every wider band
# measured at k = 2^20 scored worse while costing up to 14 s a candidate.
LARGE_K = 1 << 16
# Screening: dense inverses only for small components, a coarse stochastic
# trace and few CG steps elsewhere (a set needing more is badly conditioned
# and would lose anyway), each probe solved to a relative residual of 1e-6:
# the traces' error is about the residual squared (screening scores within
# 1e-9 relative of those at 1e-10 at k = 22000, 4096, 1024), in ~40% fewer steps.
# The best REFINE candidates are then re-scored exactly (components up to
# 4096 items) or at 0.3% relative error.
SCREEN = {"exact_limit": 256, "rel_tol": 0.02, "maxiter": 150, "cg_rtol": 1e-6}
FINAL = {"exact_limit": 4096, "rel_tol": 0.003, "maxiter": 2000}
REFINE = 4


class PlanError(ValueError):
    """No configuration satisfies the request (e.g. the bit budget is too small)."""


def cache_dir():
    base = os.environ.get("MSS_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "mss-iot" / "plans"


def omegas_within(moduli, eps, max_bits):
    """SS-optimal omegas, capped to fit max_bits; None if omega = 1 does not fit."""
    jbits = (len(moduli) - 1).bit_length()
    omegas = []
    for m in moduli:
        if max_bits is None:
            omegas.append(optimal_omega(m, eps))
            continue
        budget = max_bits - jbits
        if rank_bits(m, 1) > budget:
            return None
        lo, hi = 1, max(1, m // 2)  # largest omega with rank_bits <= budget
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if rank_bits(m, mid) <= budget:
                lo = mid
            else:
                hi = mid - 1
        omegas.append(optimal_omega(m, eps, max_omega=lo))
    return omegas


def _coprime_set(rng, l, lo, hi, tries=200):
    """l pairwise-coprime integers drawn uniformly from [lo, hi) (or None)."""
    if hi - lo < l:
        return None
    chosen = []
    for _ in range(tries * l):
        c = int(rng.integers(lo, hi))
        if all(math.gcd(c, t) == 1 for t in chosen):
            chosen.append(c)
            if len(chosen) == l:
                return sorted(chosen)
    return None


def _greedy_top(k, l, below):
    chosen = []
    for c in range(below - 1, 1, -1):
        if all(math.gcd(c, t) == 1 for t in chosen):
            chosen.append(c)
            if len(chosen) == l:
                return sorted(chosen)
    return None


def candidate_sets(k, eps, max_bits, rng, per_band):
    """Distinct candidate moduli sets with product >= k."""
    top = k
    if max_bits is not None:
        # With omega = 1 a block costs ceil(log2 m) bits: moduli above 2**max_bits never fit.
        top = min(k, 2 ** max_bits + 1)
    bands = [(0.5, 1.0), (0.7, 1.0), (0.85, 1.0), (0.95, 1.0)]
    if max_bits is not None:
        bands += [(0.05, 0.15), (0.1, 0.3), (0.2, 0.5), (0.33, 0.67), (0.5, 0.8)]
    elif k > LARGE_K:
        bands, per_band = [(0.95, 1.0)], 1
    seen = set()
    for l in range(2, MAX_MODULI + 1):
        sets = [_greedy_top(k, l, top)]
        for lo_f, hi_f in bands:
            lo, hi = max(2, int(lo_f * top)), max(3, int(hi_f * top))
            sets += [_coprime_set(rng, l, lo, min(hi, top)) for _ in range(per_band)]
        for s in sets:
            if s is not None and math.prod(s) >= k and tuple(s) not in seen:
                seen.add(tuple(s))
                yield s


def _score(cfg, settings, prior):
    try:
        mse, rel = predicted_mse(cfg, 1.0, prior, **settings)
    except SingularError:
        return None
    if not (np.isfinite(mse) and mse > 0):  # a normal matrix singular to rounding (a negative "variance")
        return None
    return mse, rel


PROTOCOLS = ("mss", "auto", "ss")  # MSS proper; MSS or SubsetSelection; SubsetSelection


@blas_threads
def search(k, eps, max_bits=None, seed=0, per_band=3, prior=None, protocol="mss", progress=None):
    """Run the search; return (best config, scored candidates) at n = 1.
    ``progress(what, done, total)`` (optional) is called after each candidate scored."""
    if protocol not in PROTOCOLS:
        raise PlanError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    rng = np.random.default_rng(seed)
    scored = []
    sets = [] if protocol == "ss" else list(candidate_sets(k=k, eps=eps, max_bits=max_bits, rng=rng, per_band=per_band))
    todo = ([[k]] if protocol != "mss" else []) + sets
    what = f"{protocol} search, k={k}, epsilon {eps:g}" + (f", <= {max_bits} bits" if max_bits else "")
    for done, moduli in enumerate(todo, 1):
        if progress is not None:
            progress(f"{what}: moduli sets scored", done - 1, len(todo))
        if sum(m - 1 for m in moduli) + 1 < k:
            continue  # rank(A) <= sum(m_j - 1) + 1 < k: the residue marginals cannot identify f
        if k > LARGE_K and max_bits is None and len(moduli) > 1 \
                and ResidueComponents(k, moduli, FINAL["exact_limit"]).large:
            continue  # a large component: minutes of stochastic traces, and it never won (see LARGE_K)
        omegas = omegas_within(moduli, eps, max_bits)
        if omegas is None:
            continue
        try:
            cfg = MssConfig.build(k, eps, moduli, omegas)
        except ConfigError as exc:
            if protocol == "ss":  # its one candidate: say why (k > 2**23: no device draws it)
                raise PlanError(str(exc)) from None
            continue
        if max_bits is not None and cfg.bits_per_report["max"] > max_bits:
            continue
        s = _score(cfg, SCREEN, prior)
        if s is not None:
            scored.append([cfg, s[0], s[1]])
    if not scored:
        raise PlanError(f"no MSS configuration for k={k}, epsilon={eps}"
                        + (f" fits in {max_bits} bits per report" if max_bits else ""))
    scored.sort(key=lambda c: c[1])
    for done, cand in enumerate(scored[:REFINE]):
        if progress is not None:
            progress(f"{what}: best sets re-scored exactly", done, min(REFINE, len(scored)))
        cand[1], cand[2] = _score(cand[0], FINAL, prior)
    scored[:REFINE] = sorted(scored[:REFINE], key=lambda c: c[1])
    return scored[0], scored


def frontier(scored):
    """Pareto-optimal (bits max, MSE) points among the candidates, fewest bits first."""
    pts = sorted(scored, key=lambda c: (c[0].bits_per_report["max"], c[1]))
    out, best = [], math.inf
    for cfg, mse, _ in pts:
        if mse < best:
            best = mse
            out.append((cfg, mse))
    return out


@contextlib.contextmanager
def _planning(path):
    """Holds ``path``'s lock file (None: nothing): processes planning the same key
    (test workers, two ``mss plan`` runs) search it once, the others wait, then read it."""
    lock = None
    if path is not None and fcntl is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(path.with_suffix(".lock"), "a")
        except OSError:  # a read-only cache folder: its entries are still read, unlocked
            pass
    if lock is None:
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _read(path):
    """The cache entry at ``path``, or None."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


@dataclass(frozen=True)
class Search:
    """How :func:`plan` searches: ``seed`` of the random moduli sets; ``use_cache``: read and write
    the plans kept on disk (:func:`cache_dir`); ``per_band``: random sets per band and l (0: the
    greedy sets only, a quick search); ``progress``: the search's hook (:func:`search`); ``memo``:
    a dict the search's results are kept in and looked up first (one caller's plans, whatever
    ``use_cache``)."""

    seed: int = 0
    use_cache: bool = True
    per_band: int = 3
    progress: object = None
    memo: dict = None


def plan(k, eps, max_bits=None, n=10000, prior=None, prior_label="uniform", protocol="mss", how=Search()):
    """Plan a configuration; return the ``mss plan --json`` dict.

    ``predicted_mse`` and ``ss_variance`` are per-item MSEs on frequencies
    at ``n`` reports; their ratio does not depend on n.  ``prior`` (k,) is
    the value distribution the MSE is predicted at (default uniform; its
    ``prior_label`` is reported).  ``protocol``: "mss" (the best MSS
    configuration), "auto" (SubsetSelection, MSS's one-block case, wins
    where it is better) or "ss".  ``how``: a :class:`Search` (seed, cache,
    per_band, progress, memo).
    """
    seed, use_cache, per_band, progress, memo = how.seed, how.use_cache, how.per_band, how.progress, how.memo
    if not (2 if protocol == "ss" else 4) <= k < privacy.ONE:
        raise PlanError(f"k must be at least 4 (2 for SubsetSelection) and below 2**30, got {k}")
    if why := privacy.plan_epsilon_problem(eps):
        raise PlanError(why)
    digest = None if prior is None else hashlib.sha256(np.asarray(prior, dtype=float).tobytes()).hexdigest()
    key = json.dumps([PLANNER_VERSION, k, float(eps), max_bits, seed, digest, protocol]
                     + ([] if per_band == 3 else [per_band]), separators=(",", ":"))
    path = cache_dir() / (hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")
    cached = None if memo is None else memo.get(key)
    with _planning(path if use_cache and cached is None else None):
        if cached is None and use_cache:
            cached = _read(path)
        if cached is None:
            best, scored = search(k=k, eps=eps, max_bits=max_bits, seed=seed, per_band=per_band, prior=prior,
                                  protocol=protocol, progress=progress)
            parts = predicted_mse(best[0], 1.0, prior, parts=True, **FINAL)[0]
            cached = {
                "key": key, "config": best[0].to_dict(), "unit_mse": best[1], "mse_rel_error": best[2],
                "unit_parts": parts,
                "candidates": len(scored),
                "frontier": [{"moduli": list(c.moduli), "omegas": list(c.omegas),
                              "bits_per_report": c.bits_per_report, "unit_mse": m}
                             for c, m in frontier(scored)],
            }
            if use_cache:
                tmp = path.with_suffix(f".{os.getpid()}.tmp")  # lock-free readers never see half a file
                tmp.write_text(json.dumps(cached))
                os.replace(tmp, path)
    if memo is not None:
        memo[key] = cached
    cfg = MssConfig.from_dict(cached["config"])
    ss_var, ss_omega = ss_mse(k, eps, n)
    mse = cached["unit_mse"] / n
    return {
        "k": k, "epsilon": float(eps), "eps_effective": cfg.eps_effective,
        "moduli": list(cfg.moduli), "omegas": list(cfg.omegas),
        "bits_per_report": cfg.bits_per_report,
        "protocol": cfg.name, "prior": prior_label,
        "n": n, "predicted_mse": mse, "predicted_mse_rel_error": cached["mse_rel_error"],
        "predicted_mse_parts": {name: v / n for name, v in cached["unit_parts"].items()},
        "ss_variance": ss_var, "ss_omega": ss_omega, "ss_bits": rank_bits(k, ss_omega),
        "variance_ratio_vs_ss": mse / ss_var,
        "max_bits": max_bits, "candidates_considered": cached["candidates"],
        "frontier": [dict(f, predicted_mse=f.pop("unit_mse") / n) for f in
                     (dict(x) for x in cached["frontier"])],
        "config_id": cfg.config_id_hex, "config": cfg.to_dict(),
    }
