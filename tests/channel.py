"""Exact enumeration of the device randomiser's output distribution.

Randomisers draw only through ``rng.below(n)`` and ``rng.chance(T)``, or,
in their viper kernels (plain Python under CPython), through ``take`` and
``coin`` on the rng's byte pool (``rng.drive``).  :func:`enumerate_outputs`
runs the real client code once per path of those decisions (depth-first),
multiplying the exact probabilities 1/n and T/2**30 as Fractions, and
returns the exact output distribution.
"""
import sys
from fractions import Fraction

from mss_device.encoder import encode
from mss_device.randomiser import privatise
from mss_protocol.privacy import ONE


class _Branch(Exception):
    pass


class _Replay:
    def __init__(self, prefix):
        self.prefix, self.i, self.prob, self.pending = prefix, 0, Fraction(1), None
        self.first = Fraction(1)  # probability of the first decision taken

    def _next(self, options, probs):
        if self.i < len(self.prefix):
            choice = self.prefix[self.i]
            if self.i == 0:
                self.first = probs[choice]
            self.i += 1
            self.prob *= probs[choice]
            return options[choice]
        self.pending = len(options)
        raise _Branch

    def below(self, n):
        return self._next(list(range(n)), [Fraction(1, n)] * n)

    def chance(self, t):
        return self._next([True, False], [Fraction(t, ONE), 1 - Fraction(t, ONE)])

    def drive(self, kernel, a, b):
        """Run a device kernel with its module's pool draws (``take``, ``coin``)
        made this path's decisions: the kernel's own loop runs, unchanged."""
        module = sys.modules[kernel.__module__]
        draws = {"take": lambda pool, at, n: self.below(n), "coin": lambda pool, at, t: int(self.chance(t))}
        saved = {name: getattr(module, name) for name in draws if hasattr(module, name)}
        for name in saved:
            setattr(module, name, draws[name])
        try:
            return kernel(a, None, None, b)
        finally:
            for name, f in saved.items():
                setattr(module, name, f)


def enumerate_outputs(client, max_draws=None):
    """Exact output distribution {output: Fraction} of ``client(rng)``.

    With ``max_draws``, paths taking more random decisions are dropped and
    the rest are renormalised within each outcome of the first decision:
    exact for a client whose first decision is followed by a memoryless
    rejection loop (HR, PGR: "inside or outside", then uniform draws until
    one lands on that side), whose law given the first decision is that of
    its first accepted draw.  Without it every path is enumerated and the
    renormalisation changes nothing."""
    groups = {}  # first decision -> (its probability, {output: probability})
    stack = [[]]
    while stack:
        prefix = stack.pop()
        rng = _Replay(prefix)
        try:
            key = client(rng)
        except _Branch:
            if max_draws is None or len(prefix) < max_draws:
                stack.extend(prefix + [c] for c in range(rng.pending))
            continue
        first = prefix[0] if prefix else None
        group = groups.setdefault(first, (rng.first, {}))[1]
        group[key] = group.get(key, Fraction(0)) + rng.prob
    dist = {}
    for first_prob, group in groups.values():
        total = sum(group.values())
        for key, p in group.items():
            dist[key] = dist.get(key, Fraction(0)) + p * first_prob / total
    return dist


def enumerate_reports(cfg, x):
    """P[report bytes | x] of the MSS device randomiser and encoder."""
    mark = bytearray((max(cfg.moduli) + 7) // 8)
    return enumerate_outputs(lambda rng: encode(cfg, privatise(cfg, x, rng, mark), mark, 0, 0))
