"""Every family of shared test vectors, written or checked in one go.

``python -m mss_protocol.all_vectors --write protocol/vectors`` writes the
protocols' vectors (:mod:`.vectors`), the serial lines
(:mod:`.serial_lines`), the refused configs (:mod:`.config_vectors`) and the
shuffled batches (:mod:`.shuffled_vectors`); ``--check protocol/vectors``
reads them all back.  The LoRaWAN and MQTT messages are the aggregator's
(``python -m mss_aggregator.collect.link_vectors``).  Each family's module
can also be run alone.
"""
import argparse
import json
import sys
from pathlib import Path

from mss_protocol import config_vectors, serial_lines, shuffled_vectors, vectors


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", metavar="DIR", help="write every protocol's vectors under DIR/<protocol>/")
    ap.add_argument("--check", metavar="DIR")
    args = ap.parse_args(argv)
    if args.write:
        for case in vectors.CASES:
            out = Path(args.write) / case[0]
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{case[1]}.json").write_text(json.dumps(vectors.make_case(*case), indent=1) + "\n")
        serial_lines.write(Path(args.write) / "serial" / "lines.json")
        config_vectors.write(Path(args.write) / "configs" / "refused.json")
        shuffled_vectors.write(Path(args.write) / "shuffled" / "batches.json")
    if args.check:
        errors = [e for p in vectors.files(args.check) for e in vectors.check_file(p)]
        errors += serial_lines.check(Path(args.check) / "serial" / "lines.json")
        errors += config_vectors.check(Path(args.check) / "configs" / "refused.json")
        errors += shuffled_vectors.check(Path(args.check) / "shuffled" / "batches.json")
        print("\n".join(errors) or f"all vectors reproduce ({len(vectors.files(args.check))} files, the serial lines, "
                                    f"the refused configs and the shuffled batches)")
        return 1 if errors else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
