"""The audit and bench PNGs read at a glance (issue 27): enough labelled ticks on a
log axis (a linear one over a narrow range), the ceiling a band under the protocols
so GRR on it stays visible (checked in the saved pixels), a panel that cannot show a
protocol saying so and why, one colour per longitudinal series with its intervals,
and the bench's standard errors and trial counts.  The figures are the real ones,
caught before plotting closes them; the data is the audit's and the bench's own."""
import re

import matplotlib.image as mpimg
import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.container import ErrorbarContainer

from mss_aggregator import plotting
from mss_aggregator.compare.bench import Grid, run_bench
from mss_aggregator.privacy import audit

K, EPS = 64, 2.0
PRIOR = np.full(K, 1 / K)
GRID = [0.5, 1, 2, 3, 4, 5]


@pytest.fixture
def figures(monkeypatch):
    """Every figure plotting closes, in order (still drawable)."""
    caught = []
    monkeypatch.setattr(plotting.plt, "close", caught.append)
    return caught


def _labels(axis):
    """The tick labels a reader sees on ``axis`` (inside its limits, non-empty)."""
    lo, hi = sorted(axis.get_view_interval())
    return [t.get_text() for t, v in zip(axis.get_majorticklabels(), axis.get_majorticklocs())
            if lo <= v <= hi and t.get_text()]


def _one_two_five(labels):
    """Each label a plain number 1, 2 or 5 times a power of ten."""
    for text in labels:
        v = float(text)
        assert min(abs(v / 10 ** np.floor(np.log10(v)) - m) for m in (1, 2, 5)) < 1e-9, labels


def _series(ax):
    """{label: Line2D} of the protocol lines (zorder above the bounds)."""
    return {line.get_label(): line for line in ax.get_lines() if line.get_zorder() == plotting.ON_TOP}


@pytest.fixture(scope="module")
def audit_data():
    names = ["mss", "ss", "grr", "olh", "hr"]
    sweep = audit.sweep(K, PRIOR, names, GRID)
    lon = audit.longitudinal(audit.Target(K, EPS, PRIOR), ["mss", "grr"], horizons=(1, 2, 5, 10, 20, 50), trials=40)
    return sweep, lon


def test_audit_plot_axes_ceiling_and_missing_protocol(audit_data, figures, tmp_path):
    sweep, lon = audit_data
    assert all(v is None for v in sweep["bayes"]["olh"])  # the case of the issue: OLH has no exact Bayes value
    plotting.plot_audit(sweep, tmp_path / "a.png", "t", lon)
    paper, bayes, repeated = figures[-1].axes[:3]
    for ax in (paper, bayes, repeated):
        assert ax.get_yscale() == "log"
        labels = _labels(ax.yaxis)
        assert len(labels) >= 4, labels  # was 10^-1 and 10^0 alone
        _one_two_five(labels)
    assert _labels(repeated.xaxis) == ["1", "2", "5", "10", "20", "50"]
    for ax in (paper, bayes):
        (ceiling,) = [line for line in ax.get_lines() if line.get_label() == "eps-LDP ceiling"]
        lines = _series(ax)
        assert "grr" in lines and all(ceiling.get_zorder() < line.get_zorder() for line in lines.values())
        assert ceiling.get_linewidth() > 3 * max(line.get_linewidth() for line in lines.values())  # a band
        assert len({line.get_color() for line in lines.values()}) == len(lines)
    # OLH: its closed form in the paper's-rule panel; the Bayes panel names it and says why
    assert "olh" in _series(paper) and "olh" not in _series(bayes)
    notes = [t.get_text() for t in bayes.texts if t.get_gid() == "missing-note"]
    assert len(notes) == 1 and notes[0].startswith("olh not shown") and "exact" in notes[0]
    assert "--protocols olh" in notes[0]
    assert not [t for t in paper.texts if t.get_gid() == "missing-note"]


def test_longitudinal_panel_colours_and_intervals(audit_data, figures, tmp_path):
    sweep, lon = audit_data
    plotting.plot_audit(sweep, tmp_path / "a.png", "t", lon)
    ax = figures[-1].axes[2]
    bars = {c.get_label(): c for c in ax.containers if isinstance(c, ErrorbarContainer)}
    series = dict(_series(ax), **{label: c.lines[0] for label, c in bars.items()})  # an errorbar's line: no label
    series.pop("_nolegend_")
    labels = {f"{r['protocol']} {r['mode']}" + (" (exact)" if r["exact"] else "") for r in lon["rows"]}
    assert set(series) == labels and len(labels) == 4
    assert len({to_rgb(line.get_color()) for line in series.values()}) == 4  # one colour a series
    simulated = [r for r in lon["rows"] if not r["exact"]]
    assert sorted(bars) == sorted(f"{r['protocol']} {r['mode']}" for r in simulated) and simulated
    for row in simulated:  # each whisker spans the row's Clopper-Pearson interval
        (segments,) = bars[f"{row['protocol']} {row['mode']}"].lines[2]
        spans = np.array([sorted(seg[:, 1]) for seg in segments.get_segments()])
        assert np.allclose(spans, np.sort(row["ci"], axis=1))
    assert str(lon["trials"]) in ax.get_title()


def test_grr_on_the_ceiling_is_visible_in_the_png(audit_data, figures, tmp_path):
    """GRR is optimal for a uniform prior: its markers sit on the ceiling, and the saved
    pixels there are GRR's colour, not the ceiling's grey."""
    sweep, _ = audit_data
    assert sweep["bayes"]["grr"] == pytest.approx(sweep["ceiling"])
    path = tmp_path / "a.png"
    plotting.plot_audit(sweep, path, "t")
    fig = figures[-1]
    png = mpimg.imread(path)[:, :, :3]
    scale = png.shape[0] / fig.bbox.height  # saved at another dpi than the figure's
    grr = _series(fig.axes[1])["grr"]
    want = np.array(to_rgb(grr.get_color()))
    for x, y in grr.get_xydata():
        px, py = fig.axes[1].transData.transform((x, y)) * scale
        row, col = int(round(png.shape[0] - py)), int(round(px))
        patch = png[row - 2:row + 3, col - 2:col + 3].reshape(-1, 3)
        assert np.abs(patch - want).max(axis=1).min() < 0.08, (x, y)


def test_narrow_range_is_linear_and_partial_gaps_are_named(figures, tmp_path):
    eps = [1, 1.5, 2]
    sweep = {"epsilons": eps, "ceiling": [0.3, 0.4, 0.5], "rero": [0.35, 0.5, 0.7], "no_information": 0.2,
             "paper_rule": {"grr": [0.3, 0.4, 0.5], "hr": [0.25, None, None]},
             "bayes": {"grr": [0.3, 0.4, 0.5], "hr": [0.25, 0.3, 0.35]}}
    plotting.plot_audit(sweep, tmp_path / "a.png", "t")
    paper, bayes = figures[-1].axes[:2]
    assert paper.get_yscale() == "linear" and len(_labels(paper.yaxis)) >= 4
    (note,) = [t.get_text() for t in paper.texts if t.get_gid() == "missing-note"]
    assert note.startswith("hr not shown at epsilon 1.5, 2:")
    assert not [t for t in bayes.texts if t.get_gid() == "missing-note"]


def test_bench_plots_carry_errors_and_trial_counts(figures, tmp_path):
    rows = run_bench(Grid(ks=(16,), epsilons=(1.0, 3.0), dists=("zipf:1.1",), names=("grr", "ss")), 400, 3,
                     client_reports=2)
    paths = plotting.plot_bench(rows, str(tmp_path / "b"))
    assert [p.rsplit("/", 1)[1] for p in paths] == ["b-mse-k16-zipf1.1.png", "b-decode-k16.png", "b-bits-k16.png"]
    mse, decode, bits = (fig.axes[0] for fig in figures[-3:])
    assert "3 trials" in mse.get_title() and "standard error" in mse.get_title()
    assert "median of 3 trials" in decode.get_title()
    bars = {c.get_label(): c for c in mse.containers if isinstance(c, ErrorbarContainer)}
    assert sorted(bars) == ["grr", "ss"]
    for name, container in bars.items():
        (segments,) = container.lines[2]
        mine = sorted((r for r in rows if r["protocol"] == name), key=lambda r: r["epsilon"])
        for seg, r in zip(segments.get_segments(), mine):  # the whisker's top: mse + mse_std / sqrt(trials)
            assert seg[:, 1].max() == pytest.approx(r["mse"] + r["mse_std"] / np.sqrt(3))
    assert len({to_rgb(c.lines[0].get_color()) for c in bars.values()}) == 2
    for ax in (mse, decode, bits):
        labels = _labels(ax.yaxis)
        assert len(labels) >= 2 and all(re.fullmatch(r"[0-9.e+-]+", t) for t in labels), labels
