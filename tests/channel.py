"""Exact enumeration of the device randomiser's output distribution.

Randomisers draw only through ``rng.below(n)`` and ``rng.chance(T)``.
:func:`enumerate_outputs` runs the real client code once per path of those
decisions (depth-first), multiplying the exact probabilities 1/n and
T/2**30 as Fractions, and returns the exact output distribution.
"""
from fractions import Fraction

from mss_device.encoder import encode
from mss_device.randomiser import privatise
from mss_protocol.privacy import ONE


class _Branch(Exception):
    pass


class _Replay:
    def __init__(self, prefix):
        self.prefix, self.i, self.prob, self.pending = prefix, 0, Fraction(1), None

    def _next(self, options, probs):
        if self.i < len(self.prefix):
            choice = self.prefix[self.i]
            self.i += 1
            self.prob *= probs[choice]
            return options[choice]
        self.pending = len(options)
        raise _Branch

    def below(self, n):
        return self._next(list(range(n)), [Fraction(1, n)] * n)

    def chance(self, t):
        return self._next([True, False], [Fraction(t, ONE), 1 - Fraction(t, ONE)])


def enumerate_outputs(client):
    """Exact output distribution {output: Fraction} of ``client(rng)``."""
    dist = {}
    stack = [[]]
    while stack:
        prefix = stack.pop()
        rng = _Replay(prefix)
        try:
            key = client(rng)
        except _Branch:
            stack.extend(prefix + [c] for c in range(rng.pending))
            continue
        dist[key] = dist.get(key, Fraction(0)) + rng.prob
    return dist


def enumerate_reports(cfg, x):
    """P[report bytes | x] of the MSS device randomiser and encoder."""
    mark = bytearray((max(cfg.moduli) + 7) // 8)
    return enumerate_outputs(lambda rng: encode(cfg, privatise(cfg, x, rng, mark), mark, 0, 0))
