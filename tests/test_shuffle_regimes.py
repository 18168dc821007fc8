"""Issue 44: every central guarantee ``mss estimate`` prints for a shuffled store holds against
the attacks built here, and says which regime (fresh or memoized draws) and how many honest
devices it counts.

* The two-batch intersection attack: SubsetSelection, k = 256, eps0 = 4, two batches of
  n = 10,000 devices; the target keeps its memoized body while every other device re-draws.
* The n - 1 flood: one victim's report and 99 of three attacker boards, through the real
  shuffler queue (:class:`~mss_aggregator.shuffle.queue.ShuffleQueue`).
"""
import math
import sqlite3
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import beta

from mss_aggregator.collect import central
from mss_aggregator.collect import scope as scopes
from mss_aggregator.collect.shuffled import ShuffledIngest
from mss_aggregator.collect.store import SHUFFLER, open_store
from mss_aggregator.shuffle.queue import QueueError, ShuffleQueue
from mss_aggregator.web.live import LiveView
from mss_cli.main import main
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.sampler import sample_bitmaps
from mss_protocol.mss.wire import WireCodec
from mss_protocol.shuffled_batch import compact_body, encode_batch
from mss_protocol.shuffling import bound_args, central_epsilon, compose, config_bound

KEY = bytes(range(32))
SS = MssConfig.subset_selection(256, 4.0)  # omega = 5
OWN = bound_args(*config_bound(SS))  # the central figure's bound: subset selection's own (ss, 256, 5)
N, DELTA = 10_000, 1e-6
TRIALS = 150
ALPHA = 1e-3  # each one-sided Clopper-Pearson bound below: a false alarm at most once in 1000 runs


def naming_ceiling(eps, delta, k):
    """The most any (eps, delta)-DP release lets an attacker name a uniformly drawn value of k:
    e^eps / (e^eps + k - 1) + delta."""
    return math.exp(eps) / (math.exp(eps) + k - 1) + delta


def subsets(cfg, values, rng):
    """SS bodies drawn by the project's randomiser: (key, packed bitmaps), key one 64-bit
    hash of each subset (a collision between two of 2 x 10^4 subsets: below 1e-11)."""
    _, [(rows, z)] = sample_bitmaps(cfg, np.asarray(values), rng)
    bits = np.packbits(z[np.argsort(rows)], axis=1)
    words = np.ascontiguousarray(bits).view(np.uint64)
    return (words * MIX[:words.shape[1]]).sum(axis=1, dtype=np.uint64), bits


MIX = np.random.default_rng(2021).integers(1, 2**63, size=8, dtype=np.uint64) | np.uint64(1)


def intersection_attack(cfg, n, trials, seed):
    """(isolated, named): in how many of ``trials`` the body common to two shuffled batches of
    ``n`` was one (the target's), and how often the attacker named the target's value, a uniform
    member of a common subset (its MAP guess under a uniform prior; a uniform value when none)."""
    rng = np.random.default_rng(seed)
    isolated = named = 0
    for _ in range(trials):
        x = int(rng.integers(cfg.k))
        others = rng.integers(cfg.k, size=n - 1)  # their values; each batch a fresh draw of them
        target = subsets(cfg, [x], rng)  # memoized: the same body in both batches
        one, two = ([np.concatenate([t, o]) for t, o in zip(target, subsets(cfg, others, rng))] for _ in range(2))
        order = rng.permutation(n)  # the shuffle (the attack below reads the batches as sets anyway)
        one = [a[order] for a in one]
        common = np.intersect1d(one[0], two[0])
        isolated += common.size == 1
        if common.size:
            row = np.flatnonzero(one[0] == common[rng.integers(common.size)])[0]
            guess = int(rng.choice(np.flatnonzero(np.unpackbits(one[1][row])[:cfg.k])))
        else:
            guess = int(rng.integers(cfg.k))
        named += guess == x
    return isolated, named


def shuffled_store(path, cfg, batches, memoize):
    """A store of ``mss aggregate --shuffled`` holding ``batches`` [(batch id, epoch, first, bodies, colluding)]."""
    ingest = ShuffledIngest(cfg, "t", KEY)
    store = open_store(path, cfg)
    store.record_mode(SHUFFLER)
    store.record_memoize(memoize)
    for batch_id, epoch, first, bodies, colluding in batches:
        data = encode_batch(KEY, cfg, batch_id, epoch, first, bodies, colluding)
        store.write_batch(ingest.decode_batch([ingest.receive_mqtt(b"mss/v1/t/shuffled", data, "mqtt")]))
    return store


def ss_bodies(cfg, values, rng):
    """Compact SS bodies of ``values`` as a board sends them (the device encoder)."""
    codec = WireCodec(cfg)
    j, blocks = sample_bitmaps(cfg, np.asarray(values), rng)
    [(rows, z)] = blocks
    subsets = [tuple(np.flatnonzero(row).tolist()) for row in z[np.argsort(rows)]]
    return [compact_body(cfg, "full", codec.encode(0, s, epoch=5, seq=1)) for s in subsets]


def test_two_batch_intersection_attack_against_the_printed_guarantee(tmp_path):
    """The memoized target's body is isolated by intersecting two batches; its value is named
    more often than the fresh-draw composition (the old rule: 0.0129) allows, and never
    significantly more than the guarantee printed now (the memoized draw's eps0 = 4: 0.176)."""
    isolated, named = intersection_attack(SS, N, TRIALS, seed=44)
    lo = beta.ppf(ALPHA, named, TRIALS - named + 1)  # one-sided lower Clopper-Pearson bound
    old = compose(central_epsilon(SS.eps_effective, N, DELTA), 2)
    old_ceiling = naming_ceiling(old.eps, old.delta, SS.k)
    assert isolated >= 0.95 * TRIALS  # two size-5 subsets of 256 agree with probability ~1e-10 a pair

    rng = np.random.default_rng(1)  # the guarantee counts the bodies, not their contents: 1000 drawn, tiled
    target, others = ss_bodies(SS, [7], rng), ss_bodies(SS, rng.integers(SS.k, size=1000), rng)
    batches = [(bytes([b]) * 16, 5 + b, 5 + b, target + others * ((N - 1) // 1000) + others[:(N - 1) % 1000], 0)
               for b in (1, 2)]
    store = shuffled_store(tmp_path / "s.sqlite", SS, batches, memoize=True)
    try:
        doc = central.guarantee(store, scopes.select(store, all_epochs=True), DELTA)
        one = central.guarantee(store, scopes.select(store, epoch=6), DELTA)
    finally:
        store.close()
    printed = naming_ceiling(doc["eps"], doc["delta"], SS.k)
    print(f"isolated {isolated}/{TRIALS}, named {named}/{TRIALS} (lower {lo:.3f}); printed {doc['eps']:.4g} "
          f"-> {printed:.4f}, old rule {old.eps:.4g} -> {old_ceiling:.4f}")
    assert lo > old_ceiling  # the old rule's figure is broken by the attack
    assert lo <= printed  # the printed one is not
    assert (doc["guarantee"], doc["regime"], doc["eps"], doc["delta"]) == ("local", "memoized", SS.eps_effective, 0)
    assert doc["devices"] == N and doc["batches"] == 2 and "intersecting" in doc["why"]
    # one epoch's batch alone: the same memoized body is in the other batch, so no central figure either
    assert (one["guarantee"], one["eps"], one["batches"]) == ("local", SS.eps_effective, 1)
    assert central.line(doc).startswith("no central guarantee of the shuffled release (memoized reports")


def test_fresh_draws_compose_and_one_memoized_batch_is_central(tmp_path):
    """Fresh draws: the composition over the batches, the regime named; a store of one memoized
    batch has released the body once: that batch's eps_c."""
    rng = np.random.default_rng(2)
    bodies = ss_bodies(SS, rng.integers(SS.k, size=1000), rng) * (N // 1000)
    fresh = shuffled_store(tmp_path / "f.sqlite", SS, [(b"\1" * 16, 5, 5, bodies, 0), (b"\2" * 16, 6, 6, bodies, 0)],
                           memoize=False)
    try:
        doc = central.guarantee(fresh, scopes.select(fresh, all_epochs=True), DELTA)
    finally:
        fresh.close()
    total = compose(central_epsilon(SS.eps_effective, N, DELTA, *OWN), 2)
    assert (doc["guarantee"], doc["regime"], doc["eps"], doc["delta"], doc["devices"]) == (
        "central", "fresh", total.eps, total.delta, N)
    once = shuffled_store(tmp_path / "m.sqlite", SS, [(b"\1" * 16, 5, 5, bodies, 0)], memoize=True)
    try:
        doc = central.guarantee(once, scopes.select(once, epoch=5), DELTA)
        assert (doc["guarantee"], doc["regime"], doc["eps"]) == (
            "central", "memoized", central_epsilon(SS.eps_effective, N, DELTA, *OWN).eps)
        view = LiveView(str(tmp_path / "m.sqlite"))  # the dashboard's API states the same, with its line
        try:
            shown = view.estimates()["central"]
        finally:
            view.close()
        assert shown["regime"] == "memoized" and shown["eps"] == doc["eps"] and "memoized reports" in shown["text"]
    finally:
        once.close()


def test_n_minus_1_flood_is_held_or_counted_as_the_attacker_s(tmp_path):
    """One victim's report and 99 of three attacker boards (33 epochs each, all within the
    window) in the real queue: 4 devices, so no batch under --min-batch 100; under --min-batch 4
    the batch holds one body a device, and with the three attacker boards assumed colluding the
    estimate prints no central guarantee (one honest device: the local one stands)."""
    cfg = MssConfig.build(64, 2.0, [59, 61, 63])
    codec = WireCodec(cfg)
    rng = np.random.default_rng(3)

    def item(device, epoch):
        j = int(rng.integers(cfg.l))
        frame = codec.encode(j, tuple(range(cfg.omegas[j])), epoch=epoch, seq=1)
        return {"device_id": device, "payload": frame, "report": replace(codec.decode(frame), epoch=epoch)}
    queue = ShuffleQueue(tmp_path / "q.sqlite", cfg, "t", KEY, colluding=3)
    try:
        items = [item("victim", 40)] + [item(f"attacker{a}", e) for a in range(3) for e in range(8, 41)]
        assert len(items) == 100 and queue.write_batch(items) == ["accepted"] * 100
        assert queue.held_through(40) == 4 and queue.make_batch(40, 100) is None  # held: 4 devices, not 100
        batch_id, n = queue.make_batch(40, 4)
        assert n == 4 and queue.counters()["superseded"] == 96 and queue.counters()["held"] == 0
        data = queue.batch(batch_id)
    finally:
        queue.close()
    ingest = ShuffledIngest(cfg, "t", KEY)
    store = open_store(tmp_path / "s.sqlite", cfg)
    try:
        store.record_mode(SHUFFLER)
        store.record_memoize(False)
        store.write_batch(ingest.decode_batch([ingest.receive_mqtt(b"mss/v1/t/shuffled", data, "mqtt")]))
        doc = central.guarantee(store, scopes.select(store, epoch=40), DELTA)
        assert scopes.select(store, epoch=40).devices == 4  # the batch's devices, never its slots
    finally:
        store.close()
    assert (doc["guarantee"], doc["eps"], doc["n"], doc["devices"], doc["colluding"]) == (
        "local", cfg.eps_effective, 4, 1, 3)
    assert "no central guarantee" in central.line(doc) and "3 of a batch's devices assumed colluding" in central.line(doc)


def test_assume_colluding_option():
    run = CliRunner().invoke(main, ["shuffle", "-h"])
    text = " ".join(run.output.split())  # click wraps the help
    assert "--assume-colluding C Devices of each batch" in text
    assert "[default: 0;" in text.split("--assume-colluding C")[1].split("--forward-broker")[0]
    run = CliRunner().invoke(main, ["shuffle", "--config", __file__, "--campaign", "t", "--broker",
                                    "mqtt://127.0.0.1:1", "--queue", "/nonexistent/q", "--min-batch", "5",
                                    "--assume-colluding", "5"])
    assert run.exit_code == 2 and "must be below --min-batch (5)" in run.output


def test_a_queue_of_an_older_shuffler(tmp_path):
    """Held bodies without their device digest cannot be batched one a device: such a queue is
    refused while it holds any; an empty one is upgraded."""
    cfg = MssConfig.build(64, 2.0, [59, 61, 63])
    for name, rows in (("full", 1), ("empty", 0)):
        ShuffleQueue(tmp_path / name, cfg, "t", KEY).close()
        with sqlite3.connect(tmp_path / name) as db:
            db.execute("DROP TABLE held")
            db.execute("CREATE TABLE held (k BLOB PRIMARY KEY, epoch INTEGER NOT NULL, body BLOB NOT NULL) "
                       "WITHOUT ROWID")
            db.executemany("INSERT INTO held VALUES (?, 1, x'81')", [(bytes([i]),) for i in range(rows)])
        db.close()
    with pytest.raises(QueueError, match="holds reports of an older mss shuffle"):
        ShuffleQueue(tmp_path / "full", cfg, "t", KEY)
    q = ShuffleQueue(tmp_path / "empty", cfg, "t", KEY)
    assert [c[1] for c in q.db.execute("PRAGMA table_info(held)")] == ["k", "epoch", "dev", "body"]
    q.close()
