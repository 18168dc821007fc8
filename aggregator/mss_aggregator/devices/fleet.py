"""Emulated fleets: N devices running the real firmware, each reporting once
(MQTT: once in each of ``epochs`` epochs).

Each device is its own process of the firmware's emulator entry point
(MQTT: ``emulated_board/fleet_board.py``; LoRaWAN: ``python -m mss_node.app``),
on the MicroPython unix port or CPython, with
its own config.json and state.json in a scratch folder, so devices share
nothing but the broker.  ``logins`` gives each MQTT device its own broker
user (its device id and client id too, as the shipped ACL's %u patterns
need); :func:`clear_retained` removes what the devices left retained.  On LoRaWAN each device drives its own emulated
modem (:mod:`.modem`, the dialects in turn) and a network-server emulator
publishes the uplinks; those boards sleep light between reports
(``device.sleep``, as ``mss plan --link`` writes for an RP2040), and
``times`` gets what each spent awake and asleep, its modem's too.
"""
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mss_aggregator.collect.collectors import parse_broker
from mss_aggregator.devices.modem import DIALECTS, emulator
from mss_aggregator.devices.runtime import board_times, ensure_umqtt, run_module
from mss_node.settings import DEVICE_DEFAULTS

PERIOD_S, EPOCH_ORIGIN = DEVICE_DEFAULTS["period_s"], DEVICE_DEFAULTS["epoch_origin"]  # the boards' own clock


@dataclass(frozen=True)
class FleetClock:
    """The campaign clock the devices date their reports by (the aggregator's config must carry the
    same): ``period_s``, ``epoch_origin``; ``epochs``: each MQTT device reports in the ``epochs``
    epochs ending with the current one."""

    period_s: int = PERIOD_S
    epoch_origin: int = EPOCH_ORIGIN
    epochs: int = 1


@dataclass(frozen=True)
class Boards:
    """Who the boards are: ids ``id_prefix`` + their index (None: the runner's own prefix), or with
    ``logins`` [(user, password)] a board, each MQTT board its own broker user (also its id);
    ``privacy``: device fields every board gets (:func:`device_config`); ``ca``: the CA certificate
    file MQTT boards verify an mqtts:// broker with (device.mqtt.ca)."""

    id_prefix: str = None
    logins: list = None
    privacy: dict = None
    ca: str = None


@dataclass(frozen=True)
class BoardRun:
    """How the boards run: on ``runtime`` (micropython or cpython), ``parallel`` at a time, in scratch
    folders under ``workdir`` (None: the system's); ``on_done()`` after each board; ``times`` (a dict)
    gets what each LoRaWAN board spent awake and asleep, its modem's too."""

    runtime: str = "micropython"
    parallel: int = 8
    workdir: str = None
    on_done: object = None
    times: dict = None


def device_config(cfg, broker, campaign, device_id, period_s=PERIOD_S, epoch_origin=EPOCH_ORIGIN, privacy=None,
                  login=None):
    """An MQTT board's config.json; ``privacy``: device fields the campaign adds (memoize, budget:
    :func:`mss_protocol.budget.default_device`); ``login``: (user, password) instead of the URL's."""
    host, port, user, password, _ = parse_broker(broker)
    if login is not None:
        user, password = login
    d = cfg.to_dict()
    d["device"] = {"campaign": campaign, "device_id": device_id, "period_s": period_s,
                   "epoch_origin": epoch_origin, "poll_s": 1,
                   "transport": "mqtt",
                   "mqtt": {"host": host, "port": port, "user": user, "password": password,
                            "timeout_s": 5, "backoff_max_s": 2}}
    d["device"].update(privacy or {})
    return d


def lorawan_device_config(cfg, campaign, modem, period_s=PERIOD_S, epoch_origin=EPOCH_ORIGIN, sleep="light",
                          privacy=None):
    d = cfg.to_dict()
    d["device"] = {"campaign": campaign, "period_s": period_s, "epoch_origin": epoch_origin, "poll_s": 1,
                   "transport": "lorawan", "sleep": sleep,
                   "lorawan": {"modem": modem.dialect.replace("-old", ""), "path": modem.path,
                               "retry_s": 1, "backoff_max_s": 2, "join_timeout_s": 5, "tx_timeout_s": 5}}
    d["device"].update(privacy or {})
    return d


def run_fleet(cfg, broker, campaign, values, network=None, clock=FleetClock(), boards=Boards(), run=BoardRun()):
    """Run one device per value; return {device_id: (value, returncode, output)}.
    ``clock`` (:class:`FleetClock`): the campaign clock the devices date their reports by, and
    the epochs each MQTT device reports in (returncode 0: all of them PUBACKed); ``boards``
    (:class:`Boards`): their ids (default prefix "dev"), logins and privacy fields; ``run``
    (:class:`BoardRun`): runtime, parallelism, scratch folder, ``on_done`` and ``times``.

    With ``network`` (a :class:`~.network_server.ChirpStackEmulator` on ``broker``)
    the devices report over LoRaWAN, each known by its modem's DevEUI, and
    then sleep until their next report (emulated: no real time passes).
    ``run.times`` (a dict), for those: {device_id: {"modem": dialect, "mcu":
    :func:`.runtime.board_times`, "radio": :meth:`.modem.base.ModemEmulator.stats`}}."""
    period_s, epoch_origin, epochs = clock.period_s, clock.epoch_origin, clock.epochs
    id_prefix, logins, privacy = boards.id_prefix or "dev", boards.logins, boards.privacy
    runtime, parallel, workdir, on_done, times = run.runtime, run.parallel, run.workdir, run.on_done, run.times
    if network is not None and epochs != 1:
        raise ValueError("LoRaWAN boards report once here: their compact frames are dated by arrival")
    if runtime == "micropython" and network is None:
        ensure_umqtt()
    results = {}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        def one(i):
            modem = None
            if network is None:
                login = logins[i] if logins else None
                device_id = login[0] if login else f"{id_prefix}{i}"
                d = device_config(cfg=cfg, broker=broker, campaign=campaign, device_id=device_id, period_s=period_s,
                                  epoch_origin=epoch_origin, privacy=privacy, login=login)
                if parse_broker(broker)[4]:  # mqtts://: the firmware's TLS, the broker checked against the CA
                    if not boards.ca:
                        raise ValueError("an mqtts:// broker needs the CA certificate the boards verify it with")
                    d["device"]["mqtt"].update(tls=True, ca=str(Path(boards.ca).resolve()))
            else:
                modem = emulator(DIALECTS[i % len(DIALECTS)], f"70b3d57ed0{i:06x}")
                network.attach(modem)
                modem.start()
                device_id, d = modem.dev_eui, lorawan_device_config(cfg=cfg, campaign=campaign, modem=modem,
                                                                    period_s=period_s, epoch_origin=epoch_origin,
                                                                    privacy=privacy)
            folder = Path(tmp) / device_id
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps(d))
            log = folder / "board.log" if modem is not None else None
            start = time.time()
            module, args = ("mss_node.app", []) if modem is not None else ("fleet_board", [epochs])
            try:
                out = run_module(runtime, module, ["config.json", "state.json", int(values[i]), *args],
                                 cwd=folder, timeout=300 * epochs, board_log=log)
            finally:
                if modem is not None:
                    modem.stop()
            if modem is not None and times is not None:
                # the MCU waits awake for the modem's last answer: the radio's time the emulator compressed too
                awake = time.time() - start + modem.stretch_s
                times[device_id] = {"modem": modem.dialect, "mcu": board_times(log, awake),
                                    "radio": modem.stats()}
            results[device_id] = (int(values[i]), out.returncode, out.stdout + out.stderr)
            if on_done:
                on_done()

        with ThreadPoolExecutor(parallel) as pool:
            list(pool.map(one, range(len(values))))
    return results


def fleet_epochs(period_s, epoch_origin, epochs, now=None):
    """The epochs a fleet run of ``epochs`` reports in (fleet_board.py): those ending with the current one."""
    current = (int(time.time() if now is None else now) - epoch_origin) // period_s
    return list(range(current - epochs + 1, current + 1))


def status_topic(campaign, device_id):
    return f"mss/v1/{campaign}/{device_id}/status"


def clear_retained(broker, clients, parallel=8, timeout=10, ca=None):
    """Publish an empty retained message (MQTT's delete) on each topic of ``clients``, [(client id
    or None, (user, password) or None for the URL's, [topics])], each logged in as itself (under
    the shipped ACL only a device may write its own status) with a clean session, which also
    ends the persistent session a board left (its subscription to the config).  Clients of one
    user go one after another (a broker that makes the user the client id would have them take
    each other's connection over); ``ca``: the CA certificate file an mqtts:// broker is verified with
    (default: the system's).  Returns ["topic: why"] of those not cleared."""
    import threading

    import paho.mqtt.client as mqtt

    host, port, url_user, url_password, tls = parse_broker(broker)

    def one(client_id, user, password, topics):
        answered, answer = threading.Event(), []
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id or "", protocol=mqtt.MQTTv311,
                        clean_session=True)
        c.on_connect = lambda cl, u, f, reason, p: (answer.append(reason), answered.set())
        if user:
            c.username_pw_set(user, password)
        try:
            if tls:
                c.tls_set(ca_certs=ca)
            c.connect(host, port, keepalive=30)
            c.loop_start()
            if not answered.wait(timeout):
                raise OSError(f"no CONNACK in {timeout} s")
            if answer[0].is_failure:
                raise OSError(f"connection refused: {answer[0]}")
            for topic in topics:
                info = c.publish(topic, b"", qos=1, retain=True)
                info.wait_for_publish(timeout)  # returns at the timeout too
                if not info.is_published():
                    raise OSError(f"no PUBACK in {timeout} s")
            return []
        except (OSError, RuntimeError, ValueError) as exc:  # refused, lost, not connected
            return [f"{t}: {exc}" for t in topics]
        finally:
            c.disconnect()
            c.loop_stop()

    by_user = {}
    for client_id, login, topics in clients:
        user, password = login or (url_user, url_password)
        by_user.setdefault(user, []).append((client_id, user, password, topics))

    def group(items):
        return [line for item in items for line in one(*item)]

    with ThreadPoolExecutor(parallel) as pool:
        return [line for lines in pool.map(group, by_user.values()) for line in lines]


def draw_values(probs, n, seed):
    return np.random.default_rng(seed).choice(probs.size, size=n, p=probs)
