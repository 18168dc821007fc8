"""PNG plots of estimates against the truth (matplotlib, no display needed)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_estimates(truth, est, path, title, top=40):
    """Left: the ``top`` most frequent items, estimate +- 95% CI (and the truth
    as bars when known).  Right, when the truth is known: every item,
    estimate against truth."""
    if truth is None:
        order = np.argsort(-est.estimate, kind="stable")[:top]
        fig, ax1 = plt.subplots(figsize=(9, 4.8))
    else:
        order = np.argsort(-truth, kind="stable")[:top]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [2, 1]})
    x = np.arange(order.size)
    if truth is not None:
        ax1.bar(x, truth[order], color="#c7d7ea", label="true frequency")
    err = np.vstack([est.estimate[order] - est.ci_low[order], est.ci_high[order] - est.estimate[order]])
    ax1.errorbar(x, est.estimate[order], yerr=np.clip(err, 0, None), fmt="o", ms=3.5,
                 color="#b2182b", ecolor="#b2182b", capsize=2, label="estimate ± 95% CI")
    ax1.set_xticks(x, [str(i) for i in order], rotation=90, fontsize=7)
    ax1.set_xlabel(f"item (top {order.size} by {'estimated' if truth is None else 'true'} frequency)")
    ax1.set_ylabel("frequency")
    ax1.legend()
    ax1.set_title(title)
    if truth is None:
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return
    lim = [min(truth.min(), est.estimate.min()), max(truth.max(), est.estimate.max())]
    ax2.plot(lim, lim, color="grey", lw=0.8)
    ax2.scatter(truth, est.estimate, s=4, alpha=0.5)
    ax2.set_xlabel("true frequency")
    ax2.set_ylabel("estimate")
    ax2.set_title(f"all {truth.size} items")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
