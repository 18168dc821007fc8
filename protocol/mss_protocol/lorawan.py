"""LoRaWAN link facts for ``mss plan --link lorawan:<region>:<dr>``.

One job: what a LoRaWAN uplink at a region's data rate allows -- the largest
application payload, the airtime of one uplink, and how many uplinks a day
fit TTN's fair use, EU868's duty cycle and the 400 ms dwell time.
Sources: docs/bandwidth-and-lorawan.md (shared docs), sections 0 and 1.

Regions (``REGIONS``):

* ``eu868``: DR0..DR5 = SF12..SF7 at 125 kHz; 1 % duty cycle, no dwell limit.
* ``us915``: DR0..DR3 = SF10..SF7 at 125 kHz, DR4 = SF8 at 500 kHz; 400 ms
  dwell time.  DR5 is LR-FHSS and is refused (see ``_LR_FHSS``).
* ``au915``: DR0..DR5 = SF12..SF7 at 125 kHz, DR6 = SF8 at 500 kHz, with the
  400 ms uplink dwell time: DR0 and DR1 are not allowed, DR2 carries 11 bytes.
  This is the state a device boots in and keeps until the network sends
  TxParamSetupReq (The Things Stack ``pkg/band/au_915_928_rp2_v1_0_3.go``:
  ``BootDwellTime{Uplinks: true}``; RP 1.0.3 section 2.6.2 as quoted in
  mcci-catena/arduino-lmic#447; TheThingsNetwork/lorawan-frequency-plans#55:
  TTN's AU915 plan has dwell time on by default), so it is the plain name.
* ``au915-nodwell``: the same data rates after the network turned the uplink
  dwell time off (TxParamSetupReq, e.g. ChirpStack ``uplink_dwell_time_400ms
  = false``): the RP002 table without dwell time.

Payload sizes N are FRMPayload bytes with FOpts empty, for devices that are
not repeater compatible, from chirpstack/chirpstack ``lrwn/src/region/
{eu868,us915,au915}.rs`` (RP002-1.0.2+, "Latest"; there M = N + 8).  Pending
MAC answers in FOpts (up to 15 bytes) share the same budget.
"""
import math
import re
from dataclasses import dataclass

OVERHEAD_BYTES = 13  # MHDR 1 + DevAddr 4 + FCtrl 1 + FCnt 2 + FPort 1 + MIC 4, FOpts empty
DEVICE_TIME_REQ_BYTES = 1  # DeviceTimeReq in FOpts: its CID 0x0D, no payload (LoRaWAN 1.0.3 section 5.9)
PREAMBLE_SYMBOLS = 8  # LoRaWAN's LoRa preamble in every region here
CODING_RATE = 1  # 4/5: CR = 1 in AN1200.13's (CR + 4)
FAIR_USE_MS = 30_000  # TTN: "an average of 30 seconds uplink time on air, per 24 hours, per device"
EU868_DUTY_CYCLE = 0.01
DWELL_MS = 400.0
DAY_S = 86_400
# OTAA (LoRaWAN 1.0.x section 6.2.4-6.2.5, PHYPayload bytes): a join-request is MHDR 1 + JoinEUI 8 + DevEUI 8
# + DevNonce 2 + MIC 4; a join-accept MHDR 1 + JoinNonce 3 + NetID 3 + DevAddr 4 + DLSettings 1 + RxDelay 1
# + MIC 4, and 16 more with the optional CFList
JOIN_REQUEST_BYTES = 23
JOIN_ACCEPT_BYTES, JOIN_ACCEPT_CFLIST_BYTES = 17, 33

_LR_FHSS = ("is LR-FHSS, whose airtime is not the LoRa formula of Semtech AN1200.13 that this planner "
            "uses (its header is repeated over frequency hops)")
_DWELL_DR0_1 = "is not allowed with the 400 ms uplink dwell time (use au915-nodwell if the network turned it off)"

# DR: (spreading factor, bandwidth kHz, N) or the reason the DR cannot be planned
REGIONS = {
    "eu868": {
        # chirpstack lrwn/src/region/eu868.rs, RP002 "Latest", no repeater; SF/BW: RP002 EU863-870 DR table
        0: (12, 125, 51),
        1: (11, 125, 51),
        2: (10, 125, 51),
        3: (9, 125, 115),
        4: (8, 125, 242),
        5: (7, 125, 242),
    },
    "us915": {
        # chirpstack lrwn/src/region/us915.rs, RP002 "Latest", no repeater; SF/BW: RP002 US902-928 DR table
        0: (10, 125, 11),
        1: (9, 125, 53),
        2: (8, 125, 125),
        3: (7, 125, 242),
        4: (8, 500, 242),
        5: _LR_FHSS,  # us915.rs: LR-FHSS, N = 50
    },
    "au915": {
        # chirpstack lrwn/src/region/au915.rs "no repeater + dwell time", RP002 "Latest"; the same M
        # (N + 8) as The Things Stack au_915_928_rp2_v1_0_3.go makeDwellTimeMaxMACPayloadSizeFunc(_, dwell)
        0: _DWELL_DR0_1,
        1: _DWELL_DR0_1,
        2: (10, 125, 11),
        3: (9, 125, 53),
        4: (8, 125, 125),
        5: (7, 125, 242),
        6: (8, 500, 242),
    },
    "au915-nodwell": {
        # chirpstack lrwn/src/region/au915.rs "no repeater + no dwell time", RP002 "Latest"
        0: (12, 125, 51),
        1: (11, 125, 51),
        2: (10, 125, 51),
        3: (9, 125, 115),
        4: (8, 125, 242),
        5: (7, 125, 242),
        6: (8, 500, 242),
    },
}
DWELL_LIMITED = ("us915", "au915")  # 400 ms per uplink: RP002 US902-928; AU915-928 with UplinkDwellTime = 1
SPEC_FORM = "lorawan:<region>:<dr>, e.g. lorawan:us915:0"


@dataclass(frozen=True)
class Link:
    """One region's data rate: its LoRa modulation and largest FRMPayload."""

    region: str
    dr: int
    sf: int
    bw_khz: int
    max_payload: int

    @property
    def spec(self):
        """The normalised ``lorawan:<region>:<dr>`` string."""
        return f"lorawan:{self.region}:{self.dr}"


def _drs(region):
    return ", ".join(f"DR{dr}" for dr, row in REGIONS[region].items() if isinstance(row, tuple))


def parse_link(spec):
    """The :class:`Link` of ``lorawan:<region>:<dr>``.

    The region is case-insensitive; the data rate is ``0``, ``5``, ``dr0`` or
    ``DR5``.  Any other spec raises ValueError naming the bad part and the
    valid regions or data rates.
    """
    parts = spec.strip().lower().split(":")
    if len(parts) != 3 or parts[0] != "lorawan":
        raise ValueError(f"{spec!r} is not {SPEC_FORM}")
    _, region, dr_text = parts
    if region not in REGIONS:
        raise ValueError(f"unknown LoRaWAN region {region!r} in {spec!r}; valid regions: {', '.join(REGIONS)}")
    number = re.fullmatch(r"(?:dr)?([0-9]+)", dr_text)
    dr = int(number[1]) if number else None
    row = REGIONS[region].get(dr)
    if row is None:
        raise ValueError(f"{region} has no data rate {dr_text!r} in {spec!r}; valid: {_drs(region)}")
    if isinstance(row, str):
        raise ValueError(f"{region} DR{dr} {row}; valid: {_drs(region)}")
    return Link(region, dr, *row)


def airtime_ms(payload_bytes, sf, bw_khz):
    """Time on air in ms of one LoRaWAN uplink carrying ``payload_bytes`` of FRMPayload.

    Semtech AN1200.13 ("LoRa Modem Designer's Guide"), as implemented in
    bertrik/ttn-gateway-collector ``AirTimeCalculator.java``:

    .. math::

        T_s = 2^{SF} / BW, \\qquad
        T = (n_{pre} + 4.25) T_s
            + \\left(8 + \\max\\left(\\left\\lceil \\frac{8 PL - 4 SF + 28 + 16 CRC - 20 IH}
              {4 (SF - 2 DE)} \\right\\rceil (CR + 4), 0\\right)\\right) T_s

    with the LoRaWAN uplink's fixed choices: PHY payload PL = FRMPayload +
    13 bytes (``OVERHEAD_BYTES``), n_pre = 8, CR = 1 (4/5), explicit header
    (IH = 0), CRC on (CRC = 1), and the low-data-rate optimisation DE = 1
    when a symbol lasts more than 16 ms (SF11 and SF12 at 125 kHz), as
    LoRaWAN regions mandate.
    """
    symbol_ms = 2 ** sf / bw_khz
    de = 1 if symbol_ms > 16 else 0
    phy = payload_bytes + OVERHEAD_BYTES
    bits = 8 * phy - 4 * sf + 28 + 16  # + 16 CRC, - 20 IH with IH = 0
    blocks = max(-(-bits // (4 * (sf - 2 * de))), 0)  # integer ceiling
    return (PREAMBLE_SYMBOLS + 4.25 + 8 + blocks * (CODING_RATE + 4)) * symbol_ms


def phy_airtime_ms(phy_bytes, link):
    """Time on air in ms of a LoRa frame of ``phy_bytes`` of PHYPayload on ``link`` (:func:`airtime_ms`
    counts FRMPayload bytes and adds ``OVERHEAD_BYTES``; this takes the whole PHYPayload, e.g. a
    join-request's ``JOIN_REQUEST_BYTES``)."""
    return airtime_ms(phy_bytes - OVERHEAD_BYTES, link.sf, link.bw_khz)


def join_airtime_ms(link):
    """Time on air in ms of one OTAA join-request (``JOIN_REQUEST_BYTES`` of PHYPayload, LoRaWAN 1.0.x
    section 6.2.4) sent at ``link``'s data rate."""
    return phy_airtime_ms(JOIN_REQUEST_BYTES, link)


def budget(link, payload_bytes):
    """How often a device can send a ``payload_bytes`` FRMPayload on ``link``, on a day it also joins.

    Every period must hold on the day a board rejoins (after a reset), so the day's limits carry one
    join-request (:func:`join_airtime_ms`) besides the uplinks.

    Returns a dict:

    * ``airtime_ms``: :func:`airtime_ms` at the link's SF and bandwidth;
    * ``join_airtime_ms``: one join-request's airtime at the link's data rate;
    * ``fair_use_reports_per_day`` = floor((30 000 ms - join airtime) / airtime):
      TTN's fair use, 30 s of uplink airtime a day (thethingsnetwork.org
      forum t/1300), on a day with a join;
    * ``duty_cycle_gap_s`` = airtime / 0.01, ``join_duty_cycle_off_s`` = join
      airtime / 0.01 (the time the device stays off its sub-band after a
      join-request) and ``duty_cycle_reports_per_day`` = floor((86 400 s -
      join off time) / gap): EU868's 1 % duty cycle (ETSI EN 300 220 in the
      868 MHz sub-bands of the EU868 channels, the join channels 868.1-868.5 MHz
      among them, counted here as one 1 % budget), None elsewhere;
    * ``dwell_ok``: airtime <= 400 ms where the region limits one uplink's
      dwell time (us915, au915), None elsewhere;
    * ``reports_per_day``: the smaller of the two counts that apply;
    * ``min_period_s`` = ceil(86 400 s / reports_per_day): the shortest
      report period that keeps within it.

    Raises ValueError if the payload exceeds the link's N.
    """
    if payload_bytes > link.max_payload:
        raise ValueError(f"{payload_bytes} bytes exceed the {link.max_payload}-byte payload of {link.spec}")
    air = airtime_ms(payload_bytes, link.sf, link.bw_khz)
    join = join_airtime_ms(link)
    fair = math.floor((FAIR_USE_MS - join) / air)
    gap = duty = join_off = None
    if link.region == "eu868":
        gap = air / 1000 / EU868_DUTY_CYCLE
        join_off = join / 1000 / EU868_DUTY_CYCLE
        duty = math.floor((DAY_S - join_off) / gap)
    per_day = min(fair, duty) if duty is not None else fair
    return {"region": link.region, "dr": link.dr, "sf": link.sf, "bw_khz": link.bw_khz,
            "max_payload_bytes": link.max_payload, "airtime_ms": air, "join_airtime_ms": join,
            "fair_use_reports_per_day": fair, "duty_cycle_gap_s": gap, "join_duty_cycle_off_s": join_off,
            "duty_cycle_reports_per_day": duty,
            "dwell_ok": air <= DWELL_MS if link.region in DWELL_LIMITED else None,
            "reports_per_day": per_day, "min_period_s": math.ceil(DAY_S / per_day)}
