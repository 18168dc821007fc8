#!/usr/bin/env python3
"""Decode speed of the baselines (issue: baselines), medians on this machine.

* PGR at k = 22000 per epsilon: decode seconds next to its O(n + K q t)
  bound, expressed as the time of one vectorised pass over n + K q t
  float64 values (a multiply-add each) -- the target is within 10x of it;
* OLH at n = 10^5, k = 1024: decode (support tally + estimate) < 3 s;
* MSS at k = 22000 for reference (< 0.05 s).
"""
import numpy as np
from bench_core import timed  # tools/ is the script's folder

from mss_protocol import registry
from mss_protocol.olh import OLH
from mss_protocol.pgr import PGR


def main():
    rng = np.random.default_rng(0)
    n = 10000
    values = rng.integers(0, 22000, size=n)
    print("PGR, k = 22000, n = 10,000:")
    for eps in (0.5, 1.0, 2.0, 3.0, 4.0, 5.0):
        o = PGR(22000, eps)
        hist = o.sample_counts(values, rng)
        dec = timed(lambda: o.estimate(hist, n), 5)
        units = n + o.K * o.field * o.t
        a = np.ones(units)
        unit = timed(lambda: a * 1.0001 + 1.0, 5)
        print(f"  eps={eps}: q={o.field} t={o.t} K={o.K:,}: decode {dec:.3f} s; n + Kqt = {units:,} "
              f"-> one pass {unit:.4f} s; ratio {dec / unit:.1f} "
              f"({'OK' if dec / unit <= 10 else 'MISSED'} <= 10)")
        mss = registry.make("mss", 22000, eps)
        counts = mss.sample_counts(values, rng)
        print(f"           MSS decode {timed(lambda: mss.decode(counts, n, 'none'), 5):.4f} s")
    o = OLH(1024, 4.0)
    vals = rng.integers(0, 1024, size=100_000)
    reports = o.sample_counts(vals, rng)
    dec = timed(lambda: o.estimate(reports, vals.size), 3)
    print(f"OLH, k = 1024, n = 100,000, eps = 4: decode {dec:.2f} s ({'OK' if dec < 3 else 'MISSED'} < 3 s; "
          "the Python peers take 80-120 s)")


if __name__ == "__main__":
    main()
