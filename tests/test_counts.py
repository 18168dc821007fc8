"""Counts are additive, mergeable only within a config, and survive save/load."""
import json

import numpy as np
import pytest

from mss_protocol.config_file import ConfigError
from mss_protocol.counts import Counts
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.sampler import sample_reports
from mss_protocol.mss.wire import Report

CFG = MssConfig.build(64, 2.0, [59, 61, 63])


def _reports(seed, n=500):
    values = np.random.default_rng(seed).integers(0, 64, size=n)
    j, subsets = sample_reports(CFG, values, np.random.default_rng(seed + 1))
    return [Report(CFG.config_id, 0, i, int(jj), z) for i, (jj, z) in enumerate(zip(j, subsets))]


def test_add_tallies_every_member():
    reps = _reports(1)
    counts = Counts(CFG).add(reps)
    want = np.zeros(CFG.offsets[-1], dtype=np.int64)
    for r in reps:
        for v in r.subset:
            want[CFG.offsets[r.j] + v] += 1
    assert counts.c.tolist() == want.tolist()
    assert counts.total == len(reps)


def test_merge_is_addition():
    a, b = Counts(CFG).add(_reports(1)), Counts(CFG).add(_reports(2))
    both = Counts(CFG).add(_reports(1) + _reports(2))
    merged = a.merge(b)
    assert merged.n.tolist() == both.n.tolist() and merged.c.tolist() == both.c.tolist()


def test_merge_rejects_other_config():
    other = MssConfig.build(64, 1.0, [59, 61, 63])
    with pytest.raises(ConfigError, match="cannot merge"):
        Counts(CFG).merge(Counts(other))


def test_save_load_round_trip(tmp_path):
    counts = Counts(CFG).add(_reports(3))
    counts.save(tmp_path / "c.json")
    back = Counts.load(tmp_path / "c.json")
    assert back.cfg == CFG and back.n.tolist() == counts.n.tolist() and back.c.tolist() == counts.c.tolist()


@pytest.mark.parametrize("edit,match", [
    (lambda d: d.update(version=99), "not an mss-counts"),
    (lambda d: d["config"].update(config_id="00000000"), "config_id"),
    (lambda d: d["counts"][0].__setitem__(0, 10 ** 9), "exceeds"),
    (lambda d: d["n"].__setitem__(0, -1), "negative"),
    (lambda d: d["counts"].pop(), "bad count arrays"),
])
def test_corrupt_files_are_named(tmp_path, edit, match):
    d = Counts(CFG).add(_reports(4)).to_dict()
    edit(d)
    (tmp_path / "c.json").write_text(json.dumps(d))
    with pytest.raises(ConfigError, match=match):
        Counts.load(tmp_path / "c.json")
