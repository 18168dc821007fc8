#!/usr/bin/env python3
"""Render the generated tables and figures of docs/benchmarks.md and README.md from the committed JSON.

Each generated block sits between ``<!-- generated: NAME -->`` and
``<!-- end generated: NAME -->`` lines; everything outside the markers is
hand-written and left alone.  The blocks and their sources:

* ``bytes-auto``, ``bytes-protocols``, ``readme-bytes``: docs/bench-bytes.json
  (``tools/bench_bytes.py``);
* ``codecs``, ``readme-codecs``: docs/bench-codecs.json (``tools/bench_codecs.py``);
* ``frontier``, ``readme-frontier``: docs/bench-frontier.json (``tools/bench_frontier.py``);
* ``peers``: docs/bench-peers.json (``tools/bench_peers.py``, run beside the peer libraries);
* ``loaded``: docs/bench-loaded.json (``tools/bench_loaded.py``).

tests/test_docs_figures.py checks that the markdown equals what this script
renders and that the planner still makes the choices the JSON records.
A new block: write ``render_NAME(data) -> str``, add it to ``BLOCKS``, put the
markers in the markdown.

    python tools/docs_tables.py          # rewrite the blocks in place
    python tools/docs_tables.py --check  # exit 1 if a block is stale
"""
import argparse
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {"bytes": "docs/bench-bytes.json", "codecs": "docs/bench-codecs.json",
           "frontier": "docs/bench-frontier.json", "peers": "docs/bench-peers.json",
           "loaded": "docs/bench-loaded.json"}
PROTOCOLS = ("mss", "ss", "pgr", "grr", "rappor", "sue", "olh", "hr")
FEW_BYTES = "auto 11 B compact"  # bench_codecs.py's label of the 11-byte compact auto choice
TARGET = 20000  # bench_codecs.py's decode target, reports/s


def load(name):
    return json.loads((ROOT / SOURCES[name]).read_text())


def ratio_half(c):
    """95% half-width of the auto/SS ratio of a bench_bytes cell (delta method)."""
    return 1.96 * c["ratio"] * math.hypot(c["auto_se"] / c["auto_simulated_mse"], c["ss_se"] / c["ss_simulated_mse"])


def span(values, fmt="{:.3f}"):
    lo, hi = min(values), max(values)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}-{fmt.format(hi)}"


def render_bytes_auto(data):
    cells = data["cells"]
    met = sum(c["target_met"] for c in cells)
    out = [f"**Met in {met} of {len(cells)} cells.**\n",
           "| k | eps | auto, 11-byte compact | bytes | simulated MSE / SS's (95% CI) | SS full frame |",
           "|---|---|---|---|---|---|"]
    out += [f"| {c['k']} | {c['epsilon']:g} | {c['auto_11_compact']} | {c['auto_bytes']} | "
            f"{c['ratio']:.3f} ± {ratio_half(c):.3f} | {c['ss_bytes_full']} B |" for c in cells]
    return "\n".join(out)


def render_bytes_protocols(data):
    out = ["| k | eps | " + " | ".join(PROTOCOLS) + " |", "|---|---|" + "---|" * len(PROTOCOLS)]
    by = {(r["k"], r["epsilon"], r["protocol"]): r for r in data["rows"]}
    for c in data["cells"]:
        cols = []
        for p in PROTOCOLS:
            r = by.get((c["k"], c["epsilon"], p))
            cols.append("–" if r is None else
                        f"{r['ratio_vs_ss']:.3g} @ {r['compact_bytes'] or '–'}/{r['full_bytes']} B")
        out.append(f"| {c['k']} | {c['epsilon']:g} | " + " | ".join(cols) + " |")
    return "\n".join(out)


def auto_choices(cells):
    """{protocol: "k = 256: ε 4, 5; k = 1024: ε 5"} of the 11-byte compact auto choices."""
    where = {}
    for c in cells:
        where.setdefault(c["auto_11_compact"], {}).setdefault(c["k"], []).append(f"{c['epsilon']:g}")
    return {p: "; ".join(f"k = {k}: ε {', '.join(e)}" for k, e in ks.items()) for p, ks in where.items()}


def render_readme_bytes(data):
    cells = data["cells"]
    picks = ", ".join(f"**{p}** ({v})" for p, v in auto_choices(cells).items())
    return (f"**Few-byte links.** Under an 11-byte compact frame (LoRaWAN US915 DR0), `mss plan --max-bytes 11 --frame compact` "
            f"returns {picks}. Their reports are {span([c['auto_bytes'] for c in cells], '{}')} bytes and their "
            f"simulated MSE is {span([c['ratio'] for c in cells])}x unbudgeted SubsetSelection's "
            f"({sum(c['target_met'] for c in cells)} of {len(cells)} cells within the target), where "
            f"SubsetSelection itself needs {span([c['ss_bytes_full'] for c in cells], '{}')} bytes "
            "(`tools/bench_bytes.py`, docs/bench-bytes.json).")


def rate(r):
    """The batch rate a codec row is judged by: the slower of its 3,000- and 50,000-report batches."""
    return min(r["decode_many_reports_per_s"], r.get("big_batch_reports_per_s") or math.inf)


def render_codecs(data):
    rows, autos = data["protocols"], data["auto"]
    by = {(r["k"], r["epsilon"], r["protocol"]): r for r in rows}
    out = ["Every protocol (`decode_many` of a 3,000-report batch, and in brackets `decode` one report at a time):",
           "", "| k | eps | " + " | ".join(PROTOCOLS) + " |", "|---|---|" + "---|" * len(PROTOCOLS)]
    for k, eps in dict.fromkeys((r["k"], r["epsilon"]) for r in rows):
        cols = []
        for p in PROTOCOLS:
            r = by.get((k, eps, p))
            cols.append("–" if r is None else
                        f"{r['decode_many_reports_per_s']:,.0f} ({r['decode_reports_per_s']:,.0f})"
                        + (f", {r['codec_bytes'] / 1e6:.1f} MB" if r["codec_bytes"] > 5e5 else ""))
        out.append(f"| {k} | {eps:g} | " + " | ".join(cols) + " |")
    out += ["", "What `mss plan` returns (`auto` unbudgeted, and for an 11-byte compact frame): `decode_many` of "
            "3,000 and of 50,000 reports, and `decode` one at a time, reports/s:", "",
            "| k | eps | auto | 3,000 | 50,000 | one by one | 11 B compact | 3,000 | 50,000 | one by one |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    cells = {}
    for r in autos:
        cells.setdefault((r["k"], r["epsilon"]), {})[r["choice"]] = r
    for (k, eps), two in cells.items():
        cols = []
        for label in ("auto", FEW_BYTES):
            r = two[label]
            big = r.get("big_batch_reports_per_s")
            cols += [r["protocol"], f"{r['decode_many_reports_per_s']:,.0f}",
                     "–" if big is None else f"{big:,.0f}", f"{r['decode_reports_per_s']:,.0f}"]
        out.append(f"| {k} | {eps:g} | " + " | ".join(cols) + " |")
    return "\n".join(out) + "\n\n" + codec_summary(data) + "\n\n" + codec_model_and_tally(rows)


def codec_model_and_tally(rows):
    """mss plan's parsing model against the measurement, and the tally rates (from the rows)."""
    ranked = [r for r in rows if r["protocol"] in ("mss", "ss")]
    others = [r for r in rows if r["protocol"] not in ("mss", "ss")]
    tally = [r["tally_reports_per_s"] for r in rows if r["protocol"] != "olh"]
    olh = {k: [r["tally_reports_per_s"] for r in rows if r["protocol"] == "olh" and r["k"] == k]
           for k in sorted({r["k"] for r in rows})}
    return ("`mss plan`'s `decode_s` uses a per-report parsing model (`choose.ingest_us`): "
            f"{span([r['model_us'] / r['measured_us'] for r in ranked], '{:.2f}')}x the measured one-by-one time "
            f"for MSS and SS, {span([r['model_us'] / r['measured_us'] for r in others], '{:.2f}')}x for the other "
            f"protocols. Tally (adding decoded reports to the counts) runs at {span(tally, '{:,.0f}')} reports/s "
            "except OLH, whose tally checks every item against each report's hash (O(n k), stated in `mss plan`'s "
            "`decode_s`): " + ", ".join(f"{span(v, '{:,.0f}')}/s at k = {k}" for k, v in olh.items() if v) + ".")


def codec_summary(data):
    """Target count, the auto configurations below it, the few-byte auto range (from the auto rows)."""
    autos = data["auto"]
    missed = [r for r in autos if not r["target_met"]]
    few = [r for r in autos if r["choice"] == FEW_BYTES]
    slow = min(few, key=rate)
    name = lambda r: f"{r['protocol']} at k = {r['k']}, ε = {r['epsilon']:g}"  # noqa: E731
    return (f"Target >= {TARGET:,} reports/s (`decode_many`, batches of 3,000 and 50,000) for every configuration "
            f"`mss plan` returns: **met in {len(autos) - len(missed)} of {len(autos)}**"
            + ("; missed by " + ", ".join(f"{name(r)} ({rate(r):,.0f}/s, {r['choice']})" for r in missed)
               if missed else "")
            + f". The few-byte (`{FEW_BYTES}`) choices decode at {span([rate(r) for r in few], '{:,.0f}')} "
            f"reports/s in batches, the slowest {name(slow)}; one at a time (`decode`) "
            f"{span([r['decode_reports_per_s'] for r in few], '{:,.0f}')} reports/s.")


def render_readme_codecs(data):
    return ("Wire decoding (`tools/bench_codecs.py`, docs/bench-codecs.json, one core): " + codec_summary(data))


PEER_ORDER = ("GRR", "OUE", "SS", "OLH", "HR")  # tools/bench_peers.py's protocols


def render_peers(data):
    """tools/bench_peers.py's table: every implementation of a protocol on the same populations."""
    fmt = lambda m, h: "–" if m is None else f"{m:.3g} ± {h:.2g}"  # noqa: E731
    ratio = lambda x: "–" if x is None else f"{x:.2f}"  # noqa: E731
    lines = ["| k | eps | protocol | implementation | client us/report | server s | MSE raw (95% CI) | "
             "MSE clip (95% CI) | ours/peer MSE raw | ours/peer MSE clip | ours/peer client time |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(data["rows"], key=lambda r: (r["k"], r["epsilon"], PEER_ORDER.index(r["protocol"]),
                                                 r["implementation"] != "mss-iot", r["implementation"])):
        lines.append(f"| {r['k']} | {r['epsilon']:g} | {r['protocol']} | {r['implementation']} | "
                     f"{r['client_us_per_report']:.1f} | {r['server_seconds']:.3f} | "
                     f"{fmt(r['mse_raw'], r['mse_raw_ci95'])} | {fmt(r['mse_clip'], r['mse_clip_ci95'])} | "
                     f"{ratio(r['ours_over_peer_raw'])} | {ratio(r['ours_over_peer_clip'])} | "
                     f"{ratio(r['ours_over_peer_client'])} |")
    return "\n".join(lines) + "\n\n" + peers_summary(data)


def peers_summary(data):
    """The MSE ratios' range and, per protocol, our client time over the fastest peer's (from the rows)."""
    peer = [r for r in data["rows"] if r["implementation"] != "mss-iot"]
    clip = [r["ours_over_peer_clip"] for r in peer if r["ours_over_peer_clip"] is not None]
    cells = dict.fromkeys((r["k"], r["epsilon"]) for r in data["rows"])
    fastest = []
    for p in PEER_ORDER:
        parts = []
        for k, eps in cells:
            times = [r["ours_over_peer_client"] for r in peer if (r["protocol"], r["k"], r["epsilon"]) == (p, k, eps)]
            if times:
                parts.append(f"{max(times):.2f}x at k = {k}, ε = {eps:g}")  # the fastest peer: the largest ratio
        fastest.append(f"{p} " + ", ".join(parts))
    return (f"Our MSE over each peer's, both clipped and renormalised: {span(clip, '{:.2f}')}. "
            "Our host client's time per report over the fastest peer's: " + "; ".join(fastest) + ".")


def render_loaded(data):
    """tools/bench_loaded.py's table: decode seconds quiet and beside the CPU hog, with and without the BLAS
    limit, the control's ratio (a pure-Python loop as long as the quiet decode), and both ratios sustained
    (decodes back to back for a second in each condition)."""
    out = ["| protocol | k | quiet | loaded | loaded / quiet | without the limit: quiet | loaded | loaded / quiet "
           "| control: loaded / quiet | sustained: loaded / quiet | sustained control |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        out.append(f"| {r['protocol']} | {r['k']:,} | {r['quiet_after']:.3g} s | {r['loaded_after']:.3g} s | "
                   f"{r['ratio_after']:.2f} | {r['quiet_before']:.3g} s | {r['loaded_before']:.3g} s | "
                   f"{r['ratio_before']:.2f} | {r['ratio_control']:.2f} | {r['sustained_after']:.2f} | "
                   f"{r['sustained_control']:.2f} |")
    rows = data["rows"]
    worst = max(rows, key=lambda r: r["ratio_after"])
    held = max(rows, key=lambda r: r["sustained_after"])
    excess = max(rows, key=lambda r: r["ratio_after"] / r["ratio_control"])
    met = sum(r["ratio_after"] <= 1.5 for r in rows)
    kept = sum(r["sustained_after"] <= 1.5 for r in rows)
    span = lambda key: f"{min(r[key] for r in rows):.2f}-{max(r[key] for r in rows):.2f}"  # noqa: E731
    return ("\n".join(out) + f"\n\n{data['hogs']} busy processes held {data['hog_cores']:.2f} cores while running; "
            f"n = {data['n']:,} reports, ε = {data['epsilon']:g}. Target loaded / quiet <= 1.5: **met in {met} of "
            f"{len(rows)} rows** for one decode; the largest {worst['ratio_after']:.2f} ({worst['protocol']}, k = "
            f"{worst['k']:,}); without the BLAS limit the largest is "
            f"{max(r['ratio_before'] for r in rows):.2f}. The control's ratios span {span('ratio_control')}; "
            f"the largest decode ratio over its control is {excess['ratio_after'] / excess['ratio_control']:.2f} "
            f"({excess['protocol']}, k = {excess['k']:,}). Sustained (a second of decodes back to back, twice in "
            f"each condition): **<= 1.5 in {kept} of {len(rows)} rows**, {span('sustained_after')} (the largest: "
            f"{held['protocol']}, k = {held['k']:,}); the control's {span('sustained_control')}."
            + "".join(f" Skipped: {x['protocol']} at k = {x['k']:,} ({x['reason']})." for x in data["skipped"]))


def render_frontier(data):
    budgets = data["budgets"]
    out = ["| k | eps | SS bits | " + " | ".join(f"{b:g}x" for b in budgets)
           + " | fewest bits within 1.3x (ratio, 95% CI) | fewest bits within 1.05x (ratio, 95% CI) |",
           "|---|---|---|" + "---|" * (len(budgets) + 2)]
    for c in data["cells"]:
        at = {p["budget"]: p for p in c["points"]}
        cols = [f"{at[b]['ratio']:.3f} ± {at[b]['ratio_ci95'][1] - at[b]['ratio']:.3f}" if b in at else "–"
                for b in budgets]
        for tol in data["tolerances"]:
            best = c[f"fewest_bits_within_{tol:g}"]
            cols.append("none" if best is None else
                        f"{best['bits']} ({100 * best['bits_fraction']:.0f}%; {best['ratio']:.3f}, "
                        f"{best['ratio_ci95'][0]:.3f}-{best['ratio_ci95'][1]:.3f})")
        out.append(f"| {c['k']} | {c['epsilon']:g} | {c['ss_bits']} | " + " | ".join(cols) + " |")
    return "\n".join(out) + "\n\n" + frontier_summary(data)


def frontier_summary(data):
    cells = data["cells"]

    def at(b):
        return [p["ratio"] for c in cells for p in c["points"] if p["budget"] == b]

    def fewest(tol):
        return [c[f"fewest_bits_within_{tol:g}"] for c in cells]

    parts = []
    for tol in data["tolerances"]:
        best = fewest(tol)
        got = [b["bits_fraction"] for b in best if b]
        parts.append(f"within {tol:g}x of SS's MSE in {len(got)} of {len(cells)} cells"
                     + (f", with {span([100 * g for g in got], '{:.0f}')}% of SS's bits" if got else ""))
    half = at(0.5)
    text = f"Simulated, MSS gets {'; '.join(parts)}."
    if half:
        text += f" At half of SS's bits its MSE is {span(half, '{:.2f}')}x SS's ({len(half)} of {len(cells)} cells)."
    return text


def render_readme_frontier(data):
    cells = data["cells"]
    ks = list(dict.fromkeys(c["k"] for c in cells))
    budgets = {k: sorted({p["budget"] for c in cells if c["k"] == k for p in c["points"]}) for k in ks}
    return ("**MSS's bit saving** (`tools/bench_frontier.py`, docs/bench-frontier.json; k "
            + ", ".join(str(k) for k in ks)
            + f", ε {span([c['epsilon'] for c in cells], '{:g}')}, MSS planned with `--max-bits` at "
            + "; ".join(", ".join(f"{b:g}" for b in budgets[k]) + f"x (k = {k})" for k in ks)
            + " SubsetSelection's bits and simulated): "
            + frontier_summary(data) + " The paper (Arcolezi, AAAI 2026) claims MSS within 1.3x of SS's MSE "
            "with up to 50% fewer bits.")


BLOCKS = {"bytes-auto": ("bytes", render_bytes_auto), "bytes-protocols": ("bytes", render_bytes_protocols),
          "readme-bytes": ("bytes", render_readme_bytes), "codecs": ("codecs", render_codecs),
          "readme-codecs": ("codecs", render_readme_codecs), "frontier": ("frontier", render_frontier),
          "readme-frontier": ("frontier", render_readme_frontier), "peers": ("peers", render_peers),
          "loaded": ("loaded", render_loaded)}
DOCS = ("docs/benchmarks.md", "README.md")
MARKED = re.compile(r"(<!-- generated: ([\w-]+) -->\n)(.*?)(<!-- end generated: \2 -->)", re.S)


def render(text, data=None):
    """``text`` with every generated block re-rendered (``data``: {source: JSON}, default the committed files)."""
    data = data if data is not None else {}

    def block(m):
        source, fn = BLOCKS[m.group(2)]
        if source not in data:
            data[source] = load(source)
        return m.group(1) + fn(data[source]) + "\n" + m.group(4)

    return MARKED.sub(block, text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block is stale")
    args = ap.parse_args()
    stale = []
    for doc in DOCS:
        path = ROOT / doc
        old = path.read_text()
        new = render(old)
        if new != old:
            stale.append(doc)
            if not args.check:
                path.write_text(new)
    print(("stale: " if args.check else "rewrote: ") + (", ".join(stale) or "nothing"))
    sys.exit(1 if args.check and stale else 0)


if __name__ == "__main__":
    main()
