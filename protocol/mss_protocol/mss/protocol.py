"""ModularSubsetSelection behind the common protocol interface (:mod:`mss_protocol.base`).

A configuration (:mod:`.config`, chosen by :mod:`.planner`) fixes the
moduli, subset sizes and integer thresholds.  The client is the device
randomiser and encoder (``mss_device``), the counts are per-block report
and inclusion counts (:mod:`.counts`), the decoder is the weighted
least-squares solve of :mod:`.decoder`, the predicted MSE that of
:mod:`.variance`, and the channel :mod:`.channel`.
"""
import math
from functools import cached_property

import numpy as np

from mss_device.encoder import Encoder
from mss_device.frame import HEADER, start
from mss_device.randomiser import Randomiser
from mss_device.rng import ByteRng
from mss_protocol.base import Protocol
from mss_protocol.counts import Counts
from mss_protocol.draw_ahead import DrawAhead
from mss_protocol.host_client import BlockClient, ranker
from mss_protocol.mss.channel import ResidueChannel
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.decoder import Decoder, item_variance
from mss_protocol.mss.planner import plan
from mss_protocol.mss.sampler import sample_counts
from mss_protocol.mss.variance import N_REF, block_weights, predicted_mse

# Up to this k, :attr:`MssProtocol.item_shifts` is computed (the worst fleet item by item: k x k
# per pair of blocks); above it MSS's manipulation coefficient is not (a ValueError says so)
EXACT_SHIFT_K = 2048

class MssProtocol(Protocol):
    """One MSS configuration; ``name`` defaults to the config's protocol (mss, or ss
    for the one-block case)."""

    config_kind = "mss"  # an MssConfig, planned by .planner
    searches_moduli = True
    # two coprime moduli >= 2 need k >= 4 (SS, the one-block case, takes k >= 2)
    min_k = 4
    min_k_why = ("MSS needs k >= 4 (at least two coprime moduli >= 2); k = {k}: use ss (MSS's one-block case) "
                 "or grr")

    def configures(self, name):
        """Its own name; an SS config (one block) is an MSS config too."""
        return name == self.name or (name == "mss" and self.name == "ss")

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
    def ranker(self):
        """The host client's colex rank of a report's subset (:func:`.host_client.ranker`)."""
        cfg = self.cfg
        width = max(m - w for m, w in zip(cfg.moduli, cfg.omegas)) + 1
        return ranker(max(cfg.omegas), width)

    @cached_property
    def blocks(self):
        """Per block j: (the host client's rank draw (:class:`.host_client.BlockClient`),
        m_j, the report's header, j shifted past the rank bits, padding bits, body bytes)."""
        cfg = self.cfg
        one = len(cfg.moduli) == 1  # no block draw between reports: the draws can be read ahead
        return [(BlockClient(m=m, omega=w, threshold=t, rank=self.ranker,
                             ahead=DrawAhead.make(m, w, t, self.ranker) if one else None),
                 m, head, j << nbits, pad, size)
                for j, (m, w, t, (head, nbits, pad, size)) in
                enumerate(zip(cfg.moduli, cfg.omegas, cfg.thresholds, self.layout))]

    @cached_property
    def layout(self):
        """Per block j: (header, rank bits, zero padding bits, body bytes) of its reports:
        the header with epoch 0, sequence 0, and the body (j, rank) in jbits + rank_bits_j
        bits, padded to whole bytes (SPEC.md section 4)."""
        cfg = self.cfg
        out = []
        for nbits in cfg.rank_bits:
            frame = start(cfg, cfg.jbits + nbits, 0, 0)
            head = HEADER[cfg.frame]
            out.append((bytes(frame[:head]), nbits, -(cfg.jbits + nbits) % 8, len(frame) - head))
        return out

    @cached_property
    def decoder(self):
        return Decoder(self.cfg)

    def randomise(self, x, rng):
        """The report bytes (header with epoch 0, sequence 0) for value x: the device's
        randomiser and encoder (``mss_device``), or from a
        :class:`~mss_device.rng.ByteRng` the same draws from the same bytes, in bulk where
        that pays, and the rank in Python integers (:mod:`mss_protocol.host_client`), bit
        for bit the device's report: j = below(l), keep r = x mod m_j with chance(T_j),
        Floyd's omega_j - keep fillers, the colex rank of the subset.  Any other rng (the
        exact enumeration of tests/channel.py) drives the device code itself."""
        if not isinstance(rng, ByteRng):
            return self.encoder.encode(self.randomiser.privatise(x, rng, self.mark), self.mark, 0, 0)
        blocks = self.blocks
        client, m, head, block, pad, size = blocks[rng.below(len(blocks)) if len(blocks) > 1 else 0]  # below(1) reads nothing
        return head + ((block | client(rng, x % m)) << pad).to_bytes(size, "big")

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
        """(k,) n Var(fhat_v): what the decoder's standard error estimates, noise
        (affine in the class frequencies g = A f) plus block assignment (quadratic in f),
        :func:`.decoder.item_variance`, at the
        expected n_j = n / l, evaluated at N_REF reports (both scale as 1/n)."""
        cfg, comps = self.cfg, self.decoder.components
        f = np.asarray(f, float)
        n_j = np.full(cfg.l, N_REF / cfg.l)
        w = np.repeat(block_weights(cfg, n_j), cfg.moduli)
        return item_variance(cfg=cfg, comps=comps, n_j=n_j, w=w, g=comps.A @ f, f=f)[0] * N_REF

    def shift_per_report(self, r=1):
        """The largest change one report can make to the sum over any r items of n fhat_v
        (:meth:`mss_protocol.base.Protocol.shift_per_report`), in units of frequency times n.

        Parameters
        ----------
        r : int
            How many items the sum runs over, 1 <= r <= k.

        Returns
        -------
        float
            M crafted reports among n move the sum of any r items' estimates by at most
            ``M * shift_per_report(r) / n`` (to first order in 1 / n: see Notes).

        Notes
        -----
        The decoder (:mod:`.decoder`, damp = 0) is the GLS solve
        fhat = M^-1 sum_j w_j A_j^T ghat_j, M = sum_j w_j A_j^T A_j, w_j = n_j / V_j, and
        w_j ghat_j = (c_j - n_j q_j) / (V_j (p_j - q_j)) is affine in the counts.  At the
        expected n_j = n / l, a report in block j with subset Z (|Z| = omega_j, any of them
        wire-valid) adds 1_Z to c_j and 1 to n_j, hence w_j grows by 1 / V_j and, to first
        order in 1 / n,

            n dfhat = W_j (1_Z - q_j 1 - (p_j - q_j) g_j),   W_j = G A_j^T / (V_j (p_j - q_j)),
            G = n M^-1 = (sum_j A_j^T A_j / (l V_j))^-1,

        g_j = A_j f the fleet's class frequencies in block j (the weight's change moves the
        balance between blocks).  G is the decoder's own M^-1 (its exact components), with
        the exact integer thresholds' p_j, q_j.  A crafted report (j, Z) in place of an honest
        (i, Z') moves item x by
        top_j(x) - bottom_i(x) + (p_i - q_i) W_i[x] g_i - (p_j - q_j) W_j[x] g_j, top and
        bottom the omega largest and smallest of W_j[x, :] summed minus q_j sum W_j[x, :]; the
        g terms cancel for i = j and are largest, over every fleet f, at a point mass on one
        item y.  :attr:`item_shifts` is the max over (j, i) and y, so
        shift(1) = max_x item_shifts[x], exact to first order in 1 / n.  Computed up to
        k = EXACT_SHIFT_K (2048); above it MSS (l > 1) raises ValueError.
        For r > 1 the bound is the sum of the r largest item_shifts.  SS (one block, A = I,
        G = V I, no weight term) is the support estimator with |S| = omega, exactly:
        shift(r) = (min(r, omega) - max(0, r - k + omega)) / (p - q).

        Examples
        --------
        >>> from mss_protocol.ss import SubsetSelection
        >>> s = SubsetSelection(16, 2.0)
        >>> s.shift_per_report(1) > 0
        True
        """
        cfg = self.cfg
        if not 1 <= r <= cfg.k:
            raise ValueError(f"shift_per_report: r must be in 1..{cfg.k}, got {r}")
        if cfg.l == 1:
            omega, p, q = int(cfg.omegas[0]), float(cfg.p[0]), float(cfg.q[0])
            return (min(r, omega) - max(0, r - cfg.k + omega)) / (p - q)
        return float(np.sort(self.item_shifts)[::-1][:r].sum())

    @cached_property
    def item_shifts(self):
        """(k,) the largest change one report can make to n fhat_x, over every fleet
        (:meth:`shift_per_report`'s Notes)."""
        cfg, comps = self.cfg, self.decoder.components
        if cfg.k > EXACT_SHIFT_K:
            raise ValueError(f"MSS's manipulation coefficient is computed up to k = {EXACT_SHIFT_K} "
                             f"(k x k per pair of blocks), not at k = {cfg.k}")
        A = comps.A
        V = np.asarray(cfg.unit_variance, float)
        # the decoder's own M^-1 (raises SingularError on a rank-deficient A)
        solve = comps.inverse(np.repeat(1.0 / (cfg.l * V), cfg.moduli)).apply
        top, bottom, weights = [], [], []
        res = np.arange(cfg.k)
        for j, (m, omega) in enumerate(zip(cfg.moduli, cfg.omegas)):
            rows = A[cfg.offsets[j]:cfg.offsets[j] + m]
            W = solve(rows.T.toarray()) / (V[j] * (cfg.p[j] - cfg.q[j]))
            weights.append((cfg.p[j] - cfg.q[j]) * W)  # times g_j: the report's weight in M
            ranked = np.sort(W, axis=1)
            base = cfg.q[j] * W.sum(axis=1)
            top.append(ranked[:, m - omega:].sum(axis=1) - base)
            bottom.append(ranked[:, :omega].sum(axis=1) - base)
        out = np.zeros(cfg.k)
        for j, U in enumerate(weights):
            for i, U2 in enumerate(weights):
                if i == j:  # same block: the weight terms cancel
                    spread = 0.0
                else:  # the worst fleet: a point mass on one item y
                    spread = np.max(U2[:, res % cfg.moduli[i]] - U[:, res % cfg.moduli[j]], axis=1)
                out = np.maximum(out, top[j] - bottom[i] + spread)
        return out

    def report_floor(self):
        """(k,) what a report aimed elsewhere adds to each n fhat_x
        (:meth:`mss_protocol.base.Protocol.report_floor`), to first order in 1 / n.

        Notes
        -----
        With :meth:`shift_per_report`'s W_j (k, m_j), a report (j, Z) adds
        sum_{z in Z} W_j[x, z] - q_j S_jx to n fhat_x, S_jx = sum_z W_j[x, z] (the weight term
        is left out: it is the same for every report of block j).  A report aimed elsewhere is
        taken as a uniformly random subset of omega_j residues without x's residue, in a block
        chosen uniformly (as the scheme assigns honest devices):

            floor_x = mean_j (omega_j (S_jx - W_j[x, x mod m_j]) / (m_j - 1) - q_j S_jx),

        which for SS (one block, W = I / (p - q)) is -q / (p - q) exactly, the support
        protocols' floor.  Computed up to k = EXACT_SHIFT_K, as the coefficient; ValueError above.
        """
        cfg, comps = self.cfg, self.decoder.components
        if cfg.k > EXACT_SHIFT_K:
            raise ValueError(f"MSS's report floor is computed up to k = {EXACT_SHIFT_K}, not at k = {cfg.k}")
        V = np.asarray(cfg.unit_variance, float)
        solve = comps.inverse(np.repeat(1.0 / (cfg.l * V), cfg.moduli)).apply  # the decoder's own M^-1
        items = np.arange(cfg.k)
        out = np.zeros(cfg.k)
        for j, (m, omega) in enumerate(zip(cfg.moduli, cfg.omegas)):
            W = solve(comps.A[cfg.offsets[j]:cfg.offsets[j] + m].T.toarray()) / (V[j] * (cfg.p[j] - cfg.q[j]))
            total = W.sum(axis=1)
            out += omega * (total - W[items, items % m]) / (m - 1) - cfg.q[j] * total
        return out / cfg.l

    def crafted_counts(self, targets, m, rng):
        """:class:`~.counts.Counts` of ``m`` Maximal Gain Attack reports
        (:meth:`mss_protocol.base.Protocol.crafted_counts`): a report (j, Z) supports the items
        whose residue mod m_j is in Z, so each holds the targets' residues mod m_j (as many as
        omega_j holds, rotated from report to report when it holds fewer), filled to omega_j with
        the lowest other residues; the block j is round robin over the l blocks (each holds
        every target's residue: the decoder weighs the blocks, the attacker spreads over them)."""
        cfg = self.cfg
        blocks = np.arange(m) % cfg.l
        subsets = []
        for i, j in enumerate(blocks):
            mod, omega = cfg.moduli[j], cfg.omegas[j]
            res = list(dict.fromkeys(int(t) % mod for t in targets))
            res = res[i % len(res):] + res[:i % len(res)]
            fill = [v for v in range(mod) if v not in res][:max(0, omega - len(res))]
            subsets.append((res + fill)[:omega])
        return self._block_counts(blocks, subsets)

    def random_output_counts(self, m, rng):
        """:class:`~.counts.Counts` of ``m`` uniformly random reports: a uniform block and a
        uniform omega_j-subset of its residues."""
        cfg = self.cfg
        blocks = rng.integers(0, cfg.l, m)
        return self._block_counts(blocks, [rng.choice(cfg.moduli[j], cfg.omegas[j], replace=False) for j in blocks])

    def _block_counts(self, blocks, subsets):
        """Counts of reports (blocks[i], subsets[i]), a subset an array of residues."""
        cfg = self.cfg
        c = np.zeros(cfg.offsets[-1], dtype=np.int64)
        for j, z in zip(blocks, subsets):
            c[cfg.offsets[j] + np.asarray(z)] += 1
        return Counts(cfg, np.bincount(blocks, minlength=cfg.l), c)

    # -- what a report supports (mss_protocol.base.Protocol.supported_items) ----------------------
    def supported_items(self, j, members, sizes):
        """bool (n, k): a report (j, Z) supports the items whose residue mod m_j is in Z."""
        cfg, j = self.cfg, np.asarray(j, dtype=np.int64)
        sizes = np.asarray(sizes, dtype=np.int64)
        held = np.zeros((j.size, max(cfg.moduli)), dtype=bool)
        held[np.repeat(np.arange(j.size), sizes), np.asarray(members, dtype=np.int64)] = True
        out = np.zeros((j.size, cfg.k), dtype=bool)
        items = np.arange(cfg.k)
        for b, m in enumerate(cfg.moduli):
            rows = np.flatnonzero(j == b)
            out[rows] = held[rows][:, items % m]
        return out

    def support(self, counts):
        """(k,) the reports that support each item: sum over blocks of c_j[v mod m_j]."""
        cfg, items = self.cfg, np.arange(self.cfg.k)
        return sum(counts.block(j)[items % m] for j, m in enumerate(cfg.moduli))

    def support_rate(self, r):
        """The largest chance over every input that one report supports r = 1 or 2 given items.

        Notes
        -----
        The block j is uniform over the l blocks; in block j the report holds the input's
        residue with probability p_j and each other residue with q_j = (omega_j - p_j) /
        (m_j - 1).  One item: at most the mean of p_j (the input itself).  Two items v != w:
        in a block where v = w (mod m_j) they are supported together exactly when one is, at
        most p_j; in a block where they differ, both residues are in Z with probability
        p_j (omega_j - 1) / (m_j - 1) when one is the input's, or
        (p_j (omega_j - 1)(omega_j - 2) + (1 - p_j) omega_j (omega_j - 1)) / ((m_j - 1)(m_j - 2))
        when neither is; take the larger, n_j.  A pair is congruent in the blocks of a set J
        only if lcm(m_J) divides v - w, so lcm(m_J) <= k - 1; the rate is at most
        max over such J of (sum_{j in J} p_j + sum_{j not in J} n_j) / l.  SS (one block,
        m = k) has no congruent pair: its exact two-item rate.
        """
        if r not in (1, 2):
            raise ValueError(f"support_rate: r must be 1 or 2, got {r}")
        cfg = self.cfg
        p = np.asarray(cfg.p, float)
        if r == 1:
            return float(p.mean())
        m, w = np.asarray(cfg.moduli, float), np.asarray(cfg.omegas, float)
        one = p * (w - 1) / (m - 1)
        neither = np.where(m > 2, (p * (w - 1) * (w - 2) + (1 - p) * w * (w - 1))
                           / np.maximum((m - 1) * (m - 2), 1), 0.0)
        apart = np.maximum(one, neither)
        return max([float(apart.mean())] + [float(np.where(J, p, apart).mean()) for J in self._congruent_blocks()])

    def other_item_rate(self):
        """The largest chance one report supports an item v that is not the input x: q_j in a block
        where v != x (mod m_j), p_j where v = x, over the sets J of blocks where some v != x in [k]
        are congruent (lcm(m_J) <= k - 1), averaged over the uniform block (:meth:`support_rate`)."""
        cfg = self.cfg
        p, q = np.asarray(cfg.p, float), np.asarray(cfg.q, float)
        return max([float(q.mean())] + [float(np.where(J, p, q).mean()) for J in self._congruent_blocks()])

    def _congruent_blocks(self):
        """Boolean masks (l,) of the non-empty sets J of blocks in which two distinct items of [k]
        can agree: lcm(m_J) <= k - 1 (two items congruent modulo every m_j, j in J, differ by a
        multiple of their lcm)."""
        cfg = self.cfg
        for mask in range(1, 1 << cfg.l):
            J = np.array([mask >> b & 1 for b in range(cfg.l)], dtype=bool)
            if math.lcm(*(int(m) for m in np.asarray(cfg.moduli)[J])) <= cfg.k - 1:
                yield J

    def shuffle_channel(self):
        """Subset selection of w out of k when the config is one block over all k items; MSS over
        several blocks has no bound of its own (:meth:`Protocol.shuffle_channel`)."""
        cfg = self.cfg
        if tuple(cfg.moduli) == (cfg.k,) and len(cfg.omegas) == 1:
            return "ss", int(cfg.omegas[0])
        return None

    def channel(self):
        return ResidueChannel(self)

    # -- costs (mss_protocol.device_cost, mss_protocol.choose) -----------------------
    cost_family = "mss"

    def device_features(self):
        """{base, passes, adds, positions, draws} of the block that costs most (largest
        m_j rank_bits_j, as the planner's ``device_ms`` is a bound): the rank kernel's limb
        steps (:func:`mss_protocol.device_cost.rank_work`), the positions scanned and
        Floyd's omega_j draws."""
        from mss_protocol.device_cost import rank_work

        cfg = self.cfg
        j = max(range(len(cfg.moduli)), key=lambda j: cfg.moduli[j] * cfg.rank_bits[j])
        passes, adds, positions = rank_work(cfg.moduli[j], cfg.omegas[j])
        return {"base": 1.0, "passes": passes, "adds": adds, "positions": positions, "draws": cfg.omegas[j]}

    def decode_cells(self, n):
        """50 (k l + sum m_j): LSMR's passes over the (sum m_j) x k matrix A of l blocks
        (``n`` unused: the decoder reads counts)."""
        cfg = self.cfg
        return 50 * (cfg.k * cfg.l + sum(cfg.moduli))

    def simulated_report_us(self):
        """5 + 0.2 k us: the device randomiser and the residue support's posterior update."""
        return 5 + 0.2 * self.k

    def ingest_us(self):
        """5 us plus, per block (weighted 1 / l), the unrank of the subset: m_j (0.15 +
        1.2e-4 rank_bits_j) us when it walks the m_j positions
        (:func:`mss_protocol.mss.wire.walks`), else 0.6 omega_j us (``tools/bench_codecs.py``:
        0.25 ms a report at k = 1024, eps = 1; 53 ms at k = 22000, eps = 1)."""
        from mss_protocol.mss.wire import walks

        cfg = self.cfg
        cost = 5.0
        for j, (m, w) in enumerate(zip(cfg.moduli, cfg.omegas)):
            cost += (m * (0.15 + 1.2e-4 * cfg.rank_bits[j]) if walks(m, w) else 0.6 * w) / cfg.l
        return cost
