"""The package's import graph, computed from the source (``ast``, no import
runs): no circles, and the layers a newcomer is promised (issue 43).

What counts as an edge: every ``import`` / ``from ... import`` of a shoal
module, wherever it stands: at module top, inside a function or method
(a function-local import that only breaks a circle still makes one), and
under ``if TYPE_CHECKING:`` (the type checker follows it; a circle of
types is a circle of ideas). ``from pkg import name`` is an edge to
``pkg.name`` when that is a module, else to ``pkg``.

What does not: a module's implicit import of its own parent packages
(every module has it; a package whose ``__init__`` lists its children, as
a registry does, would otherwise be a circle with each of them), and the
kinds' string tables read by ``importlib`` (``LazyKinds``: data, checked
against the architecture page by ``tests/test_architecture.py``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP = ("common", "client", "server", "shuffler", "deploy")

# The device's side never reaches the services or the tools above them.
DEVICE_SIDE = ("shoal.client", "shoal.common")
NOT_FROM_DEVICE_SIDE = ("shoal.server", "shoal.shuffler", "shoal.deploy")
# Decoders are math on rows: never the HTTP edge, storage or the round service.
DECODERS = "shoal.server.decoders"
NOT_FROM_DECODERS = ("shoal.server.edge", "shoal.server.storage", "shoal.server.rounds")
# shoal.common's neighbourhoods, lowest first (common/__init__.py): a module imports only from its own
# neighbourhood or a lower one. "" is the top-level modules (errors, clipping, bounds, cost_drops, picture, cli).
COMMON_LAYERS = {"": 0, "privacy": 1, "randomness": 1, "mechanisms": 2, "kinds": 3, "wire": 4}
# What the two services share: imports only common's top-level modules; imported only by the services.
SERVICES = "shoal.common.services"
SERVICES_USERS = ("shoal.server", "shoal.shuffler", SERVICES)
# shoal.deploy's sub-packages, lowest first (deploy/__init__.py): the notebook code runs the simulator's
# rounds, the benchmarks both; "" is deploy's own modules (the CLI, the demo, the protocol vectors), the top.
DEPLOY_LAYERS = {"simulation": 0, "notebook": 1, "bench": 2, "": 3}


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    out = {"shoal": root / "__init__.py"}
    for top in TOP:
        for path in sorted((root / top).rglob("*.py")):
            parts = [p for p in path.relative_to(root).with_suffix("").parts if p != "__init__"]
            out["shoal." + ".".join(parts)] = path
    return out


def _resolve(name: str, modules: Iterable[str]) -> str | None:
    known = set(modules)
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The shoal modules ``module`` imports, anywhere in its source (module docstring)."""
    out: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(filter(None, (_resolve(a.name, modules) for a in node.names if a.name.startswith("shoal"))))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = anchor + ("." + base if base else "")
            if base != "shoal" and not base.startswith("shoal."):
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                target = full if full in modules else _resolve(base, modules)
                if target:
                    out.add(target)
    out.discard(module)
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = module_files(root)
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
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
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _under(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _common_neighbourhood(module: str) -> str | None:
    """``kinds`` for ``shoal.common.kinds.tree``, ``""`` for a top-level module of common, None outside."""
    if not _under(module, ("shoal.common",)) or module == "shoal.common":
        return None
    rest = module[len("shoal.common."):].split(".")
    return rest[0] if len(rest) > 1 or rest[0] in COMMON_LAYERS or rest[0] == "services" else ""


def _deploy_neighbourhood(module: str) -> str | None:
    """``simulation`` for ``shoal.deploy.simulation.sim``, ``""`` for deploy's own modules, None outside."""
    if not _under(module, ("shoal.deploy",)):
        return None
    rest = module[len("shoal.deploy."):].split(".") if module != "shoal.deploy" else [""]
    return rest[0] if len(rest) > 1 else ""


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every edge that breaks a layering rule, as ``a -> b (rule)``."""
    wrong = []
    for a, targets in sorted(graph.items()):
        for b in sorted(targets):
            if _under(a, DEVICE_SIDE) and _under(b, NOT_FROM_DEVICE_SIDE):
                wrong.append(f"{a} -> {b} (device side imports a service or a tool)")
            if _under(a, (DECODERS,)) and _under(b, NOT_FROM_DECODERS):
                wrong.append(f"{a} -> {b} (a decoder imports the edge, storage or rounds)")
            if _under(b, (SERVICES,)) and not _under(a, SERVICES_USERS):
                wrong.append(f"{a} -> {b} (only the services import common/services)")
            da, db = _deploy_neighbourhood(a), _deploy_neighbourhood(b)
            if da is not None and db is not None and da != db and DEPLOY_LAYERS[db] >= DEPLOY_LAYERS[da]:
                wrong.append(f"{a} -> {b} (deploy/{da or '.'} may not import deploy/{db or '.'})")
            na, nb = _common_neighbourhood(a), _common_neighbourhood(b)
            if na is None or nb is None or b == "shoal.common":
                continue
            if na == "services":
                if nb not in ("", "services"):
                    wrong.append(f"{a} -> {b} (common/services imports only common's top-level modules)")
            elif na != nb and nb != "services" and COMMON_LAYERS[nb] >= COMMON_LAYERS[na]:
                wrong.append(f"{a} -> {b} (common/{na or '.'} may not import common/{nb or '.'})")
    return wrong


def test_the_package_has_no_import_circles():
    assert circles(import_graph()) == []


def test_no_module_imports_upward():
    graph = import_graph()
    assert upward_imports(graph) == []


def test_every_common_neighbourhood_has_a_layer():
    folders = {p.name for p in (ROOT / "common").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(COMMON_LAYERS) - {""} | {"services"}


def test_every_deploy_sub_package_has_a_layer():
    folders = {p.name for p in (ROOT / "deploy").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(DEPLOY_LAYERS) - {""}


def test_deploy_sub_packages_import_only_downwards(tmp_path):
    """The simulator importing the notebook code, or the notebook code the CLI, is refused."""
    (tmp_path / "__init__.py").write_text("")
    for package in ("common", "client", "server", "shuffler", "deploy", "deploy/simulation", "deploy/notebook"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "deploy" / "cli.py").write_text("from shoal.deploy.notebook.fit import f\n")
    (tmp_path / "deploy" / "notebook" / "fit.py").write_text("from shoal.deploy.simulation import run\n"
                                                             "def f():\n    import shoal.deploy.cli\n")
    (tmp_path / "deploy" / "simulation" / "run.py").write_text("from shoal.deploy.notebook import fit\n")
    assert upward_imports(import_graph(tmp_path)) == [
        "shoal.deploy.notebook.fit -> shoal.deploy.cli (deploy/notebook may not import deploy/.)",
        "shoal.deploy.simulation.run -> shoal.deploy.notebook.fit (deploy/simulation may not import deploy/notebook)",
    ]


def test_the_graph_sees_function_local_and_type_checking_imports(tmp_path):
    """A planted circle through a function-local import and one through
    ``TYPE_CHECKING`` are both found; a planted upward import is refused."""
    for top in TOP:
        (tmp_path / top).mkdir()
        (tmp_path / top / "__init__.py").write_text("")
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "common" / "a.py").write_text("def f():\n    from shoal.common import b\n")
    (tmp_path / "common" / "b.py").write_text("from shoal.common.a import f\n")
    (tmp_path / "common" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from shoal.common.d import X\n")
    (tmp_path / "common" / "d.py").write_text("from . import c\nX = 1\n")
    (tmp_path / "common" / "kinds").mkdir()
    (tmp_path / "common" / "kinds" / "__init__.py").write_text("")
    (tmp_path / "common" / "kinds" / "k.py").write_text("from shoal.common.wire.m import Y\n")
    (tmp_path / "common" / "wire").mkdir()
    (tmp_path / "common" / "wire" / "__init__.py").write_text("")
    (tmp_path / "common" / "wire" / "m.py").write_text("Y = 2\n")
    (tmp_path / "server" / "decoders").mkdir()
    (tmp_path / "server" / "decoders" / "__init__.py").write_text("")
    (tmp_path / "server" / "storage.py").write_text("")
    (tmp_path / "server" / "decoders" / "x.py").write_text("def g():\n    import shoal.server.storage\n")
    graph = import_graph(tmp_path)
    assert circles(graph) == [["shoal.common.a", "shoal.common.b"], ["shoal.common.c", "shoal.common.d"]]
    assert upward_imports(graph) == [
        "shoal.common.kinds.k -> shoal.common.wire.m (common/kinds may not import common/wire)",
        "shoal.server.decoders.x -> shoal.server.storage (a decoder imports the edge, storage or rounds)",
    ]
