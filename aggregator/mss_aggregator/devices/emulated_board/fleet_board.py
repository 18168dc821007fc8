# The main of an MQTT board of a one-shot fleet (mss fleet, mss demo; mss_aggregator.devices.fleet):
#   fleet_board CONFIG STATE VALUE EPOCHS
# reports VALUE (its sensor's reading) once in each of the EPOCHS epochs that end with the current
# one, oldest first, and exits; status 1 if a report was not sent (PUBACKed).  For the j-th epoch
# the board's clock reads EPOCHS-1-j periods (device.period_s) back and nothing else changes: the
# firmware's loop dates, draws and queues each report as it would in that epoch, with the same
# state file, so every one is inside the aggregator's window (accept_past_epochs).  After each
# report the board disconnects as before a sleep (a DISCONNECT: no "offline" will).
import json
import sys
import time

from mss_node import app

CONFIG, STATE, VALUE, EPOCHS = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
TICKS = 30  # per epoch, as mss_node.app.main

with open(CONFIG) as fh:
    PERIOD = json.load(fh)["device"]["period_s"]

for j in range(EPOCHS):
    back = (EPOCHS - 1 - j) * PERIOD
    node = app.run(CONFIG, STATE, sensor=lambda: VALUE, clock=lambda b=back: time.time() - b, ticks=TICKS,
                   until_sent=True)
    if node is None or node.state.queue:
        raise SystemExit(1)
    node.link.sleep(0)
