"""``mss audit --learned``'s options, checks and table (the learned attacker on the metadata:
:mod:`mss_aggregator.privacy.learned`)."""
import click
from rich.table import Table

from mss_cli.common import FloatRange, fail


def options(f):
    """--learned, --public-signal, --public-follow, --learned-devices, --learned-days (the change model is
    mss audit's --change-every, shared with --longitudinal)."""
    for opt in reversed(_OPTIONS):
        f = opt(f)
    return f


_OPTIONS = [
    click.option("--learned", is_flag=True,
                 help="With --config: a classifier trained on simulated campaigns of the deployment, on what the "
                      "broker or network server sees (body changes, skipped epochs, arrival times, report sizes); "
                      "needs scikit-learn (pip install 'mss-iot[learned]'; docs/privacy.md section 3)."),
    click.option("--public-signal", "public_path", type=click.Path(exists=True, dir_okay=False),
                 help="--learned: a public signal the values follow (a neighbour's value, the weather): CSV rows "
                      "'epoch,value' or JSON [values], one category a campaign epoch from 0."),
    click.option("--public-follow", type=FloatRange(0, 1), default=0.8, show_default=True,
                 help="--learned with --public-signal: the chance a changing value takes the signal's."),
    click.option("--learned-devices", type=click.IntRange(100, 10**6), default=3000, show_default=True,
                 help="--learned: simulated devices (70% train the classifier, the rest score it)."),
    click.option("--learned-days", type=click.IntRange(1, 3650), default=30, show_default=True,
                 help="--learned: the simulated campaign's length in days."),
]


def campaign(cfg, public_path, follow, devices, days, change_every, transitions, seed):
    """--learned's checks (a config, scikit-learn, the public signal file) and its Campaign: values
    change every --change-every days on average (the Campaign's default without it)."""
    from mss_aggregator.privacy import learned

    if cfg is None:
        raise click.UsageError("--learned needs --config (the deployment whose metadata is attacked)")
    if transitions:
        raise click.BadParameter("--learned simulates uniform changes: give --change-every D, not a transitions file",
                                 param_hint="--transitions")
    try:
        learned.require_sklearn()
    except learned.LearnedUnavailable:
        raise click.UsageError(f"--learned needs scikit-learn: {learned.INSTALL_HINT}") from None
    public = None
    if public_path:
        try:
            public = learned.read_public_signal(public_path, cfg.k)
        except (OSError, ValueError) as exc:
            fail(f"--public-signal: {exc}")
    change = {} if change_every is None else {"change_days": change_every}
    return learned.Campaign(devices=devices, days=days, public=public, follow=follow, seed=seed, **change)


def print_learned(out, le):
    """The learned attacker's figures and its ablation."""
    c = le["campaign"]
    table = Table(title=f"learned attacker on the metadata: {c['devices']} simulated devices over {c['days']} days "
                        f"({c['epochs']} epochs), a value changing every {c['change_days']:g} days"
                        + (", a public signal" if c["public_signal"] else "") + f"; {le['target']}")
    for col in ("feature group left out", "success without it", "drop in success"):
        table.add_column(col, justify="right")
    for r in le["features"]:
        table.add_row(r["name"], f"{le['success'] - r['drop_in_success']:.3g}", f"{r['drop_in_success']:+.3g}")
    out.print(table)
    f = le["formal"]
    out.print(f"learned success {le['success']:.3g} [{le['ci'][0]:.3g}, {le['ci'][1]:.3g}] on {le['test_devices']} "
              f"held-out devices; formal (stable value, plan/audit) {f['success']:.3g}"
              + (" (exact)" if f["exact"] else "") + f"; eps-LDP ceiling at the draws spent {le['ceiling']:.3g}; "
              f"no information {le['no_information']:.3g}"
              + ("" if le["public_only"] is None else f"; the public signal alone {le['public_only']:.3g}"))
    if le["leaked"]:
        out.print(f"[red]the metadata leaks: learned success above the formal figure; leaked: {le['leaked']}[/red]")
    else:
        out.print("[green]nothing leaked beyond the formal figure (its interval reaches it)[/green]")
