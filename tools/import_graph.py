"""Import cycles among the project's own modules, found statically.

Reads every module under firmware/lib, protocol and aggregator with `ast`
(nothing is imported), draws an edge from a module to each project module it
imports, and prints the strongly connected components of more than one module
(Tarjan), each with the edges that close it.  An edge from an import inside a
function is marked ``(in function)``: such an import runs late, so the cycle
does not fail at start-up, but the two modules still depend on each other.

    python tools/import_graph.py          # prints the cycles, exit 1 if any
    python tools/import_graph.py --top    # module-level imports only

`cycles()` and `private_imports()` are what tests/test_import_cycles.py calls.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_ROOTS = ("firmware/lib", "protocol", "aggregator")


@dataclass(frozen=True)
class Edge:
    """`source` imports `target`; `names` the names it takes from it."""

    source: str
    target: str
    in_function: bool
    names: tuple[str, ...]


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the source roots."""
    modules = {}
    for base in SOURCE_ROOTS:
        top = root / base
        for path in sorted(top.rglob("*.py")):
            parts = path.relative_to(top).with_suffix("").parts
            if "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts:
                modules[".".join(parts)] = path
    return modules


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute module named by a (possibly relative) `from` import."""
    if not level:
        return name or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([name] if name else []))


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest project module that `name` is or lies inside."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _in_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return True
    return False


def module_edges(modules: dict[str, Path] | None = None) -> list[Edge]:
    """Every import from one project module to another."""
    modules = project_modules() if modules is None else modules
    edges = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            found: list[tuple[str, tuple[str, ...]]] = []
            if isinstance(node, ast.Import):
                found = [(alias.name, ()) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node.level, node.module)
                for alias in node.names:
                    # `from pkg import submodule` imports the submodule
                    sub = _known(f"{base}.{alias.name}", modules)
                    if sub == f"{base}.{alias.name}":
                        found.append((sub, ()))
                    else:
                        found.append((base, (alias.name,)))
            for name, names in found:
                target = _known(name, modules)
                if target is None or target == module:
                    continue
                # a package's own __init__ importing its submodules is not a
                # dependency of the submodule on the package
                edges.append(Edge(module, target, _in_function(node, parents), names))
    return edges


def _graph(edges: list[Edge], top_only: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for edge in edges:
        if top_only and edge.in_function:
            continue
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    return graph


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _is_package_init_edge(edge: Edge, modules: dict[str, Path]) -> bool:
    """A package importing one of its own submodules (re-export in __init__)."""
    return modules[edge.source].name == "__init__.py" and edge.target.startswith(edge.source + ".")


def cycles(top_only: bool = False, modules: dict[str, Path] | None = None,
           edges: list[Edge] | None = None) -> list[tuple[list[str], list[Edge]]]:
    """Each import cycle: its modules and the edges among them (``edges``: those of
    :func:`module_edges`, read again if not given).

    A package's `__init__` importing its own submodules is left out: Python
    imports the package before the submodule anyway, so that edge closes no
    circle of its own."""
    modules = project_modules() if modules is None else modules
    edges = module_edges(modules) if edges is None else edges
    edges = [e for e in edges if not _is_package_init_edge(e, modules)]
    found = []
    for component in _components(_graph(edges, top_only)):
        members = set(component)
        inner = sorted(
            {e for e in edges if e.source in members and e.target in members and not (top_only and e.in_function)},
            key=lambda e: (e.source, e.target, e.in_function),
        )
        found.append((component, inner))
    return found


def private_imports(prefixes: tuple[str, ...] = ("",), modules: dict[str, Path] | None = None,
                    edges: list[Edge] | None = None) -> list[Edge]:
    """Imports of a `_private` name from another project module, by modules under `prefixes`."""
    edges = module_edges(modules) if edges is None else edges
    return [
        e
        for e in edges
        if e.source.startswith(prefixes) and any(n.startswith("_") and not n.startswith("__") for n in e.names)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", action="store_true", help="module-level imports only")
    args = parser.parse_args(argv)
    found = cycles(top_only=args.top)
    for members, edges in found:
        print(f"cycle of {len(members)} modules:")
        for edge in edges:
            mark = "  (in function)" if edge.in_function else ""
            names = f"  [{', '.join(edge.names)}]" if edge.names else ""
            print(f"  {edge.source} -> {edge.target}{names}{mark}")
    print(f"{len(found)} cycle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
