"""One interface over every frequency oracle, for ``mss bench``.

``make(name, k, eps)`` returns an object with ``name``, ``bits``
({"max", "mean"}), ``client(x, rng)`` (the real integer randomiser and
encoder, for timing), ``sample(values, rng)`` (vectorised sufficient
statistic) and ``decode(stats, n, post)`` -> Estimate-like (estimate, raw).
"""
import time
from types import SimpleNamespace

import numpy as np

from mss_aggregator import postprocess
from mss_aggregator.counts import Counts
from mss_aggregator.decoder import Decoder
from mss_device.encoder import Encoder
from mss_device.randomiser import privatise
from mss_protocol.baselines import GRR, OLH, HadamardResponse, UnaryEncoding
from mss_protocol.config import MssConfig
from mss_protocol.pgr import PGR
from mss_protocol.planner import plan
from mss_protocol.sampler import sample_counts

AVAILABLE = ("mss", "ss", "pgr", "grr", "rappor", "sue", "olh", "hr")


class ResidueProtocol:
    """MSS, or SubsetSelection as its one-block case."""

    def __init__(self, name, cfg):
        self.name, self.cfg = name, cfg
        self.bits = cfg.bits_per_report
        self.decoder = Decoder(cfg)
        self.encoder = Encoder(cfg)
        self.mark = bytearray((max(cfg.moduli) + 7) // 8)

    def client(self, x, rng):
        return self.encoder.encode(privatise(self.cfg, x, rng, self.mark), self.mark, 0, 0)

    def sample(self, values, rng):
        return Counts(self.cfg, *sample_counts(self.cfg, values, rng))

    def decode(self, stats, n, post):
        return self.decoder.decode(stats, post=post)


class SupportProtocol:
    """PGR, GRR, unary encodings, OLH and HR (support counts, closed-form decoder)."""

    def __init__(self, name, oracle):
        self.name, self.oracle = name, oracle
        self.bits = {"max": oracle.bits, "mean": float(oracle.bits)}

    def client(self, x, rng):
        return self.oracle.randomise(x, rng)

    def sample(self, values, rng):
        return self.oracle.sample_counts(values, rng)

    def decode(self, stats, n, post):
        t0 = time.perf_counter()
        raw, stderr = self.oracle.estimate(stats, n)
        est = postprocess.apply(raw, post)
        return SimpleNamespace(estimate=est, raw=raw, stderr=stderr,
                               seconds=time.perf_counter() - t0)


def make(name, k, eps):
    if name == "mss":
        return ResidueProtocol("mss", MssConfig.from_dict(plan(k, eps)["config"]))
    if name == "ss":
        return ResidueProtocol("ss", MssConfig.subset_selection(k, eps))
    if name == "pgr":
        return SupportProtocol("pgr", PGR(k, eps))
    if name == "grr":
        return SupportProtocol("grr", GRR(k, eps))
    if name == "rappor":  # basic one-time RAPPOR in its optimised form (OUE), as in the PGR code
        return SupportProtocol("rappor", UnaryEncoding(k, eps, "oue"))
    if name == "sue":
        return SupportProtocol("sue", UnaryEncoding(k, eps, "sue"))
    if name == "olh":
        return SupportProtocol("olh", OLH(k, eps))
    if name == "hr":
        return SupportProtocol("hr", HadamardResponse(k, eps))
    raise ValueError(f"unknown protocol {name!r}; use {', '.join(AVAILABLE)}")


def client_seconds(protocol, k, reports, rng, budget=1.0):
    """Median seconds per report of the real integer client (CPython), over
    ``reports`` reports or as many as fit in ``budget`` seconds (at least 3)."""
    times = []
    start = time.perf_counter()
    for i in range(reports):
        t0 = time.perf_counter()
        protocol.client(i % k, rng)
        times.append(time.perf_counter() - t0)
        if i >= 2 and t0 - start > budget:
            break
    return float(np.median(times))
