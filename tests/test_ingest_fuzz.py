"""10,000 fuzzed payloads and topics through classification and the store:
no crash, every one quarantined with a reason, counts unchanged."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mss_aggregator.collect.ingest import Ingest
from mss_aggregator.collect.store import open_store
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.wire import WireCodec

CFG = MssConfig.build(64, 2.0, [59, 61, 63])
GOOD = WireCodec(CFG).encode(0, list(range(CFG.omegas[0])), epoch=1, seq=1)

topics = st.one_of(
    st.binary(max_size=300),  # anything, non-UTF-8 included
    st.just(b""),
    st.builds(lambda d: f"mss/v1/t/{d}/report".encode(), st.text(max_size=80)),
    st.just(b"mss/v1/t/" + b"x" * 300 + b"/report"),
    st.just(b"mss/v1/other/dev/report"),
)
payloads = st.one_of(
    st.binary(max_size=64),
    st.binary(min_size=len(GOOD), max_size=len(GOOD)),
    st.builds(lambda i, b: GOOD[:i] + bytes([b]) + GOOD[i + 1:], st.integers(0, len(GOOD) - 1),
              st.integers(0, 255)).filter(lambda p: p != GOOD),
    st.just(bytes(100_000)),
)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = open_store(tmp_path_factory.mktemp("fuzz") / "s.sqlite", CFG)
    yield s
    s.close()


def _is_valid_report(topic, payload):
    try:
        ok_topic = topic.decode().split("/")[:3] == ["mss", "v1", "t"]
    except UnicodeDecodeError:
        return False
    try:
        WireCodec(CFG).decode(payload)
    except ValueError:
        return False
    return ok_topic


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(topics, payloads), min_size=100, max_size=100))
def test_fuzzed_messages_never_count(store, batch):
    ingest = Ingest(CFG, "t")
    batch = [(t, p) for t, p in batch if not _is_valid_report(t, p)]  # keep only invalid ones
    before_counts = store.counts()
    before = store.counters()
    items = [ingest.from_mqtt(t, p) for t, p in batch]
    assert all("reason" in it and it["reason"] for it in items)
    assert store.write_batch(items) == ["quarantined"] * len(items)
    after = store.counters()
    assert after["accepted"] == before["accepted"] and after["received"] == before["received"] + len(items)
    assert after["rejected"] == before["rejected"] + len(items)
    assert store.counts().c.tolist() == before_counts.c.tolist()
