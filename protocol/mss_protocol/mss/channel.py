"""MSS (and SS, its one-block case) seen by the attacker.

A report (j, Z) supports S = {x : x mod m_j in Z} with likelihood ratio
R_j = p'_j (m_j - omega_j) / ((1 - p'_j) omega_j) (:mod:`mss_protocol.channel`).
"""
import numpy as np

from mss_device.randomiser import Randomiser
from mss_protocol.channel import Channel, subset_bayes
from mss_protocol.mss.sampler import sample_bitmaps
from mss_protocol.mss.wire import WireCodec


class ResidueChannel(Channel):
    """Reports (j, Z) from the device randomiser of ``protocol.cfg``."""

    def __init__(self, protocol):
        super().__init__(protocol)
        self.cfg = cfg = protocol.cfg
        self.log_r = np.log(cfg.p * (np.array(cfg.moduli) - cfg.omegas)
                            / ((1 - cfg.p) * np.array(cfg.omegas)))
        self.residues = [np.arange(cfg.k) % m for m in cfg.moduli]
        self.mark = bytearray((max(cfg.moduli) + 7) // 8)
        self.codec = WireCodec(cfg)
        self.randomiser = Randomiser(cfg)

    def client(self, x, rng):
        j = self.randomiser.privatise(x, rng, self.mark)
        bits = np.unpackbits(np.frombuffer(self.mark, dtype=np.uint8), bitorder="little")
        return j, np.flatnonzero(bits[:self.cfg.moduli[j]])

    def wire(self, x, rng):
        return self.oracle.randomise(x, rng)

    def parse(self, data, epoch=None):
        r = self.codec.decode(data, epoch=epoch)
        return r.j, np.array(r.subset, dtype=np.int64)

    def support(self, report):
        j, z = report
        in_z = np.zeros(self.cfg.moduli[j], dtype=bool)
        in_z[z] = True
        return in_z[self.residues[j]], self.log_r[j]

    def key(self, report):
        return report[0], bytes(np.asarray(report[1], dtype=np.int64))

    def sample_logliks(self, values, rng):
        """:meth:`loglik` of one fresh report of each of ``values`` (n,), shape (n, k),
        the reports drawn by :func:`~mss_protocol.mss.sampler.sample_bitmaps` (the
        device randomiser's exact law, NumPy's ``rng``), all at once."""
        out = np.zeros((len(values), self.k))
        for (rows, z), res, log_r in zip(sample_bitmaps(self.cfg, values, rng)[1], self.residues, self.log_r):
            out[rows] = z[:, res] * log_r
        return out

    def paper_guess(self, report, rng):
        j, z = report
        m = self.cfg.moduli[j]
        r = int(z[rng.integers(len(z))])
        return r + m * int(rng.integers((self.k - 1 - r) // m + 1))

    def _class_sizes(self):
        """|class_j(x)| = #{x' in [k] : x' = x mod m_j}, shape (l, k)."""
        return np.array([(self.k - 1 - res) // m + 1 for m, res in zip(self.cfg.moduli, self.residues)])

    def paper_exact(self, prior):
        """sum_x pi(x) (1/l) sum_j p'_j / (omega_j |class_j(x)|)."""
        per = self.cfg.p[:, None] / (np.array(self.cfg.omegas)[:, None] * self._class_sizes())
        return float(np.dot(prior, per.mean(axis=0)))

    def paper_closed_form(self):
        """MSS paper Eq. 7: (1/l) sum_j p'_j / (omega_j ceil(k / m_j))."""
        cfg = self.cfg
        return float(np.mean([p / (w * -(-cfg.k // m)) for p, w, m in zip(cfg.p, cfg.omegas, cfg.moduli)]))

    def bayes_exact(self, prior):
        """(1/l) sum_j subset_bayes(class maxima of pi in block j)."""
        total = 0.0
        for m, w, p, res in zip(self.cfg.moduli, self.cfg.omegas, self.cfg.p, self.residues):
            top = np.zeros(m)
            np.maximum.at(top, res, prior)
            total += subset_bayes(top, w, p)
        return total / self.cfg.l
