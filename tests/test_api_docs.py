"""docs/api.md's examples run: every ```python block, in order, in one namespace (as a reader
pasting them into one session would), each within a few seconds (about 6 s in all on 2 cores)."""
import re
import shutil
import time
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
SECONDS_PER_BLOCK = 10  # the doc promises a few seconds each; this leaves room for a loaded CI machine


def blocks():
    """(line number, code) of each python block of docs/api.md."""
    text = DOC.read_text()
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in BLOCK.finditer(text)]


def compiled(line, code):
    """``code`` compiled so that a traceback names docs/api.md's own line numbers."""
    return compile("\n" * (line - 1) + code, str(DOC), "exec")


def test_every_example_runs(capsys):
    found = blocks()
    assert len(found) >= 8, "docs/api.md lost its examples"
    namespace = {"__name__": "api_doc"}
    try:
        for line, code in found:
            start = time.monotonic()
            exec(compiled(line, code), namespace)
            took = time.monotonic() - start
            assert took < SECONDS_PER_BLOCK, f"docs/api.md line {line}: the example took {took:.1f} s"
    finally:
        if "work" in namespace:
            shutil.rmtree(namespace["work"], ignore_errors=True)
    out = capsys.readouterr().out
    assert "Traceback" not in out
