"""mss-iot's Python API: plan a campaign, simulate it, read its store's estimates, audit its privacy
and embed its services, with one import::

    import mss_iot

    p = mss_iot.plan(k=16, epsilon=2.0)                  # a Plan: p.to_dict() is mss plan --json
    sim = mss_iot.simulate(k=16, epsilon=2.0, n=2000)    # a Simulation: to_dict(), to_frame()
    with mss_iot.open_store("campaign.sqlite") as store: # an SQLite path or a postgresql:// URL
        store.epochs()                                   # [7, 8, ...]
        store.estimate(epoch=8).to_frame()               # one epoch's estimates, a DataFrame
    report = mss_iot.audit(k=16, epsilon=2.0)            # an AuditReport: to_dict(), problems()

Every workflow lives in :mod:`mss_aggregator` (this package re-exports it and adds small
adapters); the ``mss`` command line is built on the same names.  Results are plain objects with
``to_dict()`` (the matching command's ``--json`` document, field for field) and, where pandas is
installed, ``to_frame()``.  docs/api.md walks through each with runnable examples.

Names are loaded on first use, so ``import mss_iot`` is cheap and ``from mss_iot import plan``
imports the planner only.
"""
import importlib

# name -> the module it lives in (its home; this package only re-exports)
EXPORTS = {
    # planning (mss plan)
    "plan": "mss_iot.workflows", "PlanRequest": "mss_aggregator.plan", "Limits": "mss_aggregator.plan",
    "Question": "mss_aggregator.plan", "Hardware": "mss_aggregator.plan", "Reporting": "mss_aggregator.plan",
    "Shuffling": "mss_aggregator.plan", "Plan": "mss_aggregator.plan", "RequestError": "mss_aggregator.plan",
    "PlanError": "mss_protocol.mss.planner", "ConfigError": "mss_protocol.config_file",
    # the campaign file, read once
    "Campaign": "mss_iot.campaign", "NoClock": "mss_aggregator.campaign",
    # simulation (mss simulate)
    "simulate": "mss_iot.workflows", "SimulateRequest": "mss_aggregator.simulation",
    "Simulation": "mss_aggregator.simulation", "simulation_config": "mss_aggregator.simulation",
    "SimulateRequestError": "mss_aggregator.simulation",
    # a campaign's store (mss estimate, mss export)
    "open_store": "mss_iot.store", "CampaignStore": "mss_iot.store", "StoreError": "mss_aggregator.collect.store",
    "EpochEstimate": "mss_iot.store", "EstimateTable": "mss_iot.store",
    "estimate_store": "mss_aggregator.estimates",
    "EstimateRequest": "mss_aggregator.estimates", "EstimateError": "mss_aggregator.estimates",
    "Compromised": "mss_protocol.integrity", "Integrity": "mss_aggregator.estimates",
    "export": "mss_aggregator.export", "ExportRequest": "mss_aggregator.export",
    "ExportResult": "mss_aggregator.export", "ExportError": "mss_aggregator.export",
    # privacy audit (mss audit)
    "audit": "mss_iot.workflows", "AuditReport": "mss_iot.workflows", "AuditRequest": "mss_aggregator.audit",
    "Longitudinal": "mss_aggregator.audit", "Empirical": "mss_aggregator.audit",
    "AuditRequestError": "mss_aggregator.audit",
    # services to embed (mss aggregate, mss shuffle)
    "Aggregator": "mss_aggregator.collect.service", "Shuffler": "mss_aggregator.shuffle.service",
    "Batching": "mss_aggregator.shuffle.service", "Links": "mss_aggregator.collect.links",
    "MqttEndpoint": "mss_aggregator.collect.links", "TlsFiles": "mss_aggregator.collect.links",
    "LinkError": "mss_aggregator.collect.links", "EmbeddedBroker": "mss_aggregator.collect.embedded_broker",
}

__all__ = sorted(EXPORTS)


def __getattr__(name):
    home = EXPORTS.get(name)
    if home is None:
        raise AttributeError(f"module 'mss_iot' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__():
    return sorted(set(globals()) | set(EXPORTS))
