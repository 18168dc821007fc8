"""What every command shares: the console, exit codes, errors and small helpers.

Exit codes: 0 ok, 1 privacy audit failed (``mss audit``), 2 usage error (click;
an --epsilon outside ``privacy.MIN_PLAN_EPSILON`` to ``MAX_EPSILON`` too), 3 data error (bad config or
input file, a store that cannot be opened or fails a write, plan impossible);
the message names what is wrong, in one style: ``error: ...`` on one line
(:func:`fail` for data errors, :class:`Group` for click's usage errors, which add
a ``Try 'mss CMD -h' for help.`` line).
"""
import math
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager

import click
import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mss_protocol.integrity import Compromised
from mss_protocol.privacy import MAX_EPSILON, MIN_PLAN_EPSILON, plan_epsilon_problem

AUDIT_FAILED = 1  # mss audit: a client exceeded its epsilon, or the broken control was not caught
DATA_ERROR = 3
PIPED_WIDTH = 240  # a table's widest, piped or redirected (rich would squeeze it into 80 columns)
HELP = {"help_option_names": ["-h", "--help"], "max_content_width": 120}  # the group's; commands inherit it


def make_console(stderr=False):
    """A rich console on stdout (or stderr).  On a terminal, the terminal's width; piped or
    redirected, lines are never wrapped and tables get :data:`PIPED_WIDTH` columns (rich's 80
    would wrap titles and notes), unless $COLUMNS says otherwise."""
    plain = Console(stderr=stderr)
    if plain.is_terminal or "COLUMNS" in os.environ:
        return plain
    return Console(stderr=stderr, width=PIPED_WIDTH, soft_wrap=True)


console = make_console(stderr=True)


def error_line(msg):
    """``error: msg`` on stderr, on one line whatever its length."""
    console.print(f"[red]error:[/red] {escape(str(msg))}", soft_wrap=True, highlight=False)


# What the library's store, queue and dashboard errors ask the caller to do (mss_aggregator.remedies.REMEDIES),
# as this command line's flags say it
REMEDY_FLAGS = {
    "another-store": "use another --store",
    "recorded-campaign": "give --campaign {recorded} (or none: the recorded one is used), or use another --store",
    "another-queue": "use another --queue",
    "older-queue": "let that version forward them, or use another --queue",
    "token-needed": "give --http-token (or --http-token-file, or MSS_HTTP_TOKEN), or bind to 127.0.0.1",
}


def flag_message(exc):
    """The message of a library error, its remedy (if it says one) said with this command line's flags."""
    remedy = getattr(exc, "remedy", None)
    return f"{exc.detail}; {REMEDY_FLAGS[remedy].format(**exc.values)}" if remedy else str(exc)


def fail(msg, now=False):
    """Print ``msg`` as an error and exit with the data-error status; ``now``:
    without running finalisers (an SQLite store whose files turned immutable
    must not be closed, see ``SqliteStore.close``)."""
    error_line(msg)
    if now:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(DATA_ERROR)
    sys.exit(DATA_ERROR)


class OneLineError(click.UsageError):
    """A click error (usage: exit 2) shown as :func:`fail` shows a data error, ``error: ...``
    naming the flag, then one hint line, instead of click's usage block and ``Error:``."""

    def __init__(self, exc):
        super().__init__(exc.format_message(), getattr(exc, "ctx", None))
        self.exit_code = exc.exit_code

    def show(self, file=None):
        error_line(self.message)
        if self.ctx is not None:
            click.echo(f"Try '{self.ctx.command_path} -h' for help.", err=True)


class Group(click.Group):
    """The ``mss`` group: every click error of the group or of a command, one-line (:class:`OneLineError`);
    the full first sentence of each command's help in ``mss -h``, wrapped rather than cut."""

    # already one line, or click's help for a bare group (click >= 8.2 raises it as a usage error)
    SHOWN = (OneLineError, getattr(click.exceptions, "NoArgsIsHelpError", OneLineError))

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except self.SHOWN:
            raise
        except click.ClickException as exc:
            raise OneLineError(exc) from None

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except self.SHOWN:
            raise
        except click.ClickException as exc:
            raise OneLineError(exc) from None

    def format_commands(self, ctx, formatter):
        rows = [(name, cmd.get_short_help_str(limit=1000)) for name in self.list_commands(ctx)
                if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@contextmanager
def progress(what, total=None):
    """Progress of an operation that may take a while; yields ``step()``, to call after each of
    ``total`` steps (None: no steps, only the time).  On a terminal a rich bar (spinner) on
    stderr, gone when done; otherwise, from 2 s on, one plain line per step on stderr (at most
    one a second; without steps one every 5 s), and a last line with the time taken."""
    if console.is_terminal:
        from rich.progress import Progress

        with Progress(console=console, transient=True) as bar:
            task = bar.add_task(what, total=total)
            yield lambda: bar.advance(task)
        return
    done, stop, start = [0], threading.Event(), time.monotonic()
    said = []  # the step counts of the lines printed

    def line(end=""):
        elapsed = time.monotonic() - start
        count = f" {done[0]}/{total}" if total else ""
        console.print(f"{what}:{count} {elapsed:.0f} s{end}", soft_wrap=True, highlight=False, markup=False)
        said.append(done[0])

    def watch():
        if stop.wait(2):
            return
        while True:
            if not said or done[0] != said[-1] or total is None:
                line()
            if stop.wait(1 if total else 5):
                return

    watcher = threading.Thread(target=watch, name="progress", daemon=True)
    watcher.start()
    try:
        yield lambda: done.__setitem__(0, done[0] + 1)
    finally:
        stop.set()
        watcher.join()
    if said:
        line(", done")


class FloatRange(click.FloatRange):
    """click.FloatRange refusing nan too: every comparison with nan is false, so click's lets it
    through whatever the bounds.  Every float option of ``mss`` is one (tests/test_cli_hostile.py
    reads the bounds)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


SEED = click.IntRange(0, 2**32 - 1)  # any seed numpy and the planner take; 32 bits is every seed wanted
# Upper bounds of the options whose memory or time follow from them (tests/test_cli_hostile.py: every numeric
# option has both bounds)
MAX_SIMULATED = 10**8  # simulated devices a run holds: mss simulate --n 10**7 takes 140 MB and 6 s
MAX_BITS = 1 << 20  # a report body's bits, far beyond any link (LoRaWAN's 242 bytes, an MQTT report's 2 KiB)
YEAR_S = 365 * 86400  # a report period's longest


class Epsilon(FloatRange):
    """A privacy budget: finite, from ``privacy.MIN_PLAN_EPSILON`` (the least the planner
    plans for) to ``privacy.MAX_EPSILON`` (the largest a 30-bit threshold delivers);
    anything else is a usage error that says why."""

    name = "float"

    def __init__(self):
        super().__init__(MIN_PLAN_EPSILON, MAX_EPSILON)

    def convert(self, value, param, ctx):
        try:
            eps = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if why := plan_epsilon_problem(eps):
            self.fail(why, param, ctx)
        return eps

    def _describe_range(self):  # as -h shows it
        return f"{MIN_PLAN_EPSILON}<=x<={MAX_EPSILON:.4f}"


EPSILON = Epsilon()


class NumberList(click.ParamType):
    """Comma-separated numbers, at least one, each checked by ``item`` (a click number type,
    e.g. :data:`EPSILON`); a bad one is a usage error naming the flag."""

    name = "list"

    def __init__(self, item):
        self.item = item

    def convert(self, value, param, ctx):
        if isinstance(value, list):  # a default already converted
            return value
        items = [v for v in str(value).split(",") if v.strip()]
        if not items:
            self.fail(f"{value!r}: give at least one value", param, ctx)
        return [self.item.convert(v.strip(), param, ctx) for v in items]


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


# When a command takes --tls-ca (tls_options' ``ca_rule``): the collectors, the forwarder and the downlink
# sender take it as "TLS" (mqtts:// alone checks against the system's CAs); a device's TLS needs its CA file
# (device.mqtt.ca), so mss fleet needs --tls-ca exactly with mqtts:// (the command checks that)
TLS_CA_RULES = {
    "implies-tls": "implies TLS (mqtts:// without it: the system's CAs)",
    "with-mqtts": "required by an mqtts:// --broker, refused with mqtt://",
}


def tls_options(purpose, client_cert=True, ca_rule="implies-tls"):
    """--tls-ca (and, with ``client_cert``, --tls-cert and --tls-key) for a command that connects to
    --broker: one declaration and one help each, ``purpose`` naming what the CA is checked on
    (e.g. "the --broker connection"), ``ca_rule`` a key of :data:`TLS_CA_RULES`.  The command's
    parameters are ``tls_ca``, ``tls_cert``, ``tls_key``; the files must exist (click checks)."""
    pem = click.Path(exists=True, dir_okay=False)
    options = [click.option("--tls-ca", type=pem, metavar="PEM",
                            help=f"CA certificate (PEM) the broker's certificate must be signed by, on {purpose}; "
                                 f"{TLS_CA_RULES[ca_rule]}.")]
    if client_cert:
        options += [click.option("--tls-cert", type=pem, metavar="PEM",
                                 help="Client certificate (PEM) for a --broker that requires one; implies TLS."),
                    click.option("--tls-key", type=pem, metavar="PEM",
                                 help="The client certificate's key (PEM; default: in the --tls-cert file).")]

    def declare(command):
        for option in reversed(options):  # as if stacked in this order above the command
            command = option(command)
        return command
    return declare


def broker_url(broker, password_file, flag="--broker", environ=None):
    """The ``flag`` URL with the password of its password file / $MSS_BROKER_PASSWORD filled in
    (a usage error if it is given twice, or without a user); ``environ={}``: no variable."""
    from mss_aggregator.credentials import SecretError, broker_password

    try:
        return broker_password(broker, password_file, os.environ if environ is None else environ, flag)
    except SecretError as exc:
        raise click.UsageError(str(exc))


def post_option(command):
    """--post, the post-processing of the estimates (mss_protocol.postprocess)."""
    from mss_protocol import postprocess

    return click.option("--post", type=click.Choice(postprocess.CHOICES), default="none", show_default=True,
                        help="Post-processing of the estimates: none (unbiased), clip (negatives to 0, rescaled "
                             "to sum 1) or simplex (the nearest point of the probability simplex).")(command)


def figure(x, digits=4):
    """``x`` rounded to ``digits`` significant figures as ``g`` formats it, but in exponent form only
    below 1e-4 (``f"{300:.2g}"`` says 3e+02); None as "-"."""
    if x is None:
        return "-"
    text = f"{x:.{digits}g}"
    if "e+" in text:
        text = f"{float(text):f}".rstrip("0").rstrip(".")
    return text


def counters_line(counters):
    """A store's counters (``Store.counters``) as one line: ``received 60, accepted 58, duplicate 1,
    rejected 1 (bad frame 1)``, then any non-zero others."""
    reasons = [f"{name.removeprefix('rejected_').replace('_', ' ')} {n}" for name, n in counters.items()
               if name.startswith("rejected_") and n]
    parts = [f"{name} {counters[name]}" + (f" ({', '.join(reasons)})" if name == "rejected" and reasons else "")
             for name in ("received", "accepted", "duplicate", "rejected") if name in counters]
    parts += [f"{name.replace('_', ' ')} {n}" for name, n in counters.items()
              if name not in ("received", "accepted", "duplicate", "rejected") and not name.startswith("rejected_")]
    return ", ".join(parts)


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


def counters_table(counters, title, no_clock=(), skipped=None):
    """A service's counters as a table, with the boards that said they have no clock and the
    epochs skipped (budget spent with no memo of the value) under them."""
    table = Table(title=title)
    table.add_column("counter")
    table.add_column("value", justify="right")
    for name, value in counters.items():
        table.add_row(name, str(value))
    if no_clock:  # link health: boards whose reports wait for the time
        ids = ", ".join(d["device_id"] for d in no_clock[:5]) + (", ..." if len(no_clock) > 5 else "")
        table.add_row("[bold red]devices without a clock[/]", f"[bold red]{len(no_clock)}: {ids}[/]")
    if skipped and any(skipped.values()):  # boards whose budget was spent with no memo of their value
        table.add_row("[bold yellow]skipped epochs (budget spent)[/]",
                      "[bold yellow]" + ", ".join(f"{k} {v}" for k, v in skipped.items() if v) + "[/]")
    return table


def stop_signals():
    """A threading.Event that SIGINT and SIGTERM set from now on.  Taken before a service starts
    its threads, so that a signal during the start-up (a supervisor's stop right after its start)
    stops it cleanly once started instead of killing it by the default action."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def run_until_stopped(died, stop, table=None, tick=None):
    """Wait for ``stop`` (:func:`stop_signals`) or ``died`` (a threading.Event: a service thread
    ended), calling ``tick()`` every half second; with ``table`` (a callable giving a rich
    renderable) show it live on stderr, refreshed (``-v`` lines piped to stdout stay in the pipe)."""
    from rich.live import Live

    def going():
        if tick is not None:
            tick()
        return not stop.is_set() and not died.wait(0.5)
    if table is None:
        while going():
            pass
        return
    with Live(table(), console=Console(stderr=True), refresh_per_second=2,
              redirect_stdout=sys.stdout.isatty()) as display:
        while going():
            display.update(table())


class CompromisedParam(click.ParamType):
    """``--compromised``: a count of devices (``3``) or a share of the fleet (``1%`` or ``0.01``), as a
    :class:`mss_protocol.integrity.Compromised` (``mss plan``: of its n; ``mss estimate``: of the devices
    decoded)."""

    name = "M|P%"

    def convert(self, value, param, ctx):
        if isinstance(value, Compromised):
            return value
        text = str(value).strip()
        try:
            if text.endswith("%") or any(c in text for c in ".eE"):
                share = float(text[:-1]) / 100 if text.endswith("%") else float(text)
                if not 0 <= share < 1:  # also refuses nan and inf
                    self.fail(f"{value!r}: a share is from 0% to below 100%", param, ctx)
                return Compromised(share=share)
            count = int(text)
        except ValueError:
            self.fail(f"{value!r} is neither a count of devices (3) nor a share of them (1% or 0.01)", param, ctx)
        if not 0 <= count <= 2**32:
            self.fail(f"{value!r}: a count of devices is from 0 to 2**32", param, ctx)
        return Compromised(count=count)
