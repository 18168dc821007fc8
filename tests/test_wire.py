"""Wire format: round trips, fixed lengths, shared vectors, fuzzed decoding."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mss_device.frame import HEADER_BYTES
from mss_protocol import vectors
from mss_protocol import registry
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import plan
from mss_protocol.vectors import check_file
from mss_protocol.mss.wire import WireCodec, WireError

VECTORS = vectors.files()


def _configs():
    return [MssConfig.build(8, 1.0, [5, 7]),
            MssConfig.from_dict(plan(64, 1.0)["config"]),
            MssConfig.from_dict(plan(1024, 4.0)["config"]),
            MssConfig.from_dict(plan(1024, 1.0)["config"]),
            MssConfig.build(1024, 4.0, [521, 541, 562, 613, 671, 691, 701, 719, 725, 777]),
            MssConfig.build(40000, 6.0, [39997, 39989])]  # moduli above 2**15: 7-bit limbs


@pytest.fixture(scope="module", params=range(6),
                ids=["k8", "k64e1", "k1024e4", "k1024e1", "k1024-10m", "k40000"])
def codec(request):
    return WireCodec(_configs()[request.param])


def test_round_trip_every_block(codec):
    rng = np.random.default_rng(7)
    cfg = codec.cfg
    for j, (m, w) in enumerate(zip(cfg.moduli, cfg.omegas)):
        for extreme in (range(w), range(m - w, m)):  # smallest and largest ranks
            data = codec.encode(j, list(extreme), epoch=5, seq=9)
            assert codec.decode(data).subset == tuple(extreme)
        for _ in range(20 if cfg.k < 10000 else 4):
            z = tuple(sorted(rng.choice(m, size=w, replace=False).tolist()))
            data = codec.encode(j, z, epoch=123456, seq=65535)
            r = codec.decode(data)
            assert (r.j, r.subset, r.epoch, r.seq) == (j, z, 123456, 65535)
            assert len(data) == HEADER_BYTES + codec.body_bytes[j]
            assert 8 * codec.body_bytes[j] - 8 < cfg.jbits + cfg.rank_bits[j] <= 8 * codec.body_bytes[j]


def test_length_does_not_depend_on_value():
    cfg = MssConfig.from_dict(plan(64, 1.0)["config"])
    from mss_device.encoder import encode
    from mss_device.randomiser import privatise
    from mss_device.rng import ByteRng

    mark = bytearray(8)
    lengths = {}
    for x in range(64):
        for _ in range(30):
            j = privatise(cfg, x, ByteRng(), mark)
            lengths.setdefault(j, set()).add(len(encode(cfg, j, mark, 0, 0)))
    assert all(len(v) == 1 for v in lengths.values())


@pytest.mark.parametrize("path", VECTORS, ids=[f"{p.parent.name}-{p.stem}" for p in VECTORS])
def test_vectors_reproduce_decode_and_reject(path):
    """Device client -> report_hex, decoder -> (j, subset), each rejected input -> its reason."""
    assert check_file(path) == []


def test_vectors_cover_every_protocol_frame_and_path():
    docs = [json.loads(p.read_text()) for p in VECTORS]
    assert {d["protocol"] for d in docs} == set(registry.AVAILABLE)
    assert {d["config"]["frame"] for d in docs} == {"full", "compact", "compact-epoch"}
    moduli = {m for d in docs for m in d["config"].get("moduli", [])}
    assert max(moduli) > 65536 and {256, 257} <= moduli  # 3-byte draws and 7-bit limbs; the 1/2-byte edge
    reasons = {r["reason"] for d in docs for r in d["rejected"]}
    assert {"length", "version", "config", "rank", "value"} <= reasons


@pytest.mark.parametrize("mutate,reason", [
    (lambda b: b[:-1], "length"),
    (lambda b: b + b"\0", "length"),
    (lambda b: b"\x02" + b[1:], "version"),
    (lambda b: b[:1] + bytes(4) + b[5:], "config"),
    (lambda b: b"", "length"),
])
def test_malformed_reports_are_named(mutate, reason):
    codec = WireCodec(MssConfig.build(8, 1.0, [5, 7]))
    data = codec.encode(1, [0, 6])
    with pytest.raises(WireError) as exc:
        codec.decode(mutate(data))
    assert exc.value.reason == reason


def test_out_of_range_block_rank_and_padding():
    cfg = MssConfig.build(8, 1.0, [5, 7])  # jbits 1; block 0: 3 rank bits, block 1: 5
    codec = WireCodec(cfg)
    head = codec.encode(0, [2])[:HEADER_BYTES]
    with pytest.raises(WireError, match="rank"):
        codec.decode(head + bytes([0b0_111_0000]))  # rank 7 >= C(5, 1)
    with pytest.raises(WireError, match="padding"):
        codec.decode(head + bytes([0b0_010_0001]))
    cfg3 = MssConfig.build(9, 3.0, [5, 7, 8])  # jbits 2: j = 3 does not exist
    codec3 = WireCodec(cfg3)
    head3 = codec3.encode(0, [1])[:HEADER_BYTES]
    with pytest.raises(WireError, match="block"):
        codec3.decode(head3 + bytes([0b11_000000]))


FUZZ_CODEC = WireCodec(MssConfig.build(1024, 4.0, [521, 541, 562, 613, 671, 691, 701, 719, 725, 777]))
VALID = FUZZ_CODEC.encode(3, list(range(FUZZ_CODEC.cfg.omegas[3])), epoch=1, seq=2)


@settings(max_examples=3000, deadline=None)
@given(st.one_of(st.binary(max_size=40),
                 st.binary(min_size=len(VALID) - HEADER_BYTES, max_size=len(VALID) - HEADER_BYTES)
                 .map(lambda body: VALID[:HEADER_BYTES] + body)))
def test_decoder_never_crashes(data):
    try:
        r = FUZZ_CODEC.decode(data)
    except WireError as exc:
        assert exc.reason in {"length", "version", "kind", "config", "epoch", "block", "padding", "rank"}
        return
    # anything accepted is a well-formed report that encodes back to the same bytes
    assert FUZZ_CODEC.encode(r.j, r.subset, r.epoch, r.seq) == data


FUZZ_FRAMES = st.one_of(st.binary(max_size=40),
                        st.binary(min_size=len(VALID) - HEADER_BYTES, max_size=len(VALID) - HEADER_BYTES)
                        .map(lambda body: VALID[:HEADER_BYTES] + body))


@settings(max_examples=300, deadline=None)
@given(st.lists(FUZZ_FRAMES, max_size=12))
def test_batch_decoder_agrees_with_decoder(frames):
    """decode_many refuses what decode refuses, with the same WireError, and decodes the rest alike."""
    batch = FUZZ_CODEC.decode_many(frames)
    for n, data in enumerate(frames):
        try:
            r = FUZZ_CODEC.decode(data)
        except WireError as exc:
            assert isinstance(batch.errors[n], WireError) and str(batch.errors[n]) == str(exc)
        else:
            assert n not in batch.errors and batch.report(batch.positions.index(n)) == r
    assert len(batch) + len(batch.errors) == len(frames)
