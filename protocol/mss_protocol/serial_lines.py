"""Test vectors of serial lines (SPEC.md section 8): ``protocol/vectors/serial/lines.json``.

``{"name": "serial-lines", "lines": [{"line", "device_id", "report_hex"[, "vector"]}],
"statuses": [{"line", "device_id", "word", "effect"[, "epoch"]}],
"rejected": [{"line", "reason"}], "ignored": [line],
"streams": [{"stream", "lines", "rest"}]}``.  A writer given
``device_id`` and ``report_hex`` must write ``line`` (the CRLF variant
aside), and a reader must read each of ``lines`` to its device id and
report (``vector``: the protocol vector file, under protocol/vectors/, one
of whose vectors the report and device id are: every protocol and frame
kind a serial link carries), read each of ``statuses`` as a status line of
``device_id`` and ``word`` (a writer given both writes ``line``; ``effect``
is what the aggregator makes of it: ``no_clock``, ``clock``, ``skipped``
with the ``epoch`` counted, ``ignored``), reject each of ``rejected`` with
its ``reason`` (``frame`` or ``checksum``), ignore each of ``ignored``
(console output), and split each of ``streams`` (bytes as a port gives
them) into exactly ``lines`` (their LF taken off) leaving ``rest``, no line
until its LF comes.  :func:`write` makes the file with the board's writers
(:func:`mss_device.framing.frame`, ``status_line``) and :func:`check`
verifies it against the writers and the host's reader
(:mod:`mss_device.gateway`: ``parse``, ``parse_status``, ``split_lines``)::

    python -m mss_protocol.serial_lines --write protocol/vectors/serial/lines.json
    python -m mss_protocol.serial_lines --check protocol/vectors/serial/lines.json
"""
import json
import sys
from pathlib import Path

from mss_device.framing import HEAD, crc16, frame, status_line
from mss_device.gateway import LineError, parse, parse_status, split_lines
from mss_protocol.vector_cli import vector_main

PATH = Path(__file__).resolve().parents[1] / "vectors" / "serial" / "lines.json"
DEVICE_ID = "board-07"
# status words (SPEC.md section 8) -> what the aggregator makes of them
STATUSES = [("no-clock", "no_clock"), ("skipped-70000", "skipped"), ("skipped-0", "skipped"),
            ("online", "clock"), ("skipped", "ignored"), ("skipped-", "ignored"),
            ("skipped-1234567890123", "ignored"), ("reboot-2", "ignored"), ("a", "ignored")]


def _line(fields):
    """A line of ``fields`` (after the head) with the CRC its grammar asks for: a
    malformed line whose only fault is its grammar, not its checksum."""
    body = HEAD + ",".join(fields)
    return "%s,%04x\n" % (body, crc16(body.encode()))


def _report():
    """The vectors' report: the device client's, grr at k = 5, epsilon 1, full frame, value 2, epoch 70000,
    sequence 45 (its hex and its line's CRC have letters), from fixed random bytes."""
    from mss_protocol.oracle_config import OracleConfig
    from mss_protocol.vectors import report_from_stream

    return report_from_stream(config=OracleConfig("grr", 5, 1.0).to_dict(), value=2, stream=bytes(range(256)),
                              epoch=70000, seq=45, device_id=DEVICE_ID)[0]


def _protocol_lines():
    """A line of the first vector of every protocol vector file whose frame kind a serial link
    carries (full, compact-epoch: SPEC.md section 4), each naming its file."""
    from mss_protocol.vectors import ROOT, files

    out = []
    for path in files(ROOT):
        d = json.loads(path.read_text())
        if d["config"].get("frame", "full") == "compact":
            continue
        v = d["vectors"][0]
        out.append({"line": frame(v["device_id"], bytes.fromhex(v["report_hex"])), "device_id": v["device_id"],
                    "report_hex": v["report_hex"], "vector": str(path.relative_to(ROOT))})
    return out


def make():
    """The document (see the module doc)."""
    r = _report().hex()
    good = frame(DEVICE_ID, bytes.fromhex(r))
    body, crc = good[:-6], good[-5:-1]
    other_crc = "%04x" % (int(crc, 16) ^ 0x0001)
    cut = r[:-1]  # an odd number of hex digits
    assert r != r.upper() and crc != crc.upper(), "the upper-case cases need hex letters"
    lines = [{"line": good, "device_id": DEVICE_ID, "report_hex": r},
             {"line": good[:-1] + "\r\n", "device_id": DEVICE_ID, "report_hex": r},  # MicroPython's USB REPL
             {"line": frame("A_z.0:9-x", b"\x00"), "device_id": "A_z.0:9-x", "report_hex": "00"},
             {"line": frame("d" * 64, bytes.fromhex(r)), "device_id": "d" * 64, "report_hex": r}]
    lines += _protocol_lines()
    statuses = []
    for word, effect in STATUSES:
        entry = {"line": status_line(DEVICE_ID, word), "device_id": DEVICE_ID, "word": word, "effect": effect}
        statuses.append(dict(entry, epoch=int(word[8:])) if effect == "skipped" else entry)
    no_clock = status_line(DEVICE_ID, "no-clock")
    rejected = [
        (body + "," + other_crc + "\n", "checksum"),  # bad crc
        (good.replace(DEVICE_ID, "board-08"), "checksum"),  # the device id is under the CRC
        (body[:-1] + ("0" if body[-1] != "0" else "1") + "," + crc + "\n", "checksum"),  # a report digit
        (_line([DEVICE_ID, r.upper()]), "frame"),  # upper-case hex in the report
        (body + "," + crc.upper() + "\n", "frame"),  # upper-case hex in the crc
        (good[:-1] + " \n", "frame"),  # trailing space
        (good[:-1] + " \r\n", "frame"),  # trailing space before CRLF
        (good[:-1] + "\r\r\n", "frame"),  # two CRs
        (_line([DEVICE_ID, ""]), "frame"),  # empty report field
        (_line([DEVICE_ID, cut]), "frame"),  # odd hex length
        (_line([DEVICE_ID, r[:2] + "g" + r[3:]]), "frame"),  # not hex
        (body + ",+fff\n", "frame"),  # int(..., 16) would take it
        (body + "," + crc[:3] + "\n", "frame"),  # 3 crc digits
        (body + "," + crc + "0\n", "frame"),  # 5 crc digits
        ("$MSS1,%s,%04x\n" % (r, crc16(bytes.fromhex(r))), "frame"),  # format 1: no device id
        (_line(["board 07", r]), "frame"),  # a bad character in the device id
        (_line(["board/07", r]), "frame"),
        (_line(["board-\u00e9", r]), "frame"),  # not ASCII
        (_line(["d" * 65, r]), "frame"),  # too long
        (_line(["", r]), "frame"),  # empty device id
        (_line([DEVICE_ID, r, "00"]), "frame"),  # an extra field
        (_line([r]), "frame"),  # the device id missing
        ("$MSS2,%s,%s\n" % (DEVICE_ID, r), "frame"),  # the crc missing
        (_line([DEVICE_ID, r]).replace("$MSS2,", "$MSS3,"), "frame"),  # another format
        # status lines (SPEC.md section 8): a status whose crc fails is no status and no line
        (no_clock[:-5] + "%04x\n" % (int(no_clock[-5:-1], 16) ^ 1), "frame"),
        (_line([DEVICE_ID, "!No-clock"]), "frame"),  # upper case
        (_line([DEVICE_ID, "!" + "a" * 33]), "frame"),  # a word of 33 characters
        (_line([DEVICE_ID, "!"]), "frame"),  # no word
        (_line([DEVICE_ID, "!9-lives"]), "frame"),  # a word starts with a letter
        (_line([DEVICE_ID, "!no_clock"]), "frame"),  # "_" is no word character
    ]
    ignored = ["boot: hello\n", "\n", "\r\n", " " + good, "$mss2" + good[5:], "MSS2" + good[5:],
               ">>> import main\r\n"]
    crlf = good[:-1] + "\r\n"
    streams = [(good + good[:-1]), (good + crlf + "boot: hello"), (good[:20]), (crlf + no_clock + no_clock[:-1])]
    return {"name": "serial-lines", "lines": lines, "statuses": statuses,
            "rejected": [{"line": line, "reason": reason} for line, reason in rejected], "ignored": ignored,
            "streams": [_split(text) for text in streams]}


def _split(text):
    lines, rest = split_lines(text.encode())
    return {"stream": text, "lines": [line.decode() for line in lines], "rest": rest.decode()}


def write(path=PATH):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(make(), indent=1) + "\n")


def _read(line):
    """parse() of the line as text and as the bytes a port gives: both must agree."""
    out = []
    for given in (line, line.encode()):
        try:
            out.append(("ok", parse(given)))
        except LineError as exc:
            out.append(("error", exc.reason))
    if out[0] != out[1]:
        raise AssertionError(f"{line!r}: read as text {out[0]}, as bytes {out[1]}")
    return out[0]


def check(path=PATH):
    """Mismatch messages (empty when the writer and the reader agree with the file)."""
    d = json.loads(Path(path).read_text())
    errors = []
    if d.get("name") != "serial-lines":
        errors.append(f"{path}: name is not serial-lines")
    for v in d["lines"]:
        report = bytes.fromhex(v["report_hex"])
        written = frame(v["device_id"], report)
        if v["line"] not in (written, written[:-1] + "\r\n"):
            errors.append(f"{path}: the writer wrote {written!r}, not {v['line']!r}")
        got = _read(v["line"])
        if got != ("ok", (v["device_id"], report)):
            errors.append(f"{path}: {v['line']!r} read as {got}")
    for v in d["rejected"]:
        got = _read(v["line"])
        if got != ("error", v["reason"]):
            errors.append(f"{path}: {v['line']!r} read as {got}, not rejected as {v['reason']}")
    for line in d["ignored"]:
        got = _read(line)
        if got != ("ok", None):
            errors.append(f"{path}: {line!r} read as {got}, not ignored")
    for v in d["statuses"]:
        if status_line(v["device_id"], v["word"]) != v["line"]:
            errors.append(f"{path}: the writer wrote {status_line(v['device_id'], v['word'])!r}, not {v['line']!r}")
        for given in (v["line"], v["line"].encode()):
            if parse_status(given) != (v["device_id"], v["word"]):
                errors.append(f"{path}: {given!r} read as status {parse_status(given)}")
    for v in d["rejected"]:
        if parse_status(v["line"]) is not None:
            errors.append(f"{path}: {v['line']!r} read as a status, not rejected")
    for v in d["streams"]:
        if _split(v["stream"]) != v:
            errors.append(f"{path}: stream {v['stream']!r} split as {_split(v['stream'])}")
    if "vector" in str(d["lines"]):
        from mss_protocol.vectors import ROOT

        for v in d["lines"]:
            if "vector" in v:
                f = json.loads((ROOT / v["vector"]).read_text())
                if not any((w["report_hex"], w["device_id"]) == (v["report_hex"], v["device_id"])
                           for w in f["vectors"]):
                    errors.append(f"{path}: {v['line']!r} is no vector of {v['vector']}")
    return errors


def main(argv=None):
    return vector_main(argv=argv, doc=__doc__, write=write, check=check,
                       ok=lambda path: f"all serial lines read as stated ({path})")


if __name__ == "__main__":
    sys.exit(main())
