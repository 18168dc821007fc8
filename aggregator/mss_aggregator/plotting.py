"""PNG plots of estimates against the truth (matplotlib, no display needed)."""
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import ticker  # noqa: E402
from mss_protocol.channel import EXACT_CELLS  # noqa: E402


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


MARKERS = "osv^DPX*<>"
CEILING = {"color": "#b8b8b8", "lw": 9, "alpha": 0.6, "solid_capstyle": "round", "zorder": 1}  # a band under the lines
ON_TOP = 3  # protocol lines and markers above the ceiling band and the bounds


def _styles(names):
    """{name: (colour, marker)}: one colour (tab10 order) and marker per protocol, the same in every panel."""
    return {name: (f"C{i % 10}", MARKERS[i % len(MARKERS)]) for i, name in enumerate(names)}


def _readable_axis(axis, values):
    """Ticks a person reads: over a decade or more a log scale labelled at 1, 2 and 5 times
    each power of ten (1 alone beyond three decades) in plain decimals; a narrower range
    linear (a log axis would label one tick or none)."""
    values = [v for v in values if v is not None and v > 0]
    if not values or max(values) / min(values) < 10:
        return
    getattr(axis.axes, f"set_{axis.axis_name}scale")("log")
    decades = np.log10(max(values) / min(values))
    axis.set_major_locator(ticker.LogLocator(base=10, subs=(1, 2, 5) if decades <= 3 else (1,)))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(ticker.NullFormatter())


def plot_bench(rows, prefix):
    """PNG files ``<prefix>-{mse,decode,bits}-k<k>[-<dist>].png``; returns their paths.
    MSE: the mean over the trials with +- one standard error of that mean
    (mse_std / sqrt(trials)); decode time: the median over the trials (the rows carry
    no spread of it); bits per report: exact."""
    paths = []
    ks = sorted({r["k"] for r in rows})
    styles = _styles(list(dict.fromkeys(r["protocol"] for r in rows)))

    def series(sel, key):
        for name, (colour, marker) in styles.items():
            pts = sorted((r["epsilon"], r[key], r) for r in sel if r["protocol"] == name)
            if pts:
                yield name, colour, marker, [p[0] for p in pts], np.array([p[1] for p in pts]), [p[2] for p in pts]

    def save(fig, ax, title, ylabel, path, values):
        ax.set_xlabel("epsilon")
        ax.set_ylabel(ylabel)
        _readable_axis(ax.yaxis, values)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the lines, never on them
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    for k in ks:
        for dist in sorted({r["dist"] for r in rows if r["k"] == k}):
            sel = [r for r in rows if r["k"] == k and r["dist"] == dist]
            trials = sorted({r["trials"] for r in sel})
            fig, ax = plt.subplots(figsize=(7.4, 4.2))
            values = []
            for name, colour, marker, x, y, pts in series(sel, "mse"):
                se = np.array([r["mse_std"] / np.sqrt(r["trials"]) for r in pts])
                low = np.minimum(se, y * 0.999)  # a log axis: the whisker stops above 0
                ax.errorbar(x, y, yerr=[low, se], marker=marker, ms=4, capsize=3, color=colour, label=name)
                values += list(y - low) + list(y + se)
            save(fig=fig, ax=ax, title=f"MSE per item, k={k}, {dist}, n={sel[0]['n']}\n"
                 f"mean of {'/'.join(map(str, trials))} trials ± 1 standard error", ylabel="MSE",
                 path=f"{prefix}-mse-k{k}-{dist.replace(':', '')}.png", values=values)
        sel = [r for r in rows if r["k"] == k and r["dist"] == rows[0]["dist"]]
        trials = "/".join(map(str, sorted({r["trials"] for r in sel})))
        for key, label, how in (("decode_seconds", "decode time (s)", f"median of {trials} trials"),
                                ("bits_max", "bits per report", "the largest report, exact")):
            fig, ax = plt.subplots(figsize=(7.4, 4.2))
            values = []
            for name, colour, marker, x, y, _ in series(sel, key):
                ax.plot(x, y, marker=marker, ms=4, color=colour, label=name)
                values += list(y)
            save(fig=fig, ax=ax, title=f"{label}, k={k}: {how}", ylabel=label,
                 path=f"{prefix}-{key.split('_')[0]}-k{k}.png", values=values)
    return paths


def _missing_note(ax, name_values, eps, why):
    """Say under the panel which protocols (or which of their epsilons) it cannot show, and why."""
    lines = []
    for name, ys in name_values.items():
        gone = [e for e, y in zip(eps, ys) if y is None]
        if len(gone) == len(eps):
            lines.append(f"{name} not shown: {why(name)}")
        elif gone:
            lines.append(f"{name} not shown at epsilon {', '.join(f'{e:g}' for e in gone)}: {why(name)}")
    if lines:
        ax.text(0.5, -0.16, "\n".join(textwrap.fill(line, 70) for line in lines), transform=ax.transAxes,
                ha="center", va="top", fontsize=7.5, color="#7a1f1f", gid="missing-note")


def _success_axes(ax, xlabel, title, values):
    """Labels, title and the readable y axis of a reconstruction-success panel."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel("P[exact value recovered]")
    ax.set_title(title, fontsize=9)
    _readable_axis(ax.yaxis, values)


def plot_audit(sweep, path, title, longitudinal=None):
    """Reconstruction success vs epsilon for the paper's rule and the Bayes-optimal
    attacker, with the eps-LDP ceiling (a grey band under the protocols: GRR, optimal
    for a uniform prior, lies on it), the ReRo bound and the no-information line, and a
    note naming any protocol a panel cannot show; with ``longitudinal``, a third panel
    of success vs reports T, one colour per protocol and mode, with the 95%
    Clopper-Pearson intervals of its simulated devices."""
    fig = plt.figure(figsize=(12 + (5.4 if longitudinal else 0), 4.8), layout="constrained")
    single, repeated = fig.subfigures(1, 2, width_ratios=[12, 5.4]) if longitudinal else (fig, None)
    axes = single.subplots(1, 2)  # the two single-report panels share one key, on their right
    eps = sweep["epsilons"]
    styles = _styles(list(sweep["bayes"]))
    cells = f"2^{EXACT_CELLS.bit_length() - 1}"
    why = {"paper_rule": lambda name: f"no exact value (outputs × k above the {cells} enumerated) "
                                      "and no published closed form",
           "bayes": lambda name: f"no exact value, its outputs × k exceed the {cells} cells enumerated; "
                                 f"measure it: mss audit --protocols {name} --trials N"}
    for ax, key, label in ((axes[0], "paper_rule", "paper's rule"), (axes[1], "bayes", "Bayes-optimal")):
        ax.plot(eps, sweep["ceiling"], label="eps-LDP ceiling", **CEILING)
        ax.plot(eps, sweep["rero"], color="black", ls="-.", lw=1, zorder=2, label="ReRo bound")
        ax.axhline(sweep["no_information"], color="grey", ls=":", zorder=2, label="no information")
        values = sweep["ceiling"] + sweep["rero"] + [sweep["no_information"]]
        for name, ys in sweep[key].items():
            pts = [(e, y) for e, y in zip(eps, ys) if y is not None]
            if pts:
                colour, marker = styles[name]
                ax.plot(*zip(*pts), marker=marker, ms=4.5, lw=1.4, color=colour, zorder=ON_TOP, label=name)
                values += [y for _, y in pts]
        _missing_note(ax, sweep[key], eps, why[key])
        _success_axes(ax, "epsilon", f"{label}: {title}", values)
    handles = {h.get_label(): h for ax in axes[:2] for h in ax.get_legend_handles_labels()[0]}  # one key for both
    single.legend(handles.values(), handles.keys(), fontsize=7, loc="outside right upper")
    if longitudinal:
        _longitudinal(repeated.subplots(), longitudinal, list(sweep["bayes"]))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _longitudinal(ax, lon, names):
    """Success after T reports: fresh solid, memoized dashed, each series its own colour
    (tab20: the protocol's colour of the other panels for fresh, its light pair for
    memoize) and its 95% Clopper-Pearson interval over lon["trials"] devices, or
    marked exact."""
    t = lon["horizons"]
    names = names + [r["protocol"] for r in lon["rows"] if r["protocol"] not in names]
    pairs = plt.get_cmap("tab20").colors
    ax.plot(t, lon["ceiling"], label="ceiling at T eps", **CEILING)
    ax.axhline(lon["memoize_ceiling"], color="black", ls=":", zorder=2, label="ceiling at eps")
    values = list(lon["ceiling"])
    for row in lon["rows"]:
        i = names.index(row["protocol"])
        memo = row["mode"] != "fresh"
        style = {"color": pairs[(2 * i + memo) % 20], "ls": "--" if memo else "-", "marker": MARKERS[i % len(MARKERS)],
                 "ms": 4, "zorder": ON_TOP}
        label = f"{row['protocol']} {row['mode']}"
        if row.get("exact"):
            ax.plot(t, row["success"], label=f"{label} (exact)", **style)
        else:
            ci = np.array(row["ci"], dtype=float).T
            y = np.array(row["success"], dtype=float)
            # y is at most its exact ceiling, the interval as measured (docs/privacy.md section 3): a capped
            # point may lie below the interval's low end
            ax.errorbar(t, y, yerr=[np.clip(y - ci[0], 0, None), np.clip(ci[1] - y, 0, None)], capsize=2,
                        label=label, **style)
            values += list(ci[0]) + list(ci[1])
        values += list(row["success"])
    _readable_axis(ax.xaxis, t)
    _success_axes(ax, "reports T of one value", f"repeated reports: {lon['trials']} devices a series, 95% CI",
                  values)
    ax.legend(fontsize=7)
