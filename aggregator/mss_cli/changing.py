"""The change-model options of ``mss plan`` and ``mss audit --longitudinal`` and their tables
(a value that changes: :mod:`mss_aggregator.privacy.changing`)."""
import click
from rich.table import Table

from mss_aggregator.privacy.changing import Change, load_matrix
from mss_cli.common import FloatRange


def options(f):
    """--change-every D and --transitions FILE."""
    f = click.option("--transitions", "transitions", type=click.Path(exists=True, dir_okay=False), default=None,
                     metavar="FILE",
                     help="A value that changes on this chain: a k x k row-stochastic matrix (JSON rows, or CSV), "
                          "P[i][j] the probability of moving from category i to j between two reports; the "
                          "privacy over time then adds the attacker on the current value, the change-time leak, "
                          "the budget's skip rate and its bias (docs/privacy.md, values that change).")(f)
    f = click.option("--change-every", "change_every", type=FloatRange(min=1e-6, max=1e6), default=None,
                     metavar="D",
                     help="A value that changes on average every D days, to a uniformly chosen other category "
                          "(as --transitions, for that chain).")(f)
    return f


def change_model(change_every, transitions, k):
    """The :class:`Change` of the two options (None without either); click errors naming the flag."""
    if change_every is not None and transitions is not None:
        raise click.BadParameter("give --change-every or --transitions, not both", param_hint="--transitions")
    if change_every is not None:
        return Change(every_days=float(change_every), label=f"changes every {change_every:g} days on average")
    if transitions is not None:
        try:
            m = load_matrix(transitions, k)
        except (OSError, ValueError) as exc:
            raise click.BadParameter(f"{transitions}: {exc}", param_hint="--transitions")
        return Change(matrix=tuple(tuple(float(v) for v in row) for row in m), label=f"transitions {transitions}")
    return None


def _cell(c):
    lo, hi = c["ci"]
    return f"{c['success']:.3g}" + ("†" if c["capped"] else "") + f" [{lo:.3g}, {hi:.3g}]"


COLOUR = {"weak": "red", "moderate": "yellow", "strong": "green"}


def print_changing(out, ot, labels):
    """The table of a changing value (``privacy_over_time`` with a change model)."""
    ch = ot["change"]
    table = Table(title=f"a value that changes ({ch['label']}; stationary start): the attacker names the current "
                        f"value; change times dated by a report that differs from the last")
    for col in ("reporting", "days", "attacker [95% CI]", "ceiling", "verdict", "changes dated", "false dates",
                "advantage", "skip rate", "bias (max |.|)"):
        table.add_column(col, justify="left" if col == "reporting" else "right", no_wrap=col == "reporting")
    for mode in ot["modes"]:
        this = mode == ot["deployment"]
        for i, h in enumerate(ot["horizons"]):
            c = h[mode]["changing"]
            v = c["verdict"]
            adv = c["change_time_advantage"]
            bias = max(abs(b) for b in c["bias"])
            half = max(c["bias_ci"])
            table.add_row((labels[mode] + (" *" if this else "")) if i == 0 else "", str(h["days"]),
                          ("≥ " if c["window"] else "") + _cell(c) + ("‡" if c.get("view") == "draws" else ""),
                          f"{c['ceiling']:.3g}" + ("" if c["ceiling_holds"] else " (ε part)"),
                          f"[{COLOUR[v]}]{v}[/{COLOUR[v]}]",
                          "-" if c["change_time_tpr"] is None else f"{c['change_time_tpr']:.3f}",
                          f"{c['change_time_fpr']:.3f}", "-" if adv is None else f"{adv:.3f}",
                          f"{c['skip_rate']:.3g}", f"{bias:.2g} ± {half:.2g}",
                          style="bold" if this else None, end_section=i == len(ot["horizons"]) - 1)
    out.print(table)
    out.print(f"attacker: MAP of the current value under the known chain, simulated on {ch['trials']} devices "
              f"(95% Clopper-Pearson), ≥: fresh filter on its last reports only (a lower bound); ceiling: the "
              f"epsilon-LDP ceiling at the loss spent (memoized: mean over devices of its fresh draws); verdict as "
              f"for a stable value, against {ch['no_information']:.3g} (the chain's stationary law); advantage: "
              f"dated - false dates (0: the reports do not date changes); skip rate and bias (share of reports minus "
              f"share of devices per category, ± 95%) over {ch['devices']} devices and the epochs up to the horizon "
              "(docs/privacy.md, values that change)", highlight=False)
    if any(h[m]["changing"].get("view") == "draws" for h in ot["horizons"] for m in ot["modes"]):
        out.print("‡ with the instantaneous layer, the attacker on the permanent draws the reports are a "
                  "post-processing of (it sees more than the reports show)", highlight=False)
    memo = [h[m]["changing"] for h in ot["horizons"] for m in ot["modes"] if m != "fresh"]
    if any((c["change_time_advantage"] or 0) > 0.5 for c in memo):
        out.print("[yellow]change times are visible under memoization: a new body (or a skip) marks the epoch "
                  "the value changed; epsilon bounds nothing about it[/yellow]", highlight=False)
    for h in ot["horizons"]:
        for mode in ot["modes"]:
            c = h[mode]["changing"]
            if c["conflict"]:
                out.print(f"[red]changing, {mode}, {h['days']} days: the simulated success {c['measured']:.3f} is "
                          f"above its ceiling {c['bound']:.4g} beyond sampling noise (99.9%)[/red]", highlight=False)


def print_hiding(out, hid):
    """The options that hide change times, compared (``mss plan``'s ``hiding_options``)."""
    table = Table(title=f"what hides the change times, at n={hid['n']} over {hid['campaign_days']} days "
                        f"(a value: {hid['change']})")
    for col in ("option", "attacker [95% CI]", "change-time advantage", "detectable frequency", "serves n?"):
        table.add_column(col, justify="left" if col in ("option", "serves n?") else "right")
    for o in hid["options"]:
        att = "-" if o.get("success") is None else _cell(o)
        adv = "-" if o.get("change_time_advantage") is None else f"{o['change_time_advantage']:.3f}"
        det = "-" if o.get("detectable_frequency") is None else f"{o['detectable_frequency']:.3g}"
        serves = "yes" if o["serves"] else f"[red]no[/red]: {o['why']}"
        table.add_row(o["option"], att, adv, det, serves, style="bold" if o.get("this") else None)
    out.print(table)
    out.print(f"serves n: buildable, and its detectable frequency at n={hid['n']} at most "
              f"{hid['threshold']:.3g} (the larger of 1/k and this plan's, within --mse-slack); attacker: "
              f"the current value at day {hid['campaign_days']}", highlight=False)
    s = hid["suggested"]
    out.print(("suggested: " + s) if s else "[yellow]no option that hides the change times serves this n: they stay "
              "visible under memoization (accept it in writing, docs/privacy.md section 6)[/yellow]", highlight=False)
