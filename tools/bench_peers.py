#!/usr/bin/env python3
"""Optional: our GRR, SS and OLH beside the same protocols in multi-freq-ldpy
and pure-ldp, on the same data (MSE per item and seconds).

The peers are not dependencies of this project; install them in a separate
environment with ``pip install "xxhash<4" pure-ldp multi-freq-ldpy
scikit-learn statsmodels`` (xxhash 4 breaks their hashing; pure-ldp imports
scikit-learn and statsmodels without declaring them), then run with this
repository on the path:

    PYTHONPATH=firmware/lib:protocol:aggregator python tools/bench_peers.py [--n 10000]

multi-freq-ldpy always clips and renormalises (its "MI" aggregators), so our
rows show both our raw (unbiased) and our clipped MSE; pure-ldp's are raw.
Both libraries are given 0-based data (pure-ldp with an identity index
mapper: its default maps item 0 to the last bin).
"""
import argparse
import sys
import time
import warnings

import numpy as np

try:
    from multi_freq_ldpy.pure_frequency_oracles import GRR as MF_GRR
    from multi_freq_ldpy.pure_frequency_oracles import LH as MF_LH
    from multi_freq_ldpy.pure_frequency_oracles import SS as MF_SS
    from pure_ldp.frequency_oracles import DEClient, DEServer, LHClient, LHServer
except ImportError as exc:
    sys.exit(f"bench_peers: the peer libraries are not installed ({exc}); see this script's docstring")

from mss_protocol import postprocess, registry

warnings.filterwarnings("ignore", message=".*small amounts of data.*")  # pure-ldp, at small n


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--k", type=int, default=1024)
    args = ap.parse_args()
    n, k = args.n, args.k
    probs = np.arange(1, k + 1, dtype=float) ** -1.1
    values = np.random.default_rng(12345).choice(k, size=n, p=probs / probs.sum())
    truth = np.bincount(values, minlength=k) / n
    mse = lambda est: float(np.mean((np.asarray(est) - truth) ** 2))  # noqa: E731
    print(f"k={k}, n={n}, Zipf(1.1); seconds are client + server for all n users, one core\n")
    print("| eps | protocol | implementation | MSE raw | MSE clip+renorm | seconds |")
    print("|---|---|---|---|---|---|")
    for eps in (1.0, 4.0):
        for ours, label in (("grr", "GRR"), ("ss", "SS"), ("olh", "OLH")):
            proto = registry.make(ours, k, eps)
            est, secs = timed(lambda: proto.decode(proto.sample_counts(values, np.random.default_rng(1)), n, "none").raw)
            print(f"| {eps:g} | {label} | mss-iot (vectorised) | {mse(est):.3g} | "
                  f"{mse(postprocess.clip(est)):.3g} | {secs:.2f} |")
        peers = [
            ("GRR", "multi-freq-ldpy", lambda: MF_GRR.GRR_Aggregator_MI(
                [MF_GRR.GRR_Client(int(v), k, eps) for v in values], k, eps), False),
            ("SS", "multi-freq-ldpy", lambda: MF_SS.SS_Aggregator_MI(
                [MF_SS.SS_Client(int(v), k, eps) for v in values], k, eps), False),
            ("OLH", "multi-freq-ldpy", lambda: MF_LH.LH_Aggregator_MI(
                [MF_LH.LH_Client(int(v), k, eps) for v in values], k, eps), False),
        ]
        for label, client_cls, server_cls, extra in (("GRR", DEClient, DEServer, {}),
                                                     ("OLH", LHClient, LHServer, {"use_olh": True})):
            def run(client_cls=client_cls, server_cls=server_cls, extra=extra):
                client = client_cls(epsilon=eps, d=k, index_mapper=lambda x: x, **extra)
                server = server_cls(epsilon=eps, d=k, index_mapper=lambda x: x, **extra)
                for v in values:
                    server.aggregate(client.privatise(int(v)))
                return np.array(server.estimate_all(range(k))) / n
            peers.append((label, "pure-ldp", run, True))
        for label, lib, fn, raw in peers:
            est, secs = timed(fn)
            cells = (f"{mse(est):.3g} | {mse(postprocess.clip(est)):.3g}" if raw
                     else f"– | {mse(est):.3g}")
            print(f"| {eps:g} | {label} | {lib} | {cells} | {secs:.2f} |")


if __name__ == "__main__":
    main()
