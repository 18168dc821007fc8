"""The writer's batch decoding (``Ingest.decode_batch``: one ``codec.decode_many``
per batch) gives every message exactly the result of one-by-one classification
(``Ingest.from_mqtt``/``from_lorawan``/``from_serial``: ``codec.decode`` per
frame): the same report, or the same quarantine reason, detail and kept bytes.
Mixed batches of good frames, every kind of bad frame and link, compact frames
with the link's sequence, and epochs outside the window; fixed seeds and a
fixed clock, so every check is an exact equality (no false alarms)."""
import base64
import json
import random

import pytest

from mss_aggregator.collect.collectors import Writer
from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.lorawan import parse_spec
from mss_aggregator.collect.store import open_store
from mss_aggregator.devices.network_server import chirpstack_uplink
from mss_device.framing import frame as serial_line
from mss_protocol.choose import Limits, choose
from mss_protocol.codec import codec
from mss_protocol.configs import load_dict
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.wire import WireCodec
from mss_protocol.oracle_config import OracleConfig

PERIOD = 3600
NOW = 1_700_000_000.0
EPOCH = int(NOW) // PERIOD  # the campaign clock's epoch (origin 0)
PAST = 4  # aggregator.accept_past_epochs: the window is EPOCH - 4 .. EPOCH + 1
EPOCHS = range(EPOCH - PAST - 2, EPOCH + 4)  # two too old, the window, two in the future
APP = "app"

MSS = MssConfig.build(64, 2.0, [59, 61, 63])
GRR = load_dict(choose(16, 2.0, "grr", limits=Limits(frame="compact", max_bytes=11))["config"])
OLH = load_dict(choose(64, 2.0, "olh", limits=Limits(frame="compact-epoch", max_bytes=11))["config"])
RAPPOR = OracleConfig("rappor", 30, 2.0, "full")  # 30 bits: 2 padding bits


def ingest_of(cfg, lorawan=False):
    return Ingest(cfg, "t", PERIOD, clock=lambda: NOW, past_epochs=PAST, ports=(1, 3),
                  lorawan=parse_spec(f"chirpstack:{APP}") if lorawan else None)


def mutants(good, rng, count):
    """``count`` bad (or lucky) variants of the frames ``good``: a byte replaced, its
    last bytes (the body's) replaced, a header bit flipped, the frame cut or extended,
    or far too long."""
    out = []
    for _ in range(count):
        f = rng.choice(good)
        how = rng.randrange(6)
        if how == 0:
            i = rng.randrange(len(f))
            out.append(f[:i] + bytes([rng.randrange(256)]) + f[i + 1:])
        elif how == 1:
            out.append(f[:rng.randrange(len(f))])
        elif how == 2:
            out.append(f + bytes(rng.randrange(1, 4)))
        elif how == 3:
            out.append(bytes([f[0] ^ (1 << rng.randrange(8))]) + f[1:])
        elif how == 4:
            cut = rng.randrange(1, 4)
            out.append(f[:-cut] + rng.randbytes(cut))
        else:
            out.append(bytes(rng.randrange(200, 300)))
    return out


def mss_frames(rng):
    c = WireCodec(MSS)
    good = []
    for n in range(60):
        j = rng.randrange(MSS.l)
        subset = rng.sample(range(MSS.moduli[j]), MSS.omegas[j])
        good.append(c.encode(j, subset, epoch=rng.choice(EPOCHS), seq=n))
    # block 0's frame with every rank bit set: a rank >= C(59, 7), a rank error (its padding stays 0)
    pad = 8 * c.body_bytes[0] - c.body_bits[0]
    body = (((1 << MSS.rank_bits[0]) - 1) << pad).to_bytes(c.body_bytes[0], "big")
    return good + [c.encode(0, range(MSS.omegas[0]))[:-len(body)] + body]


def rappor_frames(rng):
    c = codec(RAPPOR)
    return [c.encode(rng.getrandbits(RAPPOR.k), epoch=rng.choice(EPOCHS), seq=n) for n in range(40)]


def mqtt_messages(good, rng):
    """(topic, payload): good frames (some sent twice), mutants, bad topics, all shuffled."""
    devices = [f"d{i}" for i in range(8)]
    msgs = [(f"mss/v1/t/{rng.choice(devices)}/report".encode(), p)
            for p in good + good[:10] + mutants(good, rng, 300)]
    msgs += [(b"mss/v1/other/d1/report", good[0]), (b"\xff\xfe/report", good[1]), (b"mss/v1/t/d1/status", good[2]),
             (b"mss/v1/t/" + b"x" * 300 + b"/report", good[3]), (b"mss/v1/t/bad id/report", good[4])]
    rng.shuffle(msgs)
    return msgs


def classified(ingest, receive, one, messages):
    """(batch results, one-by-one results) of ``messages``."""
    batch = ingest.decode_batch([receive(*m) for m in messages])
    return batch, [one(*m) for m in messages]


def reasons(results):
    return {r["reason"] for r in results if r and "reason" in r}


@pytest.mark.parametrize("cfg,make,needed", [
    (MSS, mss_frames, {"topic", "payload", "epoch", "wire_length", "wire_version", "wire_kind", "wire_config",
                       "wire_block", "wire_padding", "wire_rank"}),
    (RAPPOR, rappor_frames, {"topic", "payload", "epoch", "wire_length", "wire_version", "wire_kind",
                             "wire_config", "wire_padding"}),
])
def test_mqtt_batch_is_one_by_one(cfg, make, needed):
    rng = random.Random(1)
    ingest = ingest_of(cfg)
    messages = mqtt_messages(make(rng), rng)
    batch, one = classified(ingest, ingest.receive_mqtt, ingest.from_mqtt, messages)
    assert batch == one
    assert needed <= reasons(one), needed - reasons(one)
    assert sum("report" in r for r in one) >= 40  # accepted ones are compared too


def chirpstack(eui, fcnt, data, t, fport=1, edit=None):
    topic, doc = chirpstack_uplink(APP, eui, fport, fcnt, data, t)
    if edit:
        edit(doc)
    return topic.encode(), json.dumps(doc).encode()


def lorawan_messages(cfg, rng):
    """Uplink events: good compact frames at times in and out of the window (their
    FCnt the report's seq), copies, mutants, time probes, skips and bad events."""
    c = codec(cfg)
    euis = [f"70b3d57ed005{i:04x}" for i in range(6)]
    times = [(e + rng.random()) * PERIOD for e in EPOCHS]
    good = [c.encode(rng.randrange(c.n), epoch=EPOCH, seq=0) for _ in range(30)]
    msgs = [chirpstack(rng.choice(euis), rng.randrange(1 << 20), f, rng.choice(times))
            for f in good + good[:5] + mutants(good, rng, 100)]
    msgs += [chirpstack(euis[0], 7, b"\x00", NOW, fport=3), chirpstack(euis[1], 8, b"\x01", NOW, fport=3),
             chirpstack(euis[2], 9, good[0], NOW, fport=2), chirpstack(euis[2], 9, good[0], NOW, fport=0),
             chirpstack(euis[3], 1, good[1], NOW, edit=lambda d: d.update(data="!!not base64")),
             chirpstack(euis[3], 2, good[2], NOW, edit=lambda d: d.pop("deviceInfo")),
             chirpstack(euis[3], 3, good[3], NOW, edit=lambda d: d.update(fCnt="3")),
             (f"application/{APP}/device/{euis[4]}/event/up".encode(), b"{not json"),
             (b"application/other/device/x/event/up", b"{}")]
    rng.shuffle(msgs)
    return msgs


@pytest.mark.parametrize("cfg", [GRR, OLH], ids=["grr-compact", "olh-compact-epoch"])
def test_lorawan_batch_is_one_by_one(cfg):
    rng = random.Random(2)
    ingest = ingest_of(cfg, lorawan=True)
    messages = lorawan_messages(cfg, rng)
    batch, one = classified(ingest, ingest.receive_lorawan, ingest.from_lorawan, messages)
    assert batch == one
    assert {"epoch", "wire_config", "wire_length", "lorawan_fport", "lorawan_base64", "lorawan_field",
            "lorawan_json", "topic"} <= reasons(one)
    accepted = [r["report"] for r in one if r and "report" in r]
    assert len(accepted) >= 10 and any(r.seq > 0xFF for r in accepted)  # the FCnt's low 16 bits as seq
    assert {"time_probes"} == {r["ignored"] for r in one if "ignored" in r}
    assert any("skip" in r for r in one)


def test_serial_batch_is_one_by_one():
    rng = random.Random(3)
    ingest = ingest_of(MSS)
    good = mss_frames(rng)
    lines = [serial_line(f"s{rng.randrange(3)}", f).encode() for f in good + mutants(good, rng, 80)]
    lines += [b"console output", b"$MSS garbage", lines[0][:-3] + b"00\n", lines[1][:10]]
    rng.shuffle(lines)
    messages = [(f"/dev/tty{rng.randrange(2)}", line) for line in lines]
    batch, one = classified(ingest, ingest.receive_serial, ingest.from_serial, messages)
    assert batch == one
    assert None in one and {"frame", "checksum", "epoch", "wire_rank"} <= reasons(one)


def test_writer_stores_what_one_by_one_stores(tmp_path):
    """The writer (batch decoding) and write_batch of the one-by-one results store the
    same reports and quarantine rows with the same outcomes; every message is acked
    once, after its batch."""
    rng = random.Random(4)
    ingest = ingest_of(MSS)
    messages = mqtt_messages(mss_frames(rng), rng)
    batch_store, one_store = open_store(tmp_path / "b.sqlite", MSS), open_store(tmp_path / "o.sqlite", MSS)
    seen, acked = [], []
    writer = Writer(batch_store, ingest, on_batch=lambda items, outcomes: seen.append((items, outcomes)))
    for n, m in enumerate(messages):
        writer.inbox.put((lambda m=m: ingest.receive_mqtt(*m), lambda n=n: acked.append(n)))
    writer.start()
    writer.stop()
    assert writer.error is None and sorted(acked) == list(range(len(messages)))
    one = [ingest.from_mqtt(*m) for m in messages]
    assert [it for items, _ in seen for it in items] == one
    assert [o for _, outcomes in seen for o in outcomes] == one_store.write_batch(one)
    assert batch_store.counters() == one_store.counters()
    assert batch_store.counts().to_dict() == one_store.counts().to_dict() and batch_store.counts().total > 0
    batch_store.close()
    one_store.close()


@pytest.mark.parametrize("cfg,make", [(MSS, mss_frames), (RAPPOR, rappor_frames)], ids=["mss", "rappor"])
def test_batch_of_no_good_frame(cfg, make):
    """A batch with no frame to decode, or none that decodes, is still each one's result."""
    rng = random.Random(5)
    ingest = ingest_of(cfg)
    bad = [(b"mss/v1/t/d1/report", p) for p in (b"", b"\xff" * 12, bytes(5000))]
    for messages in ([], bad, [(b"mss/v1/x/d1/report", make(rng)[0])]):
        assert ingest.decode_batch([ingest.receive_mqtt(*m) for m in messages]) == [ingest.from_mqtt(*m)
                                                                                   for m in messages]
