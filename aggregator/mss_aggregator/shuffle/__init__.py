"""The anonymising shuffler between the fleet and the aggregator (issue 29;
PROCHLO's encode, shuffle, analyse: Bittau et al., SOSP 2017).

:mod:`.queue` (the durable queue: identity checks on keyed digests of device
ids, held bodies under random keys, batches until their PUBACK),
:mod:`.forward` (closing epochs, making batches of at least ``--min-batch``,
publishing them at QoS 1), :mod:`.service` (``mss shuffle``: the
aggregator's collectors and writer feeding the queue).  The batch format is
:mod:`mss_protocol.shuffled_batch` (SPEC.md, "Shuffled batches"); the threat
model is docs/privacy.md section 5.
"""
