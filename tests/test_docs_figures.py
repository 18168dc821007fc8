"""The documented benchmark figures agree with the committed JSON and with the code.

* docs/benchmarks.md and README.md: every generated block equals what
  tools/docs_tables.py renders from docs/bench-*.json (a hand edit of a
  generated figure, or a JSON regenerated without re-rendering, fails);
* docs/bench-bytes.json: the planner's ``auto`` choice for an 11-byte compact
  frame, recomputed in every cell, is the protocol and report size the JSON
  (and so the table) records.  The planner is deterministic (seeded search),
  so any difference means the code changed its choices and the benchmark
  must be rerun (``python tools/bench_bytes.py --json docs/bench-bytes.json
  ...`` then ``python tools/docs_tables.py``);
* docs/bench-codecs.json: its ``auto`` rows are the planner's current
  choices, so the throughput it reports is that of what ``mss plan`` returns.

No simulation: planning only (fresh plan cache, conftest.py).
"""
import json
from pathlib import Path

import pytest

import docs_tables
from mss_protocol.choose import Limits, Question, choose

ROOT = Path(__file__).resolve().parent.parent
BYTES = json.loads((ROOT / "docs/bench-bytes.json").read_text())
CODECS = json.loads((ROOT / "docs/bench-codecs.json").read_text())["auto"]


@pytest.mark.parametrize("doc", docs_tables.DOCS)
def test_generated_blocks_match_the_json(doc):
    text = (ROOT / doc).read_text()
    blocks = docs_tables.MARKED.findall(text)
    assert blocks, f"{doc} has no generated block"
    assert {b[1] for b in blocks} <= set(docs_tables.BLOCKS)
    assert docs_tables.render(text) == text, f"{doc} is stale: run python tools/docs_tables.py"


def test_every_block_is_in_a_doc():
    names = {b[1] for doc in docs_tables.DOCS for b in docs_tables.MARKED.findall((ROOT / doc).read_text())}
    assert names == set(docs_tables.BLOCKS)


@pytest.mark.parametrize("cell", BYTES["cells"], ids=lambda c: f"k{c['k']}-eps{c['epsilon']:g}")
def test_few_byte_auto_choice_is_current(cell):
    got = choose(cell["k"], cell["epsilon"], "auto", limits=Limits(max_bytes=11, frame="compact"),
                 question=Question(n=10000))
    assert (got["protocol"], got["frame_bytes"]) == (cell["auto_11_compact"], cell["auto_bytes"])


def codec_cases():
    """(k, eps, {choice label: protocol}) of every (k, eps) of docs/bench-codecs.json's auto rows."""
    cells = {}
    for r in CODECS:
        cells.setdefault((r["k"], r["epsilon"]), {})[r["choice"]] = r["protocol"]
    return [pytest.param(k, eps, labelled, id=f"k{k}-eps{eps:g}") for (k, eps), labelled in cells.items()]


@pytest.mark.parametrize("k, eps, labelled", codec_cases())
def test_codec_auto_labels_are_current(k, eps, labelled):
    got = {"auto": choose(k, eps, "auto")["protocol"],
           docs_tables.FEW_BYTES: choose(k, eps, "auto", limits=Limits(max_bytes=11, frame="compact"))["protocol"]}
    assert labelled == got
