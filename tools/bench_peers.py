#!/usr/bin/env python3
"""Our protocols beside multi-freq-ldpy and pure-ldp on the same populations: the peer table.

Every protocol both libraries have is run next to ours: GRR (multi-freq-ldpy GRR,
pure-ldp DE), OUE (multi-freq-ldpy UE, pure-ldp UE with use_oue), SS
(multi-freq-ldpy), OLH (multi-freq-ldpy LH, pure-ldp LH with use_olh: its default
is binary local hashing) and Hadamard response (pure-ldp). For each (k, eps) the
trials share their populations (trial t draws the same n Zipf(1.1) values for
every implementation) and report, per implementation:

* client: the mean seconds of one report of the client, timed call by call
  on the first ``--client-reports`` values of trial 0, every implementation's
  clients of the (k, eps) interleaved value by value (ours: ``randomise(x,
  host_rng())``, the exact integer client reading ``os.urandom`` 64 KB at a time: the
  mean, not the median, so that the calls that read them carry their cost; numba's
  compilation is done by one warm-up call first);
* server: seconds from the reports (peers) or counts (ours) to the n
  estimates, median over trials; ours take the counts from ``sample_counts``,
  the clients' exact law, vectorised;
* MSE per item against the population's histogram, raw (unbiased) and clipped
  at 0 then renormalised (multi-freq-ldpy's aggregators only return that), each
  the mean over trials with a 95% Student-t interval;
* the ratio of our MSE to each peer's, raw to raw and clipped to clipped.

The peers are not dependencies of this project; install them in a separate
environment (xxhash 4 breaks their hashing; pure-ldp imports scikit-learn and
statsmodels without declaring them) and run with this repository on the path:

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install "xxhash<4" pure-ldp \\
        multi-freq-ldpy scikit-learn statsmodels numpy scipy
    PYTHONPATH=firmware/lib:protocol:aggregator /tmp/peers/bin/python tools/bench_peers.py \\
        --json docs/bench-peers.json

Both libraries get 0-based data (pure-ldp with an identity index mapper: its
default maps item 0 to the last bin).
"""
import argparse
import json
import random
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import stats

try:
    from multi_freq_ldpy.pure_frequency_oracles import GRR as MF_GRR
    from multi_freq_ldpy.pure_frequency_oracles import LH as MF_LH
    from multi_freq_ldpy.pure_frequency_oracles import SS as MF_SS
    from multi_freq_ldpy.pure_frequency_oracles import UE as MF_UE
    from pure_ldp.frequency_oracles import (DEClient, DEServer, HadamardResponseClient, HadamardResponseServer,
                                            LHClient, LHServer, UEClient, UEServer)
except ImportError as exc:
    sys.exit(f"bench_peers: the peer libraries are not installed ({exc}); see this script's docstring")

from docs_tables import render_peers  # noqa: E402  (tools/: the table docs/benchmarks.md shows)
from mss_protocol.host_client import host_rng
from mss_protocol import postprocess, registry

warnings.filterwarnings("ignore", message=".*small amounts of data.*")  # pure-ldp, at small n
OURS = {"GRR": "grr", "OUE": "rappor", "SS": "ss", "OLH": "olh", "HR": "hr"}


@dataclass
class Peer:
    """One library's protocol: ``client(v)`` -> report, ``server(reports)`` -> (k,)
    frequencies; ``raw``: unbiased (else clipped and renormalised by the library)."""
    protocol: str
    library: str
    client: Callable
    server: Callable
    raw: bool


def identity(x):
    return x


def pure_ldp(protocol, client_cls, server_cls, k, eps, **extra):
    """A pure-ldp oracle: one client and one server, reset for each population
    (aggregate each report, then estimate_all / n)."""
    server = server_cls(epsilon=eps, d=k, index_mapper=identity, **extra)
    if client_cls is HadamardResponseClient:  # its client needs the server's permutation (eps > 1)
        client = client_cls(eps, k, server.get_hash_funcs(), index_mapper=identity)
    else:
        client = client_cls(epsilon=eps, d=k, index_mapper=identity, **extra)

    def estimate(reports):
        server.reset()
        for r in reports:
            server.aggregate(r)
        return np.array(server.estimate_all(range(k))) / len(reports)
    return Peer(protocol, "pure-ldp", client.privatise, estimate, True)


def peers(k, eps):
    return [
        Peer("GRR", "multi-freq-ldpy", lambda v: MF_GRR.GRR_Client(v, k, eps),
             lambda r: MF_GRR.GRR_Aggregator_MI(r, k, eps), False),
        pure_ldp("GRR", DEClient, DEServer, k, eps),
        Peer("OUE", "multi-freq-ldpy", lambda v: MF_UE.UE_Client(v, k, eps, True),
             lambda r: MF_UE.UE_Aggregator_MI(np.array(r), eps, True), False),
        pure_ldp("OUE", UEClient, UEServer, k, eps, use_oue=True),
        Peer("SS", "multi-freq-ldpy", lambda v: MF_SS.SS_Client(v, k, eps),
             lambda r: MF_SS.SS_Aggregator_MI(r, k, eps), False),
        Peer("OLH", "multi-freq-ldpy", lambda v: MF_LH.LH_Client(v, k, eps, True),
             lambda r: MF_LH.LH_Aggregator_MI(r, k, eps, True), False),
        pure_ldp("OLH", LHClient, LHServer, k, eps, use_olh=True),
        pure_ldp("HR", HadamardResponseClient, HadamardResponseServer, k, eps),
    ]


def client_seconds(clients, values):
    """[mean seconds of one ``client(v)`` call over ``values``] for each of ``clients``, timed
    interleaved (each value through every client in turn, after one warm-up call each), so that
    the machine's drift weighs on all of them alike and their ratios hold within the run."""
    for client in clients:
        client(int(values[0]))
    times = [[] for _ in clients]
    for v in values.tolist():
        for client, out in zip(clients, times):
            t = time.perf_counter()
            client(v)
            out.append(time.perf_counter() - t)
    return [float(np.mean(t)) for t in times]


def summary(mses):
    """(mean, 95% Student-t half-width) of per-trial MSEs."""
    mses = np.asarray(mses)
    if len(mses) < 2:
        return float(mses.mean()), float("nan")
    half = stats.t.ppf(0.975, len(mses) - 1) * mses.std(ddof=1) / np.sqrt(len(mses))
    return float(mses.mean()), float(half)


def row(protocol, implementation, k, eps, n, server_s, raw, clip):
    return {"k": k, "epsilon": eps, "n": n, "protocol": protocol, "implementation": implementation,
            "client_us_per_report": None, "server_seconds": server_s,
            "mse_raw": raw[0] if raw else None, "mse_raw_ci95": raw[1] if raw else None,
            "mse_clip": clip[0], "mse_clip_ci95": clip[1]}


def run_cell(k, eps, populations, client_reports):
    """Rows of one (k, eps): ours then each peer, on the same populations."""
    n = len(populations[0])
    truths = [np.bincount(values, minlength=k) / n for values in populations]
    mse = lambda est, truth: float(np.mean((np.asarray(est) - truth) ** 2))  # noqa: E731
    sample = populations[0][:client_reports]
    rows, clients = [], {}
    for label, name in OURS.items():
        proto = registry.make(name, k, eps)
        rng, device = np.random.default_rng([k, int(eps * 1000)]), host_rng()
        raws, clips, secs = [], [], []
        for values, truth in zip(populations, truths):
            counts = proto.sample_counts(values, rng)
            t = time.perf_counter()
            est = proto.decode(counts, n, "none").raw
            secs.append(time.perf_counter() - t)
            raws.append(mse(est, truth))
            clips.append(mse(postprocess.clip(est), truth))
        clients[label, "mss-iot"] = lambda v, proto=proto, device=device: proto.randomise(v, device)
        rows.append(row(label, "mss-iot", k, eps, n, float(np.median(secs)), summary(raws), summary(clips)))
    for peer in peers(k, eps):
        raws, clips, secs = [], [], []
        for t_i, (values, truth) in enumerate(zip(populations, truths)):
            random.seed(t_i)
            np.random.seed(t_i)
            reports = [peer.client(v) for v in values.tolist()]
            t = time.perf_counter()
            est = peer.server(reports)
            secs.append(time.perf_counter() - t)
            clips.append(mse(postprocess.clip(est) if peer.raw else est, truth))
            if peer.raw:
                raws.append(mse(est, truth))
        clients[peer.protocol, peer.library] = peer.client
        rows.append(row(peer.protocol, peer.library, k, eps, n, float(np.median(secs)),
                        summary(raws) if peer.raw else None, summary(clips)))
    for (protocol, library), seconds in zip(clients, client_seconds(list(clients.values()), sample)):
        next(r for r in rows if (r["protocol"], r["implementation"]) == (protocol, library))[
            "client_us_per_report"] = seconds * 1e6
    ours = {r["protocol"]: r for r in rows if r["implementation"] == "mss-iot"}
    for r in rows:
        o = ours[r["protocol"]]
        r["ours_over_peer_raw"] = o["mse_raw"] / r["mse_raw"] if r["mse_raw"] and r is not o else None
        r["ours_over_peer_clip"] = o["mse_clip"] / r["mse_clip"] if r is not o else None
        r["ours_over_peer_client"] = (o["client_us_per_report"] / r["client_us_per_report"]
                                      if r is not o else None)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000, help="reports per population (default 10000)")
    ap.add_argument("--k", type=int, nargs="+", default=[16, 1024])
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 4.0])
    ap.add_argument("--trials", type=int, default=3, help="populations per (k, eps) (default 3)")
    ap.add_argument("--client-reports", type=int, default=2000,
                    help="reports timed one by one for the client means (default 2000)")
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--json", metavar="PATH", help="also write the rows and the setup as JSON")
    args = ap.parse_args()
    rows = []
    for k in args.k:
        probs = np.arange(1, k + 1, dtype=float) ** -1.1
        populations = [np.random.default_rng([args.seed, k, t]).choice(k, size=args.n, p=probs / probs.sum())
                       for t in range(args.trials)]
        for eps in args.eps:
            rows += run_cell(k, eps, populations, args.client_reports)
            print(f"k={k} eps={eps:g} done", file=sys.stderr)
    print(f"Zipf(1.1), n = {args.n}, {args.trials} trials (the same populations for every implementation); "
          f"client: mean of {args.client_reports} reports timed one by one, the clients interleaved, one core\n")
    print(render_peers({"rows": rows}))
    if args.json:
        from importlib.metadata import version
        setup = {"n": args.n, "k": args.k, "epsilons": args.eps, "trials": args.trials, "dist": "zipf1.1",
                 "seed": args.seed, "client_reports": args.client_reports,
                 "versions": {p: version(p) for p in ("multi-freq-ldpy", "pure-ldp", "numpy", "xxhash")}}
        with open(args.json, "w") as f:
            json.dump({"setup": setup, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
