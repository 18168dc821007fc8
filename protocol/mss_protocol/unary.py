"""Unary encoding: basic one-time RAPPOR, in its optimised (OUE) and symmetric (SUE) forms.

The report is k bits; bit v is set with probability p if v is the value,
else q, independently.  ``rappor`` is OUE (p = 1/2, q = 1/(e^eps + 1); Wang
et al. 2017, as in the PGR reference code), ``sue`` the symmetric form
(p = e^(eps/2)/(e^(eps/2) + 1), q = 1 - p; Erlingsson et al. 2014).
Counts: per-item support counts (k,), i.e. how many reports set bit v.
"""
import math
from decimal import ROUND_FLOOR, localcontext
from fractions import Fraction
from functools import cached_property

import numpy as np

from mss_device.rng import ByteRng
from mss_protocol import privacy
from mss_protocol.channel import Channel
from mss_protocol.host_client import unary_client
from mss_protocol.privacy import ONE
from mss_protocol.support import SupportOracle

NAMES = {"oue": "rappor", "sue": "sue"}  # registry name of each variant


def two_bit_ratio(tp, tq):
    """The worst ratio of a unary encoding: between x and x' only their two bits change
    law, tp (2**30 - tq) / ((2**30 - tp) tq)."""
    return Fraction(tp * (ONE - tq), (ONE - tp) * tq)


def thresholds(variant, epsilon):
    """(tp, tq) by SPEC.md section 1, E = e^eps to 60 digits (privacy.exp_decimal), exactly:

    * oue: tp = 2**29 and tq the smallest integer with the two-bit ratio <= E,
      i.e. 2**30 - tq <= E tq: tq = ceil(2**30 / (E + 1)), one exact division;
    * sue: tp the largest integer with the two-bit ratio of (tp, 2**30 - tp),
      tp**2 / (2**30 - tp)**2, <= E, and tq = 2**30 - tp; searched exactly
      downward and upward from the 60-digit floor(2**30 sqrt(E) / (sqrt(E) + 1)).
    """
    n, d = privacy.exp_fraction(epsilon).as_integer_ratio()
    if variant == "oue":
        return ONE // 2, -(-ONE * d // (n + d))
    with localcontext() as ctx:
        ctx.prec = privacy.DIGITS
        h = privacy.exp_decimal(epsilon).sqrt()
        guess = int((ONE * h / (h + 1)).to_integral_value(ROUND_FLOOR))
    tp = privacy.largest(lambda t: t < ONE and t * t * d <= n * (ONE - t) * (ONE - t), min(guess, ONE - 1))
    return tp, ONE - tp


class UnaryEncoding(SupportOracle):
    """k independent bits; ``variant`` is "oue" (registered as ``rappor``) or "sue"."""

    def __init__(self, k, epsilon, variant="oue"):
        if variant not in NAMES:
            raise ValueError(f"unary encoding variant must be oue or sue, got {variant!r}")
        self.k, self.epsilon, self.variant, self.name = k, epsilon, variant, NAMES[variant]
        tp, tq = thresholds(variant, epsilon)
        eps_ratio = two_bit_ratio(tp, tq)
        self.tp, self.tq = tp, tq
        self.p, self.q = tp / ONE, tq / ONE
        self.eps_effective = privacy.ln_down(eps_ratio)
        self.body_bits = k

    @classmethod
    def oue(cls, k, epsilon):
        return cls(k, epsilon, "oue")

    @classmethod
    def sue(cls, k, epsilon):
        return cls(k, epsilon, "sue")

    def device_values(self):
        """(tp, tq), in mss_device.params.FIELDS order."""
        return (self.tp, self.tq)

    unary_body = True  # the k bits, item 0 most significant (mss_protocol.codec)

    # the device cost model (mss_protocol.device_cost): one coin per item
    cost_family = "unary"

    def device_features(self):
        """{base: 1, items: k}: k coins, ``chance(tp)`` or ``chance(tq)``."""
        return {"base": 1.0, "items": self.k}

    def ingest_us(self):
        """8 + 0.03 k us: the header checks and the k bits unpacked (``tools/bench_codecs.py``)."""
        return 8.0 + 0.03 * self.k

    def simulated_report_us(self):
        """5 + 0.8 k us: k coins in the client, k bits in the posterior."""
        return 5 + 0.8 * self.k

    def support_sizes(self):
        """(0, k): any k bits are a valid body, from none set to all set
        (:meth:`SupportOracle.shift_per_report`: r / (p - q), every r)."""
        return 0, self.k

    def supported_items(self, j, members, sizes):
        """bool (n, k): the set bits of each report (stored as its members, ``sizes`` each)."""
        sizes = np.asarray(sizes, dtype=np.int64)
        out = np.zeros((sizes.size, self.k), dtype=bool)
        out[np.repeat(np.arange(sizes.size), sizes), np.asarray(members, dtype=np.int64)] = True
        return out

    def sample_supports(self, values, rng):
        """bool (n, k): bit v set with probability p if v is the value, else q, independently."""
        values = np.asarray(values, dtype=np.int64)
        bits = rng.random((values.size, self.k)) < self.q
        bits[np.arange(values.size), values] = rng.random(values.size) < self.p
        return bits

    def support_rate(self, r):
        """p for one item; for two the bits are independent, so p q when one of them is the
        input (q q otherwise): q max(p, q) (:meth:`Protocol.support_rate`)."""
        if r not in (1, 2):
            raise ValueError(f"support_rate: r must be 1 or 2, got {r}")
        top = max(self.p, self.q)
        return top if r == 1 else self.q * top

    def support_size_law(self):
        """|S(y)| = Bernoulli(p) (the input's bit) + Binomial(k - 1, q) (the others'), whatever
        the input: ((1, p), (k - 1, q))."""
        return ((1, self.p), (self.k - 1, self.q))

    def randomise(self, x, rng):
        """The k-bit report body: item v at bit v, most significant first (SPEC.md).

        Bit v is ``rng.chance(tp if v == x else tq)``, drawn for v = 0 .. k-1.  From a
        :class:`~mss_device.rng.ByteRng` the k coins are read at once
        (:func:`~mss_protocol.host_client.unary_client`: the device's bytes and report);
        any other rng (the exact enumeration of tests/channel.py) draws them one by one."""
        if isinstance(rng, ByteRng):
            return self.host(rng, x)
        out = bytearray((self.k + 7) // 8)
        for v in range(self.k):
            if rng.chance(self.tp if v == x else self.tq):
                out[v >> 3] |= 0x80 >> (v & 7)
        return bytes(out)

    @cached_property
    def host(self):
        """The host client ``client(rng, x)`` (:func:`~mss_protocol.host_client.unary_client`)."""
        return unary_client(self.k, self.tp, self.tq)

    def sample_chunk(self, values, rng):
        """Support counts: Binomial(n_v, p) + Binomial(n - n_v, q) per item, exactly."""
        n_v = np.bincount(np.asarray(values), minlength=self.k)
        return rng.binomial(n_v, self.p) + rng.binomial(n_v.sum() - n_v, self.q)

    def crafted_counts(self, targets, m, rng):
        """Support counts (k,) of ``m`` Maximal Gain Attack reports (:meth:`Protocol.crafted_counts`):
        any k bits are a valid body, so each report sets exactly the targets' bits."""
        support = np.zeros(self.k, dtype=np.int64)
        support[np.asarray(targets)] = m
        return support

    def random_output_counts(self, m, rng):
        """Support counts (k,) of ``m`` uniformly random bodies: every bit a fair coin."""
        return rng.binomial(m, 0.5, size=self.k)

    def shuffle_channel(self):
        """Optimised or symmetric unary encoding, named by its variant (:meth:`Protocol.shuffle_channel`)."""
        return self.variant, None

    def channel(self):
        return UnaryChannel(self)


class UnaryChannel(Channel):
    """S(y) = the set bits; exact values in closed form over the sorted prior."""

    def __init__(self, oracle):
        super().__init__(oracle)
        p, q = oracle.p, oracle.q
        self.log_r = math.log(p * (1 - q) / (q * (1 - p)))

    def support(self, report):
        bits = np.unpackbits(np.frombuffer(report, dtype=np.uint8))
        return bits[:self.k].astype(bool), self.log_r

    def from_decoded(self, report, data):
        """The k-bit body: the frame's last ceil(k / 8) bytes."""
        return data[len(data) - (self.k + 7) // 8:]

    def paper_exact(self, prior):
        """p (1 - (1-q)^k) / (k q) + (1 - p)(1 - q)^(k-1) / k, whatever the prior:
        x's bit is set (p) and x is drawn among it and Binomial(k-1, q) others,
        or no bit is set and the guess is uniform."""
        p, q, k = self.oracle.p, self.oracle.q, self.k
        return float(p * -math.expm1(k * math.log1p(-q)) / (k * q) + (1 - p) * (1 - q) ** (k - 1) / k)

    def paper_closed_form(self):
        """The author code's formula, which is exact: :meth:`paper_exact`."""
        return self.paper_exact(None)

    def bayes_exact(self, prior):
        """sum_B q^|B| (1-q)^(k-|B|) max(p/q max_B pi, (1-p)/(1-q) max_not-B pi),
        grouped by the first set / unset bit in the sorted prior (O(k log k))."""
        p, q, k = self.oracle.p, self.oracle.q, self.k
        w = np.sort(np.asarray(prior, dtype=float))[::-1]
        r1, r0 = p / q, (1 - p) / (1 - q)
        s = np.arange(1, k)
        lq, l1q = math.log(q), math.log1p(-q)
        top_set = (np.exp(s * lq + l1q) * np.maximum(r1 * w[0], r0 * w[s])).sum() \
            + math.exp(k * lq) * r1 * w[0]
        top_unset = (np.exp(s * l1q + lq) * np.maximum(r1 * w[s], r0 * w[0])).sum() \
            + math.exp(k * l1q) * r0 * w[0]
        return float(top_set + top_unset)
