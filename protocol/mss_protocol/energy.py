"""Energy per report and battery life of a LoRaWAN board (``mss plan --link ... --board --modem --battery``).

One job: the energy one report costs a battery board -- a MicroPython
board (``BOARDS``) driving a LoRaWAN AT modem (``MODEMS``) over a UART --
as a sum of (power x time) terms, and the days a battery lasts.  Every
current and time is in the part tables below with its source next to it
(docs/energy.md has the same table); the airtime is
:func:`mss_protocol.lorawan.airtime_ms`, the one ``mss plan --link``
verifies.

The report cycle
----------------
A board sleeps for the period; for one report it

1. wakes (light sleep: returns into the running program; deep sleep: boots
   MicroPython again, ``boot_s``),
2. runs the protocol (randomise + encode): the planner's device time,
   :func:`mss_protocol.device_cost.device_ms` on an RP2040, mapped to the
   other boards by :func:`device_s`,
3. wakes the modem and hands it the report (the AT handshake: the bytes of
   the wake, send and sleep commands and their answers at the dialect's
   baud rate, :func:`handshake_s`),
4. waits, awake, for the modem's final answer (``+EVT:TX_DONE``,
   ``+MSGHEX: Done``, ``mac_tx_ok``), which comes after the uplink
   (airtime) and the two Class A receive windows: RX1 opens
   RECEIVE_DELAY1 = 1 s after the end of the uplink, RX2 RECEIVE_DELAY2 = 2 s
   after it (RP002-1.0.x section 3.3, "Default Settings"); the firmware's
   modem drivers poll the UART for that answer, so the MCU stays awake
   (at its idle current) through the whole uplink and both windows,
5. puts the modem to sleep and sleeps itself until the next report.

With times in s, currents in mA and voltages in V (mA x V x s = mJ):

.. math::

    E_{mcu,awake} &= V_{mcu} I_{mcu,active} (t_{boot} + t_{device} + t_{hs}) \\\\
    E_{mcu,wait} &= V_{mcu} I_{mcu,idle} (t_{air} + D_2 + t_{rx2}) \\\\
    E_{tx} &= V_{modem} I_{tx}(P_{region}) t_{air} \\\\
    E_{rx1} &= V_{modem} I_{rx} t_{rx1}, \\qquad E_{rx2} = V_{modem} I_{rx} t_{rx2} \\\\
    E_{modem,idle} &= V_{modem} I_{modem,idle} (t_{hs} + D_2 - t_{rx1}) \\\\
    E_{sleep} &= V_{mcu} I_{mcu,sleep} (T - t_{mcu}) + V_{modem} I_{modem,sleep} (T - t_{modem})

where :math:`D_2` = RECEIVE_DELAY2, :math:`T` the period,
:math:`t_{mcu} = t_{boot} + t_{device} + t_{hs} + t_{air} + D_2 + t_{rx2}`
the MCU's awake time and :math:`t_{modem} = t_{hs} + t_{air} + D_2 + t_{rx2}`
the modem's.  Between the end of the uplink and RX2 the modem is counted at
its idle current (its MCU awake, radio off) outside the windows: stacks
that enter Stop2 there draw less.  The energy of one report is the sum of
the seven terms; a day holds 86 400 / T reports.

One voltage convention: energy at the cell's terminals
------------------------------------------------------
Every energy is what the battery (``CELLS``) delivers.  A cell of C mAh at its
nominal voltage V_cell holds C x 3.6 x V_cell J.  A board that feeds its parts
through a linear regulator (``regulator`` "linear": the ESP32 boards' LDO)
draws each part's current from the cell, so each term's V is V_cell (the
days are then C over the mean current, whatever V_cell).  A board with a
switching regulator (the Pico W's buck-boost on VSYS) draws each part's
power: V is the voltage the part's current was measured at (VSYS 5 V for
the Pico W's own figures, which contain its regulator; 3.3 V for the modem
on its 3V3 rail), the converter's losses not modelled.

Battery life: self-discharge and shelf life
-------------------------------------------
A cell loses ``self_discharge_per_year`` of its capacity a year besides the
load (linear in time, the datasheet's figure), so the days a battery lasts
are 1 / (E_day / E_cell + s / 365), and never more than the cell's
``shelf_life_days`` (the plan says so when that caps them).

Receive windows
---------------
Both windows are empty (no downlink): an empty window lasts the radio's
preamble-detection timeout, which LoRaMac-node (``RegionCommon.c``,
``RegionCommonComputeRxWindowParameters``) sizes as

.. math::

    n = \\max\\left(\\left\\lceil \\frac{(2 n_{min} - 8) T_s + 2 e_{max}}{T_s} \\right\\rceil, n_{min}\\right),
    \\qquad t_{rx} = n T_s, \\qquad T_s = 2^{SF} / BW

with n_min = DEFAULT_MIN_RX_SYMBOLS = 6 and e_max =
DEFAULT_SYSTEM_MAX_RX_ERROR = 10 ms (Semtech LoRaWAN-lib ``LoRaMac.h``).
RX1 uses the region's RX1 data rate for the uplink's (RX1DROffset 0), RX2
the region's default RX2 data rate (chirpstack ``lrwn/src/region/*.rs``
``rx1_data_rate_table`` and ``get_defaults``).

TX power
--------
``REGION_TX_DBM``: EU868 14 dBm conducted (16 dBm EIRP = 14 dBm ERP with a
2.15 dBi antenna, the RP002 EU863-870 maximum); US915 and AU915 allow
30 dBm, but the modules give at most 20-22 dBm (RAK3172 22 dBm, Wio-E5
20.8 dBm): the model uses 20 dBm there, the power the RAK3172 datasheet
states its TX current at.

Device time on the ESP32 and ESP32-C3
-------------------------------------
``mss plan`` hands :func:`report` the device time on the board itself
(``board_ms``: :func:`mss_protocol.device_cost.device_ms` on that board):
the ESP32-C3's from RV32IMC instruction counts measured under QEMU
(docs/device-cost.md) at 1.3 cycles per instruction (an assumption, no
cycle table published) and 160 MHz, the clock its current figures are given
at.  ASSUMPTION, not measured: the ESP32 (Xtensa LX6; no Xtensa board in
MicroPython's ports/qemu, no ESP32 core in Debian's QEMU) is taken to
execute the count a Cortex-M3 does at 1.3 cycles per instruction, 160 MHz.
Without ``board_ms`` the RP2040 time is scaled by
``BOARDS[b]["device_scale"]``: for the ESP32-C3 the median of the measured
ratios (see there).  The RP2350 has a device time
(``mss plan --board rp2350``) but no energy figures here: no sourced
currents were found for a Pico 2 W.

The join
--------
An OTAA join (:func:`join`) is counted once at the start of a campaign and once after every reset
(:func:`joins_per_day`, ``RESETS_PER_YEAR`` by default, an ASSUMPTION): the join-request's airtime
(``lorawan.JOIN_REQUEST_BYTES``), JOIN_ACCEPT_DELAY1 = 5 s to RX1 (RP002-1.0.x section 3.3) and the
join-accept received in RX1 at the RX1 data rate; the MCU waits awake for the modem's answer, as for
a report.  :func:`with_joins` spreads the campaign's joins over its days.  A modem that rejoins after
every boot is refused on a deep-sleeping board (``REJOINS_AFTER_BOOT``).

Not modelled: failed joins and their retries, downlinks (a received frame keeps the radio on for
its airtime), retransmissions, the application's own work (sensor, writing
``state.json``), the modem's command latency, regulator losses and
quiescent current, and temperature.
"""
import math
from collections import namedtuple

from mss_protocol import device_cost, lorawan

RECEIVE_DELAY1_S = 1.0  # RP002-1.0.x section 3.3 Default Settings (every region)
RECEIVE_DELAY2_S = 2.0  # "SHALL be RECEIVE_DELAY1 + 1 s"
JOIN_ACCEPT_DELAY1_S = 5.0  # RP002-1.0.x section 3.3 Default Settings (every region)
JOIN_ACCEPT_DELAY2_S = 6.0  # "SHALL be JOIN_ACCEPT_DELAY1 + 1 s"
# ASSUMPTION: resets a year a board rejoins after (power cuts, watchdog, firmware updates); every
# reset counted as a rejoin, an upper bound for the RAK3172 and Wio-E5 (they keep their session over a
# board reset, not over a power cut); the RN2483 rejoins after every boot (REJOINS_AFTER_BOOT)
RESETS_PER_YEAR = 12
MIN_RX_SYMBOLS = 6  # LoRaWAN-lib LoRaMac.h DEFAULT_MIN_RX_SYMBOLS
MAX_RX_ERROR_MS = 10.0  # LoRaWAN-lib LoRaMac.h DEFAULT_SYSTEM_MAX_RX_ERROR
RANK_PERIOD_S = lorawan.DAY_S  # auto without --period: any period common to all candidates ranks the same
MJ_PER_MAH_V = 3.6e3  # 1 mAh x 1 V = 3.6 J = 3600 mJ

# conducted TX power (dBm) the model charges an uplink at, per region (see the module docstring)
REGION_TX_DBM = {"eu868": 14, "us915": 20, "au915": 20, "au915-nodwell": 20}

# downlink data rates: DR -> (SF, bandwidth kHz); chirpstack lrwn/src/region/{eu868,us915,au915}.rs data_rates
_EU_DOWN = {dr: (12 - dr, 125) for dr in range(6)}
_US_DOWN = {8 + i: (12 - i, 500) for i in range(6)}  # DR8..DR13 = SF12..SF7 at 500 kHz
DOWNLINK_DRS = {"eu868": _EU_DOWN, "us915": _US_DOWN, "au915": _US_DOWN, "au915-nodwell": _US_DOWN}
# RX1 data rate for the uplink DR at RX1DROffset 0: chirpstack rx1_data_rate_table (first column)
RX1_DR = {"eu868": {dr: dr for dr in range(6)},
          "us915": {0: 10, 1: 11, 2: 12, 3: 13, 4: 13},
          "au915": {0: 8, 1: 9, 2: 10, 3: 11, 4: 12, 5: 13, 6: 13}}
RX1_DR["au915-nodwell"] = RX1_DR["au915"]
# RX2 default data rate: chirpstack get_defaults() rx2_dr (EU868 DR0 at 869.525 MHz, US915/AU915 DR8 at 923.3 MHz)
RX2_DR = {"eu868": 0, "us915": 8, "au915": 8, "au915-nodwell": 8}

_COMMUNITY = "[secondary: community measurement]"
_PICO_ACTIVE = ("~21 mA, Raspberry Pi Pico, MicroPython v1.19 idle at the REPL (about 125 MHz), 5 V on VSYS, no USB: "
                "micropython/micropython issue #8770 " + _COMMUNITY + "; the Pico / Pico W datasheet power tables "
                "were not found.  MicroPython does not slow the clock while it waits, so it is also the idle current")
_ESP32_T42 = "ESP32 Series Datasheet v5.2, Table 4-2 Power Consumption by Power Modes"
_C3_T66 = "ESP32-C3-MINI-1 & MINI-1U Datasheet v2.2, Table 6-6 (from the ESP32-C3 Series Datasheet), Modem-sleep"
_BOOT_635 = ("635 ms: stock MicroPython v1.19.1, deep-sleep wake -> main.py -> deepsleep, measured on an ESP32-S3 "
             "(FeatherS3): glenn20/upy-esp32-experiments OptimisingMicropythonBootTime/README.md "
             + _COMMUNITY + "; no figure for this chip was found, used as an estimate")
# ASSUMPTION (module docstring): Cortex-M3 count (0.65 x M0) at 1.3 CPI, 160 MHz, over the RP2040's 1.55 CPI at 125 MHz
_LDO = ("the chip's figures are at its 3.3 V rail, which a development board makes from the cell with a linear "
        "regulator (an LDO): the cell delivers the chip's and the modem's current")
_M3_SCALE = (0.65 * 1.3 / 160e6) / (device_cost.CPI_RP2040 / device_cost.HZ_RP2040)

# Each figure is (value, source).  Currents in mA, voltages in V, times in s.
BOARDS = {
    "rp2040": {
        "name": "Raspberry Pi Pico W (RP2040), MicroPython",
        "volts": (5.0, "VSYS, the supply the current below was measured at"),
        "regulator": ("switching", "Pico W datasheet, power chain: VSYS (1.8-5.5 V) feeds the on-board buck-boost "
                                   "SMPS that makes the 3.3 V rail (the modem's supply here)"),
        "active_ma": (21.0, _PICO_ACTIVE),
        "idle_ma": (21.0, _PICO_ACTIVE),
        "sleep": "light",
        "sleep_ma": (1.2, "Pico W machine.lightsleep(): ~1.2 mA after a re-test (earlier reports 12-15 mA), "
                          "ghubcoder/micropython-pico-deepsleep issues #7 and #8 " + _COMMUNITY + "; a Pico from USB "
                          "draws ~1.5 mA in lightsleep(5000) (micropython commit b004e7e397 message).  The rp2 "
                          "port's deepsleep() is lightsleep() then a reset (ports/rp2/modmachine.c): never lower"),
        "boot_s": (0.0, "lightsleep returns into the running program: no boot; the wake-up (XOSC restart) is not "
                        "modelled, no figure found"),
        "device_scale": (1.0, "the planner's device time: Cortex-M0 instructions x 1.55 CPI / 125 MHz "
                              "(mss_protocol.device_cost, docs/device-cost.md)"),
    },
    "esp32": {
        "name": "ESP32 (Xtensa LX6), MicroPython at 160 MHz",
        "volts": (3.3, "the chip datasheet's supply"),
        "regulator": ("linear", _LDO),
        "active_ma": (44.0, _ESP32_T42 + ": Modem-sleep (radio off), 160 MHz, dual-core, 27-44 mA; the top of "
                            "the range for the CPU computing"),
        "idle_ma": (27.0, _ESP32_T42 + ": the bottom of the same 27-44 mA range, for the CPU waiting on the UART"),
        "sleep": "deep",
        "sleep_ma": (0.010, _ESP32_T42 + ": Deep-sleep, RTC timer + RTC memory, 10 uA"),
        "boot_s": (0.635, _BOOT_635),
        "device_scale": (_M3_SCALE, "ASSUMPTION: Cortex-M3 instruction count (0.65 x the M0's, docs/device-cost.md) "
                                    "at 1.3 CPI and 160 MHz; the Xtensa was not emulated"),
    },
    "esp32c3": {
        "name": "ESP32-C3 (RISC-V RV32IMC), MicroPython at 160 MHz",
        "volts": (3.3, "the chip datasheet's supply"),
        "regulator": ("linear", _LDO),
        "active_ma": (23.0, _C3_T66 + ", 160 MHz, CPU running: 23 mA (28 mA with all peripheral clocks)"),
        "idle_ma": (16.0, _C3_T66 + ", 160 MHz, CPU idle: 16 mA"),
        "sleep": "deep",
        "sleep_ma": (0.005, "ESP32-C3-MINI-1 Datasheet v2.2, Table 6-7: Deep-sleep (RTC timer + RTC memory) 5 uA"),
        "boot_s": (0.635, _BOOT_635),
        "device_scale": (0.567, "measured: RV32IMC instruction counts (tools/bench_mcu.py, VIRT_RV32 under "
                                "qemu-system-riscv32 -icount, docs/device-cost.md) x 1.3 CPI (an assumption) / 160 MHz "
                                "over the RP2040's time, median over the 60 configs of the grid (0.43-0.76); "
                                "mss plan passes the C3's own device_ms (board_ms) instead"),
    },
}

_WLE5_IDLE = ("[derived] STM32WLE5 DS13105 Rev 12 (Dec 2022) front page, 'Active-mode MCU: < 72 uA/MHz (CoreMark)', "
              "x 48 MHz (its maximum clock) = 3.456 mA: an upper bound for the modem awake with its radio off")
_RAK = "RAK3172 WisDuo module datasheet (RAKWireless/rakwireless-docs Datasheet/README.md)"
MODEMS = {
    "rak3172": {
        "name": "RAKwireless RAK3172 (STM32WLE5CC), RUI3 AT firmware",
        "regions": tuple(REGION_TX_DBM),
        "volts": (3.3, _RAK + ", typical supply"),
        "baud": (115200, "firmware/lib/mss_node/modem BAUD; RUI3 AT manual"),
        "tx_ma": {20: (87.0, _RAK + ", Operating Current, TX Mode: 87 mA @ 20 dBm 868 MHz (listed as 'Minimum')"),
                  14: (87.0, "[upper bound] no 14 dBm figure found: the datasheet's 20 dBm figure; an STM32WLE5 "
                             "module on its high-power PA at 14 dBm (Wio-E5, stock firmware) was measured at 86.8 mA")},
        "rx_ma": (5.22, _RAK + ", Operating Current, RX Mode"),
        "idle_ma": (3.456, _WLE5_IDLE),
        "sleep_ma": (0.00169, _RAK + ", Sleep Current, EU868/US915, typical at 3.3 V: 1.69 uA"),
        # (wake, send, sleep) lines the board writes, with the modem's answers
        "handshake": (("AT", "OK"), ("AT+SEND={port}:{hex}", "OK"), ("AT+SLEEP={ms}", "OK")),
    },
    "wio-e5": {
        "name": "Seeed Wio-E5 / LoRa-E5 (STM32WLE5JC), Seeed AT firmware",
        "regions": tuple(REGION_TX_DBM),
        "volts": (3.3, "Seeed wiki LoRa-E5 mini, supply"),
        "baud": (9600, "firmware/lib/mss_node/modem BAUD; LoRa-E5 AT Command Specification V1.0"),
        "tx_ma": {14: (86.8, "Seeed forum t/lora-e5-fw-bug-tx-eu868-85ma-too-high-consumption/260126: measured, stock "
                             "firmware, EU868 14 dBm (60 mA with a patched firmware) " + _COMMUNITY + "; the module "
                             "datasheet's tables were not found"),
                  20: (87.0, "[secondary] no Wio-E5 figure found: the RAK3172 datasheet's 87 mA @ 20 dBm, the same "
                             "STM32WLE5 high-power PA (the Wio-E5 transmits on RFO_HP only)")},
        "rx_ma": (5.65, "Seeed forum t/260126, measured RX " + _COMMUNITY),
        "idle_ma": (3.456, _WLE5_IDLE),
        "sleep_ma": (0.0021, "Seeed wiki LoRa_E5_mini / LoRa_E5_Dev_Board: 'as low as 2.1 uA (WOR mode)'; measured "
                             "21 uA (Seeed forum) and 90 uA on a LoRa-E5 mini board in Stop2"),
        "handshake": (("AT", "+LOWPOWER: WAKEUP"), ('AT+MSGHEX="{hex}"', "+MSGHEX: Start"),
                      ("AT+LOWPOWER={ms}", "+LOWPOWER: SLEEP")),
    },
    "rn2483": {
        "name": "Microchip RN2483 (433/868 MHz), LoRaWAN command set",
        "regions": ("eu868",),
        "volts": (3.3, "RN2483 datasheet DS50002346F front page: 3.3 V typical"),
        "baud": (57600, "firmware/lib/mss_node/modem BAUD; EspruinoDocs devices/RN2483.md"),
        "tx_ma": {14: (38.0, "[secondary] 38 mA @ 14 dBm, a LoRaWAN simulator's parameter table citing the 'RN2483 "
                             "datasheet' (indexed code, repo unknown); the DS50002346F tables could not be read")},
        "rx_ma": (12.7, "[derived] module idle 2.8 mA + the SX1276's 'Low RX current of 9.9 mA' (SX1276/77/78/79 "
                        "datasheet Rev 7 front page), taking the module's radio as an SX1276; no RN2483 RX figure found"),
        "idle_ma": (2.8, "Microchip forum m913217: 'The idle current is approx. 2.8mA (correct typical value stated in "
                         "the datasheet)' [secondary: the datasheet table was not readable]"),
        "sleep_ma": (0.0018, "Microchip forum m913217: 'The datasheet claims this current to be typ. at 1.8uA' "
                             "[secondary]; the poster measured 35 uA on firmware 1.0.0"),
        # wake: a break (0x00) then 0x55 for auto-baud, then a command (TheThingsNetwork arduino-device-lib wake())
        "handshake": (("\x00\x55\r\nsys get ver", "RN2483 1.0.5 Oct 31 2018 15:06:52"),
                      ("mac tx uncnf {port} {hex}", "ok"), ("sys sleep {ms}", "ok")),
    },
}
# The battery: nominal voltage, self-discharge a year (a fraction of the capacity) and shelf life, sourced.
CELLS = {
    "li-ion": {
        "name": "Li-ion (Panasonic NCR18650B)",
        "volts": (3.6, "Panasonic NCR18650B specification sheet: nominal voltage 3.6 V"),
        "self_discharge_per_year": (0.20, "Panasonic NCR18650B specification sheet, Storing Conditions: 80 % "
                                          "recoverable capacity after storage of less than 1 year at -20..+20 C "
                                          "(as quoted by batterybro.com 'How to store 18650 batteries safely') "
                                          "[secondary copy]: 20 % a year, an upper bound (it includes the "
                                          "irreversible loss)"),
        "shelf_life_days": (365, "the same table's longest storage (1 year): no retention figure beyond it, so the "
                                 "model stops there (a rechargeable cell is recharged)"),
    },
    "li-socl2": {
        "name": "Li-SOCl2 bobbin cell (Saft LS 26500 class)",
        "volts": (3.6, "Saft LS 26500 datasheet: 3.6 V primary lithium-thionyl chloride cell"),
        "self_discharge_per_year": (0.01, "Saft LS 26500 datasheet, Benefits: 'Low self-discharge rate (less than "
                                          "1 % after 1 year of storage at + 20 C)': 1 % a year, the upper bound"),
        "shelf_life_days": (15 * 365, "VARTA Microbattery, Primary Lithium Cylindrical Cells Li/SOCl2, Sales "
                                      "Program and Technical Handbook: 'shelf life and operational life (up to "
                                      "15 years and more)'; 15 years, the figure stated"),
    },
}
DEFAULT_CELL = "li-ion"
Battery = namedtuple("Battery", "mah cell", defaults=(DEFAULT_CELL,))
Battery.__doc__ = "A battery: ``mah`` its capacity (None: no battery life), ``cell`` a key of ``CELLS``."
COMPONENTS = ("mcu_awake", "mcu_wait", "tx", "rx1", "rx2", "modem_idle", "sleep")


def _v(figure):
    return figure[0]


# Modems whose firmware dialect joins again after every boot of the board: on a board that deep-sleeps
# (a boot a report) each report would carry a join (request airtime, JOIN_ACCEPT_DELAY1 of 5 s awake,
# the accept's window) that neither the link budget nor this model counts, so the pair is refused.
REJOINS_AFTER_BOOT = {
    "rn2483": "the firmware's RN2483 dialect joins (mac join otaa) after every boot (docs/lorawan.md, "
              "mss_node.modem.rn2483), while the RAK3172 and Wio-E5 keep their session",
}


def check(link, board, modem):
    """Raise ValueError if ``board`` or ``modem`` is unknown, the modem has no ``link.region``, or the
    modem rejoins after a boot (``REJOINS_AFTER_BOOT``) and the board deep-sleeps (boots a report)."""
    if board not in BOARDS:
        raise ValueError(f"unknown board {board!r}; valid: {', '.join(BOARDS)}")
    if modem not in MODEMS:
        raise ValueError(f"unknown modem {modem!r}; valid: {', '.join(MODEMS)}")
    if link.region not in MODEMS[modem]["regions"]:
        raise ValueError(f"the {modem} has no {link.region} band (valid: {', '.join(MODEMS[modem]['regions'])}; "
                         f"the RN2903 is Microchip's US915 module)")
    if modem in REJOINS_AFTER_BOOT and BOARDS[board]["sleep"] == "deep":
        light = [b for b in BOARDS if BOARDS[b]["sleep"] != "deep"]
        keep = [m for m in MODEMS if m not in REJOINS_AFTER_BOOT and link.region in MODEMS[m]["regions"]]
        raise ValueError(f"the {board} deep-sleeps, booting before every report, and {REJOINS_AFTER_BOOT[modem]}: "
                         f"every report would carry a join (its airtime against the duty cycle and fair use, "
                         f"5 s awake for the accept) that the plan does not count; use a modem that keeps its "
                         f"session ({', '.join(keep)}) or a light-sleeping board ({', '.join(light)})")


def tx_ma(modem, region):
    """The modem's TX current (mA) at the region's power REGION_TX_DBM[region]."""
    return _v(MODEMS[modem]["tx_ma"][REGION_TX_DBM[region]])


def rx_window_s(sf, bw_khz):
    """Length (s) of an empty receive window at SF / BW kHz: LoRaMac-node's symbol timeout (module docstring)."""
    ts_ms = 2 ** sf / bw_khz
    symbols = max(math.ceil(((2 * MIN_RX_SYMBOLS - 8) * ts_ms + 2 * MAX_RX_ERROR_MS) / ts_ms), MIN_RX_SYMBOLS)
    return symbols * ts_ms / 1e3


def rx_windows_s(link):
    """(t_rx1, t_rx2) in s for an uplink on ``link``: RX1 at the region's RX1 DR, RX2 at its default RX2 DR."""
    down = DOWNLINK_DRS[link.region]
    return (rx_window_s(*down[RX1_DR[link.region][link.dr]]), rx_window_s(*down[RX2_DR[link.region]]))


def handshake_bytes(modem, frame_bytes, period_s, fport=1):
    """Bytes on the UART for one report: the wake, send and sleep command lines (CR LF each) and their answers.

    The report travels as 2 hex digits a byte; ``{ms}`` is the period in ms.  The modem's final answer
    after RX2 is not counted (it arrives while the MCU waits).
    """
    fields = {"port": fport, "hex": "00" * frame_bytes, "ms": int(period_s * 1000)}
    total = 0
    for command, answer in MODEMS[modem]["handshake"]:
        total += len(command.format(**fields)) + 2 + (len(answer) + 2 if answer else 0)
    return total


def handshake_s(modem, frame_bytes, period_s, fport=1):
    """UART time (s) of :func:`handshake_bytes` at the dialect's baud rate, 10 bits a byte (8N1)."""
    return handshake_bytes(modem, frame_bytes, period_s, fport) * 10 / _v(MODEMS[modem]["baud"])


def device_s(board, rp2040_ms, board_ms=None):
    """The protocol's device time (s) on ``board``: ``board_ms`` (the planner's time on the board itself,
    :func:`mss_protocol.device_cost.device_ms`) when given, else the RP2040 time (ms) x ``device_scale``."""
    return (rp2040_ms * _v(BOARDS[board]["device_scale"]) if board_ms is None else board_ms) / 1e3


def _battery(battery):
    """``battery`` as a :class:`Battery`: None (no capacity, the default cell), a capacity in mAh, or a Battery."""
    if battery is None or isinstance(battery, Battery):
        return battery or Battery(None)
    return Battery(battery)


def check_cell(cell):
    """Raise ValueError if ``cell`` is not a key of ``CELLS``."""
    if cell not in CELLS:
        raise ValueError(f"unknown cell {cell!r}; valid: {', '.join(CELLS)}")


def lifetime_days(per_day_mj, battery):
    """(days, load_days, limit): the days a :class:`Battery` lasts at ``per_day_mj`` mJ a day, with its
    cell's self-discharge and capped at its shelf life, the days the load alone would take (no
    self-discharge, no cap), and what ends it ("shelf life" when the cap holds, else "load");
    (None, None, None) without a capacity."""
    if battery.mah is None:
        return None, None, None
    cell = CELLS[battery.cell]
    held = battery.mah * MJ_PER_MAH_V * _v(cell["volts"])
    drained = 1 / (per_day_mj / held + _v(cell["self_discharge_per_year"]) / 365)
    shelf = _v(cell["shelf_life_days"])
    return min(drained, shelf), held / per_day_mj, "shelf life" if drained > shelf else "load"

def join(link, board="rp2040", modem="rak3172", cell=DEFAULT_CELL, cflist=True):
    """Time and energy of one OTAA join on ``link`` by ``board`` + ``modem``.

    The modem sends a join-request and opens RX1 JOIN_ACCEPT_DELAY1 after its end, where the
    join-accept comes at the region's RX1 data rate; the board waits for the modem's answer
    (``+EVT:JOINED``, ``+JOIN: Done``, ``accepted``) awake, as it waits for a report's, at its idle
    current.  With times in s, the same currents and voltage convention as :func:`report`:

    .. math::

        E_{join} = V_{mcu} I_{mcu,idle} t_{awake} + V_{modem} (I_{tx} t_{req} + I_{rx} t_{acc}
                   + I_{modem,idle} D_{J1}), \\qquad t_{awake} = t_{req} + D_{J1} + t_{acc}

    The same times as the emulated modems' (``ModemEmulator.exchange_s`` with ``join``): the accept's
    airtime is :func:`mss_protocol.lorawan.phy_airtime_ms` of its PHYPayload, counted like an
    uplink's (with a CRC, which a downlink does not carry: at most one 4-5-byte block more).

    Parameters
    ----------
    link : mss_protocol.lorawan.Link
        The region and the data rate the join-request goes at.
    board, modem : str
        Keys of ``BOARDS`` and ``MODEMS``.
    cell : str
        A key of ``CELLS``: its voltage on a linear-regulator board.
    cflist : bool
        The join-accept carries a CFList (33 bytes; without it 17): EU868 networks send one with the
        extra channels, US915/AU915 ones with RP002 a channel mask.

    Returns
    -------
    dict
        ``airtime_ms`` (the join-request's), ``accept_airtime_ms``, ``accept_bytes``, ``tx_s``,
        ``rx_s``, ``awake_s`` (the modem and the MCU awake for the join), ``energy_mj`` (mJ at the
        cell) and ``energy_breakdown`` (``mcu_wait``, ``tx``, ``rx``, ``modem_idle``, mJ).

    Notes
    -----
    Sources: LoRaWAN 1.0.x specification, sections 6.2.4 (join-request: MHDR 1 + JoinEUI 8 +
    DevEUI 8 + DevNonce 2 + MIC 4 = 23 bytes) and 6.2.5 (join-accept: 17 bytes, 33 with the CFList);
    RP002-1.0.x section 3.3 (JOIN_ACCEPT_DELAY1 = 5 s).  The join command's UART bytes (a few ms),
    a failed join's retries and the sleep the join's time displaces are not counted (an upper bound).
    """
    check(link, board, modem)
    check_cell(cell)
    b, m = BOARDS[board], MODEMS[modem]
    accept = lorawan.JOIN_ACCEPT_CFLIST_BYTES if cflist else lorawan.JOIN_ACCEPT_BYTES
    rx1 = lorawan.Link(link.region, link.dr, *DOWNLINK_DRS[link.region][RX1_DR[link.region][link.dr]], 0)
    tx, rx = lorawan.join_airtime_ms(link) / 1e3, lorawan.phy_airtime_ms(accept, rx1) / 1e3
    awake = tx + JOIN_ACCEPT_DELAY1_S + rx
    linear = _v(b["regulator"]) == "linear"
    vb, vm = (_v(CELLS[cell]["volts"]),) * 2 if linear else (_v(b["volts"]), _v(m["volts"]))
    e = {"mcu_wait": vb * _v(b["idle_ma"]) * awake, "tx": vm * tx_ma(modem, link.region) * tx,
         "rx": vm * _v(m["rx_ma"]) * rx, "modem_idle": vm * _v(m["idle_ma"]) * JOIN_ACCEPT_DELAY1_S}
    return {"airtime_ms": tx * 1e3, "accept_airtime_ms": rx * 1e3, "accept_bytes": accept, "tx_s": tx, "rx_s": rx,
            "awake_s": awake, "energy_mj": sum(e.values()), "energy_breakdown": e}


def joins_per_day(campaign_days, resets_per_year=RESETS_PER_YEAR):
    """The joins a day over a campaign of ``campaign_days``: 1 + ``resets_per_year`` x days / 365
    joins (the first, then one after every reset), spread over its days."""
    return (1 + resets_per_year * campaign_days / 365) / campaign_days


def with_joins(result, link, per_day, cflist=True):
    """:func:`report`'s ``result`` with ``per_day`` joins a day (:func:`joins_per_day`) added: the
    energy a day and the battery's days recomputed, and ``join`` (:func:`join` on the result's board,
    modem and cell), ``joins_per_day`` and ``join_mj_per_day`` set."""
    m = result["energy_model"]
    j = join(link, m["board"], m["modem"], m["cell"], cflist)
    extra = per_day * j["energy_mj"]
    per_day_mj = result["energy_mj_per_day"] - result.get("join_mj_per_day", 0.0) + extra
    battery = Battery(m["battery_mah"], m["cell"])
    days, load_days, limit = lifetime_days(per_day_mj, battery)
    return dict(result, energy_mj_per_day=per_day_mj, battery_days=days, battery_load_days=load_days,
                battery_limit=limit, join=j, joins_per_day=per_day, join_mj_per_day=extra)


def period_for_days(result, days):
    """The shortest period (s) at which the plan ``result`` (:func:`report`'s, with a battery) lasts
    ``days``, the other figures unchanged; None when no period does (the sleep current and the
    self-discharge alone drain it first, or the cell's shelf life is shorter).

    The energy a day is 86 400 (A / T + P_sleep) + J, A the report's energy less P_sleep x T and J
    the joins' energy a day (:func:`with_joins`; 0 without): the
    handshake's sleep command grows by a digit now and then with T, so the caller checks the result
    with :func:`report`.
    """
    m = result["energy_model"]
    cell = CELLS[m["cell"]]
    if days > _v(cell["shelf_life_days"]):
        return None
    held = m["battery_mah"] * MJ_PER_MAH_V * _v(cell["volts"])
    allowed = held * (1 / days - _v(cell["self_discharge_per_year"]) / 365) - result.get("join_mj_per_day", 0.0)
    sleep = lorawan.DAY_S * result["sleep_mw"]
    if allowed <= sleep:
        return None
    fixed = result["energy_mj_per_report"] - result["sleep_mw"] * result["period_s"]
    return lorawan.DAY_S * fixed / (allowed - sleep)


def capacity_for_days(result, days, cell):
    """The capacity (mAh) of a ``cell`` battery that lasts ``days`` at the plan ``result``'s energy a day
    (the same voltage convention: on a linear-regulator board the energy scales with the cell's
    voltage); None when the cell's shelf life is shorter."""
    c = CELLS[cell]
    if days > _v(c["shelf_life_days"]):
        return None
    per_day = result["energy_mj_per_day"] * _v(c["volts"]) / result["energy_model"]["rail_volts"] \
        if result["energy_model"]["regulator"] == "linear" else result["energy_mj_per_day"]
    return per_day / (MJ_PER_MAH_V * _v(c["volts"]) * (1 / days - _v(c["self_discharge_per_year"]) / 365))


def report(link, frame_bytes, rp2040_ms, board="rp2040", modem="rak3172", period_s=None, battery=None,
           board_ms=None):
    """Energy of one report of ``frame_bytes`` on ``link`` (FPort 1, as :func:`handshake_bytes` counts it)
    every ``period_s`` seconds.

    Parameters
    ----------
    link : mss_protocol.lorawan.Link
        The region and data rate.
    frame_bytes : int
        The whole report (LoRaWAN FRMPayload), bytes.
    rp2040_ms : float
        The protocol's device time on an RP2040 (ms), ``mss plan``'s ``rp2040_ms``.
    board, modem : str
        Keys of ``BOARDS`` and ``MODEMS``.
    period_s : float, optional
        The report period (s); default: the link budget's ``min_period_s``.
    battery : Battery or float, optional
        The battery (a capacity in mAh: the :data:`DEFAULT_CELL`); None: the default cell without a
        capacity (no ``battery_days``).  Its cell's voltage is the one the energy is counted at on a
        linear-regulator board (module docstring, the voltage convention).
    board_ms : float, optional
        The device time on ``board`` itself (ms, ``mss plan``'s ``device_ms``); None: ``rp2040_ms`` x
        the board's ``device_scale``.

    Returns
    -------
    dict
        ``energy_mj_per_report`` (mJ), ``energy_mj_per_day`` (mJ), ``battery_days`` (None without a
        capacity; with self-discharge, capped at the cell's shelf life), ``battery_load_days`` (the
        load alone), ``battery_limit`` ("shelf life" when the cap holds, else "load"),
        ``sleep_mw`` (the sleep power, mW at the cell), ``energy_breakdown`` (mJ per report for each of ``COMPONENTS``), ``times_s`` (the
        model's times, s) and ``energy_model`` (the parts, their figures and the TX power used).

    Raises
    ------
    ValueError
        An unknown part or cell, a modem without the link's region, or a period shorter than the
        board's awake time.
    """
    check(link, board, modem)
    battery = _battery(battery)
    check_cell(battery.cell)
    b, m = BOARDS[board], MODEMS[modem]
    air_ms = lorawan.airtime_ms(frame_bytes, link.sf, link.bw_khz)
    if period_s is None:
        period_s = lorawan.budget(link, frame_bytes)["min_period_s"]
    t = {"boot": _v(b["boot_s"]), "device": device_s(board, rp2040_ms, board_ms),
         "handshake": handshake_s(modem, frame_bytes, period_s), "air": air_ms / 1e3}
    t["rx1"], t["rx2"] = rx_windows_s(link)
    t["wait"] = t["air"] + RECEIVE_DELAY2_S + t["rx2"]
    t["modem_idle"] = t["handshake"] + RECEIVE_DELAY2_S - t["rx1"]
    t["modem_awake"] = t["handshake"] + t["wait"]
    t["mcu_awake"] = t["boot"] + t["device"] + t["handshake"] + t["wait"]
    if period_s < t["mcu_awake"]:
        raise ValueError(f"a {period_s:g} s period is shorter than the {t['mcu_awake']:.3g} s a report keeps the "
                         f"{board} awake")
    # energy at the cell's terminals: through a linear regulator the cell delivers each part's current
    linear = _v(b["regulator"]) == "linear"
    vb, vm = (_v(CELLS[battery.cell]["volts"]),) * 2 if linear else (_v(b["volts"]), _v(m["volts"]))
    e = {
        "mcu_awake": vb * _v(b["active_ma"]) * (t["boot"] + t["device"] + t["handshake"]),
        "mcu_wait": vb * _v(b["idle_ma"]) * t["wait"],
        "tx": vm * tx_ma(modem, link.region) * t["air"],
        "rx1": vm * _v(m["rx_ma"]) * t["rx1"],
        "rx2": vm * _v(m["rx_ma"]) * t["rx2"],
        "modem_idle": vm * _v(m["idle_ma"]) * t["modem_idle"],
        "sleep": (vb * _v(b["sleep_ma"]) * (period_s - t["mcu_awake"])
                  + vm * _v(m["sleep_ma"]) * (period_s - t["modem_awake"])),
    }
    total = sum(e.values())
    per_day = total * lorawan.DAY_S / period_s
    days, load_days, limit = lifetime_days(per_day, battery)
    cell = CELLS[battery.cell]
    return {"energy_mj_per_report": total, "energy_mj_per_day": per_day, "battery_days": days,
            "battery_load_days": load_days,
            "battery_limit": limit,
            "sleep_mw": vb * _v(b["sleep_ma"]) + vm * _v(m["sleep_ma"]),
            "energy_breakdown": e, "times_s": t, "period_s": period_s,
            "energy_model": {"board": board, "modem": modem, "sleep": b["sleep"],
                             "tx_dbm": REGION_TX_DBM[link.region], "battery_mah": battery.mah,
                             "cell": battery.cell, "battery_volts": _v(cell["volts"]),
                             "self_discharge_per_year": _v(cell["self_discharge_per_year"]),
                             "shelf_life_days": _v(cell["shelf_life_days"]),
                             "regulator": _v(b["regulator"]), "rail_volts": vb,
                             "voltage_convention": "energy at the cell's terminals", "airtime_ms": air_ms}}
