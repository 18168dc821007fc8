#!/usr/bin/env python3
"""Device cost per report on real Cortex-M and RISC-V instruction sets (QEMU instruction counts).

MicroPython's ports/qemu is built for MICROBIT (nRF51, Cortex-M0, armv6m,
with the Thumb native emitter on as on the RP2040's rp2 port), MPS2_AN385
(Cortex-M3, armv7m) and VIRT_RV32 (RV32IMC, the ESP32-C3's instruction set,
with the port's RV32 native emitter), with firmware/lib/mss_device and
tools/mcu_driver.py frozen in (tools/mcu: cached under build/mcu), and run
under ``qemu-system-arm`` / ``qemu-system-riscv32 -icount shift=0``, where
ticks_us() = instructions / 1000 (recipe and its checks: docs/device-cost.md;
every session also times a 2-instruction asm loop to confirm it).  Every report is drawn
again on the unix port from the same byte stream: the digests must match
(bit-identity), else the tool exits non-zero.

Grid: k in {16, 64, 1024, 22000} x eps in {1, 4} x every device protocol as
``mss plan`` configures it (``choose(k, eps, protocol=name)``; "auto" marks
the one ``choose(k, eps)`` returns), on every board.  Targets (M0): the
auto choice for k in {2 .. 4096} x eps in {0.5 .. 5}, also under the
LoRaWAN US915 DR0 budget (11 bytes, compact frame), < 20 ms on an RP2040;
MSS k = 1024, eps = 1 < 50 ms; MSS k = 22000, eps = 4 < 2 s; MSS k = 22000,
eps = 1 measured; heap < 4 KB per report for every protocol at k <= 1024.

Instructions to time (the doc's reasoning): each board of
``mss_protocol.device_cost.CORES`` runs one count at its cycles per
instruction and clock (RP2040: M0 x 1.55 / 125 MHz; RP2350: M3 x 1.3 /
150 MHz; ESP32-C3: RV32 x 1.3 / 160 MHz); 240 MHz cores (ESP32-S3 class):
~1.3 CPI on the M3's count, a rough proxy (Xtensa was not emulated: an
estimate only): CPI_240 = 1.3.

Usage: python tools/bench_mcu.py [--json PATH] [--quick] [--only PROTO ...]
       [--k K ...] [--eps EPS ...] [--board m0|m3|rv32 ...] [--no-targets]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mcu  # noqa: E402  (tools/mcu)
from mss_aggregator.devices.runtime import micropython_path  # noqa: E402
from mss_protocol import device_cost, registry  # noqa: E402
from mss_protocol.choose import CHOICES, Limits, choose  # noqa: E402
from mss_protocol.mss.planner import PlanError  # noqa: E402

CPI_240, HZ_240 = 1.3, 240e6
KS, EPSS = (16, 64, 1024, 22000), (1.0, 4.0)
TARGET_KS, TARGET_EPSS = (2, 4, 16, 64, 256, 1024, 4096), (0.5, 1.0, 2.0, 3.0, 4.0, 5.0)
LORA = Limits(max_bytes=11, frame="compact")  # LoRaWAN US915 DR0
QUICK = {"k": (16, 64), "eps": (1.0, 4.0)}
PROTOCOLS = CHOICES[1:]
N_MAX, BUDGET, MIN_SAMPLES = 101, 2_000_000_000, 5
LARGE_K, LARGE_N = 10000, 5  # above LARGE_K: LARGE_N timed reports
SS_LARGE_N = 2  # SS above LARGE_K: 1.2 billion M0 instructions a report at eps = 1, fewer samples
HEAP_LIMIT = 4096
POOL_LIMIT = 32768  # random bytes a report may need: the emulated M0's heap is 140 KB


rp2040_ms = device_cost.rp2040_ms


def mcu240_ms(m3_instr):
    return m3_instr * CPI_240 / HZ_240 * 1e3


def device_config(k, eps, protocol="auto", limits=Limits()):
    """(config dict, protocol name) as ``mss plan --device-config`` writes it (no device section)."""
    res = choose(k, eps, protocol=protocol, limits=limits)
    cfg = res["config"]
    return cfg, cfg.get("protocol", "mss")


def limits(cfg):
    """The driver's stopping rule for ``cfg``: n_max, budget, min_samples."""
    if cfg["k"] <= LARGE_K:
        return {"n_max": N_MAX, "budget": BUDGET, "min_samples": MIN_SAMPLES}
    n = SS_LARGE_N if cfg.get("protocol") == "ss" else LARGE_N
    return {"n_max": n, "budget": 0, "min_samples": n}


def grid(ks, epss, protocols):
    """(rows, refused): a row per (k, eps, protocol) planned; refused: why the others were not."""
    rows, refused = [], []
    for k in ks:
        for eps in epss:
            auto = device_config(k, eps)[1]
            for name in protocols:
                try:
                    cfg, _ = device_config(k, eps, name)
                    if registry.protocol_class(name).unary_body and 4 * k > POOL_LIMIT:
                        raise ValueError(f"{4 * k} random bytes a report (a 4-byte coin per item) do not fit "
                                         f"the emulated M0's 140 KB heap beside the pool copy")
                except (PlanError, ValueError) as exc:
                    refused.append({"protocol": name, "k": k, "eps": eps, "why": str(exc)})
                    continue
                rows.append({"protocol": name, "k": k, "eps": eps, "auto": name == auto, "cfg": cfg})
    return rows, refused


def target_rows():
    """The M0 target configs: auto choices (also under LORA) and the MSS-forced ones."""
    rows = []
    for limits, label in ((Limits(), "auto"), (LORA, "auto lora")):
        for k in TARGET_KS:
            for eps in TARGET_EPSS:
                try:
                    cfg, name = device_config(k, eps, limits=limits)
                except (PlanError, ValueError) as exc:
                    rows.append({"target": label, "k": k, "eps": eps, "error": str(exc)})
                    continue
                rows.append({"target": label, "k": k, "eps": eps, "protocol": name, "cfg": cfg,
                             "limit_ms": 20.0})
    for k, eps, limit in ((1024, 1.0, 50.0), (22000, 4.0, 2000.0), (22000, 1.0, None)):
        cfg, _ = device_config(k, eps, "mss")
        rows.append({"target": "mss", "k": k, "eps": eps, "protocol": "mss", "cfg": cfg, "limit_ms": limit})
    return rows


def key(cfg):
    return json.dumps(cfg, sort_keys=True)


def measure_board(board, cfgs, timeout):
    """{config key: RESULT} for every config on ``board``, in one QEMU session."""
    order = sorted(cfgs, key=lambda c: (c["k"] > LARGE_K, c["k"], c.get("protocol") == "ss"))
    lines = ["import mcu_calib; mcu_calib.run()"]
    lines += [mcu.driver_line(c, str(i), **limits(c)) for i, c in enumerate(order)]

    def echo(r):
        if r["name"] == "calibration":
            print(f"  {board}: ticks_us check: {r['instr']} counted / {r['expected']} executed = "
                  f"{r['ratio']:.4f}", flush=True)
            return
        c = order[int(r["name"])]
        what = r.get("error") or f"{r['instr_med']:,} instructions/report, {r['reports']} reports"
        print(f"  {board}: {c.get('protocol', 'mss'):6} k={c['k']:<5} eps={c['epsilon']:<3} {what}", flush=True)

    found = mcu.run_qemu(board, lines, timeout, echo)
    calib = found[0]
    return {key(order[int(r["name"])]): r for r in found[1:]}, calib


def verify(board, cfgs, measured, timeout):
    """Draw the same reports on the unix port: {config key: digest equal (bool)}."""
    todo = [c for c in cfgs if "digest" in measured[key(c)]]
    lines = [mcu.driver_line(c, str(i), group=measured[key(c)]["group"], reports=measured[key(c)]["reports"])
             for i, c in enumerate(todo)]
    same = {}
    for r in mcu.run_unix(lines, timeout):
        c = todo[int(r["name"])]
        same[key(c)] = r.get("digest") == measured[key(c)]["digest"]
        if not same[key(c)]:
            print(f"!!! BIT-IDENTITY MISMATCH on {board}: {c.get('protocol', 'mss')} k={c['k']} "
                  f"eps={c['epsilon']}: device {measured[key(c)]['digest']} unix {r.get('digest') or r}",
                  flush=True)
    return same


def run_boards(boards, cfgs_by_board, timeout):
    """Measure and verify every board in parallel threads: {board: (results, calibration, same)}."""
    out, errors = {}, []

    def one(board):
        try:
            res, calib = measure_board(board, cfgs_by_board[board], timeout)
            out[board] = (res, calib, verify(board, cfgs_by_board[board], res, timeout))
        except Exception as exc:  # reported after the other board finished
            errors.append(f"{board}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=one, args=(b,)) for b in boards]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit("bench_mcu: " + "; ".join(errors))
    return out


def row_figures(cfg, board, measured):
    """The measured figures of ``cfg`` on ``board`` (dict; None when the board was not run)."""
    if board not in measured:
        return None
    r = measured[board][0][key(cfg)]
    if "error" in r:
        return {"error": r["error"]}
    return {"instr": r["instr_med"], "instr_min": r["instr_min"], "instr_max": r["instr_max"],
            "instr_mean": r["instr_mean"],
            "heap_bytes": r["heap_max"], "report_bytes": r["report_len"], "random_bytes": r["rand_bytes"],
            "reports": r["reports"], "group": r["group"], "refills": r["refills"],
            "bit_identical": measured[board][2].get(key(cfg), False)}


def table_row(row, measured):
    """A grid row with every board's figures and the time estimates (``<board>_ms``: device_cost.CORES)."""
    figs = {b: row_figures(row["cfg"], b, measured) for b in mcu.BOARDS}
    ok = [f for f in figs.values() if f and "error" not in f]

    def instr(b):
        return figs[b]["instr"] if figs[b] and "error" not in figs[b] else None

    times = {f"{board}_ms": None if instr(isa) is None else device_cost.board_ms(instr(isa), board)
             for board, (isa, _, _) in device_cost.CORES.items()}
    return {**{k: v for k, v in row.items() if k != "cfg"}, "config": row["cfg"], **figs,
            "heap_bytes": max([f["heap_bytes"] for f in ok], default=None), **times,
            "mcu240_ms": None if instr("m3") is None else mcu240_ms(instr("m3")),
            "bit_identical": all(f["bit_identical"] for f in ok) if ok else None,
            "errors": [f"{b}: {f['error']}" for b, f in figs.items() if f and "error" in f]}


def _num(v, fmt):
    return "-" if v is None else format(v, fmt)


def print_grid(table):
    print(f"\n{'protocol':8} {'k':>5} {'eps':>3} {'auto':4} {'M0 instr':>15} {'M3 instr':>15} {'RV32 instr':>15} "
          f"{'heap B':>6} {'RP2040 ms':>10} {'RP2350 ms':>10} {'C3 ms':>10} {'240MHz ms':>10} {'bit-id':6} {'n':>3}")
    for r in table:
        figs = [r[b] or {} for b in mcu.BOARDS]
        ident = "-" if r["bit_identical"] is None else ("yes" if r["bit_identical"] else "NO")
        note = "".join(f"  [{e}]" for e in r["errors"])
        refills = sum(f.get("refills", 0) for f in figs)
        note += f"  ({refills} refills)" if refills else ""
        n = next((f["reports"] for f in figs if "reports" in f), "-")
        print(f"{r['protocol']:8} {r['k']:>5} {r['eps']:>3g} {'*' if r['auto'] else '':4} "
              + "".join(f"{_num(f.get('instr'), ',d'):>15} " for f in figs) + f"{_num(r['heap_bytes'], 'd'):>6} "
              + "".join(f"{_num(r[f'{b}_ms'], '.3f'):>10} " for b in device_cost.CORES)
              + f"{_num(r['mcu240_ms'], '.3f'):>10} {ident:6} {n:>3}{note}")
    print("; ".join(f"{b} ms = {isa.upper()} instructions x {cpi} CPI / {hz / 1e6:g} MHz"
                    for b, (isa, cpi, hz) in device_cost.CORES.items())
          + f"; 240MHz ms = M3 instructions x {CPI_240} CPI / 240 MHz; * = choose(k, eps) picks it; "
            "n = timed reports")


def check_targets(targets, grid_rows, measured):
    """PASS / MISS lines of every target (list of dicts, printed)."""
    verdicts = []
    for t in targets:
        if "error" in t:
            verdicts.append(dict(t, verdict="MISS", figure=f"not planned: {t['error']}"))
            continue
        f = row_figures(t["cfg"], "m0", measured)
        if "error" in f:
            verdicts.append(dict(t, verdict="MISS", figure=f"error: {f['error']}"))
            continue
        ms = rp2040_ms(f["instr"])
        ok = t["limit_ms"] is None or ms < t["limit_ms"]
        verdicts.append(dict(t, verdict="PASS" if ok else "MISS", rp2040_ms=ms, instr=f["instr"],
                             bit_identical=f["bit_identical"],
                             figure=f"{ms:.2f} ms RP2040 ({f['instr']:,} M0 instructions)"))
    heap = [r for r in grid_rows if r["k"] <= 1024]
    if heap:
        worst = max(heap, key=lambda r: 1 << 30 if r["heap_bytes"] is None else r["heap_bytes"])
        h = worst["heap_bytes"]
        verdicts.append({"target": "heap", "verdict": "PASS" if h is not None and h < HEAP_LIMIT else "MISS",
                         "figure": f"max {h} B/report ({worst['protocol']} k={worst['k']} eps={worst['eps']})"})
    print("\ntargets:")
    for v in verdicts:
        if v["target"].startswith("auto"):
            what = f"{v['target']:9} {v.get('protocol', '-'):6} k={v['k']:<5} eps={v['eps']:<3} < 20 ms"
        elif v["target"] == "mss":
            lim = "measured" if v["limit_ms"] is None else f"< {v['limit_ms']:g} ms"
            what = f"{'mss':9} {'mss':6} k={v['k']:<5} eps={v['eps']:<3} {lim}"
        else:
            what = "heap < 4 KB per report, every protocol at k <= 1024"
        print(f"  {v['verdict'] if v.get('limit_ms', 0) is not None else 'INFO':4}  {what:42} {v['figure']}")
    return verdicts


def machine():
    info = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), **mcu.versions()}
    try:
        names = [ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")]
        info["cpu"] = names[0] if names else info["cpu"]
    except OSError:
        pass
    info["micropython_unix"] = subprocess.run([micropython_path(), "-c", "import sys; print(sys.version)"],
                                              capture_output=True, text=True).stdout.strip()
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--quick", action="store_true", help="k in {16, 64} only, no target grid")
    ap.add_argument("--only", nargs="+", choices=PROTOCOLS, metavar="PROTO")
    ap.add_argument("--k", nargs="+", type=int)
    ap.add_argument("--eps", nargs="+", type=float)
    ap.add_argument("--board", nargs="+", choices=sorted(mcu.BOARDS), default=sorted(mcu.BOARDS))
    ap.add_argument("--no-targets", action="store_true")
    ap.add_argument("--timeout", type=float, default=4 * 3600, help="seconds per board session")
    args = ap.parse_args()
    if mcu.missing_tools(args.board):
        sys.exit("bench_mcu: missing " + ", ".join(mcu.missing_tools(args.board)) + " (make system-deps)")
    ks = args.k or (QUICK["k"] if args.quick else KS)
    epss = args.eps or (QUICK["eps"] if args.quick else EPSS)
    filtered = args.quick or args.only or args.k or args.eps
    t0 = time.time()
    info = machine()
    print("machine:", json.dumps(info))
    rows, refused = grid(ks, epss, args.only or PROTOCOLS)
    targets = [] if (filtered or args.no_targets or "m0" not in args.board) else target_rows()
    for b in args.board:
        mcu.build(b)
    cfgs = {b: list({key(r["cfg"]): r["cfg"] for r in rows}.values()) for b in args.board}
    if targets:
        cfgs["m0"] = list({key(c): c for c in cfgs["m0"] + [t["cfg"] for t in targets if "cfg" in t]}.values())
    print(f"planned {len(rows)} grid configs ({len(refused)} refused), {len(targets)} targets; "
          f"{', '.join(f'{b}: {len(c)} configs in one session' for b, c in cfgs.items())}", flush=True)
    measured = run_boards(args.board, cfgs, args.timeout)
    table = [table_row(r, measured) for r in rows]
    print_grid(table)
    for r in refused:
        print(f"refused: {r['protocol']} k={r['k']} eps={r['eps']}: {r['why']}")
    verdicts = check_targets(targets, table, measured) if targets else []
    mismatches = [r for r in table if r["bit_identical"] is False]
    cpi = {k: v for board, (_, c, hz) in device_cost.CORES.items() for k, v in ((board, c), (f"{board}_hz", hz))}
    out = {"machine": info, "cpi": {**cpi, "mcu240": CPI_240, "mcu240_hz": HZ_240},
           "calibration": {b: measured[b][1] for b in args.board},
           "rows": table, "refused": refused,
           "targets": [{k: v for k, v in v.items() if k != "cfg"} for v in verdicts],
           "host_seconds": round(time.time() - t0, 1)}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
        print("wrote", args.json)
    print(f"host time {out['host_seconds']} s")
    if mismatches:
        sys.exit(f"bench_mcu: {len(mismatches)} configs are NOT bit-identical to the unix port")


if __name__ == "__main__":
    main()
