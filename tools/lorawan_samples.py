#!/usr/bin/env python3
"""Print the sample uplink events of docs/lorawan.md ("Sample uplink events"):
a ChirpStack v4 ``event/up`` through its JSON marshaler and its protobuf
marshaler, and a The Things Stack v3 ``up`` message, made by the same code as
the network-server emulator and the tests (mss_aggregator.devices.modem:
ChirpStack's own ``chirpstack-api`` messages, TTS's documented shape).

    .venv/bin/python tools/lorawan_samples.py

prints the section's body; tests/test_chirpstack_marshalers.py checks that
the doc holds exactly it.
"""
import json

from mss_aggregator.devices.modem import chirpstack_event, chirpstack_json, marshal, tts_uplink

APP = "6f1c1c2e-1d2f-4b5f-9d2e-0a1b2c3d4e5f"  # a ChirpStack application id (a UUID)
TTS_APP, TENANT = "orchard", "ttn"
DEV_EUI, FPORT, FCNT = "70b3d57ed0000001", 1, 42
FRAME = bytes([0x8B])  # a 1-byte compact report
TIME = 1764590400.123456  # 2025-12-01T12:00:00.123456Z, the network server's receive time


def samples():
    """The markdown body of the section, ending in a newline."""
    topic, event = chirpstack_event(APP, DEV_EUI, FPORT, FCNT, FRAME, TIME)
    tts_topic, tts = tts_uplink(TTS_APP, TENANT, DEV_EUI, FPORT, FCNT, FRAME, TIME)
    protobuf = marshal(event, "protobuf").hex()
    lines = [f"ChirpStack v4, `json = true` (sent compact; indented here), on `{topic}`:", "",
             "```json", json.dumps(chirpstack_json(event), indent=2), "```", "",
             f"The same event with `json = false`: the binary protobuf `integration.UplinkEvent`, "
             f"{len(protobuf) // 2} bytes, in hex:", "", "```text"]
    lines += [protobuf[i:i + 96] for i in range(0, len(protobuf), 96)]
    lines += ["```", "", f"The Things Stack v3 (TTN), on `{tts_topic}`:", "",
              "```json", json.dumps(tts, indent=2), "```"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(samples(), end="")
