"""Every reason SPEC.md names has a vector (issue 43): the table between ``<!-- reasons -->`` and
``<!-- /reasons -->`` in section 6 lists every refusal and quarantine reason; each must be
carried by a vector under protocol/vectors (a ``reason`` or ``quarantine`` value), every reason a
vector carries must be in it, and every reason the code raises (WireError, UplinkError,
BatchError, LineError, the aggregator's ``reason=``) must be in it too."""
import json
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "protocol" / "SPEC.md"
VECTORS = ROOT / "protocol" / "vectors"
RAISED = re.compile(r'\b(WireError|UplinkError|BatchError|LineError)\(\s*"([a-z_]+)"')
AGGREGATOR = re.compile(r'\breason="([a-z_]+)"')
FAMILY = re.compile(r"^([a-z_]+)<reason>$")  # wire_<reason>: a report refused with a section 4 reason
NO_MESSAGE = {"type", "key", "batch"}  # BatchErrors no MQTT message can carry (SPEC.md section 12)


def spec_reasons(text):
    """The reasons of SPEC.md's table (first column, in backticks), in order."""
    block = re.search(r"<!-- reasons -->\n(.*?)<!-- /reasons -->", text, re.S)
    assert block, "SPEC.md has no <!-- reasons --> table"
    rows = [line for line in block.group(1).splitlines() if line.startswith("| `")]
    return [re.match(r"\| `([^`]+)`", row).group(1) for row in rows]


def carried(root):
    """Every ``reason`` and ``quarantine`` value in the JSON files under ``root``."""
    out = set()

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("reason", "quarantine") and isinstance(v, str):
                    out.add(v)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    for path in Path(root).rglob("*.json"):
        walk(json.loads(path.read_text()))
    return out


def missing(reasons, have):
    """The reasons of the table that no vector carries."""
    out = []
    for r in reasons:
        family = FAMILY.match(r)
        if family:
            if not any(h.startswith(family.group(1)) for h in have):
                out.append(r)
        elif r not in have:
            out.append(r)
    return out


def raised_in_code():
    """(class or 'aggregator', reason) of every literal reason the code raises."""
    out = set()
    for folder in ("protocol/mss_protocol", "firmware/lib", "aggregator/mss_aggregator"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text()
            out |= set(RAISED.findall(text))
            if "/collect/" in str(path):
                out |= {("aggregator", r) for r in AGGREGATOR.findall(text)}
    return out


def test_every_reason_of_spec_has_a_vector():
    reasons = spec_reasons(SPEC.read_text())
    assert len(reasons) == len(set(reasons)) and len(reasons) > 30
    assert missing(reasons, carried(VECTORS)) == []


def test_every_reason_a_vector_carries_is_in_spec():
    reasons = set(spec_reasons(SPEC.read_text()))
    prefixes = [FAMILY.match(r).group(1) for r in reasons if FAMILY.match(r)]
    stray = [h for h in carried(VECTORS)
             if h not in reasons and not any(h.startswith(p) and h[len(p):] in reasons for p in prefixes)]
    assert stray == []


def test_every_reason_the_code_raises_is_in_spec():
    reasons = set(spec_reasons(SPEC.read_text()))
    raised = raised_in_code()
    kinds = {kind for kind, _ in raised}
    assert {"WireError", "UplinkError", "BatchError", "LineError", "aggregator"} <= kinds
    assert sorted(r for _, r in raised if r not in reasons) == []
    # the aggregator quarantines a refused batch as batch_<reason>
    batch = {r for kind, r in raised if kind == "BatchError"} - NO_MESSAGE
    assert sorted(f"batch_{r}" for r in batch if f"batch_{r}" not in reasons) == []


def test_a_reason_without_a_vector_fails(tmp_path):
    """Deleting the one vector that carries a reason makes the check name it."""
    root = tmp_path / "vectors"
    shutil.copytree(VECTORS / "lorawan", root / "lorawan")
    shutil.copytree(VECTORS / "shuffled", root / "shuffled")
    path = root / "lorawan" / "uplinks.json"
    d = json.loads(path.read_text())
    for s in d["sets"]:
        s["messages"] = [m for m in s["messages"] if m["result"].get("reason") != "lorawan_base64"]
    path.write_text(json.dumps(d))
    reasons = spec_reasons(SPEC.read_text())
    lost = missing(reasons, carried(root))
    assert "lorawan_base64" in lost and "lorawan_fport" not in lost and "batch_body" not in lost
    assert missing(["wire_<reason>"], {"wire_value"}) == [] and missing(["wire_<reason>"], {"value"})


@pytest.mark.parametrize("text, found", [
    ("<!-- reasons -->\n| reason | x |\n|---|---|\n| `a` | x |\n| `b_<reason>` | y |\n<!-- /reasons -->", ["a", "b_<reason>"]),
])
def test_the_table_parses(text, found):
    assert spec_reasons(text) == found
