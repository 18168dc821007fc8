"""How estimates are shown: which items, in which order, with which intervals.

``mss estimate`` (table, CSV, JSON, plot), ``/api/estimates`` and the dashboard
share one rule:

* **order**: ``item`` keeps the items' own order (the default for a config
  with ``ordinal: true``: a histogram of buckets keeps its shape), ``estimate``
  ranks them, largest first (the default otherwise);
* **top N**: the N largest estimates, shown in that order (default: every
  item of an ordinal domain of at most ``ALL_ITEMS_UP_TO`` items, else 10);
* **intervals**: 95% for each item alone, or 95% for all k items together
  (Bonferroni, :mod:`mss_protocol.significance`).  A view of N < k items
  picked by their estimates uses the simultaneous ones by default: the
  largest of k marginal intervals are the noise maxima of k draws (k = 4096,
  n = 40: the top 40 marginal CIs all excluded 0), the simultaneous ones hold
  for whichever items the estimates pick;
* **signal**: an item is marked when it is distinguishable from 0 under the
  view's intervals' kind (alone: one-sided 5%; together: its simultaneous
  interval above 0), and the caption says how many items noise alone would mark.
"""
from dataclasses import dataclass

import numpy as np

from mss_protocol.categories import Categories
from mss_protocol.estimate import Estimate

ORDERS = ("item", "estimate")
DEFAULT_TOP = 10
ALL_ITEMS_UP_TO = 64


@dataclass
class View:
    est: Estimate
    categories: Categories
    order: str
    top: int
    simultaneous: bool

    def shown(self):
        """Indices of the items shown, in display order: (top,)."""
        e = self.est.estimate
        pick = np.argsort(-e, kind="stable")[:self.top]
        return pick if self.order == "estimate" else np.sort(pick)

    def intervals(self):
        """(low, high), (k,) each: the view's intervals (simultaneous or marginal)."""
        if self.simultaneous:
            return self.est.intervals(simultaneous=True)
        return self.est.ci_low, self.est.ci_high

    def detected(self):
        """Boolean (k,): items distinguishable from 0 under the view's kind."""
        return self.est.detected(simultaneous=self.simultaneous)

    @property
    def interval_name(self):
        k = self.est.raw.size
        return f"95% simultaneous CI (all {k})" if self.simultaneous else "95% CI"

    def caption(self):
        """The lines a reader needs to trust the view: what the intervals are, how
        many items are signal, and how many noise alone would give."""
        k, sig = self.est.raw.size, self.est.significance()
        if not np.isfinite(self.est.stderr).any():
            return ["no reports: nothing is known about any item"]
        kind = (f"intervals: 95% for all {k} items together (Bonferroni, z = {sig['z_interval_simultaneous']:.2f})"
                if self.simultaneous else "intervals: 95% for each item alone (z = 1.96)")
        if self.simultaneous and self.top < k:
            kind += f": the {self.top} largest of {k} estimates are a selection, marginal intervals would not hold"
        return [kind,
                f"distinguishable from 0: {sig['detected_simultaneous']} items family-wise (simultaneous interval "
                f"above 0: noise alone marks any of the {k} with probability <= 2.5%); {sig['detected']} items one "
                f"at a time (one-sided 5% each: noise alone marks about {sig['expected_false']:.3g} of {k})"]

    def document(self):
        """The JSON fields of the view: ``k``, ``order``, ``top``, ``intervals``, ``shown``
        (item indices in display order), ``labels``, ``ordinal``, ``significance``."""
        return {"k": int(self.est.raw.size), "order": self.order, "top": self.top,
                "intervals": "simultaneous" if self.simultaneous else "marginal",
                "shown": [int(i) for i in self.shown()], **self.categories.to_dict(),
                "significance": self.est.significance()}


def make(est, categories=None, order=None, top=None, simultaneous=None):
    """The :class:`View` of ``est`` with the defaults of the module docstring for
    whatever is None; ``top`` is capped at k."""
    k = est.raw.size
    categories = categories or Categories(k)
    if order is None:
        order = "item" if categories.ordinal else "estimate"
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if top is None:
        top = k if order == "item" and k <= ALL_ITEMS_UP_TO else DEFAULT_TOP
    top = min(int(top), k)
    if top < 1:
        raise ValueError(f"top must be at least 1, got {top}")
    if simultaneous is None:
        simultaneous = top < k
    return View(est=est, categories=categories, order=order, top=top, simultaneous=bool(simultaneous))
