"""mss plan --link lorawan:<region>:<dr>: payload tables, airtime (Semtech AN1200.13) and the daily budget."""
import json
import math

import pytest
from click.testing import CliRunner

from mss_cli.main import main
from mss_protocol import configs, lorawan


def reference_ms(frm_payload, sf, bw_khz):
    """AN1200.13 counted in symbols: 8 preamble + 4.25 sync symbols, 8 symbols of the
    first block, then blocks of 5 symbols (CR 4/5), each carrying 4 (SF - 2 DE) bits,
    until the PHY payload (13 bytes of LoRaWAN + FRMPayload), the 16-bit CRC and the
    20-bit explicit header, less the 4 SF - 8 bits of the first block, are carried."""
    de = sf in (11, 12) and bw_khz == 125
    bits_left = 8 * (frm_payload + 13) + 16 + 20 - (4 * sf - 8)
    blocks = 0
    while blocks * 4 * (sf - 2 * de) < bits_left:
        blocks += 1
    symbols = 8 + 4.25 + 8 + 5 * blocks
    return symbols * (1 << sf) / (bw_khz * 1e3) * 1e3


def plan(*args):
    return CliRunner().invoke(main, ["plan", *map(str, args)])


def plan_json(*args):
    out = plan(*args, "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


@pytest.mark.parametrize("sf", range(7, 13))
@pytest.mark.parametrize("n", [1, 11, 51])
def test_airtime_is_an1200_13_at_125_khz(sf, n):
    assert lorawan.airtime_ms(n, sf, 125) == pytest.approx(reference_ms(n, sf, 125), abs=1e-9)


@pytest.mark.parametrize("n", [1, 11, 51, 242])
def test_airtime_us915_dr4_sf8_500_khz(n):
    link = lorawan.parse_link("lorawan:us915:4")
    assert (link.sf, link.bw_khz) == (8, 500)
    assert lorawan.airtime_ms(n, 8, 500) == pytest.approx(reference_ms(n, 8, 500), abs=1e-9)


@pytest.mark.parametrize("n,sf,ms", [(4, 7, 51.5), (4, 12, 1318.9), (11, 10, 370.7), (1, 9, 164.9),
                                     (28, 12, 2138.1), (51, 11, 1560.6)])
def test_airtime_matches_the_docs_table(n, sf, ms):
    assert lorawan.airtime_ms(n, sf, 125) == pytest.approx(ms, abs=0.05)


@pytest.mark.parametrize("spec,n,sf,bw", [
    ("lorawan:us915:0", 11, 10, 125), ("lorawan:us915:dr4", 242, 8, 500), ("LoRaWAN:EU868:DR0", 51, 12, 125),
    ("lorawan:eu868:5", 242, 7, 125), ("lorawan:au915:2", 11, 10, 125), ("lorawan:au915:4", 125, 8, 125),
    ("lorawan:au915:6", 242, 8, 500), ("lorawan:au915-nodwell:0", 51, 12, 125),
    ("lorawan:au915-nodwell:3", 115, 9, 125),
])
def test_payload_table(spec, n, sf, bw):
    link = lorawan.parse_link(spec)
    assert (link.max_payload, link.sf, link.bw_khz) == (n, sf, bw)
    assert link.spec == spec.lower().replace("dr", "")


@pytest.mark.parametrize("region", lorawan.DWELL_LIMITED)
def test_every_dwell_limited_payload_fits_400_ms(region):
    """RP002's dwell-time payload sizes are the largest that fit 400 ms: the table and the formula agree."""
    for dr, row in lorawan.REGIONS[region].items():
        if isinstance(row, tuple):
            link = lorawan.parse_link(f"lorawan:{region}:{dr}")
            assert reference_ms(link.max_payload, link.sf, link.bw_khz) <= 400
            assert lorawan.budget(link, link.max_payload)["dwell_ok"] is True


def test_dwell_check_fails_above_400_ms():
    """LoRaWAN 1.0.1's 126 bytes at US915 DR2 (SF8/125) would take over 400 ms."""
    link = lorawan.Link("us915", 2, 8, 125, 126)
    assert reference_ms(126, 8, 125) > 400
    assert lorawan.budget(link, 126)["dwell_ok"] is False


def test_budget_refuses_a_payload_over_the_table():
    with pytest.raises(ValueError, match="exceed the 11-byte payload of lorawan:us915:0"):
        lorawan.budget(lorawan.parse_link("lorawan:us915:0"), 12)


def test_plan_us915_dr0_json():
    d = plan_json("--k", 1024, "--epsilon", 4, "--link", "lorawan:us915:0")
    assert d["frame"] == "compact" and d["frame_bytes"] <= 11 and d["max_bytes"] == 11
    assert d["link"] == "lorawan:us915:0"
    air = reference_ms(d["frame_bytes"], 10, 125)
    assert d["airtime_ms"] == pytest.approx(air, abs=1e-9)
    # the day a board rejoins: its uplinks and one 23-byte join-request within TTN's 30 s (issue 48 item 1)
    assert d["reports_per_day"] == math.floor((30000 - reference_ms(23 - 13, 10, 125)) / air)
    b = d["link_budget"]
    assert (b["region"], b["dr"], b["sf"], b["bw_khz"], b["max_payload_bytes"]) == ("us915", 0, 10, 125, 11)
    assert b["duty_cycle_gap_s"] is None and b["duty_cycle_reports_per_day"] is None and b["dwell_ok"] is True


def test_plan_olh_on_a_link_sends_the_epoch():
    """OLH's epoch seed needs the drawing epoch on the wire (SPEC.md section 4): with fresh
    reports (--fresh-reports; memoized reports use seed device, tests/test_plan_privacy.py) it
    is planned on a LoRaWAN link in compact-epoch frames, and refused in compact ones."""
    d = plan_json("--k", 64, "--epsilon", 2, "--protocol", "olh", "--link", "lorawan:us915:0", "--fresh-reports")
    assert (d["protocol"], d["frame"], d["frame_bytes"]) == ("olh", "compact-epoch", 4)
    out = CliRunner().invoke(main, ["plan", "--k", "64", "--epsilon", "2", "--protocol", "olh", "--link",
                                    "lorawan:us915:0", "--frame", "compact", "--fresh-reports"])
    assert out.exit_code != 0 and "olh cannot use compact" in out.output


def test_plan_eu868_dr5_binding_limit():
    d = plan_json("--k", 64, "--epsilon", 2, "--link", "lorawan:eu868:5")
    air = reference_ms(d["frame_bytes"], 7, 125)
    join = reference_ms(23 - 13, 7, 125)  # a join-request's 23-byte PHYPayload, on the day a board rejoins
    fair, duty = math.floor((30000 - join) / air), math.floor((86400 - join / 10) / (air / 1000 / 0.01))
    b = d["link_budget"]
    assert (b["fair_use_reports_per_day"], b["duty_cycle_reports_per_day"]) == (fair, duty)
    assert b["duty_cycle_gap_s"] == pytest.approx(air / 10) and b["dwell_ok"] is None
    assert b["join_airtime_ms"] == pytest.approx(join, abs=1e-9) and b["join_duty_cycle_off_s"] == pytest.approx(join / 10)
    assert d["reports_per_day"] == min(fair, duty)


def test_without_link_the_json_is_unchanged():
    d = plan_json("--k", 64, "--epsilon", 2)
    assert not {"link", "airtime_ms", "reports_per_day", "link_budget"} & set(d)
    assert d["frame"] == "full"


def test_max_bytes_and_frame_given_with_link():
    d = plan_json("--k", 64, "--epsilon", 2, "--link", "lorawan:eu868:0", "--max-bytes", 5)
    assert d["max_bytes"] == 5 and d["frame_bytes"] <= 5
    assert plan_json("--k", 64, "--epsilon", 2, "--link", "lorawan:us915:0", "--max-bytes", 100)["max_bytes"] == 11
    d = plan_json("--k", 64, "--epsilon", 2, "--link", "lorawan:eu868:3", "--frame", "full")
    assert d["frame"] == "full" and 11 < d["frame_bytes"] <= 115
    out = plan("--k", 64, "--epsilon", 2, "--link", "lorawan:eu868:0", "--max-bytes", 5)
    assert "the smaller, 5, is used" in " ".join(out.stdout.split())


@pytest.mark.parametrize("spec,names", [
    ("lorawan:xx868:0", ["'xx868'", "eu868, us915, au915"]),
    ("lorawan:us915:9", ["'9'", "DR0, DR1, DR2, DR3, DR4"]),
    ("lorawan:us915:5", ["DR5", "LR-FHSS"]),
    ("lorawan:au915:0", ["DR0", "dwell time", "au915-nodwell"]),
    ("lora:us915:0", ["'lora:us915:0'", "lorawan:<region>:<dr>"]),
    ("lorawan:us915", ["'lorawan:us915'", "lorawan:<region>:<dr>"]),
])
def test_bad_specs_name_the_problem(spec, names):
    out = plan("--k", 64, "--epsilon", 2, "--link", spec)
    assert out.exit_code != 0
    message = " ".join(out.stderr.split())
    assert "--link" in message
    for name in names:
        assert name in message


def test_no_room_names_the_link():
    out = plan("--k", 64, "--epsilon", 2, "--link", "lorawan:us915:0", "--frame", "full")
    assert out.exit_code == 3 and "lorawan:us915:0 carries 11 bytes" in " ".join(out.stderr.split())


def test_human_output_states_airtime_and_reports_per_day():
    d = plan_json("--k", 1024, "--epsilon", 4, "--link", "lorawan:eu868:2")
    out = plan("--k", 1024, "--epsilon", 4, "--link", "lorawan:eu868:2")
    assert out.exit_code == 0, out.output
    text = " ".join(out.stdout.split())
    assert f"{d['airtime_ms']:.1f} ms airtime" in text
    assert f"reports/day: {d['reports_per_day']}" in text
    assert "1 % duty cycle" in text and "TTN fair use" in text


def test_device_config_gets_the_budget_period(tmp_path):
    path = tmp_path / "cfg.json"
    out = plan("--k", 64, "--epsilon", 2, "--link", "lorawan:us915:1", "--json", "--device-config", path)
    d = json.loads(out.stdout)
    assert configs.load(path).config_id_hex == d["config_id"]
    period = json.loads(path.read_text())["device"]["period_s"]
    # the default period (issue 48 item 1): one estimate a day, longer than the link's shortest
    assert d["link_budget"]["min_period_s"] == math.ceil(86400 / d["reports_per_day"]) < 86400
    assert period == d["period_s"] == 86400 and d["period_basis"]["source"] == "estimate_every"
    assert 86400 / period <= d["reports_per_day"]


def test_device_config_gets_the_boards_sleep(tmp_path):
    """device.sleep (issue 24 item 2): with --link the board's best mode between reports (an
    rp2040 light: its deepsleep is lightsleep then a reset; an esp32 deep), without none; the
    firmware's loader takes the file."""
    from mss_node.settings import Settings

    for args, sleep in ((("--link", "lorawan:eu868:0"), "light"),
                        (("--link", "lorawan:eu868:0", "--board", "esp32"), "deep"),
                        (("--link", "lorawan:us915:0", "--board", "esp32c3"), "deep"), ((), "none")):
        path = tmp_path / f"{sleep}-{len(args)}.json"
        d = plan_json("--k", 16, "--epsilon", 2, *args, "--device-config", path)
        written = json.loads(path.read_text())
        assert written["device"]["sleep"] == d["device_sleep"] == sleep, args
        dev = dict(written["device"], transport="lorawan" if args else "serial", lorawan={"path": "/dev/x"},
                   **({} if args else {"device_id": "b1"}))  # a LoRaWAN board takes its modem's DevEUI
        assert Settings(dict(written, device=dev)).device["sleep"] == sleep
    out = plan("--k", 16, "--epsilon", 2, "--link", "lorawan:eu868:0", "--device-config", tmp_path / "h.json")
    assert "device.sleep light" in " ".join(out.stdout.split())


def test_device_config_always_carries_the_campaign_clock(tmp_path):
    """Issue 23 item 1: every config ``mss plan --device-config`` writes has
    ``device.period_s`` (the aggregator refuses a config without one):
    --period, else the link budget's minimum, else the firmware's 3600."""
    def period(path):
        return json.loads(path.read_text())["device"]["period_s"]

    plain = tmp_path / "plain.json"
    out = plan("--k", 16, "--epsilon", 2, "--device-config", plain)
    assert out.exit_code == 0, out.output
    assert period(plain) == 3600 and f"wrote {plain} (device.period_s 3600)" in " ".join(out.stdout.split())
    d = plan_json("--k", 16, "--epsilon", 2, "--period", 600, "--device-config", tmp_path / "p.json")
    assert period(tmp_path / "p.json") == d["period_s"] == 600
    linked = plan_json("--k", 64, "--epsilon", 2, "--link", "lorawan:us915:1", "--device-config", tmp_path / "l.json")
    least = linked["link_budget"]["min_period_s"]
    assert period(tmp_path / "l.json") == linked["period_s"] == max(least, 86400)  # --estimate-every's default
    longer = plan_json("--k", 64, "--epsilon", 2, "--link", "lorawan:us915:1", "--period", least + 1,
                       "--device-config", tmp_path / "l2.json")
    assert period(tmp_path / "l2.json") == longer["period_s"] == least + 1
    short = plan("--k", 64, "--epsilon", 2, "--link", "lorawan:us915:1", "--period", least - 1,
                 "--device-config", tmp_path / "short.json")
    text = " ".join(short.output.split())
    assert short.exit_code == 2 and "--period" in text and f"shorter than {least}" in text, text
    assert not (tmp_path / "short.json").exists()
    for bad in (0, -5, "x"):
        assert plan("--k", 16, "--epsilon", 2, "--period", bad).exit_code == 2


@pytest.mark.parametrize("args,named", [
    (["--mse-slack", "nan"], "--mse-slack"),
    (["--device-config", "{tmp}/missing/cfg.json"], "--device-config"),
])
def test_bad_plan_arguments_exit_2_in_one_line(tmp_path, args, named):
    """Issue 23 item 6 (plan's part): one line naming the flag, no traceback."""
    from collect_helpers import mss

    args = [a.format(tmp=tmp_path) for a in args]
    out = mss("plan", "--k", 16, "--epsilon", 2, *args, unwrap=False)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert named in out.stderr and "Traceback" not in out.stderr
    if "missing" in args[-1]:
        assert str(tmp_path / "missing") in " ".join(out.stderr.split())


def test_link_proposes_the_period_that_serves_the_question_at_the_least_energy():
    """Issue 48 item 1: with --link and no --period, the period is the longer of --estimate-every
    (default a day) and the link's shortest: each estimate takes one report from every device and
    memoized re-sends add nothing, so a shorter period only costs energy; the plan says why, and
    whether the n devices meet the devices-needed figure."""
    base = ("--k", 16, "--epsilon", 2, "--link", "lorawan:eu868:0", "--n", 300)
    d = plan_json(*base, "--board", "esp32c3", "--battery", 2000, "--detect", 0.05)
    pb, least = d["period_basis"], d["link_budget"]["min_period_s"]
    assert d["period_s"] == pb["period_s"] == 86400 > least == pb["min_period_s"]
    assert (pb["source"], pb["estimate_every_s"], pb["estimate_every_given"]) == ("estimate_every", 86400, False)
    shortest = plan_json(*base, "--board", "esp32c3", "--battery", 2000, "--detect", 0.05, "--period", least)
    assert pb["energy_mj_per_day_at_min_period"] == pytest.approx(shortest["energy_mj_per_day"], rel=1e-12)
    assert pb["energy_mj_per_day"] == d["energy_mj_per_day"] < shortest["energy_mj_per_day"] / 6  # 2.76 J, 17.4 J
    assert d["battery_load_days"] > shortest["battery_load_days"]  # both capped at the li-ion shelf life
    assert (pb["n"], pb["devices_needed"], pb["served"]) == (300, d["devices_needed"], 300 >= d["devices_needed"])
    assert pb["served"] is False  # 300 devices cannot detect 5 % at k = 16, eps 2: no period helps
    text = " ".join(plan(*base, "--detect", 0.05).stdout.split())
    assert "period: 86400 s, one estimate every 86400 s (--estimate-every)" in text
    assert f"n=300 < {d['devices_needed']} devices needed: no period serves the question" in text
    served = plan_json(*base[:-2], "--detect", 0.05)  # n is then the devices needed
    assert served["period_basis"]["served"] is True
    # an estimate every 2 h: that period; every 10 min: the link's shortest, said so
    assert plan_json(*base, "--estimate-every", 7200)["period_s"] == 7200
    fast = plan_json(*base, "--estimate-every", 600)
    assert fast["period_s"] == least and fast["period_basis"]["source"] == "min_period"
    assert any(w.startswith(f"period_s {least} > estimate_every_s 600") for w in fast["warnings"])
    # --period longer than --estimate-every: warned; --period alone: used, no warning
    slow = plan_json(*base, "--period", 7200, "--estimate-every", 3600)
    assert slow["period_s"] == 7200 and slow["period_basis"]["source"] == "request"
    assert [w for w in slow["warnings"] if w.startswith("period_s 7200 > estimate_every_s 3600")]
    assert not [w for w in plan_json(*base, "--period", 7200)["warnings"] if w.startswith("period_s")]
    # without --link: unchanged (the firmware's period), and --estimate-every refused
    assert plan_json("--k", 16, "--epsilon", 2)["period_s"] == 3600
    out = plan("--k", 16, "--epsilon", 2, "--estimate-every", 600)
    assert out.exit_code == 2 and "--estimate-every" in out.output and "--link" in out.output, out.output
