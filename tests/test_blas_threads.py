"""The decoders run with one BLAS thread, and give the caller's setting back (issue 28).

OpenBLAS's default pool (a thread per core) makes each of LSMR's small
level-1 calls wait for a second thread when other processes hold the cores
(an MSS decode at k = 22000: 1.2 s instead of 0.2 s at load average 16;
tools/bench_loaded.py).  A hook in place of LSMR reads threadpoolctl's view
of every BLAS library from inside a decode.  The caller first sets 2
threads, so a decode that forgot the limit would show 2 and fail, on any
machine.  Deterministic: no randomness in what is checked.
"""
import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from mss_protocol.mss import decoder, linalg
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.protocol import MssProtocol

K = 256
MODULI = {"mss": [241, 251, 253, 255], "ss": [K]}  # fixed moduli: no planner run in a unit test


def blas_threads():
    """{library path: threads} of every loaded BLAS."""
    return {i["filepath"]: i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


@pytest.fixture
def seen(monkeypatch):
    """The BLAS threads LSMR ran with, one dict per call."""
    calls = []

    def spy(*args, **kwargs):
        calls.append(blas_threads())
        return real(*args, **kwargs)

    real = decoder.lsmr
    monkeypatch.setattr(decoder, "lsmr", spy)
    return calls


def decode_counts(name, seed=1):
    """An MSS protocol (``name``: mss or its one-block case ss) and counts of 2000 reports."""
    proto = MssProtocol(MssConfig.build(K, 2.0, MODULI[name]))
    rng = np.random.default_rng(seed)
    return proto, proto.sample_counts(rng.integers(0, K, 2000), rng)


@pytest.mark.parametrize("name", ["mss", "ss"])
def test_decode_runs_on_one_blas_thread_and_restores(name, seen):
    proto, counts = decode_counts(name)
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        assert before and set(before.values()) == {2}
        proto.decode(counts, counts.total, "none")
        after = blas_threads()
    assert len(seen) == 1 and seen[0].keys() == before.keys()
    assert set(seen[0].values()) == {1}, seen[0]
    assert after == before


def test_opt_out_leaves_the_callers_threads(seen, monkeypatch):
    """BLAS_THREADS = None, the behaviour tools/bench_loaded.py compares against."""
    monkeypatch.setattr(linalg, "BLAS_THREADS", None)
    proto, counts = decode_counts("mss")
    with threadpool_limits(limits=2, user_api="blas"):
        proto.decode(counts, counts.total, "none")
    assert set(seen[0].values()) == {2}


def test_limit_restored_when_decode_raises():
    proto, _ = decode_counts("mss")
    _, other = decode_counts("ss")  # counts made under another config: decode raises
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        with pytest.raises(ValueError, match="another config"):
            proto.decoder.decode(other)
        assert blas_threads() == before
