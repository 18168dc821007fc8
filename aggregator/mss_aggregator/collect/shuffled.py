"""Classify one shuffler batch (``mss aggregate --shuffled``): the aggregator side
of the shuffle model (PROCHLO's encode, shuffle, analyse: Bittau et al., SOSP
2017; docs/privacy.md section 5).

A batch arrives as one MQTT message on ``mss/v1/<campaign>/shuffled``
(:mod:`mss_protocol.shuffled_batch`).  It is checked in this order, and the
first failure quarantines the whole message with reason ``topic`` (another
topic) or ``batch_<reason>`` of :class:`~mss_protocol.shuffled_batch.BatchError`:
``batch_length`` for a message shorter than any batch (its length is all that is read), then
``batch_mac`` (nothing of an unauthenticated message is parsed), then
``batch_magic``, ``batch_version``, ``batch_epoch``, ``batch_config`` (another
config's batch), ``batch_count``, ``batch_body``, ``batch_length`` (malformed).

A batch with a valid MAC is the shuffler's: its bodies, compact frames of the
config (SPEC.md section 4), are decoded together with the codec of
``cfg.with_frame("compact")`` at the batch's epoch and no device id.  A body
that does not decode is quarantined alone (reason ``wire_<reason>``, its
detail naming the batch id and position) and **the rest of the batch is
stored and counted**: the shuffler checked every frame before stripping it,
so a bad body means a broken shuffler (a loud counter, ``rejected_wire_*``),
and the batch's other reports are still valid eps0-LDP reports.  The central
guarantee (:mod:`.central`) counts only the reports stored: a body that did
not decode may not come from an eps0-LDP randomiser, so it is no part of the
blanket that hides the others.

No epoch window is applied: the MAC says the shuffler sent the batch, the
shuffler applied the window to each report, and a batch held for
``--min-batch`` is released late on purpose.  Replays of a stored batch are
duplicates by batch id (:meth:`~.store.Store.write_batch`).  Nothing here
raises on any message.
"""
from mss_aggregator.collect.ingest import held
from mss_protocol import registry, shuffled_batch
from mss_protocol.codec import codec
from mss_protocol.config_file import ConfigError
from mss_protocol.shuffled_batch import BatchError, check_key, decode_batch


class ShuffledIngest:
    """The Writer's classifier of shuffler batches of ``cfg`` for ``campaign``, authenticated
    under ``key`` (bytes, at least ``shuffled_batch.MIN_KEY_BYTES``; BatchError ``key`` else).
    OLH is refused (ConfigError): its hash seed needs the device id (docs/privacy.md, section 5)."""

    def __init__(self, cfg, campaign, key):
        if registry.from_config(cfg).has_seed:
            raise ConfigError(f"a shuffler's batches: {cfg.name} cannot be shuffled (its hash seed is derived from "
                              "the device id, so its reports cannot be decoded without it); plan another protocol")
        check_key(key)
        self.cfg, self.key = cfg, key
        self.codec = codec(cfg.with_frame("compact"))
        self.topic = shuffled_batch.topic(campaign).encode()

    def receive_mqtt(self, topic, payload, source="mqtt"):
        """A batch item (``batch``: the verified ShuffledBatch) or a quarantine result."""
        item = {"source": source, "topic": bytes(topic), "payload": bytes(payload)}
        if item["topic"] != self.topic:
            return held(dict(item, reason="topic", detail="not this campaign's shuffled topic"), item["payload"])
        try:
            batch = decode_batch(self.key, item["payload"], self.cfg)
        except BatchError as exc:
            return held(dict(item, reason=f"batch_{exc.reason}", detail=str(exc)), item["payload"])
        return dict(item, payload=None, batch=batch)  # the bodies are kept one a row, not the message

    def decode_batch(self, outs):
        """Each of ``outs`` with its batch's bodies decoded: ``reports`` [(position, Report)]
        and ``bad`` (quarantine items of the bodies that did not decode)."""
        return [self._decoded(out) if out and "batch" in out else out for out in outs]

    def _decoded(self, out):
        b = out["batch"]
        decoded = self.codec.decode_many(list(b.bodies), None, [b.epoch] * len(b.bodies))
        bad = [held({"source": out["source"], "topic": out["topic"], "reason": f"wire_{exc.reason}",
                     "detail": f"batch {b.batch_id_hex} body {pos}: {exc}"}, b.bodies[pos])
               for pos, exc in sorted(decoded.errors.items())]
        return dict(out, reports=list(zip(decoded.positions, decoded.reports())), bad=bad)
