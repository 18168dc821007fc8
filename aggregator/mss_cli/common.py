"""What every command shares: the console, exit codes, errors and small helpers.

Exit codes: 0 ok, 1 privacy audit failed (``mss audit``), 2 usage error (click;
an --epsilon beyond ``privacy.MAX_EPSILON`` too), 3 data error (bad config or
input file, a store that cannot be opened or fails a write, plan impossible);
the message names what is wrong.
"""
import os
import sys

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from mss_protocol.privacy import epsilon_problem

console = Console(stderr=True)
AUDIT_FAILED = 1  # mss audit: a client exceeded its epsilon, or the broken control was not caught
DATA_ERROR = 3


def fail(msg, now=False):
    """Print ``msg`` as an error and exit with the data-error status; ``now``:
    without running finalisers (an SQLite store whose files turned immutable
    must not be closed, see ``SqliteStore.close``)."""
    console.print(f"[red]error:[/red] {msg}")
    if now:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(DATA_ERROR)
    sys.exit(DATA_ERROR)


class Epsilon(click.ParamType):
    """A privacy budget: positive, finite, at most ``privacy.MAX_EPSILON`` (the
    largest a 30-bit threshold delivers); anything else is a usage error that
    says why."""

    name = "float"

    def convert(self, value, param, ctx):
        try:
            eps = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if why := epsilon_problem(eps):
            self.fail(why, param, ctx)
        return eps


EPSILON = Epsilon()


def epsilon_list(ctx, param, value):
    """Comma-separated privacy budgets, each checked as :class:`Epsilon` checks one."""
    return [EPSILON.convert(v, param, ctx) for v in value.split(",") if v]


def csv_list(kind):
    def convert(ctx, param, value):
        try:
            return [kind(v) for v in value.split(",") if v]
        except ValueError:
            raise click.BadParameter(f"expected comma-separated {kind.__name__} values, got {value!r}")
    return convert


def top_table(title, truth, est, n):
    """The n most frequent true categories: truth, estimate and its 95% CI."""
    table = Table(title=title)
    for col in ("item", "true", "estimate", "95% CI"):
        table.add_column(col, justify="right")
    for i in np.argsort(-truth, kind="stable")[:n]:
        table.add_row(str(i), f"{truth[i]:.4f}", f"{est.estimate[i]:.4f}",
                      f"[{est.ci_low[i]:.4f}, {est.ci_high[i]:.4f}]")
    return table
