"""The toy's vectors and a fleet's reports through the aggregator's ingest.

``python -m mss_toy.drive VECTORS CONFIG STORE``: every vector file under VECTORS
reproduces from the toy's device client and decodes (``mss_protocol.vectors.check_file``);
then 400 devices running the device client of CONFIG report in epoch 7, their
reports go through :class:`mss_aggregator.collect.ingest.Ingest` (as from MQTT)
into the store STORE.  ``--write VECTORS`` regenerates the vectors from ``CASES``.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

# (protocol, file name, k, epsilon, moduli, frame, values): mss_protocol.vectors.CASES' form
CASES = [("toy", "k5_eps1", 5, 1.0, None, "full", [0, 4]),
         ("toy", "k8_eps2_compact_epoch", 8, 2.0, None, "compact-epoch", [0, 7])]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", metavar="VECTORS")
    ap.add_argument("paths", nargs="*")
    args = ap.parse_args(argv)
    from mss_protocol import vectors

    if args.write:
        for case in CASES:
            out = Path(args.write) / case[0]
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{case[1]}.json").write_text(json.dumps(vectors.make_case(*case), indent=1) + "\n")
        return 0
    root, config, store_path = args.paths
    files = vectors.files(root)
    errors = [e for path in files for e in vectors.check_file(path)]
    if errors or len(files) != len(CASES):
        print("\n".join(errors) or f"{len(files)} vector files, not {len(CASES)}", file=sys.stderr)
        return 1
    from mss_aggregator.collect.ingest import Ingest
    from mss_aggregator.collect.store import open_store
    from mss_protocol.configs import load

    cfg = load(config)
    store, ingest = open_store(store_path, cfg), Ingest(cfg, "t")
    rng = np.random.default_rng(7)
    msgs = []
    for d in range(400):
        report, _ = vectors.report_from_stream(cfg.to_dict(), int(rng.integers(cfg.k)), rng.bytes(256), 7, 7, f"d{d}")
        msgs.append(ingest.from_mqtt(f"mss/v1/t/d{d}/report".encode(), report))
    bad = [m for m in msgs if "reason" in m]
    if bad:
        print(f"quarantined: {bad[0]}", file=sys.stderr)
        return 1
    store.write_batch(msgs)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
