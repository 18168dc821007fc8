"""``mss bench``: every protocol on the same data, same trials, one table.

For each (k, epsilon, distribution) the trials share their populations
across protocols (trial t draws the same n values for all), so MSE ratios
compare like with like.  MSE is per item on frequencies against the
empirical frequencies of the population, after the chosen post-processing.
"""
import time
from dataclasses import dataclass

import numpy as np

from mss_aggregator.distributions import draw, parse
from mss_protocol.config_file import make_checked
from mss_protocol.host_client import host_rng


def client_seconds(protocol, k, reports, rng, budget=1.0):
    """Median seconds per report of the real integer client (CPython), over
    ``reports`` reports or as many as fit in ``budget`` seconds (at least 3)."""
    times = []
    start = time.perf_counter()
    for i in range(reports):
        t0 = time.perf_counter()
        protocol.randomise(i % k, rng)
        times.append(time.perf_counter() - t0)
        if i >= 2 and t0 - start > budget:
            break
    return float(np.median(times))


@dataclass(frozen=True)
class Grid:
    """What :func:`run_bench` measures: every protocol of ``names`` at every k of ``ks``, epsilon of
    ``epsilons`` and value distribution of ``dists`` (:func:`mss_aggregator.distributions.parse` specs)."""
    ks: tuple
    epsilons: tuple
    dists: tuple
    names: tuple


def run_bench(grid, n, trials, post="none", seed=0, client_reports=20, progress=None):
    """The rows of ``mss bench``: one a protocol and point of ``grid`` (:class:`Grid`), over ``trials``
    populations of ``n`` values; ``progress()`` after each trial."""
    ks, epsilons, dists, names = grid.ks, grid.epsilons, grid.dists, grid.names
    rows = []
    for k in ks:
        for dist in dists:
            probs = parse(dist, k)
            populations = [np.concatenate(list(draw(probs, n, np.random.default_rng([seed, k, t]))))
                           for t in range(trials)]
            for eps in epsilons:
                block = []
                for name in names:
                    proto = make_checked(name, k, eps)
                    rng = np.random.default_rng([seed, k, int(eps * 1000), len(block)])
                    mses, secs = [], []
                    for values in populations:
                        truth = np.bincount(values, minlength=k) / n
                        est = proto.decode(proto.sample_counts(values, rng), n, post)
                        mses.append(float(np.mean((est.estimate - truth) ** 2)))
                        secs.append(est.seconds)
                        if progress:
                            progress()
                    block.append({
                        "protocol": name, "k": k, "epsilon": eps, "dist": dist, "n": n,
                        "trials": trials, "mse": float(np.mean(mses)),
                        "mse_std": float(np.std(mses, ddof=1)) if trials > 1 else 0.0,
                        "mse_ratio_vs_ss": None, "bits_max": proto.bits["max"],
                        "bits_mean": proto.bits["mean"],
                        "client_seconds_per_report": client_seconds(
                            proto, k, client_reports, host_rng()),
                        "decode_seconds": float(np.median(secs)), "post": post,
                    })
                ss = next((r["mse"] for r in block if r["protocol"] == "ss"), None)
                for r in block:
                    r["mse_ratio_vs_ss"] = r["mse"] / ss if ss else None
                rows += block
    return rows
