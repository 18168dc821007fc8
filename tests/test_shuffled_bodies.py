"""Every protocol a shuffler forwards, in every frame kind of the shared vectors:
the batch body of a report (its compact frame, ``shuffled_batch.compact_body``)
decodes at the batch's epoch, without a device id, to the report the device
made (the vector's j and subset), one by one and in one ``decode_many`` as the
aggregator decodes a batch.  OLH is not forwarded (its seed names the device)."""
import json

import pytest

from mss_protocol.codec import codec
from mss_protocol.configs import load_dict
from mss_protocol.shuffled_batch import compact_body
from mss_protocol.vectors import ROOT

FILES = sorted(p for p in ROOT.glob("*/*.json")
               if p.parent.name != "olh" and "config" in json.loads(p.read_text()))


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_batch_bodies_decode_to_the_devices_reports(path):
    doc = json.loads(path.read_text())
    cfg = load_dict(doc["config"])
    kind = doc["config"].get("frame", "full")
    shuffled = codec(cfg.with_frame("compact"))
    vectors = doc["vectors"]
    bodies = [compact_body(cfg, kind, bytes.fromhex(v["report_hex"])) for v in vectors]
    want = [(v["j"], tuple(v["subset"])) for v in vectors]
    one = [shuffled.decode(b, None, v["epoch"]) for b, v in zip(bodies, vectors)]
    assert [(r.j, tuple(r.subset)) for r in one] == want
    assert {len(b) - 1 for b in bodies} <= set(shuffled.body_lengths)  # the tag byte and a body of the config
    batch = shuffled.decode_many(bodies, None, [v["epoch"] for v in vectors])
    assert not batch.errors
    assert [(r.j, tuple(r.subset)) for r in batch.reports()] == want


def test_the_vectors_cover_every_forwarded_protocol_and_kind():
    docs = [json.loads(p.read_text()) for p in FILES]
    seen = {(d["protocol"], d["config"].get("frame", "full")) for d in docs}
    assert {name for name, _ in seen} == {"mss", "ss", "grr", "rappor", "sue", "hr", "pgr"}
    assert {kind for _, kind in seen} == {"full", "compact", "compact-epoch"}
