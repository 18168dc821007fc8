"""Emulated fleets: N devices running the real firmware, each reporting once.

Each device is its own process of the firmware's emulator entry point
(``python -m mss_node.app``), on the MicroPython unix port or CPython, with
its own config.json and state.json in a scratch folder, so devices share
nothing but the broker.  On LoRaWAN each device drives its own emulated
modem (:mod:`.modem`, the dialects in turn) and a network-server emulator
publishes the uplinks; those boards sleep light between reports
(``device.sleep``, as ``mss plan --link`` writes for an RP2040), and
``times`` gets what each spent awake and asleep, its modem's too.
"""
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from mss_aggregator.collect.collectors import parse_broker
from mss_aggregator.devices.modem import DIALECTS, ModemEmulator
from mss_aggregator.devices.runtime import board_times, ensure_umqtt, run_module


def device_config(cfg, broker, campaign, device_id, period_s=3600, epoch_origin=0, privacy=None):
    """An MQTT board's config.json; ``privacy``: device fields the campaign adds (memoize, budget:
    :func:`mss_protocol.budget.default_device`)."""
    host, port, user, password, _ = parse_broker(broker)
    d = cfg.to_dict()
    d["device"] = {"campaign": campaign, "device_id": device_id, "period_s": period_s,
                   "epoch_origin": epoch_origin, "poll_s": 1,
                   "transport": "mqtt",
                   "mqtt": {"host": host, "port": port, "user": user, "password": password,
                            "timeout_s": 5, "backoff_max_s": 2}}
    d["device"].update(privacy or {})
    return d


def lorawan_device_config(cfg, campaign, modem, period_s=3600, epoch_origin=0, sleep="light", privacy=None):
    d = cfg.to_dict()
    d["device"] = {"campaign": campaign, "period_s": period_s, "epoch_origin": epoch_origin, "poll_s": 1,
                   "transport": "lorawan", "sleep": sleep,
                   "lorawan": {"modem": modem.dialect.replace("-old", ""), "path": modem.path,
                               "retry_s": 1, "backoff_max_s": 2, "join_timeout_s": 5, "tx_timeout_s": 5}}
    d["device"].update(privacy or {})
    return d


def run_fleet(cfg, broker, campaign, values, id_prefix="dev", runtime="micropython",
              parallel=8, period_s=3600, workdir=None, on_done=None, network=None, epoch_origin=0, times=None,
              privacy=None):
    """Run one device per value; return {device_id: (value, returncode, output)}.
    ``period_s`` and ``epoch_origin``: the campaign clock the devices date
    their reports by (the aggregator's config must carry the same).

    With ``network`` (a :class:`~.modem.ChirpStackEmulator` on ``broker``)
    the devices report over LoRaWAN, each known by its modem's DevEUI, and
    then sleep until their next report (emulated: no real time passes).
    ``times`` (a dict), for those: {device_id: {"modem": dialect, "mcu":
    :func:`.runtime.board_times`, "radio": :meth:`.modem.ModemEmulator.stats`}}.
    ``privacy``: device fields every board gets (:func:`device_config`)."""
    if runtime == "micropython" and network is None:
        ensure_umqtt()
    results = {}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        def one(i):
            modem = None
            if network is None:
                device_id = f"{id_prefix}{i}"
                d = device_config(cfg, broker, campaign, device_id, period_s, epoch_origin, privacy)
            else:
                modem = ModemEmulator(DIALECTS[i % len(DIALECTS)], f"70b3d57ed0{i:06x}")
                network.attach(modem)
                modem.start()
                device_id, d = modem.dev_eui, lorawan_device_config(cfg, campaign, modem, period_s, epoch_origin,
                                                                    privacy=privacy)
            folder = Path(tmp) / device_id
            folder.mkdir()
            (folder / "config.json").write_text(json.dumps(d))
            log = folder / "board.log" if modem is not None else None
            start = time.time()
            try:
                out = run_module(runtime, "mss_node.app", ["config.json", "state.json", int(values[i])],
                                 cwd=folder, timeout=300, board_log=log)
            finally:
                if modem is not None:
                    modem.stop()
            if modem is not None and times is not None:
                times[device_id] = {"modem": modem.dialect, "mcu": board_times(log, time.time() - start),
                                    "radio": modem.stats()}
            results[device_id] = (int(values[i]), out.returncode, out.stdout + out.stderr)
            if on_done:
                on_done()

        with ThreadPoolExecutor(parallel) as pool:
            list(pool.map(one, range(len(values))))
    return results


def draw_values(probs, n, seed):
    return np.random.default_rng(seed).choice(probs.size, size=n, p=probs)
