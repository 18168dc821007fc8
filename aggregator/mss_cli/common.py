"""What every command shares: the console, exit codes, errors and small helpers.

Exit codes: 0 ok, 1 privacy audit failed (``mss audit``), 2 usage error (click;
an --epsilon beyond ``privacy.MAX_EPSILON`` too), 3 data error (bad config or
input file, a store that cannot be opened or fails a write, plan impossible);
the message names what is wrong.
"""
import os
import sys
from contextlib import contextmanager

import click
import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mss_protocol.privacy import epsilon_problem

console = Console(stderr=True)
AUDIT_FAILED = 1  # mss audit: a client exceeded its epsilon, or the broken control was not caught
DATA_ERROR = 3


def fail(msg, now=False):
    """Print ``msg`` as an error and exit with the data-error status; ``now``:
    without running finalisers (an SQLite store whose files turned immutable
    must not be closed, see ``SqliteStore.close``)."""
    console.print(f"[red]error:[/red] {escape(str(msg))}", soft_wrap=True)  # one line, as written
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


TOPIC_LEVEL = "one MQTT topic level: 1 to 64 printable characters, no '/', '+' or '#'"


def checked(check):
    """A click callback running ``check(value, flag)`` on the value (each of a multiple
    option's), a ValueError being a usage error; None passes."""
    def callback(ctx, param, value):
        flag = param.opts[-1]
        try:
            if isinstance(value, tuple):
                return tuple(check(v, flag) for v in value)
            return value if value is None else check(value, flag)
        except ValueError as exc:  # click names the flag: not twice
            raise click.BadParameter(str(exc).removeprefix(f"{flag} "))
    return callback


def topic_level(value, flag):
    """A campaign or share-group name (:data:`TOPIC_LEVEL`), or ValueError naming ``flag``."""
    from mss_aggregator.collect.collectors import check_topic_level

    return check_topic_level(value, flag)


def output_file(ctx, param, value):
    """A file a command writes (a click callback): its folder must exist, checked before any
    work; a usage error naming the flag otherwise.  ``-`` (stdout) passes."""
    if value is not None and value != "-":
        folder = os.path.dirname(os.path.abspath(value))
        if not os.path.isdir(folder):
            raise click.BadParameter(f"no such folder {folder}")
    return value


@contextmanager
def writing(flag, path):
    """Writing ``path`` (given with ``flag``): an OSError is a data error naming both."""
    try:
        yield
    except OSError as exc:
        fail(f"{flag} {path}: cannot write it: {exc.strerror or exc}")


def broker_password_option(command):
    """--broker-password-file for a command that takes --broker (mss_aggregator.credentials)."""
    return click.option(
        "--broker-password-file", type=click.Path(exists=True, dir_okay=False), metavar="PATH",
        help="Read the broker password from this file (the --broker URL then names the user "
             "only); default: $MSS_BROKER_PASSWORD. A password in the URL is readable by every "
             "local user.")(command)


def broker_url(broker, password_file):
    """--broker with the password of --broker-password-file / $MSS_BROKER_PASSWORD filled in
    (a usage error if it is given twice, or without a user)."""
    from mss_aggregator.credentials import SecretError, broker_password

    try:
        return broker_password(broker, password_file)
    except SecretError as exc:
        raise click.UsageError(str(exc))


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
