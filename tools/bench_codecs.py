#!/usr/bin/env python3
"""Host decoding speed and memory of every protocol's wire codec.

For each protocol at k in {16, 1024, 22000} x epsilon in {1, 4} (MSS and
SS as planned, the others fixed by (k, epsilon)), and for the planner's
``auto`` choices (unbudgeted; 11-byte compact frame), on one core:

* decode: ``codec.decode`` of a batch of valid reports, what the aggregator
  does for every message it receives (target: >= 20,000 reports/s for every
  ``auto`` configuration);
* tally: adding the decoded reports to the counts, done when estimating
  (OLH's is O(k) per report: every item is checked against each report's hash);
* mss plan's per-report parsing model (``choose.ingest_us``, in ``decode_s``)
  against the measured time;
* memory the codec holds once it has decoded the batch (tracemalloc; MSS's
  unranking tables).

Rates are medians of 3 runs of BATCH reports (fewer, at least 20, where
that would take over 2 s).

    python tools/bench_codecs.py [--json out.json]
"""
import argparse
import json
import math
import platform
import random
import statistics
import time
import tracemalloc

from mss_device.frame import HEADER, start
from mss_device.params import Params
from mss_device.rng import ByteRng
from mss_protocol.choose import CHOICES, choose, ingest_us
from mss_protocol.mss.counts import Counts
from mss_protocol.oracle_config import OracleConfig, codec, load_dict

KS = (16, 1024, 22000)
EPS = (1.0, 4.0)
BATCH = 3000
TARGET = 20000


def reports(cfg, n, seed):
    """n valid reports of ``cfg``.  MSS bodies are built from a uniform rank
    (the device's encoder would take minutes at k = 22000); the others come
    from the device client."""
    rnd = random.Random(seed)
    p = Params(cfg.to_dict())
    out = []
    if p.protocol in ("mss", "ss"):
        for i in range(n):
            j = rnd.randrange(len(p.moduli))
            nbits = p.jbits + p.rank_bits[j]
            buf = start(p, nbits, 1, i & 0xFFFF)
            code = (j << p.rank_bits[j]) | rnd.randrange(math.comb(p.moduli[j], p.omegas[j]))
            buf[HEADER[p.frame]:] = (code << ((-nbits) % 8)).to_bytes((nbits + 7) // 8, "big")
            out.append(bytes(buf))
        return out
    client = p.client()
    client.device_id = "bench"
    rng = ByteRng(rnd.randbytes)
    return [client.report(i % cfg.k, rng, 1, i & 0xFFFF) for i in range(n)]


def measure(cfg):
    """(decode reports/s, tally reports/s, bytes the codec holds); a batch of
    BATCH reports, or fewer (at least 20) where BATCH would take over 2 s."""
    probe, c = reports(cfg, 20, 1), codec(cfg)
    t0 = time.perf_counter()
    for d in probe:
        c.decode(d, "bench", 1)
    per_report = (time.perf_counter() - t0) / len(probe)
    data = reports(cfg, max(20, min(BATCH, int(2.0 / per_report))), 1)
    tracemalloc.start()
    c = codec(cfg)
    decoded = [c.decode(d, "bench", 1) for d in data]
    del decoded
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    decode, tally = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        decoded = [c.decode(d, "bench", 1) for d in data]
        t1 = time.perf_counter()
        Counts(cfg).add(decoded)
        decode.append(len(data) / (t1 - t0))
        tally.append(len(data) / (time.perf_counter() - t1))
    return statistics.median(decode), statistics.median(tally), held


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json")
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, one core; "
          f"{BATCH} reports per run, median of 3")
    rows = []
    for k in KS:
        for eps in EPS:
            picks = {"auto": choose(k, eps, "auto")["protocol"],
                     "auto 11 B compact": choose(k, eps, "auto", max_bytes=11, frame="compact")["protocol"]}
            for name in CHOICES[1:]:
                try:
                    cfg = (load_dict(choose(k, eps, name)["config"]) if name in ("mss", "ss")
                           else OracleConfig(name, k, eps))
                except ValueError as exc:
                    print(f"k={k:5d} eps={eps}: {name:6s} -- {exc}")
                    continue
                rate, tally, held = measure(cfg)
                auto = [label for label, p in picks.items() if p == name]
                ok = rate >= TARGET
                model = ingest_us(cfg)  # mss plan's decode_s model, checked here
                rows.append({"k": k, "epsilon": eps, "protocol": name, "decode_reports_per_s": rate,
                             "model_us": model, "measured_us": 1e6 / rate,
                             "tally_reports_per_s": tally, "codec_bytes": held, "auto": auto,
                             "target_met": ok if auto else None})
                print(f"k={k:5d} eps={eps}: {name:6s} decode {rate:9,.0f}/s, tally {tally:11,.0f}/s, "
                      f"codec holds {held / 1e6:7.2f} MB, mss plan's model {model / (1e6 / rate):5.2f}x measured"
                      + (f"  [{', '.join(auto)}: {'OK' if ok else 'MISSED'} >= {TARGET:,}/s]" if auto else ""))
    autos = [r for r in rows if r["auto"]]
    print(f"target: {sum(r['target_met'] for r in autos)} of {len(autos)} auto configurations >= {TARGET:,} reports/s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
