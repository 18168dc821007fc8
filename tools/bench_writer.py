#!/usr/bin/env python3
"""The aggregator writer's classification throughput (no broker): a batch of 500 MQTT
messages (the Writer's BATCH) classified one by one (``Ingest.from_mqtt``: ``codec.decode``
per frame) and as the Writer does it (``receive_mqtt`` then one ``decode_batch``:
``codec.decode_many``), medians of 5 batches, with SQLite's ``write_batch`` of the same
items; both paths' results are checked equal.

Usage: python tools/bench_writer.py
"""
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.store import open_store
from mss_protocol.choose import choose
from mss_protocol.codec import codec
from mss_protocol.configs import load_dict
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import plan
from mss_protocol.mss.sampler import sample_reports
from mss_protocol.mss.wire import WireCodec


def frames_for(cfg, n, rng):
    """``n`` valid full frames of ``cfg`` (epoch 5), random outputs."""
    c = codec(cfg)
    if isinstance(c, WireCodec):
        j, subsets = sample_reports(cfg, rng.integers(0, cfg.k, n), rng)
        return [c.encode(int(j[i]), subsets[i], epoch=5, seq=i) for i in range(n)]
    if c.unary:
        return [c.encode(int.from_bytes(rng.bytes((cfg.k + 7) // 8), "big") >> (-cfg.k % 8), epoch=5, seq=i)
                for i in range(n)]
    return [c.encode(int(rng.integers(c.n)), epoch=5, seq=i) for i in range(n)]


def run(label, cfg, size=500, reps=5):
    """Print ``cfg``'s rates (reports/s) of both paths, medians of ``reps`` batches of ``size``."""
    rng = np.random.default_rng(0)
    ingest = Ingest(cfg, "b", 3600, clock=lambda: 10 * 3600 + 5)  # epoch 10: frames of epoch 5 are accepted
    messages = [(f"mss/v1/b/d{i}/report".encode(), f) for i, f in enumerate(frames_for(cfg, size * reps, rng))]
    one_s, batch_s, store_s = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(reps):
            chunk = messages[r * size:(r + 1) * size]
            t0 = time.perf_counter()
            one = [ingest.from_mqtt(t, p) for t, p in chunk]
            t1 = time.perf_counter()
            batch = ingest.decode_batch([ingest.receive_mqtt(t, p) for t, p in chunk])
            t2 = time.perf_counter()
            assert batch == one and all("report" in x for x in one)
            store = open_store(Path(tmp) / f"s{r}.sqlite", cfg)
            t3 = time.perf_counter()
            store.write_batch(batch)
            store_s.append(time.perf_counter() - t3)
            store.close()
            one_s.append(t1 - t0)
            batch_s.append(t2 - t1)
    one, batch, write = (statistics.median(x) for x in (one_s, batch_s, store_s))
    print(f"{label}: classify one by one {size / one:,.0f}/s, batch {size / batch:,.0f}/s ({one / batch:.1f}x); "
          f"store.write_batch {size / write:,.0f}/s; writer {size / (one + write):,.0f}/s -> "
          f"{size / (batch + write):,.0f}/s", flush=True)


def main():
    run("MSS k=1024 eps=4 (bench_collect's)", MssConfig.from_dict(plan(1024, 4.0)["config"]))
    for name, k, eps in [("ss", 1024, 1.0), ("sue", 1024, 1.0), ("olh", 1024, 2.0), ("grr", 16, 2.0)]:
        run(f"{name} k={k} eps={eps}", load_dict(choose(k, eps, name)["config"]))


if __name__ == "__main__":
    main()
