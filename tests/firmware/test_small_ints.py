"""No device-side intermediate reaches 2**30, the subset rank included.

CPython: the device code (mss_device, mss_node) is imported through an AST
rewrite that checks every value it computes, stores or is given: each
arithmetic result (so the parts of an expression too, which a 32-bit viper
register would wrap silently), each value assigned to a name, an item or
an attribute (tuples element by element), each augmented assignment's
result, each function's arguments and each return value, while reports are made for several configs,
k = 22000 included.  (The check before this one inspected every local after
every line under sys.settrace: blind to the parts of an expression, and
4.8 million traced lines, 21-38 s, for one k = 22000 report.)
MicroPython: the randomiser runs under micropython.heap_lock(), so it
allocates nothing at all (with its random bytes reserved beforehand).
"""
import ast
import contextlib
import importlib.abc
import importlib.util
import sys
from pathlib import Path

import pytest

from micropython_runner import FIRMWARE, run
from mss_protocol import vectors
from mss_protocol.mss.config import MssConfig
from mss_protocol.mss.planner import plan

LIMIT = 1 << 30
DEVICE = FIRMWARE / "lib"
PACKAGES = ("mss_device", "mss_node")


class _Rewrite(ast.NodeTransformer):
    """Wraps each value the device code computes or stores in ``__small__(value, site)``."""

    def __init__(self, name, sites):
        self.name, self.sites, self.where = name, sites, ["<module>"]

    def _check(self, node):
        self.sites.append(f"{self.name}:{node.lineno} in {self.where[-1]}: {ast.unparse(node)[:80]}")
        site = ast.Constant(len(self.sites) - 1)
        return ast.copy_location(ast.Call(ast.Name("__small__", ast.Load()), [node, site], []), node)

    def visit_FunctionDef(self, node):
        self.where.append(node.name)
        self.generic_visit(node)
        names = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
        if names:  # the arguments, on the way in, after the docstring
            args = ast.copy_location(ast.Tuple([ast.Name(n, ast.Load()) for n in names], ast.Load()), node)
            docstring = ast.get_docstring(node, clean=False) is not None
            node.body.insert(int(docstring), ast.copy_location(ast.Expr(self._check(args)), node))
        self.where.pop()
        return node

    def visit_BinOp(self, node):
        return self._check(self.generic_visit(node))

    def visit_UnaryOp(self, node):
        return self._check(self.generic_visit(node))

    def _value(self, node):
        self.generic_visit(node)
        if node.value is not None and not isinstance(node.value, (ast.BinOp, ast.UnaryOp)):  # those are wrapped
            node.value = self._check(node.value)
        return node

    visit_Assign = visit_AnnAssign = visit_Return = visit_NamedExpr = _value

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        again = ast.parse(ast.unparse(node.target), mode="eval").body  # the target, read back
        return [node, ast.copy_location(ast.Expr(self._check(again)), node)]


class Checker(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports the device packages from firmware/lib rewritten by :class:`_Rewrite`
    (never from or to a .pyc); while ``on``, ``violations`` gets (site, value) for each
    value out of range (off while modules load and configs are checked: the config
    check's exact ratios are long ints by design, mss_device/check.py)."""

    def __init__(self, on=False):
        self.violations, self.sites, self.on = [], [], on

    def __small__(self, value, site):
        if type(value) is int:
            if not -LIMIT < value < LIMIT and self.on:
                self.violations.append((self.sites[site], value))
        elif type(value) is tuple:
            for v in value:
                self.__small__(v, site)
        return value

    def run(self, source, name, namespace):
        tree = ast.fix_missing_locations(_Rewrite(name, self.sites).visit(ast.parse(source)))
        namespace["__small__"] = self.__small__
        exec(compile(tree, name, "exec"), namespace)

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in PACKAGES:
            return None
        base = DEVICE.joinpath(*name.split("."))
        if (base / "__init__.py").exists():
            return importlib.util.spec_from_file_location(name, base / "__init__.py", loader=self,
                                                          submodule_search_locations=[str(base)])
        return importlib.util.spec_from_file_location(name, base.with_suffix(".py"), loader=self)

    def exec_module(self, module):
        path = Path(module.__spec__.origin)
        self.run(path.read_text(), str(path.relative_to(DEVICE)), module.__dict__)


@contextlib.contextmanager
def rewritten():
    """A :class:`Checker` whose rewritten device modules are in sys.modules while
    inside (the usual ones after)."""
    ours = [n for n in sys.modules if n.split(".")[0] in PACKAGES]
    saved = {n: sys.modules.pop(n) for n in ours}
    checker = Checker()
    sys.meta_path.insert(0, checker)
    try:
        yield checker
    finally:
        sys.meta_path.remove(checker)
        for n in [n for n in sys.modules if n.split(".")[0] in PACKAGES]:
            del sys.modules[n]
        sys.modules.update(saved)


# moduli None: the planner's choice.  k = 22000 gives plan(22000, 5)'s moduli (15-bit limbs,
# the largest moduli below 2**15; omegas 147) without planning them here (a minute of CPU
# on a busy runner): the device code and its integers are the same.
CASES = [(64, 1.0, None, 40), (1024, 4.0, None, 5), (1024, 0.5, None, 1),
         (22000, 5.0, [21991, 21995, 21997, 21998, 21999], 1),
         (33000, 8.0, [32771, 32779], 1)]  # the last has moduli above 2**15: 7-bit limbs


def _reports(cfg, values, params=None):
    """Violations while reports of ``values`` are made under ``cfg`` (``params(p)`` may edit them)."""
    with rewritten() as checker:
        from mss_device.params import Params
        from mss_node.reporter import Reporter

        p = Params(cfg.to_dict())
        if params:
            params(p)
        reporter = Reporter(p)
        checker.on = True
        for v in values:
            reporter.report(v, epoch=(1 << 30) - 1, seq=0xFFFF)
    return checker.violations


@pytest.mark.parametrize("k,eps,moduli,reports", CASES)
def test_device_ints_stay_small(k, eps, moduli, reports):
    cfg = MssConfig.build(k, eps, moduli) if moduli else MssConfig.from_dict(plan(k, eps)["config"])
    assert _reports(cfg, [(i * 7919) % k for i in range(reports)]) == []


def test_checker_catches_a_big_int():
    """The checker itself can fail: a config threshold of 2**30 is caught, and so are a
    product of 2**30 inside an expression whose result is small and an augmented
    assignment's result; the usual modules are back after."""
    import mss_device.limbs as usual

    cfg = MssConfig.build(64, 1.0, [59, 61, 63])
    assert _reports(cfg, [5], params=lambda p: setattr(p, "thresholds", [LIMIT] * 3))
    checker = Checker(on=True)
    checker.run("y = (1 << 15) * (1 << 15) >> 20\nz = 1 << 29\nz += z", "snippet", {})
    assert [v for _, v in checker.violations] == [LIMIT, LIMIT]
    assert checker.violations[0][0].startswith("snippet:1 in <module>: ")
    assert sys.modules["mss_device.limbs"] is usual


HEAP_LOCK = r"""
import json, micropython, sys
from mss_device.params import Params
from mss_device.randomiser import Randomiser
from mss_device.rng import ByteRng
p = Params(json.load(open(sys.argv[1]))["config"])
rng = ByteRng()
mark = bytearray((max(p.moduli) + 7) // 8)
randomiser = Randomiser(p)


def locked(x):  # inside a function: no new globals are created under the lock
    micropython.heap_lock()
    try:
        randomiser.privatise(x % p.k, rng, mark)
    finally:
        micropython.heap_unlock()


for x in range(50):
    rng.reserve(4096)
    locked(x)
print("ok")
"""


@pytest.mark.parametrize("vector", ["k64_eps1", "k1024_eps4", "k22000_eps5"])
def test_randomiser_allocates_nothing_under_heap_lock(vector):
    out = run(HEAP_LOCK, args=[str(vectors.DIR / f"{vector}.json")])
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr
