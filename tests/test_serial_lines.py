"""protocol/vectors/serial/lines.json (SPEC.md section 8) against the board's
writer and the host's reader; the board's device-id check against the host's."""
import json

import pytest
from hypothesis import given, settings as hsettings
from hypothesis import strategies as st

from mss_aggregator.collect.ingest import Ingest
from mss_device.framing import crc16, frame
from mss_device.gateway import DEVICE_ID, LineError, parse
from mss_node import settings
from mss_protocol import serial_lines
from mss_protocol.oracle_config import OracleConfig


def test_the_vectors_read_as_stated():
    assert serial_lines.check(serial_lines.PATH) == []


def test_the_vectors_cover_the_cases():
    d = json.loads(serial_lines.PATH.read_text())
    good = [v["line"] for v in d["lines"]]
    assert any(line.endswith("\r\n") for line in good) and any(not line.endswith("\r\n") for line in good)
    assert {len(v["device_id"]) for v in d["lines"]} >= {64}
    bad = {v["line"]: v["reason"] for v in d["rejected"]}
    assert set(bad.values()) == {"frame", "checksum"}
    fields = [line.rstrip("\r\n").split(",") for line in bad]
    assert any(line.startswith("$MSS1,") for line in bad)
    assert any(f[-1] == "+fff" for f in fields) and any(line.endswith(" \n") for line in bad)
    assert {len(f) for f in fields} >= {3, 4, 5}
    assert any(len(f) == 4 and f[2] == "" for f in fields) and any(len(f) == 4 and len(f[2]) % 2 for f in fields)
    assert any(len(f) == 4 and f[2] != f[2].lower() for f in fields)
    ids = [f[1] for f in fields if len(f) == 4 and f[0] == "$MSS2"]
    assert "" in ids and any(len(i) > 64 for i in ids) and any(" " in i for i in ids)
    assert d["ignored"]


@pytest.mark.parametrize("mutate", [
    lambda d: d["rejected"][0].update(reason="frame"),  # a checksum case
    lambda d: d["rejected"][3].update(reason="checksum"),  # a frame case
    lambda d: d["lines"][0].update(device_id="board-08"),
    lambda d: d["lines"][0].update(line=d["lines"][0]["line"].replace("be1d", "be1e")),
    lambda d: d["ignored"].append(d["lines"][0]["line"]),
    lambda d: d["lines"].append({"line": d["rejected"][0]["line"], "device_id": "board-07",
                                 "report_hex": d["lines"][0]["report_hex"]}),
])
def test_a_wrong_vector_is_caught(tmp_path, mutate):
    d = json.loads(serial_lines.PATH.read_text())
    mutate(d)
    path = tmp_path / "lines.json"
    path.write_text(json.dumps(d))
    assert serial_lines.check(path)


def test_write_makes_a_file_that_checks(tmp_path):
    path = tmp_path / "serial" / "lines.json"
    serial_lines.write(path)
    assert serial_lines.check(path) == []
    assert serial_lines.main(["--check", str(path)]) == 0


def test_crc_check_value_and_the_spec_vector():
    assert crc16(b"123456789") == 0x29B1
    assert parse("$MSS2,board-07,012445113600011170002d40,be1d\n") == ("board-07",
                                                                     bytes.fromhex("012445113600011170002d40"))


def test_board_and_host_take_the_same_device_ids():
    """mss_node.settings (no ``re`` on the board) and mss_device.gateway.DEVICE_ID agree."""
    d = OracleConfig("grr", 5, 1.0).to_dict()

    def board_takes(device_id):
        try:
            settings.Settings(dict(d, device={"device_id": device_id, "transport": "serial"}))
            return True
        except ValueError as exc:
            assert "device.device_id" in str(exc)
            return False

    for c in map(chr, range(0x300)):
        assert board_takes("a" + c) == bool(DEVICE_ID.match("a" + c)), repr(c)
    for n in (0, 1, 63, 64, 65, 200):
        assert board_takes("x" * n) == bool(DEVICE_ID.match("x" * n)) == (1 <= n <= 64)
    assert not DEVICE_ID.match("ab\n") and not board_takes("ab\n")

INGEST = Ingest(OracleConfig("grr", 5, 1.0), "t")


@hsettings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.sampled_from([b"", b"$MSS", b"$MSS2,", b"$MSS2,board-07,", b"$MSS1,"]))
def test_any_bytes_read_without_surprise(data, head):
    """Whatever arrives: None, (id, report), or a LineError with reason frame or checksum."""
    line = head + data
    held = INGEST.from_serial("p", line)  # the aggregator's classification never raises
    assert (held is None) == (not line.startswith(b"$MSS")) and (held is None or held["source"] == "serial:p")
    try:
        out = parse(line)
    except LineError as exc:
        assert exc.reason in ("frame", "checksum") and str(exc).startswith(exc.reason + ": ")
        return
    if out is None:
        assert not line.startswith(b"$MSS")
    else:
        device_id, report = out
        assert DEVICE_ID.match(device_id) and report and frame(device_id, report) in (
            line.decode() + "\n" * (not line.endswith(b"\n")),
            line.decode().replace("\r\n", "\n") + "\n" * (not line.endswith(b"\n")))
