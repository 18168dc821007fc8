"""Publish many valid reports quickly (fault tests and the throughput benchmark).

Reports come from the vectorised sampler and the wire encoder, one per
(device, epoch), published at QoS 1 by paho with automatic reconnection.
The publisher's log -- (device_id, epoch, seq, publish time) per report --
is the ground truth the aggregator's store is compared with.

    python tools/loadgen.py CONFIG BROKER CAMPAIGN DEVICES EPOCHS LOG.json
        [--prefix P] [--seed S] [--rate R]
"""
import argparse
import json
import time

import numpy as np
import paho.mqtt.client as mqtt

from mss_aggregator.collect.collectors import parse_broker
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.sampler import sample_reports
from mss_protocol.mss.wire import WireCodec


def make_reports(cfg, devices, epochs, prefix="load", seed=0):
    """[(device_id, epoch, seq, payload)] for devices x epochs reports."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, cfg.k, size=devices * epochs)
    j, subsets = sample_reports(cfg, values, rng)
    codec = WireCodec(cfg)
    out = []
    for i in range(devices * epochs):
        d, e = divmod(i, epochs)
        out.append((f"{prefix}{d}", e, e, codec.encode(int(j[i]), subsets[i], epoch=e, seq=e)))
    return out


def publish(reports, broker, campaign, client_id="loadgen", log_path=None, rate=None):
    """Publish at QoS 1 (at ``rate`` reports/s when given); return the log."""
    host, port, user, password, _ = parse_broker(broker)
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=True)
    if user:
        c.username_pw_set(user, password)
    c.max_queued_messages_set(0)
    c.max_inflight_messages_set(1000)
    c.reconnect_delay_set(0.2, 2)
    c.connect(host, port)
    c.loop_start()
    log, infos = [], []
    start = time.time()
    for i, (device, epoch, seq, payload) in enumerate(reports):
        if rate:
            ahead = start + i / rate - time.time()
            if ahead > 0:
                time.sleep(ahead)
        log.append((device, epoch, seq, time.time()))
        infos.append(c.publish(f"mss/v1/{campaign}/{device}/report", payload, qos=1))
    for info in infos:
        while not info.is_published():  # survives broker restarts: paho resends
            time.sleep(0.01)
    c.disconnect()
    c.loop_stop()
    if log_path:
        with open(log_path, "w") as fh:
            json.dump(log, fh)
    return log


def main():
    ap = argparse.ArgumentParser()
    for name in ("config", "broker", "campaign"):
        ap.add_argument(name)
    ap.add_argument("devices", type=int)
    ap.add_argument("epochs", type=int)
    ap.add_argument("log")
    ap.add_argument("--prefix", default="load")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rate", type=float, help="reports per second (default: as fast as possible)")
    args = ap.parse_args()
    cfg = MssConfig.load(args.config)
    reports = make_reports(cfg, args.devices, args.epochs, args.prefix, args.seed)
    publish(reports, args.broker, args.campaign, client_id=f"loadgen-{args.prefix}", log_path=args.log,
            rate=args.rate)


if __name__ == "__main__":
    main()
