"""No import circles among the project's modules, and no private name imported
across modules (style.md: "No import circles"; "Never import a _name from
another module").

Both read the sources with ``ast`` (tools/import_graph.py), nothing is
imported; an import inside a function counts too (it runs late, but the two
modules still depend on each other).  About 1 s.
"""
import pytest

from import_graph import cycles, module_edges, private_imports, project_modules

# where the circles were broken (issue 46, item 3): no module there imports a _name
NO_PRIVATE_IMPORTS = ("mss_protocol", "mss_node", "mss_aggregator.devices", "mss_aggregator.privacy")


@pytest.fixture(scope="module")
def edges():
    return module_edges()


def test_the_graph_sees_every_source_root():
    modules = project_modules()
    for name in ("mss_protocol.counts", "mss_protocol.mss.protocol", "mss_node.app", "mss_device.frame",
                 "mss_aggregator.devices.modem", "mss_cli.main"):
        assert name in modules, name


def test_no_import_cycles(edges):
    found = cycles(edges=edges)
    assert not found, "import cycles:\n" + "\n".join(
        "  " + " <-> ".join(members) + ": " + "; ".join(
            f"{e.source} -> {e.target}" + (" (in function)" if e.in_function else "") for e in edges)
        for members, edges in found)


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    """The checker itself: two modules importing each other, one of them inside a function."""
    pkg = tmp_path / "firmware" / "lib" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg import a\n")  # a package importing its own module: no circle
    (pkg / "a.py").write_text("from pkg.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from pkg import a\n    return a\n")
    (pkg / "c.py").write_text("from pkg.a import _hidden\n")
    from import_graph import project_modules as modules_of

    modules = modules_of(tmp_path)
    (members, edges), = cycles(modules=modules)
    assert members == ["pkg.a", "pkg.b"]
    assert [(e.source, e.target, e.in_function) for e in edges] == [("pkg.a", "pkg.b", False),
                                                                   ("pkg.b", "pkg.a", True)]
    assert cycles(top_only=True, modules=modules) == []
    assert [(e.source, e.names) for e in private_imports(("pkg",), modules)] == [("pkg.c", ("_hidden",))]


def test_no_private_names_imported_across_modules(edges):
    found = private_imports(NO_PRIVATE_IMPORTS, edges=edges)
    assert not found, [f"{e.source} imports {', '.join(e.names)} from {e.target}" for e in found]
