"""Every protocol x every frame kind x every link, end to end with real parts
(issue 22 item 3): the firmware under the MicroPython unix port, a real
Mosquitto, real ptys, the emulated LoRaWAN modems and both network-server
shapes (ChirpStack v4, The Things Stack v3), the real aggregator service,
one store per cell.  The machinery and the timeline: ``tests/e2e_matrix.py``.

Cells: 8 protocols (mss, ss, grr, rappor (OUE), sue, olh, hr, pgr; each as
``mss plan --protocol P --frame F`` configures it at k = 8, epsilon = 2) x 3
frame kinds (full, compact, compact-epoch) x 4 links (MQTT, serial,
LoRaWAN/ChirpStack, LoRaWAN/TTS) = 96.  18 are refused by design and tested
as refused: olh x compact on every link (its hash seed is the drawing
epoch's, which a compact frame, dated by arrival, does not carry) and
compact x {MQTT, serial} (only a network server's receive time survives
aggregator outages): the board's config loader (under MicroPython) refuses
them naming ``frame``, the aggregator refuses to collect them (naming
``frame``, before it creates a store) and the planner makes no OLH compact
config.  The other 78 run all at once, 10 boards each, 30 for OLH (940
boards, one MicroPython process per link), for 12 epochs of 3 s, with:

* an outage of 3 epochs on every link (MQTT: a relay in front of the broker
  cuts every connection and refuses new ones; LoRaWAN: the network is out of
  reach, sends refused as not joined and rejoins timing out; serial: the
  board's UART write fails with EIO), so reports wait in the boards' flash
  and leave later: asserted, a report of every cell arrived at least 3
  epochs after the epoch it was drawn in;
* 6 of every 10 boards' clocks half a period behind the network's and the
  aggregator's, waking late in their period: a report drawn in board epoch
  e arrives in epoch e + 1; asserted, reports of every cell did.

Checks per cell:

(a) exact: every report a board drew was sent and none is left queued; the
    store accepted exactly the frames drawn (device id and bytes: nothing
    lost, nothing twice, nothing rejected), and its counts (per epoch for the
    dated kinds, in total for compact) equal an offline decode of those
    frames with the seeds the boards drew with (device id, drawing epoch),
    tallied by the project's Counts.  Controls that (a) can fail: an OLH
    cell's frames decoded with the arrival epoch (bug 1's seed) or with the
    device id ``serial:/dev/ttyUSB0`` (bug 2's) do not give the stored counts.
(b) unbiased: the store's pooled counts decoded by the project's decoder
    (``registry.from_config(cfg).decode``, what ``mss estimate --counts``
    runs); each item's z = (estimate - true frequency of the fleet's reports)
    / the decoder's standard error, two-sided, family-wise alpha = 1% over
    all 78 cells x 8 items (Bonferroni: alpha = 0.01 / 624 = 1.6e-5 per
    test, |z| < 4.31).  A board draws afresh every epoch (no memoize), so
    its reports are independent given its value and the decoder's standard
    errors need no widening.  The fleet's values: 0 x 7, 1, 2, 5 in every 10
    boards (true frequencies 0.7, 0.1, 0.1, 0.1); 5 of the 7 zeros are on
    late clocks.  Simulated at this k, epsilon and ~100 reports the z-scores
    of every protocol have standard deviation 0.85-1.13 (MSS's block
    assignment, which its standard errors leave out, is small at epsilon 2).

Before the fix (16d84d3: the same harness, ``python tests/e2e_matrix.py
--cells olh:compact:chirpstack,... --boards-per-port 1`` in a worktree of that
commit with this harness's test files and modem.py; one board per port
since that aggregator stored all of a port's reports as one device
``serial:<port>``), true frequencies (0.70, 0.10, 0.10, 0, 0, 0.10, 0, 0),
estimate - truth per item 0..7 and the z-scores with the decoder's SEs:

  bug 1, olh x compact (seed of the arrival epoch), each cell all reports accepted:
    LoRaWAN/ChirpStack, 256 reports, 163 arrived in another epoch than drawn:
      bias -0.430 -0.112 +0.025 -0.060 -0.141 -0.122 +0.010 -0.040
      z    -6.99  -2.10  +0.44  -1.13  -2.65  -2.29  +0.19  -0.76
      stored support counts differ from the offline decode by 83 (L1)
    LoRaWAN/TTS, 258 reports, 166 in another epoch:
      bias -0.515 -0.099 +0.033 -0.032 -0.092 +0.040 -0.102 -0.042
      z    -8.72  -1.88  +0.57  -0.61  -1.74  +0.70  -1.93  -0.80   (L1 76)
    MQTT (dated by the aggregator's clock), 270 reports, 174 in another epoch:
      bias -0.478 -0.164 -0.136 +0.012 -0.083 -0.040 -0.074 -0.017
      z    -8.15  -3.17  -2.62  +0.23  -1.61  -0.75  -1.43  -0.32   (L1 108)
  bug 2, olh over serial (seed of ``serial:<port>``), 360 reports each:
    full:          bias -0.643 -0.129 -0.064 -0.086 +0.050 -0.150 -0.007 +0.014
                   z    -13.83 -2.87  -1.40  -1.91  +1.08  -3.34  -0.16  +0.32  (L1 326)
    compact-epoch: bias -0.721 -0.157 -0.186 +0.014 +0.014 -0.114 +0.057 -0.014
                   z    -16.08 -3.50  -4.14  +0.32  +0.32  -2.55  +1.23  -0.32  (L1 264)
  (olh x full on LoRaWAN, the same run: L1 0, |z| <= 2.26.)

So both checks fail both bugs: (a) by the count mismatch, (b) by item 0's
z (-7 to -16 against the bound 4.31).  This module itself, run on that
commit, fails 34 of its 97 tests: all 16 serial cells (bug 2, and the boards
sharing a port were one device there: extras and duplicates) and the 18
refused cells (that code took them); the 63 others pass.
"""
import pytest
from scipy.stats import norm

from e2e_matrix import (CROSSING, K, PERIOD_S, VALUES, fleet, matrix, mismatch, offline, paired, plan_config, refusal,
                        refused_config, run_matrix, stored, summary)
from micropython_runner import run

CELLS = matrix()
RUN = [c for c in CELLS if refusal(c) is None]
REFUSED = [c for c in CELLS if refusal(c) is not None]
FAMILY_ALPHA = 0.01
ALPHA = FAMILY_ALPHA / (len(RUN) * K)  # Bonferroni over every cell and item
Z_MAX = float(norm.isf(ALPHA / 2))


def ids(cell):
    return cell.id


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out, timing = run_matrix(RUN, tmp_path_factory.mktemp("matrix"))
    return out


def test_the_matrix_has_every_cell():
    assert len(CELLS) == 96 and len(RUN) == 78 and len(REFUSED) == 18
    assert abs(Z_MAX - 4.31) < 0.01
    assert len(CROSSING) < len(VALUES)


@pytest.mark.parametrize("cell", RUN, ids=ids)
def test_cell(runs, cell):
    r = runs[cell]
    s = summary(r)
    # (a) nothing lost on the board, nothing lost, twice or refused in the store
    assert not s["errors"], s["errors"]
    assert s["unsent"] == 0 and s["left_queued"] == 0, s
    assert s["counters"]["rejected"] == 0 and s["counters"]["accepted"] == s["drawn"], s["counters"]
    assert s["accepted_equal_drawn"], s
    assert s["count_mismatch"] == 0, s
    # not vacuous: the boards reported in at least 4 of the 12 epochs each (a compact board stands one
    # report for the outage's epochs, and a board whose process lags past its epoch skips that wake:
    # under a loaded CI machine a cell drew 58 of 60 at the old bound of 6)
    assert s["drawn"] >= 4 * len(fleet(cell)), s
    # not vacuous: the outage held reports back, and reports crossed an epoch boundary in flight
    assert s["failed_sends"] >= 1 and s["max_delay_epochs"] >= 3, s
    assert s["crossed"] >= 1, s
    # (b) the estimate is unbiased for the fleet's true frequencies
    assert max(abs(z) for z in s["z"]) < Z_MAX, (s["bias"], s["z"])
    if cell.protocol == "olh":  # (a) has teeth: a wrong seed gives other counts
        arrival = {(d, h): int(sent // PERIOD_S) for d, _, h, _, sent in paired(r)}
        assert mismatch(stored(r), offline(r, lambda d, e, h: (d, arrival[d, h]))) > 0
        assert mismatch(stored(r), offline(r, lambda d, e, h: ("serial:/dev/ttyUSB0", e))) > 0


@pytest.fixture(scope="module")
def device_refusals(tmp_path_factory):
    """{cell: the error of the board's config loader} for every refused cell, one MicroPython run."""
    import json

    folder = tmp_path_factory.mktemp("refused")
    paths = []
    for n, cell in enumerate(REFUSED):
        d = refused_config(cell)
        link = "lorawan" if cell.link in ("chirpstack", "tts") else cell.link
        d["device"] = {"period_s": PERIOD_S, "transport": link, link: {"path": "/dev/null"} if link != "mqtt" else {}}
        if link != "lorawan":  # a LoRaWAN board takes its modem's DevEUI
            d["device"]["device_id"] = f"d{n}"
        path = folder / f"{n}.json"
        path.write_text(json.dumps(d))
        paths.append(str(path))
    script = ("import sys\nfrom mss_node import settings\nfor p in sys.argv[1:]:\n"
              "    try:\n        settings.load(p)\n        print('LOADED')\n"
              "    except ValueError as exc:\n        print('REFUSED', exc)\n")
    out = run(script, args=paths)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == len(REFUSED), out.stdout
    return dict(zip(REFUSED, lines))


@pytest.mark.parametrize("cell", REFUSED, ids=ids)
def test_refused_cell(tmp_path, device_refusals, cell):
    import json

    from collect_helpers import build_aggregator
    from mss_protocol.choose import Limits, PlanError, choose
    from mss_protocol.config_file import ConfigError

    assert device_refusals[cell].startswith("REFUSED") and "frame" in device_refusals[cell], device_refusals[cell]
    d = refused_config(cell)
    d["device"] = {"period_s": PERIOD_S}
    path = tmp_path / "aggregator.json"
    path.write_text(json.dumps(d))
    lorawan = None
    if cell.link in ("chirpstack", "tts"):
        from mss_aggregator.collect.lorawan import parse_spec

        lorawan = parse_spec("chirpstack:app" if cell.link == "chirpstack" else "tts:app@mss")
    kw = {"serial_ports": ["/dev/null"]} if cell.link == "serial" else {"broker": "mqtt://127.0.0.1:1"}
    with pytest.raises((ConfigError, ValueError), match="frame"):
        build_aggregator(path, tmp_path / "store.sqlite", "t", lorawan=lorawan, log=lambda m: None, **kw)
    assert not (tmp_path / "store.sqlite").exists()
    if cell.protocol == "olh":  # the planner makes no such config either
        with pytest.raises(PlanError):
            choose(K, 2.0, "olh", limits=Limits(frame="compact"))
    else:
        assert plan_config(cell.protocol, cell.kind).frame == 1  # a LoRaWAN-only config, not a broken one
