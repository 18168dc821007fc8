"""A field campaign in real time (``mss demo --epochs``): emulated LoRaWAN boards
running the firmware's own loop for several epochs, reset at random moments.

Each board is one long-running process of ``emulated_board/field_board.py``
(the firmware's ``mss_node.app.run``, on the MicroPython unix port or
CPython) with its config.json and state.json in its own folder, driving its
own emulated modem (:class:`~.modem.base.ModemEmulator`, the dialects in turn) on
a pty; a network-server emulator publishes the uplinks, dated by their
arrival.  Time is real but accelerated by a short ``period_s``: the boards
sleep light between reports (``device.sleep``) and their sleeps take real
time (``$MSS_BOARD_REALTIME``: the emulated ``machine`` of a one-shot fleet
sleeps in no time, which would make a board run its epochs ahead of the
network's clock).  With ``no_clock`` each board's wall clock reads
2000-01-01 at every boot.

Resets (:func:`plan_resets`, seeded), each board ``n`` of them at random
moments, of four kinds:

* ``power``: SIGKILL at the moment, the modem powered off too (it forgets
  its session and network time), back on after a short random off time;
* ``power-mid-uplink``: the same, at the first uplink the modem takes after
  the moment (it is on air: published; the board never hears its answer);
* ``watchdog``: SIGKILL at the moment, the modem keeps power, the board
  boots again at once;
* ``reset``: the board calls ``machine.reset()`` at its first wait or sleep
  after the moment (as ``main.py`` after a fatal error), boots again at once.

State.json persists across all of them (the board's flash).  A board's
process that ends by itself (a deep sleep, an emulated watchdog trip, a
crash) boots again at once; each such boot is recorded.
"""
import json
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mss_aggregator.devices.fleet import BoardRun, Boards, FleetClock
from mss_aggregator.devices.modem import DIALECTS, emulator
from mss_aggregator.devices.runtime import board_sleeps, command

KINDS = ("power", "power-mid-uplink", "watchdog", "reset")
OFF_S = (0.1, 1.0)  # a power cycle's off time, uniform (s)


def field_device_config(cfg, campaign, modem, period_s, epoch_origin, privacy=None):
    """A LoRaWAN board's config.json: a sleeping battery board (device.sleep light), the
    link's retries scaled to a short period; ``privacy`` as in :func:`.fleet.device_config`."""
    d = cfg.to_dict()
    d["device"] = {"campaign": campaign, "period_s": period_s, "epoch_origin": epoch_origin, "poll_s": 1,
                   "transport": "lorawan", "sleep": "light",
                   "lorawan": {"modem": modem.dialect.replace("-old", ""), "path": modem.path,
                               "retry_s": 1, "backoff_max_s": 2, "join_timeout_s": 2, "tx_timeout_s": 2}}
    d["device"].update(privacy or {})
    return d


def plan_resets(rng, devices, n, start, end, arm_end):
    """Per board, ``n`` resets [{"kind", "at" (unix), "off" (s)}] in time order: the kinds
    (:data:`KINDS`) spread evenly over the fleet in a random order; moments uniform in
    [start, end) (``power-mid-uplink``: armed in [start, arm_end), so that an uplink follows)."""
    kinds = [KINDS[i % len(KINDS)] for i in range(devices * n)]
    rng.shuffle(kinds)
    plans = []
    for d in range(devices):
        plan = []
        for kind in kinds[d * n:(d + 1) * n]:
            at = rng.uniform(start, arm_end if kind == "power-mid-uplink" else end)
            off = rng.uniform(*OFF_S) if kind.startswith("power") else 0.0
            plan.append({"kind": kind, "at": at, "off": off})
        plans.append(sorted(plan, key=lambda r: r["at"]))
    return plans


class FieldBoard(threading.Thread):
    """One board: its modem, its folder, its boots until ``t_end``."""

    def __init__(self, folder, modem, runtime, value, resets, t_end, no_clock):
        super().__init__(name=f"board-{modem.dev_eui}", daemon=True)
        self.folder, self.modem, self.runtime, self.value = folder, modem, runtime, value
        self.resets, self.t_end, self.no_clock = resets, t_end, no_clock
        self.log = folder / "board.log"  # the emulated machine's (sleeps, resets)
        self.out = folder / "board.out"  # the firmware's output, every boot
        self.runs = []  # [(start, end, how it ended, returncode)]
        self.done = []  # resets made: dicts of the plan with "t" (unix time) they happened
        self.arrivals = []  # [(unix time, fcnt, data)] of the uplinks that went on air
        self.proc = None
        self._mid = None  # the armed power-mid-uplink reset
        self._killed = threading.Event()
        self._halt = threading.Event()
        self.error = None

    def uplink(self, modem, fport, fcnt, data, publish):
        """The modem took an uplink (it is on air): publish it, then fire an armed mid-uplink reset."""
        self.arrivals.append((time.time(), fcnt, data))
        publish(modem, fport, fcnt, data)
        r, p = self._mid, self.proc
        if r is not None and p is not None and time.time() >= r["at"]:
            self._mid = None
            self._kill(p)

    def _kill(self, p):
        self._killed.set()
        try:
            p.send_signal(signal.SIGKILL)
        except OSError:
            pass

    def stop(self):
        self._halt.set()
        p = self.proc
        if p is not None:
            self._kill(p)

    def _boot(self, reset):
        env_extra = {"MSS_BOARD_REALTIME": "1", "MSS_BOARD_NO_CLOCK": "1" if self.no_clock else "0"}
        if reset is not None and reset["kind"] == "reset":
            env_extra["MSS_BOARD_RESET_AT"] = "%.3f" % reset["at"]
        argv, env = command(self.runtime, "field_board", ["config.json", "state.json", self.value],
                            board_log=self.log)
        env.update(env_extra)
        self._killed.clear()
        with open(self.out, "a") as fh:
            fh.write(f"=== boot {len(self.runs) + 1} at {time.time():.3f}\n")
            fh.flush()
            return subprocess.Popen(argv, env=env, cwd=self.folder, stdout=fh, stderr=subprocess.STDOUT)

    def run(self):
        try:
            self._run()
        except Exception as exc:  # reported by the caller
            self.error = exc

    def _run(self):
        pending = list(self.resets)
        while not self._halt.is_set() and time.time() < self.t_end:
            reset = pending[0] if pending else None
            start = time.time()
            if reset is not None and reset["at"] < start + 0.2:
                reset["at"] = start + 0.2  # not before this boot: early in it
            self.proc = p = self._boot(reset)
            self._mid = reset if reset is not None and reset["kind"] == "power-mid-uplink" else None
            timed = reset is not None and reset["kind"] in ("power", "watchdog")
            until = min(self.t_end, reset["at"]) if timed else self.t_end
            how = None
            try:
                p.wait(timeout=max(0.0, until - time.time()))
            except subprocess.TimeoutExpired:  # the moment of a timed reset, or the end
                how = reset["kind"] if timed and until < self.t_end else "end"
                self._kill(p)
                p.wait()
            self._mid = None
            if how is None:  # it ended by itself, or was killed at an uplink or by stop()
                if self._halt.is_set():
                    how = "end"
                elif self._killed.is_set():
                    how = "power-mid-uplink"
                elif reset is not None and reset["kind"] == "reset" and _reset_logged(self.log, start):
                    how = "reset"
                else:
                    how = "exit"  # a deep sleep, the emulated watchdog, a crash: it boots again
            end = time.time()
            self.runs.append((start, end, how, p.returncode))
            if how == "end":
                break
            if how != "exit":
                pending.pop(0)
                self.done.append(dict(reset, t=end))
                if how.startswith("power"):
                    self.modem.power_off()
                    self._halt.wait(reset["off"])

    def done_in(self, a, b):
        """True if a reset of this board happened between unix times ``a`` and ``b``."""
        return any(a < r["t"] < b for r in self.done)

    def times(self):
        """The MCU's time over its boots (real time: sleeps take theirs): ``awake_s`` (run time
        less the light sleeps, a sleep cut by a reset counted to the reset), ``asleep_s``,
        ``off_s`` (powered off or rebooting between boots), ``awake_fraction`` = awake /
        (awake + asleep), ``sleeps``."""
        runs = [(a, b) for a, b, _, _ in self.runs]
        asleep, n = 0.0, 0
        for kind, ms, t in board_sleeps(self.log):
            if kind not in ("light", "deep"):
                continue
            for a, b in runs:
                if a <= t <= b:
                    asleep += max(0.0, min(t + ms / 1000, b) - t)
                    n += 1
                    break
        on = sum(b - a for a, b in runs)
        span = (runs[-1][1] - runs[0][0]) if runs else 0.0
        awake = max(0.0, on - asleep)
        return {"awake_s": awake, "asleep_s": asleep, "off_s": max(0.0, span - on),
                "awake_fraction": awake / on if on else None, "sleeps": n}


def _reset_logged(log, since):
    return any(kind == "reset" and t >= since for kind, _, t in board_sleeps(log))


# RN2483 has no DeviceTimeReq (no network time in its command set): a clockless one is paced, loses
# the epoch of a reset (its off time is unknown) and drifts by the pace margin (tests/firmware/test_clockless.py)
NO_CLOCK_LEFT_OUT = "rn2483 left out: it has no network time (no DeviceTimeReq), so a clockless board loses the epoch of each reset"


def fleet_dialects(no_clock):
    """The modems boards take in turn: with ``no_clock`` only those with network time."""
    return tuple(d for d in DIALECTS if not (no_clock and d == "rn2483"))


@dataclass(frozen=True)
class FieldRun:
    """A field campaign's course: until ``t_end`` (unix time), boards without a clock
    (``no_clock``: their wall clock reads 2000-01-01 at every boot), ``resets`` a board planned
    from ``seed`` (:func:`plan_resets`)."""

    t_end: float
    no_clock: bool = False
    resets: int = 0
    seed: int = 1


def run_field(cfg, campaign, values, network, clock, course, boards=Boards(), run=BoardRun()):
    """Run one board per value from now until ``course.t_end`` (:class:`FieldRun`); return the
    boards (:class:`FieldBoard`, stopped, in order).  ``clock``: a
    :class:`~.fleet.FleetClock` (period_s, epoch_origin); ``boards``: a :class:`~.fleet.Boards`
    (DevEUI prefix, default "70b3d57ed0", and privacy fields; no logins on LoRaWAN); ``run``: a
    :class:`~.fleet.BoardRun` (runtime, workdir).  Resets are planned from ``course.seed`` over
    [epoch_origin + period_s / 2, t_end - period_s / 4)."""
    period_s, epoch_origin = clock.period_s, clock.epoch_origin
    t_end, no_clock, resets, seed = course.t_end, course.no_clock, course.resets, course.seed
    runtime, workdir = run.runtime, run.workdir
    id_prefix, privacy = boards.id_prefix or "70b3d57ed0", boards.privacy
    rng = random.Random(seed)
    plans = plan_resets(rng=rng, devices=len(values), n=resets, start=epoch_origin + period_s / 2,
                        end=t_end - period_s / 4, arm_end=max(epoch_origin + period_s / 2, t_end - 2 * period_s))
    boards = []
    base = Path(workdir)
    dialects = fleet_dialects(no_clock)
    try:
        for i, value in enumerate(values):
            modem = emulator(dialects[i % len(dialects)], f"{id_prefix}{i:06x}")
            network.attach(modem)
            publish = modem.on_uplink
            folder = base / modem.dev_eui
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps(field_device_config(cfg=cfg, campaign=campaign, modem=modem,
                                                                               period_s=period_s,
                                                                               epoch_origin=epoch_origin,
                                                                               privacy=privacy)))
            b = FieldBoard(folder=folder, modem=modem, runtime=runtime, value=int(value), resets=plans[i], t_end=t_end,
                           no_clock=no_clock)
            modem.on_uplink = lambda m, fport, fcnt, data, b=b, publish=publish: b.uplink(
                modem=m, fport=fport, fcnt=fcnt, data=data, publish=publish)
            boards.append(b)
            modem.start()
        for b in boards:
            b.start()
        for b in boards:
            b.join(max(0.0, t_end - time.time()) + 30)
    finally:
        for b in boards:
            b.stop()
        for b in boards:
            b.join(5)
            b.modem.stop()
    return boards


def account(rows, counters, device_ids, required):
    """The campaign's tally from the store: ``rows`` (:meth:`Store.report_epochs`: device,
    epoch, status), ``counters`` (:meth:`Store.counters`), the fleet's ``device_ids``,
    the ``required`` epochs (each board must be counted once in each).

    ``per_epoch``: [{epoch, devices (with an accepted report), accepted (reports)}] of the
    required epochs; ``lost`` = devices x epochs - accepted reports of fleet devices in
    them; ``duplicates``: reports beyond one per device and epoch, over the whole run
    (the store's extras, ``rejected_extra_in_epoch``, which counts the ones a cap left
    unstored too, plus its ``duplicate`` redeliveries); ``quarantined``: every other
    rejected message; ``missing`` [(epoch, device)], ``extra`` [(epoch, device, n)]
    (stored extras), ``other_epochs`` [{epoch, devices, accepted}] outside ``required``."""
    fleet = set(device_ids)
    accepted, extra = {}, {}
    for d, e, status in rows:
        if status == "accepted":
            accepted.setdefault(e, []).append(d)
        else:
            extra[(e, d)] = extra.get((e, d), 0) + 1
    per_epoch = [{"epoch": e, "devices": len(set(accepted.get(e, []))), "accepted": len(accepted.get(e, []))}
                 for e in required]
    missing = [(e, d) for e in required for d in device_ids if d not in accepted.get(e, [])]
    counted = sum(1 for e in required for d in accepted.get(e, []) if d in fleet)
    extras = counters.get("rejected_extra_in_epoch", 0)
    return {"per_epoch": per_epoch, "lost": len(device_ids) * len(required) - counted,
            "duplicates": extras + counters.get("duplicate", 0),
            "quarantined": counters.get("rejected", 0) - extras,
            "missing": missing, "extra": sorted((e, d, n) for (e, d), n in extra.items()),
            "strangers": sorted({d for d, _, _ in rows} - fleet),
            "other_epochs": [{"epoch": e, "devices": len(set(ds)), "accepted": len(ds)}
                             for e, ds in sorted(accepted.items()) if e not in required]}


FIELD_KEYS = ("required_epochs", "per_epoch", "lost", "duplicates", "quarantined", "missing", "extra",
              "other_epochs", "awake_fraction", "per_device", "checks", "ok", "failed", "why")


def summarize(boards, rows, counters, required, period_s, epoch_origin, resets):
    """:func:`account` of the campaign, per board its boots, resets (``t``: s from the
    start of epoch 0), uplinks, epochs counted and its MCU's and modem's times; the
    checks and, when one fails, what failed (``failed``) and why (``why``: each missing
    or doubled device and epoch with its uplinks and resets nearby).  Every key of
    :data:`FIELD_KEYS`."""
    ids = [b.modem.dev_eui for b in boards]
    s = account(rows, counters, ids, required)
    counted = {}
    for d, e, status in rows:
        if status == "accepted":
            counted.setdefault(d, []).append(e)
    per_device = []
    for b in boards:
        mcu, radio = b.times(), b.modem.stats()
        per_device.append({
            "device_id": b.modem.dev_eui, "modem": b.modem.dialect, "boots": len(b.runs),
            "resets": [{"kind": r["kind"], "t": round(r["t"] - epoch_origin, 3), "off_s": round(r["off"], 3)}
                       for r in b.done],
            "exits": sum(1 for _, _, how, _ in b.runs if how == "exit"), "uplinks": len(b.arrivals),
            "epochs": sorted(counted.get(b.modem.dev_eui, [])),
            "awake_s": mcu["awake_s"], "asleep_s": mcu["asleep_s"], "off_s": mcu["off_s"],
            "awake_fraction": mcu["awake_fraction"], "sleeps": mcu["sleeps"],
            "modem_awake_s": radio["awake_s"], "modem_asleep_s": radio["asleep_s"], "modem_sleeps": radio["sleeps"],
            "tx_s": radio["tx_s"], "rx_s": radio["rx_s"], "time_requests": getattr(b.modem, "time_requests", None),
            "joins": radio["joins"]})
    short = [(b.modem.dev_eui, len(b.done)) for b in boards if len(b.done) < resets]
    errors = [(b.modem.dev_eui, b.error) for b in boards if b.error is not None]
    in_required = [x for x in s["extra"] if x[0] in required]
    checks = {"once_per_epoch": not s["missing"] and not in_required, "lost": s["lost"] == 0,
              "duplicates": s["duplicates"] == 0, "quarantined": s["quarantined"] == 0,
              "resets": not short, "harness": not errors and not s["strangers"]}
    failed = []
    if not checks["once_per_epoch"]:
        failed.append(f"{len(s['missing'])} (device, epoch) pairs not counted, {len(in_required)} counted more "
                      f"than once in epochs {required[0]}..{required[-1]}")
    if not checks["lost"]:
        failed.append(f"lost {s['lost']} of {len(ids) * len(required)} reports")
    if not checks["duplicates"]:
        failed.append(f"{s['duplicates']} duplicates (rejected_extra_in_epoch "
                      f"{counters.get('rejected_extra_in_epoch', 0)}, duplicate {counters.get('duplicate', 0)})")
    if not checks["quarantined"]:
        failed.append(f"{s['quarantined']} messages quarantined")
    if short:
        failed.append(f"{len(short)} boards were reset fewer than {resets} times "
                      f"({', '.join(f'{d}: {n}' for d, n in short[:4])})")
    if not checks["harness"]:
        failed.append("the harness: " + "; ".join([f"{d}: {e!r}" for d, e in errors]
                                                  + [f"reports from unknown devices {s['strangers']}"]
                                                  * bool(s["strangers"])))
    by_id = {b.modem.dev_eui: b for b in boards}

    def story(e, d):
        b = by_id[d]
        lo, hi = (e - 1) * period_s, (e + 2) * period_s  # s from epoch 0's start: the epoch and its neighbours
        ups = [t - epoch_origin for t, _, _ in b.arrivals if lo <= t - epoch_origin < hi]
        near = [f"{r['kind']} at {r['t'] - epoch_origin:.2f} s (off {r['off']:.2f} s)" for r in b.done
                if lo - period_s <= r["t"] - epoch_origin < hi]
        return (f"[{e * period_s}, {(e + 1) * period_s}) s: its uplinks at "
                + (", ".join(f"{u:.2f}" for u in ups) or "none") + " s" + (f"; resets: {', '.join(near)}" if near
                                                                          else "; no reset near"))

    def cause(e, d):
        """What the network side saw before a (device, epoch) without a report: ``reset`` (the
        board was reset between its last uplink before the epoch and the epoch's end: a board
        that boots without the time waits a pace), ``gap`` (it was not: its next uplink came, or
        would have, more than a period after the last, as a pace drifts), ``other`` (no uplink
        before the epoch)."""
        b = by_id[d]
        before = [t for t, _, _ in b.arrivals if t < epoch_origin + e * period_s]
        if not before:
            return "other"
        return "reset" if b.done_in(max(before), epoch_origin + (e + 1) * period_s) else "gap"

    causes = {(e, d): cause(e, d) for e, d in s["missing"]}
    said = {"reset": "reset between its last uplink and the epoch's end",
            "gap": "not reset since its last uplink", "other": "no uplink before it"}
    why = [f"epoch {e}: {d} ({by_id[d].modem.dialect}) not counted ({said[causes[(e, d)]]}); epoch {story(e, d)}"
           for e, d in s["missing"]]
    why += [f"epoch {e}: {d} ({by_id[d].modem.dialect}) {n} more report(s) stored as extra; epoch {story(e, d)}"
            for e, d, n in s["extra"] if d in by_id]
    if s["missing"]:
        n = {c: sum(1 for v in causes.values() if v == c) for c in said}
        failed.append(f"of those not counted {n['reset']} were reset between their last uplink and the epoch's "
                      f"end, {n['gap']} were not, {n['other']} had no uplink before")
    s.update(required_epochs=list(required), per_device=per_device, checks=checks, ok=all(checks.values()),
             failed=failed, why=why, awake_fraction={r["device_id"]: r["awake_fraction"] for r in per_device},
             missing=[{"epoch": e, "device_id": d, "cause": causes[(e, d)]} for e, d in s["missing"]],
             extra=[{"epoch": e, "device_id": d, "reports": n} for e, d, n in s["extra"]])
    return s
