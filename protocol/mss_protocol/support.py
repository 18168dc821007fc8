"""The support-count estimator shared by GRR, the unary encodings, OLH, HR and PGR.

Each of these reports something that *supports* a set of values; the
support count c_v of value v over n reports has E[c_v / n] = q + (p - q) f_v,
so fhat_v = (c_v / n - q) / (p - q), with variance

    q(1-q)/(n (p-q)^2) + f_v (1-p-q)/(n (p-q))

(Wang et al. 2017, "Locally differentially private protocols for frequency
estimation", Eq. 3 generalised).  Keep-probabilities are integer thresholds
T / 2**30 rounded towards more privacy; ``eps_effective`` is the exact
worst-case log ratio of those integers (mss-protocol-notes.md section 8).

The one-output protocols (grr, olh, hr, pgr) may add an instantaneous layer
(:meth:`SupportOracle.with_irr`, :mod:`.irr`): the client then applies it
after the protocol's draw, and p and q become the composed channel's, so the
estimate, its standard errors, :meth:`variance` and the channel are the
composed ones.
"""
import copy

import numpy as np

from mss_protocol.base import Protocol
from mss_protocol.limits import DEVICE_DRAW, check_draw  # noqa: F401  (the protocols' import)


class SupportOracle(Protocol):
    """Shared estimator of the support-count protocols; subclasses set p, q,
    ``body_bits`` and the client, sampler and channel."""

    @property
    def bits(self):
        return {"max": self.body_bits, "mean": float(self.body_bits)}

    # -- the instantaneous layer (one-output protocols) -----------------------------
    # Subclasses that take one give ``outputs`` (n_out), ``support_size`` (s: the outputs
    # supporting one value) and ``point_probs()`` (the PRR's two probabilities of one output).
    def with_irr(self, epsilon, threshold=None):
        """A copy of this protocol with an instantaneous layer at ``epsilon`` (GRR on its
        n_out outputs, threshold privacy.threshold(n_out, 1, epsilon) unless given):
        its client applies the layer, its p and q are the composed channel's
        (:meth:`mss_protocol.irr.IRR.compose`), ``report_eps_effective`` the exact worst
        log-ratio of one composed report; ``prr`` is this protocol, ``irr`` the layer."""
        from mss_protocol.irr import IRR, PROTOCOLS, composed_ratio
        from mss_protocol.privacy import ln_down

        if self.name not in PROTOCOLS or self.irr is not None:
            raise ValueError(f"irr: an instantaneous layer applies to {', '.join(PROTOCOLS)} only "
                             f"(one output per report), not {self.name}")
        out = copy.copy(self)
        out.prr, out.irr = self, IRR(self.outputs, epsilon, threshold)
        out.p, out.q = (out.irr.compose(v, self.support_size) for v in (self.p, self.q))
        out._report_ratio = composed_ratio(*self.point_probs(), out.irr)
        out._report_eps = ln_down(out._report_ratio)
        return out

    @property
    def report_ratio(self):
        """The exact worst likelihood ratio of one report (a Fraction)."""
        from mss_protocol.privacy import worst

        if self.irr is not None:
            return self._report_ratio
        pin, pout = self.point_probs()
        return worst(pin / pout)

    @property
    def report_eps_effective(self):
        """The exact worst log-ratio of one report, rounded down (without an IRR: eps_effective)."""
        return self.eps_effective if self.irr is None else self._report_eps

    def _irr(self, y, rng):
        """The instantaneous layer on one drawn output (none: y, no draw)."""
        return y if self.irr is None else self.irr.apply(y, rng)

    def _irr_np(self, y, rng):
        """The instantaneous layer on drawn outputs, vectorised (none: y, no draw)."""
        return y if self.irr is None else self.irr.perturb(y, rng)

    # -- the counts and the wire (mss_protocol.oracle_config, mss_protocol.codec) ------------
    members_per_report = 1  # what a decoded report stores: the point (OLH: a, b and y)

    @property
    def counts_size(self):
        """Cells of the counts: the k support counts (HR and PGR: the K-point histogram)."""
        return self.k

    def tally_members(self, members):
        """Counts (counts_size,) of stored reports' members (``members_per_report`` each, flat)."""
        return np.bincount(members, minlength=self.counts_size)

    def decoded_members(self, code, config, device_id, epoch):
        """The members of a report whose body is ``code`` (what the counts tally): (code,)."""
        return (code,)

    # -- host costs (mss_protocol.choose) ------------------------------------------
    def decode_cells(self, n):
        """k: the estimator reads the k support counts once (``n`` unused);
        protocols that build them from a larger histogram or from each report add that."""
        return self.k

    def ingest_us(self):
        """8 us: the header checks and one integer body (``tools/bench_codecs.py``);
        the unary encodings add their k bits."""
        return 8.0

    def simulated_report_us(self):
        """10 + 0.03 k us (OLH, HR, PGR's fit; GRR and the unary encodings have their own):
        a point's client and a support set's posterior update over [k]."""
        return 10 + 0.03 * self.k

    def sample_counts(self, values, rng):
        """Counts of reports for ``values``: an array, or an iterable of arrays
        (chunks, to bound memory), each through ``sample_chunk``."""
        if isinstance(values, np.ndarray):
            return self.sample_chunk(values, rng)
        return sum(self.sample_chunk(np.asarray(chunk), rng) for chunk in values)

    def support(self, counts):
        """Support counts (k,) from the protocol's counts (identity by default)."""
        return counts

    def estimate(self, counts, n):
        """(fhat, stderr), shape (k,) each, from the counts of n reports."""
        p, q = self.p, self.q
        fhat = (np.asarray(self.support(counts)) / n - q) / (p - q)
        f = np.clip(fhat, 0, 1)
        var = q * (1 - q) / (n * (p - q) ** 2) + f * (1 - p - q) / (n * (p - q))
        return fhat, np.sqrt(var)

    def unit_item_variance(self, f):
        """(k,) n Var(fhat_v) = q(1-q)/(p-q)^2 + f_v (1-p-q)/(p-q) (module docstring):
        the square of :meth:`estimate`'s standard error times n at fhat = f.  Each
        item's depends on its own frequency only."""
        p, q = self.p, self.q
        return q * (1 - q) / (p - q) ** 2 + np.asarray(f, float) * (1 - p - q) / (p - q)

    def report_floor(self):
        """(k,) -q / (p - q) each (:meth:`mss_protocol.base.Protocol.report_floor`): a report y
        adds (1{v in S(y)} - q) / (p - q) to n fhat_v, so this to every item it does not support.

        Examples
        --------
        >>> from mss_protocol.grr import GRR
        >>> g = GRR(16, 2.0)
        >>> bool(abs(g.report_floor()[0] + g.q / (g.p - g.q)) < 1e-12)
        True
        """
        return np.full(self.k, -self.q / (self.p - self.q))

    # -- the manipulation coefficient (mss_protocol.base.Protocol.shift_per_report) ----------
    def support_sizes(self):
        """(s_min, s_max): bounds on the fewest and the most items of [k] that one wire-valid
        report supports, |S(y)|, over every output y (ints)."""
        raise self.missing("support_sizes()")

    def shift_per_report(self, r=1):
        """The largest change one report can make to the sum over any r items of n fhat_v.

        Parameters
        ----------
        r : int
            How many items the sum runs over, 1 <= r <= k.

        Returns
        -------
        float
            In units of frequency times n: M crafted reports among n move the sum of any r
            items' estimates by at most ``M * shift_per_report(r) / n``.

        Notes
        -----
        The estimator is affine in the support counts, n fhat_v = (c_v - n q) / (p - q), and a
        report y adds 1 to c_v for v in its support S(y) (and 1 to n), so it adds
        (1{v in S(y)} - q) / (p - q) to n fhat_v.  Over a set R of r items that is
        (|S(y) & R| - r q) / (p - q), and a crafted report y in place of an honest y' changes
        the sum by (|S(y) & R| - |S(y') & R|) / (p - q).  With s_min <= |S(y)| <= s_max
        (:meth:`support_sizes`), |S(y) & R| <= min(r, s_max) and
        |S(y') & R| >= max(0, r - (k - s_min)), so

            shift(r) = (min(r, s_max) - max(0, r - k + s_min)) / (p - q),

        with p and q the exact integer thresholds' (an instantaneous layer's composed ones:
        it keeps the outputs and their supports).  Exact (a pair y, y' and a set R attain it)
        where the two extremes are reached by outputs and R together: GRR (1/(p - q) for
        r < k, 0 for r = k, where every report supports one item), the unary encodings
        (r/(p - q): any k bits are a valid report), OLH and PGR up to their hash and
        geometry (module docstrings); tests/test_manipulation.py searches every report.

        Examples
        --------
        >>> from mss_protocol.grr import GRR
        >>> g = GRR(16, 2.0)
        >>> round(g.shift_per_report(1), 3), g.shift_per_report(16)
        (3.504, 0.0)
        """
        if not 1 <= r <= self.k:
            raise ValueError(f"shift_per_report: r must be in 1..{self.k}, got {r}")
        s_min, s_max = self.support_sizes()
        return (min(r, s_max) - max(0, r - self.k + s_min)) / (self.p - self.q)

    # -- what a report supports (mss_protocol.base.Protocol.supported_items) ----------------------
    def supported_items(self, j, members, sizes):
        """bool (n, k): S(y) of each stored report, from the channel's ``support`` of the report
        its members form (the point, or OLH's (a, b, y)); one-point and unary protocols
        vectorise it."""
        channel = self.channel()
        per = self.members_per_report
        rows = np.asarray(members, dtype=np.int64).reshape(-1, per)
        out = np.zeros((len(rows), self.k), dtype=bool)
        for i, row in enumerate(rows):
            out[i] = channel.support(int(row[0]) if per == 1 else tuple(int(v) for v in row))[0]
        return out

    def support_rate(self, r):
        """One report supports a given item with probability p if it is the input, q else
        (the support estimator's law: module docstring), so the rate of one item is max(p, q)
        = p.  For two items the bound returned is the same p (supporting both is no likelier
        than supporting one): exact for OLH with ``seed: device`` (an honest device's fixed seed
        hashes its value's whole preimage together every epoch) and an upper bound elsewhere;
        GRR and the unary encodings give their exact two-item rate."""
        if r not in (1, 2):
            raise ValueError(f"support_rate: r must be 1 or 2, got {r}")
        return max(self.p, self.q)

    def other_item_rate(self):
        """q: a report supports an item that is not the input with probability q (module docstring)."""
        return min(self.q, max(self.p, self.q))

    def variance(self, n, prior=None):
        """Per-item MSE of the unbiased estimate averaged over [k]: the same for
        every distribution (the f term averages to 1/k), so ``prior`` is unused."""
        p, q = self.p, self.q
        return q * (1 - q) / (n * (p - q) ** 2) + (1 - p - q) / (self.k * n * (p - q))
