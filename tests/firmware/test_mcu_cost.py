"""Reports on an emulated Cortex-M0 (QEMU, tools/mcu): bit-identical to the unix port's,
and within an instruction ceiling.

Builds the M0 image (cached under build/mcu; about a minute from scratch)
and measures a few small configs.  Skipped only where the Arm toolchain or
QEMU is missing (``make system-deps`` installs them as root); under CI that
is a failure instead.
"""
import os
import sys

import pytest

from mss_aggregator.devices.runtime import REPO
from mss_protocol.choose import choose

sys.path.insert(0, str(REPO / "tools"))
import mcu  # noqa: E402

# (protocol, k, eps) -> M0 instructions per report (median) that a report must stay below.
# Provisional: 2x the figures measured on 2026-12 with the interpreted MSS encoder;
# to be set after the encoder rewrite (viper).
CEILINGS = {
    ("grr", 16, 1.0): 2 * 80_000,
    ("mss", 64, 1.0): 2 * 1_060_000,
    ("ss", 64, 4.0): 2 * 360_000,
    ("olh", 64, 1.0): 2 * 140_000,
    ("pgr", 1024, 4.0): 2 * 130_000,
}
N = 21  # timed reports per config


@pytest.fixture(scope="module")
def measured():
    missing = mcu.missing_tools()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"missing under CI: {', '.join(missing)}")
        pytest.skip(f"missing: {', '.join(missing)} (make system-deps as root installs them)")
    cfgs = [choose(k, eps, protocol=name)["config"] for name, k, eps in CEILINGS]
    lines = [mcu.driver_line(c, str(i), n_max=N, budget=10**11) for i, c in enumerate(cfgs)]
    device = mcu.run_qemu("m0", lines, timeout=600)
    replay = [mcu.driver_line(c, str(i), group=r["group"], reports=r["reports"])
              for i, (c, r) in enumerate(zip(cfgs, device))]
    unix = mcu.run_unix(replay, timeout=300)
    return dict(zip(CEILINGS, zip(device, unix)))


@pytest.mark.parametrize("case", list(CEILINGS), ids=lambda c: f"{c[0]}-k{c[1]}-eps{c[2]:g}")
def test_bit_identical_and_under_ceiling(measured, case):
    dev, unix = measured[case]
    assert "error" not in dev, dev
    assert dev["reports"] == N
    assert dev["digest"] == unix["digest"], "the M0's reports differ from the unix port's"
    assert dev["refills"] == 0, "the reserved random bytes ran out inside a timed report"
    assert dev["instr_med"] < CEILINGS[case], f"{dev['instr_med']:,} M0 instructions per report"
