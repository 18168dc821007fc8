#!/usr/bin/env python3
"""End-to-end collection throughput through Mosquitto on loopback (issues: collection, scale).

Starts its own Mosquitto on a free loopback port, W aggregator worker
processes (``mss aggregate``; with W > 1 on a ``$share`` subscription) on
one store (SQLite, or a throw-away local PostgreSQL) and P publisher
processes (``tools/loadgen.py``) sending N reports in total at QoS 1,
then reports accepted reports/s (first publish to last durable commit) and
the publish-to-durable-storage latency p50/p99 (the store's commit
timestamp minus the publisher's send time).  Target: >= 5,000 reports/s
with nothing lost, for 100,000 reports.

Usage: python tools/bench_collect.py [--reports 100000] [--publishers 2]
       [--store sqlite|postgresql] [--workers 1] [--no-paced]
"""
import argparse
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psycopg

from local_postgres import LocalPostgres
from mss_aggregator.ports import free_port
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import plan



def run(args, rate=None):
    """One run; ``rate`` paces the publishers (total reports/s), None saturates."""
    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        port = free_port()
        (tmp / "m.conf").write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                                    "max_inflight_messages 1000\nmax_queued_messages 1000000\n")
        broker = subprocess.Popen([exe, "-c", str(tmp / "m.conf")], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        cfg = MssConfig.from_dict(plan(args.k, args.epsilon)["config"])
        # the campaign clock mss aggregate needs: loadgen's epochs 0..9 end in the current one
        cfg.save(tmp / "cfg.json", {"device": {"period_s": 3600, "epoch_origin": int(time.time()) - 1800 - 9 * 3600}})
        url = f"mqtt://127.0.0.1:{port}"
        pg = LocalPostgres().start() if args.store == "postgresql" else None
        store = pg.new_database() if pg else str(tmp / "s.sqlite")
        share = ["--share-group", "bench"] if args.workers > 1 else []
        aggs = [subprocess.Popen([sys.executable, "-m", "mss_cli", "aggregate", "--broker", url,
                                  "--campaign", "bench", "--config", str(tmp / "cfg.json"),
                                  "--store", store, "--quiet", "--client-id", f"bench-w{w}", *share],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for w in range(args.workers)]
        time.sleep(1.5)
        per = args.reports // args.publishers
        epochs = 10
        pace = ["--rate", str(rate / args.publishers)] if rate else []
        pubs = [subprocess.Popen([sys.executable, str(Path(__file__).with_name("loadgen.py")), str(tmp / "cfg.json"),
                                  url, "bench", str(per // epochs), str(epochs), str(tmp / f"log{i}.json"),
                                  "--prefix", f"p{i}-", "--seed", str(i), *pace])
                for i in range(args.publishers)]
        for p in pubs:
            p.wait()
        total = per // epochs * epochs * args.publishers
        db = psycopg.connect(store, autocommit=True) if pg else sqlite3.connect(store)
        deadline = time.time() + 600
        while time.time() < deadline:
            n = db.execute("SELECT COUNT(*) FROM reports WHERE status='accepted'").fetchone()[0]
            if n >= total:
                break
            time.sleep(0.2)
        rows = db.execute("SELECT device_id, epoch, seq, received FROM reports").fetchall()
        db.close()
        for agg in aggs:
            agg.terminate()
            agg.wait(30)
        broker.terminate()
        if pg:
            pg.stop()
        stored = {(d, e, s): r for d, e, s, r in rows}
        sent = [tuple(x) for i in range(args.publishers)
                for x in json.loads((tmp / f"log{i}.json").read_text())]
        first_send = min(x[3] for x in sent)
        last_commit = max(stored.values())
        lat = np.array([stored[(d, e, s)] - t for d, e, s, t in sent if (d, e, s) in stored])
        lost = sum(1 for d, e, s, _ in sent if (d, e, s) not in stored)
    offered = len(sent) / (max(x[3] for x in sent) - first_send)
    return len(sent), len(stored), lost, len(stored) / (last_commit - first_send), lat, offered


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=int, default=100_000)
    ap.add_argument("--publishers", type=int, default=2)
    ap.add_argument("--k", type=int, default=1024)
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--paced-rate", type=float, default=5000.0,
                    help="offered load of the latency run (reports/s)")
    ap.add_argument("--no-paced", action="store_true", help="saturated run only")
    ap.add_argument("--store", choices=["sqlite", "postgresql"], default="sqlite")
    ap.add_argument("--workers", type=int, default=1, help="aggregator processes ($share subscription)")
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores; k={args.k}, eps={args.epsilon}, "
          f"{args.publishers} publisher processes, {args.workers} aggregator process(es) on "
          f"{args.store}, Mosquitto on loopback")
    runs = [("saturated", None)] + ([] if args.no_paced else
                                    [(f"paced at {args.paced_rate:,.0f}/s", args.paced_rate)])
    for label, rate in runs:
        sent, stored, lost, got, lat, offered = run(args, rate)
        ok = got >= 5000 if rate is None else got >= 0.95 * offered
        print(f"{label}: sent {sent} (offered {offered:,.0f}/s), stored {stored}, lost {lost}; "
              f"{got:,.0f} reports/s accepted "
              f"end to end ({'OK' if ok and lost == 0 else 'MISSED'}); latency publish -> durable "
              f"p50 {np.percentile(lat, 50) * 1e3:.1f} ms, p99 {np.percentile(lat, 99) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
