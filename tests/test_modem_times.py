"""The emulated modems' times are physical (issue 48, smaller findings: "modem awake 0.147 s with
0.700 s of TX"): the emulator answers a send in 50 ms, but what it accounts for a report is what
a real modem spends, the same figures as the energy model's (``mss_protocol.energy.report``'s
``times_s``): TX the uplink's airtime, RX both empty windows, awake from the uplink to the end of
RX2.  Driven line by line on a clock that stands still, so only the radio's time counts.  About
0.1 s."""
import pytest

from mss_aggregator.devices.modem import emulator
from mss_protocol import energy, lorawan

SEND = {"rak3172": "AT+SEND=1:{hex}", "wio-e5": 'AT+MSGHEX="{hex}"', "rn2483": "mac tx uncnf 1 {hex}"}
JOIN = {"rak3172": "AT+JOIN=1:0:10:8", "wio-e5": "AT+JOIN", "rn2483": "mac join otaa"}
SLEEP = {"rak3172": "AT+SLEEP={ms}", "wio-e5": "AT+LOWPOWER={ms}", "rn2483": "sys sleep {ms}"}
CASES = [(d, "lorawan:eu868:0", 51) for d in ("rak3172", "wio-e5", "rn2483")] + [
    (d, "lorawan:us915:0", 11) for d in ("rak3172", "wio-e5")]


class Still:
    """A board clock that moves only when told (the emulator's own answers take no clock time)."""

    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def feed(modem, line):
    modem.feed(line.encode() + b"\n")


@pytest.mark.parametrize("dialect,spec,frame_bytes", CASES)
def test_a_report_costs_the_modem_what_the_energy_model_counts(dialect, spec, frame_bytes):
    """Join, then one report (send, sleep for the period): the modem's TX, RX and awake time
    for the report are the energy model's air, rx1 + rx2 and wait; a join keeps it awake at
    least JOIN_ACCEPT_DELAY1 past the request; the period asleep is asleep."""
    clock, link = Still(), lorawan.parse_link(spec)
    modem = emulator(dialect, "70b3d57ed0000001", clock=clock, link=spec, delays_s=(0.0, 0.0), max_payload=242)
    try:
        feed(modem, JOIN[dialect])
        joined = modem.stats()
        assert modem.joined and joined["awake_s"] >= energy.JOIN_ACCEPT_DELAY1_S + joined["tx_s"], joined
        feed(modem, SEND[dialect].format(hex="00" * frame_bytes))
        feed(modem, SLEEP[dialect].format(ms=600_000))
        after = modem.stats()
        t = energy.report(link, frame_bytes, rp2040_ms=1.0, modem=dialect, period_s=600)["times_s"]
        tx, rx, awake = (after[k] - joined[k] for k in ("tx_s", "rx_s", "awake_s"))
        assert len(modem.uplinks) == 1
        assert tx == pytest.approx(t["air"]) and rx == pytest.approx(t["rx1"] + t["rx2"])
        assert awake == pytest.approx(t["wait"]) and awake >= tx + energy.RECEIVE_DELAY2_S + t["rx2"] - 1e-9
        assert after["asleep_s"] == pytest.approx(600.0)
        print(f"{dialect:8} {spec}: {frame_bytes} B, TX {tx:.3f} s, RX {rx:.3f} s, awake {awake:.3f} s "
              f"(energy model: air {t['air']:.3f}, wait {t['wait']:.3f}); join awake {joined['awake_s']:.3f} s")
    finally:
        modem.close()


def test_a_downlink_keeps_the_modem_awake_to_its_end_in_rx1():
    """A downlink queued for the next uplink: awake to RX1's end (RECEIVE_DELAY1 plus the
    downlink's airtime), not RX2's; RX the downlink's airtime."""
    clock = Still()
    modem = emulator("rak3172", "70b3d57ed0000002", clock=clock, link="lorawan:eu868:0", delays_s=(0.0, 0.0))
    try:
        feed(modem, JOIN["rak3172"])
        joined = modem.stats()
        modem.downlink(2, b"\x01\x02")
        feed(modem, SEND["rak3172"].format(hex="00" * 11))
        after = modem.stats()
        tx, up, down = modem.exchange_s(11 + lorawan.OVERHEAD_BYTES, 2 + lorawan.OVERHEAD_BYTES)
        assert after["tx_s"] - joined["tx_s"] == pytest.approx(tx)
        assert after["rx_s"] - joined["rx_s"] == pytest.approx(up)
        assert after["awake_s"] - joined["awake_s"] == pytest.approx(tx + energy.RECEIVE_DELAY1_S + up) == down
    finally:
        modem.close()
