"""PNG plots of estimates against the truth (matplotlib, no display needed)."""
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_estimates(view, path, title, truth=None):
    """Left: the items of ``view`` (:class:`mss_aggregator.view.View`: its order,
    top N, names and intervals), estimate +- the view's interval, filled where
    the item is distinguishable from 0, hollow where not, the caption below
    (and the truth as bars when known).  Right, when the truth is known:
    every item, estimate against truth."""
    est = view.est
    order = view.shown() if truth is None else np.argsort(-truth, kind="stable")[:view.top]  # truth: its top
    if truth is None:
        fig, ax1 = plt.subplots(figsize=(9, 5.2))
    else:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"width_ratios": [2, 1]})
    x = np.arange(order.size)
    if truth is not None:
        ax1.bar(x, truth[order], color="#c7d7ea", label="true frequency")
    lo, hi = view.intervals()
    err = np.clip(np.vstack([est.estimate[order] - lo[order], hi[order] - est.estimate[order]]), 0, None)
    err[~np.isfinite(err)] = 0  # no reports: no whisker
    signal = view.detected()[order]
    for mask, face, label in ((signal, "#b2182b", "distinguishable from 0"), (~signal, "white", "not distinguishable from 0")):
        if mask.any():
            ax1.errorbar(x[mask], est.estimate[order][mask], yerr=err[:, mask], fmt="o", ms=4, mfc=face,
                         color="#b2182b", ecolor="#b2182b", capsize=2, label=f"estimate ± {view.interval_name}: "
                         + label)
    ax1.axhline(0, color="grey", lw=0.6)
    names = [view.categories.name(i) for i in order]
    ax1.set_xticks(x, names, rotation=90 if max(map(len, names)) > 3 or order.size > 20 else 0, fontsize=7)
    how = "in item order" if view.order == "item" else "largest first"
    what = f"all {order.size} items" if order.size == est.raw.size else f"the {order.size} largest estimates"
    if truth is not None:
        what, how = f"the {order.size} most frequent", "largest first"
    ax1.set_xlabel(f"item ({what}, {how})")
    ax1.set_ylabel("frequency")
    ax1.legend(fontsize=7)
    ax1.set_title(title, fontsize=10)
    caption = [part for line in view.caption() for part in textwrap.wrap(line, 170 if truth is not None else 120)]
    fig.text(0.01, 0.005, "\n".join(caption), fontsize=6.5, va="bottom")
    if truth is not None:
        lim = [min(truth.min(), est.estimate.min()), max(truth.max(), est.estimate.max())]
        ax2.plot(lim, lim, color="grey", lw=0.8)
        ax2.scatter(truth, est.estimate, s=4, alpha=0.5)
        ax2.set_xlabel("true frequency")
        ax2.set_ylabel("estimate")
        ax2.set_title(f"all {truth.size} items")
    fig.tight_layout(rect=(0, 0.025 * len(caption), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_bench(rows, prefix):
    """PNG files ``<prefix>-{mse,decode,bits}-k<k>[-<dist>].png``; returns their paths."""
    paths = []
    ks = sorted({r["k"] for r in rows})
    names = list(dict.fromkeys(r["protocol"] for r in rows))

    def series(sel, key):
        for name in names:
            pts = sorted((r["epsilon"], r[key]) for r in sel if r["protocol"] == name)
            if pts:
                yield name, [p[0] for p in pts], [p[1] for p in pts]

    def save(fig, ax, title, ylabel, path):
        ax.set_xlabel("epsilon")
        ax.set_ylabel(ylabel)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    for k in ks:
        for dist in sorted({r["dist"] for r in rows if r["k"] == k}):
            sel = [r for r in rows if r["k"] == k and r["dist"] == dist]
            fig, ax = plt.subplots(figsize=(6.4, 4.2))
            for name, x, y in series(sel, "mse"):
                ax.plot(x, y, marker="o", label=name)
            save(fig, ax, f"MSE per item, k={k}, {dist}, n={sel[0]['n']}", "MSE",
                 f"{prefix}-mse-k{k}-{dist.replace(':', '')}.png")
        sel = [r for r in rows if r["k"] == k and r["dist"] == rows[0]["dist"]]
        for key, label in (("decode_seconds", "decode time (s, median)"), ("bits_max", "bits per report")):
            fig, ax = plt.subplots(figsize=(6.4, 4.2))
            for name, x, y in series(sel, key):
                ax.plot(x, y, marker="o", label=name)
            save(fig, ax, f"{label}, k={k}", label, f"{prefix}-{key.split('_')[0]}-k{k}.png")
    return paths


def _success_axes(ax, xlabel, title):
    """Labels, title and legend of a reconstruction-success panel."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel("P[exact value recovered]")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)


def plot_audit(sweep, path, title, longitudinal=None):
    """Reconstruction success vs epsilon for the paper's rule and the Bayes-optimal
    attacker, with the eps-LDP ceiling, the ReRo bound and the no-information
    line; with ``longitudinal``, a third panel of success vs reports T."""
    panels = 3 if longitudinal else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.4))
    eps = sweep["epsilons"]
    colour = {name: f"C{i}" for i, name in enumerate(sweep["bayes"])}  # one colour per protocol
    for ax, key, label in ((axes[0], "paper_rule", "paper's rule"), (axes[1], "bayes", "Bayes-optimal")):
        for name, ys in sweep[key].items():
            pts = [(e, y) for e, y in zip(eps, ys) if y is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", ms=3.5, color=colour[name], label=name)
        ax.plot(eps, sweep["ceiling"], color="black", lw=2, label="eps-LDP ceiling")
        ax.plot(eps, sweep["rero"], color="black", ls="-.", lw=1, label="ReRo bound")
        ax.axhline(sweep["no_information"], color="grey", ls=":", label="no information")
        ax.set_yscale("log")
        _success_axes(ax, "epsilon", f"{label}: {title}")
    if longitudinal:
        ax = axes[2]
        t = longitudinal["horizons"]
        for row in longitudinal["rows"]:
            ax.plot(t, row["success"], marker="o", ms=3, ls="-" if row["mode"] == "fresh" else "--",
                    color=colour.get(row["protocol"]), label=f"{row['protocol']} {row['mode']}")
        ax.plot(t, longitudinal["ceiling"], color="black", lw=2, label="ceiling at T eps")
        ax.axhline(longitudinal["memoize_ceiling"], color="black", ls=":", label="ceiling at eps")
        ax.set_xscale("log")
        _success_axes(ax, "reports T of one value", f"repeated reports ({longitudinal['trials']} devices)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
