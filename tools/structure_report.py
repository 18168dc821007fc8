"""The host code's shape against docs/style.md's limits (habits 2, 3 and 7), from its syntax alone.

Reads every module under aggregator/ and protocol/ (no imports, no dependencies: :mod:`ast`) and
lists, one rule a section:

- ``params``: library functions (outside ``mss_cli``) with more than 8 parameters (``self``/``cls``
  not counted; ``*args`` and ``**kwargs`` one each);
- ``positional``: calls, library and CLI, with more than 4 positional arguments (rich's
  ``Table.add_row``, whose cells are positional by design, and the builtins and standard-library
  functions in :data:`VARARGS` are left out);
- ``flag_raise``: ``raise`` statements in library code whose message names a ``--flag`` (a library
  error speaks in its own terms; the CLI maps it to the flag);
- ``command``: click command functions (decorated ``@click.command``/``@<group>.command``) longer
  than 60 lines;
- ``long``: functions over 80 lines, anywhere in the host code.

A function's length runs from its ``def`` line to its last line (decorators not counted).

    python tools/structure_report.py           # the table and every finding
    python tools/structure_report.py --json    # {rule: [finding, ...]}, for tests
"""
import ast
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = ("aggregator", "protocol")
CLI_PACKAGE = "aggregator/mss_cli/"
MAX_PARAMS = 8
MAX_POSITIONAL = 4
MAX_COMMAND_LINES = 60
MAX_FUNCTION_LINES = 80
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# callees whose positional arguments are a list by design (varargs): the rule is about signatures
VARARGS = {"add_row", "max", "min", "print", "zip", "pack", "pack_into", "join", "format", "product",
           "chain", "update"}
RULES = {
    "params": f"library functions with more than {MAX_PARAMS} parameters",
    "positional": f"calls with more than {MAX_POSITIONAL} positional arguments",
    "flag_raise": "raise statements in library code naming a --flag",
    "command": f"CLI command functions over {MAX_COMMAND_LINES} lines",
    "long": f"functions over {MAX_FUNCTION_LINES} lines",
}


def modules(root=ROOT):
    """The host's Python files, as paths relative to ``root``, sorted."""
    for top in HOST:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")


def count_params(fn):
    """A function's parameters, ``self``/``cls`` of a method not counted."""
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args]
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return len(names) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)


def callee_name(call):
    f = call.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return ""


def is_command(fn):
    """Decorated ``@click.command(...)`` or ``@<group>.command(...)``."""
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr in ("command", "group"):
            return True
    return False


def strings(node):
    """The literal text of every string constant (f-strings' literal parts too) under ``node``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value


def scan(path, root=ROOT):
    """``{rule: [finding, ...]}`` of one module; a finding is a dict with ``where`` (path:line) and
    ``what``."""
    with open(os.path.join(root, path), encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    cli = path.startswith(CLI_PACKAGE)
    found = {rule: [] for rule in RULES}

    def add(rule, node, what, size):
        found[rule].append({"where": f"{path}:{node.lineno}", "what": what, "size": size})

    def visit(node, scope):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = ".".join(scope + [child.name])
                lines = child.end_lineno - child.lineno + 1
                params = count_params(child)
                if not cli and params > MAX_PARAMS:
                    add("params", child, f"{name}: {params} parameters", params)
                if cli and is_command(child) and lines > MAX_COMMAND_LINES:
                    add("command", child, f"{name}: {lines} lines", lines)
                if lines > MAX_FUNCTION_LINES:
                    add("long", child, f"{name}: {lines} lines", lines)
                visit(child, scope + [child.name])
            elif isinstance(child, ast.ClassDef):
                visit(child, scope + [child.name])
            else:
                if isinstance(child, ast.Call) and len(child.args) > MAX_POSITIONAL \
                        and callee_name(child) not in VARARGS:
                    add("positional", child, f"{ast.unparse(child.func)}(...): {len(child.args)} positional",
                        len(child.args))
                if not cli and isinstance(child, ast.Raise) and child.exc is not None:
                    flags = sorted({m for s in strings(child.exc) for m in FLAG.findall(s)})
                    if flags:
                        add("flag_raise", child, f"raise naming {', '.join(flags)}", len(flags))
                visit(child, scope)

    visit(tree, [])
    return found


def report(root=ROOT):
    """``{rule: [finding, ...]}`` over the whole host."""
    total = {rule: [] for rule in RULES}
    for path in modules(root):
        for rule, items in scan(path, root).items():
            total[rule].extend(items)
    return total


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    found = report()
    if "--json" in argv:
        print(json.dumps(found, indent=1))
        return 0
    for rule, title in RULES.items():
        print(f"{rule}: {len(found[rule])} {title}")
    for rule, title in RULES.items():
        if found[rule]:
            print(f"\n== {title} ({len(found[rule])})")
            for item in found[rule]:
                print(f"  {item['where']}  {item['what']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
