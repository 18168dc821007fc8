"""The conventions every ``mss`` command follows (issue 27): -h and --help, help text on
every option, ``--json`` a flag printing to stdout, ``--plot`` a FILE, one-line
``error: ...`` usage errors naming the flag (exit 2), full-width output when piped,
rounded figures, a progress line on a long operation when not on a terminal."""
import json
import os
import sqlite3
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from mss_cli.main import main

COMMANDS = main.list_commands(None)  # the group loads a command's module when asked for it (mss_cli.main)


def mss(*args, **kw):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # piped, no width given
    return subprocess.run([sys.executable, "-m", "mss_cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300, **kw)


def run(args):
    return CliRunner().invoke(main, args, prog_name="mss")


def options(name):
    return [p for p in main.get_command(None, name).params if isinstance(p, click.Option) and not p.hidden]


@pytest.mark.parametrize("name", [None] + COMMANDS)
def test_h_is_help(name):
    args = ([name] if name else []) + ["-h"]
    out = run(args)
    assert out.exit_code == 0 and out.output.startswith("Usage: mss"), out.output
    assert out.output == run(args[:-1] + ["--help"]).output


def test_group_help_states_each_summary_whole():
    """mss -h: every command's first sentence, wrapped, never cut short with '...'."""
    out = run(["-h"]).output
    assert "..." not in out.split("Commands:")[1], out
    for name in COMMANDS:
        summary = main.get_command(None, name).get_short_help_str(limit=1000)
        assert " ".join(summary.split()) in " ".join(out.split()), (name, summary)


def test_every_command_loads_under_its_own_name():
    """mss_cli.main lists the commands before importing them: each listed name is the command's own."""
    assert COMMANDS and all(main.get_command(None, name).name == name for name in COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_has_help(name):
    bare = [p.opts[-1] for p in options(name) if not (p.help or "").strip()]
    assert not bare, f"mss {name}: options without help: {bare}"


@pytest.mark.parametrize("name", [n for n in COMMANDS if any("--json" in p.opts for p in options(n))])
def test_json_is_a_flag(name):
    (opt,) = [p for p in options(name) if "--json" in p.opts]
    assert opt.is_flag, f"mss {name} --json takes a value"


@pytest.mark.parametrize("name", [n for n in COMMANDS if any("--plot" in p.opts for p in options(n))])
def test_plot_is_a_file(name):
    (opt,) = [p for p in options(name) if "--plot" in p.opts]
    assert not opt.is_flag and isinstance(opt.type, click.Path) and not opt.type.dir_okay, \
        f"mss {name} --plot is not a FILE"


@pytest.mark.parametrize("args,flag", [
    (["plan", "--k", "abc", "--epsilon", "1"], "--k"),
    (["plan", "--k", "16"], "--epsilon"),
    (["simulate", "--k", "16", "--epsilon", "2", "--n", "10", "--bogus"], "--bogus"),
    (["bench", "--protocols", "mss,nope"], "--protocols"),
    (["nope"], "nope"),
])
def test_usage_error_is_one_line_naming_the_flag(args, flag):
    out = run(args)
    lines = out.stderr.splitlines()
    assert out.exit_code == 2 and len(lines) == 2, out.stderr
    assert lines[0].startswith("error: ") and flag in lines[0], out.stderr
    assert lines[1] == f"Try 'mss{' ' + args[0] if args[0] != 'nope' else ''} -h' for help.", out.stderr


def test_piped_plan_is_full_width_rounded_and_says_why():
    out = mss("plan", "--k", 16, "--epsilon", 2)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    caption = [line for line in lines if line.startswith("MSE:")]
    assert len(caption) == 1 and caption[0].rstrip().endswith("(below 1: more accurate)"), out.stdout
    assert "vs SS: MSE / SubsetSelection's" in caption[0]
    (chosen,) = [line for line in lines if line.startswith("chosen: ")]
    assert "config id" in chosen, out.stdout
    eps = chosen.split("eps_effective ")[1].split(",")[0]
    assert len(eps.replace(".", "").lstrip("0")) <= 6, chosen  # rounded, not 1.9999999970291282
    (why,) = [line for line in lines if line.startswith("why: ")]
    assert "--mse-slack 0.02" in why and "within 2%" in why, why
    assert not any("e+" in line for line in lines), out.stdout  # no 3e+02


def test_simulate_defaults_to_the_protocol_plan_chooses():
    planned = json.loads(mss("plan", "--k", 64, "--epsilon", 1, "--n", 2000, "--json").stdout)
    out = mss("simulate", "--k", 64, "--epsilon", 1, "--n", 2000, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["config_id"] == planned["config_id"]


def test_progress_lines_when_not_a_terminal():
    """Off a terminal: nothing for the first 2 s, then one line per step, then a last line."""
    script = ("import time\nfrom mss_cli.common import progress\n"
              "with progress('work', 4) as step:\n"
              "    for _ in range(4):\n        time.sleep(0.9)\n        step()\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    lines = out.stderr.splitlines()
    assert out.returncode == 0 and lines and lines[-1].startswith("work: 4/4 ") and lines[-1].endswith(", done"), \
        out.stderr
    assert all(line.startswith("work: ") for line in lines) and lines[0] != "work: 0/4 0 s", out.stderr
    quick = subprocess.run([sys.executable, "-c", script.replace("0.9", "0.01")], capture_output=True, text=True,
                           timeout=60)
    assert quick.returncode == 0 and quick.stderr == "", quick.stderr


def test_merge_of_a_store_is_one_error_line(tmp_path):
    db = sqlite3.connect(tmp_path / "s.sqlite")
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    out = mss("merge", tmp_path / "s.sqlite", "-o", tmp_path / "m.json")
    assert out.returncode == 3 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"error: {tmp_path / 's.sqlite'} is an SQLite store, not a counts file"), out.stderr


def test_bare_mss_shows_help_not_an_error():
    out = run([])
    assert "Commands:" in out.output and "error:" not in out.output, out.output
