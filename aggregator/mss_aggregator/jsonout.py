"""Strict JSON for documents other programs read: NaN and infinities (an
estimate with no reports yet has an infinite standard error) become null,
since JSON has no such numbers and browsers' JSON.parse rejects them."""
import json
import math


def _finite(x):
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def dumps(doc, **kw):
    return json.dumps(_finite(doc), allow_nan=False, **kw)
