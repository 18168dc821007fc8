"""ModularSubsetSelection behind the common protocol interface (:mod:`mss_protocol.base`).

A configuration (:mod:`.config`, chosen by :mod:`.planner`) fixes the
moduli, subset sizes and integer thresholds.  The client is the device
randomiser and encoder (``mss_device``), the counts are per-block report
and inclusion counts (:mod:`.counts`), the decoder is the weighted
least-squares solve of :mod:`.decoder`, the predicted MSE that of
:mod:`.variance`, and the channel :mod:`.channel`.
"""
from functools import cached_property

import numpy as np

from mss_device.encoder import Encoder
from mss_device.randomiser import Randomiser
from mss_protocol.base import Protocol
from mss_protocol.mss.channel import ResidueChannel
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.counts import Counts
from mss_protocol.mss.decoder import Decoder, noise_variance
from mss_protocol.mss.planner import plan
from mss_protocol.mss.sampler import sample_counts
from mss_protocol.mss.variance import N_REF, block_weights, predicted_mse


class MssProtocol(Protocol):
    """One MSS configuration; ``name`` defaults to the config's protocol (mss, or ss
    for the one-block case)."""

    def __init__(self, cfg, name=None):
        self.cfg = cfg
        self.name = name or cfg.name
        self.k, self.epsilon, self.eps_effective = cfg.k, cfg.epsilon, cfg.eps_effective
        self.mark = bytearray((max(cfg.moduli) + 7) // 8)

    @classmethod
    def planned(cls, k, epsilon):
        """The planner's most accurate MSS configuration for (k, epsilon) (MSS
        proper: SubsetSelection, its one-block case, is the ``ss`` protocol)."""
        return cls(MssConfig.from_dict(plan(k, epsilon)["config"]))

    @property
    def bits(self):
        return self.cfg.bits_per_report

    @cached_property
    def encoder(self):
        return Encoder(self.cfg)

    @cached_property
    def randomiser(self):
        return Randomiser(self.cfg)

    @cached_property
    def decoder(self):
        return Decoder(self.cfg)

    def randomise(self, x, rng):
        """The report bytes (header with epoch 0, sequence 0) for value x."""
        return self.encoder.encode(self.randomiser.privatise(x, rng, self.mark), self.mark, 0, 0)

    def sample_counts(self, values, rng):
        """:class:`~.counts.Counts` of reports for ``values`` (an array, or an
        iterable of arrays to bound memory)."""
        return Counts(self.cfg, *sample_counts(self.cfg, values, rng))

    def estimate(self, counts, n=None):
        est = self.decoder.decode(counts)
        return est.raw, est.stderr

    def decode(self, counts, n=None, post="none"):
        """The LSMR decode; ``n`` is implied by the counts."""
        return self.decoder.decode(counts, post=post)

    def variance(self, n, prior=None):
        """Noise and block-assignment variance (:mod:`.variance`) at ``prior``."""
        return predicted_mse(self.cfg, n, prior)[0]

    def unit_item_variance(self, f):
        """(k,) n Var(fhat_v): the decoder's noise variance (:func:`.decoder.noise_variance`,
        what its standard errors estimate) at class frequencies g = A f and the expected
        n_j = n / l, evaluated at N_REF reports (it scales as 1/n).  Affine in f (the
        sandwich is linear in g).  The block-assignment part of :mod:`.variance` is left
        out: the decoder's standard error does not include it, and it is quadratic in f;
        :mod:`mss_protocol.resolution` adds its average at the prior."""
        cfg, comps = self.cfg, self.decoder.components
        n_j = np.full(cfg.l, N_REF / cfg.l)
        w = np.repeat(block_weights(cfg, n_j), cfg.moduli)
        return noise_variance(cfg, comps, n_j, w, comps.A @ np.asarray(f, float))[0] * N_REF

    def channel(self):
        return ResidueChannel(self)
