"""Collection: reports in from MQTT, a LoRaWAN network server's MQTT
integration and serial ports, strictly decoded, de-duplicated and stored
durably, then counted.

:mod:`.collectors` (the MQTT and serial transports and the batching
writer), :mod:`.ingest` (one payload or uplink event -> accepted, duplicate
or quarantined with a reason), :mod:`.lorawan` (ChirpStack v4 and The
Things Stack v3: uplink topics and JSON, config-switch downlinks),
:mod:`.store` (SQLite or PostgreSQL; additive counts per config and epoch),
:mod:`.scope` (which reports an estimate decodes: one epoch by default,
pooled with widened standard errors on request),
:mod:`.service` (the running aggregator that wires them together),
:mod:`.embedded_broker` (an in-process broker for demos).  Imports
``mss_protocol`` (config, wire codec, counts) and ``mss_device`` (serial
framing); nothing of the other aggregator jobs.
"""
