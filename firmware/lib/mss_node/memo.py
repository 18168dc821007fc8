"""Memoized reports (``device.memoize``; SPEC.md, Memoized reports).

A value's first draw is kept (the body of its permanent draw, in hex, in
state.json) and re-sent under a fresh header while it lasts: no new
randomness, except the config's instantaneous layer (``irr``), which
re-randomises the kept draw in every report (Reporter.replay).  At most
``device.memo_max`` values per config, least recently used first; memos of
other configs go in the write that queues the report.
"""
from mss_node import log


def check(params):
    """A config memoize can be used with (mss_node.settings)."""
    if params.protocol == "olh" and params.seed != "device":
        raise ValueError("device.memoize cannot be used with olh with seed epoch (it changes every epoch): set seed: device")


def recall(state, config_id, value):
    """The memo ``[value, body hex]`` of ``value`` under ``config_id`` (now the most
    recently used), or None."""
    entries = state.memo.get(config_id, [])
    for e in entries:
        if e[0] == value:
            entries.remove(e)
            entries.append(e)
            return e
    return None


def remember(state, config_id, memo):
    """The state's new ``memo`` dict with ``memo`` (``[value, body hex]``) added."""
    entries = [e for e in state.memo.get(config_id, []) if e[0] != memo[0]]
    entries.append(memo)
    while len(entries) > state.memo_max:
        entries.pop(0)
        log.warn("memo full (%d values): forgot the least recently used one; "
                 "it is drawn afresh if it returns" % state.memo_max)
    return {config_id: entries}


def report(rep, state, cid, value, epoch, may_draw=None):
    """(report, new memo dict or None) for ``value`` at ``epoch`` with the Reporter ``rep``;
    a new memo dict means a fresh draw.  ``may_draw()`` (device.budget: the ledger's check)
    False on a miss: (None, None), nothing drawn (the node skips the epoch)."""
    seq = state.seq
    hit = recall(state, cid, value)
    if hit is not None:
        out = rep.replay(bytes.fromhex(hit[1]), epoch, seq)
        if out is not None:
            return out, None
        log.warn("memo is no report body of config %s: drawing afresh" % cid)
    if may_draw is not None and not may_draw():
        return None, None
    out, body = rep.fresh(value, epoch, seq)  # body: the permanent draw's (an IRR re-draws per report)
    return out, remember(state, cid, [value, body.hex()])
