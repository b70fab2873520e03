"""The layout a newcomer is promised (README "Architecture", DESIGN.md "Layout"):
which folder may import which, round kinds found only through their
registries, and packages that cannot be left out of the wheel."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shoal.client.kinds import DEVICE_KINDS
from shoal.common.errors import ConfigError
from shoal.common.kinds import config_kinds, dump_config, kind_name, parse_config
from shoal.server.edge.api_models import CreateRoundIn
from shoal.server.rounds.kinds import SERVER_KINDS, for_encoder

ROOT = Path(__file__).resolve().parent.parent
TOP = ("common", "client", "server", "shuffler", "deploy")

# package prefix -> the shoal packages its modules may import (their own included)
MAY_IMPORT = {
    "shoal.common": ("shoal.common",),
    "shoal.client": ("shoal.common", "shoal.client"),
    "shoal.shuffler": ("shoal.common", "shoal.shuffler"),
    "shoal.server": ("shoal.common",),
    "shoal.server.decoders": ("shoal.common", "shoal.server.decoders"),
    "shoal.server.storage": ("shoal.common", "shoal.server.storage"),
    "shoal.server.rounds": ("shoal.common", "shoal.server.rounds", "shoal.server.storage", "shoal.server.decoders"),
    # the edge calls rounds; from storage it takes only the row record and error types to map
    "shoal.server.edge": ("shoal.common", "shoal.server.edge", "shoal.server.rounds", "shoal.server.storage"),
    "shoal.deploy": ("shoal",),
}
# The package top (the repository root's ``__init__.py``, ``from shoal import ...``): imports no
# shoal module eagerly (a device's ``import shoal.client`` runs it first), and lazily only the
# user-facing side: the notebook code in deploy and the public types of common, never a service.
TOP_EAGER = ("__future__", "typing")
TOP_LAZY = ("shoal.common", "shoal.deploy")


def _modules() -> list[tuple[str, Path]]:
    out = []
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out.append(("shoal." + ".".join(parts), path))
    return out


def _shoal_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("shoal"):
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("shoal"))
    return names


def _rule(module: str) -> tuple[str, ...]:
    prefix = max((p for p in MAY_IMPORT if module == p or module.startswith(p + ".")), key=len)
    return MAY_IMPORT[prefix]


def test_every_module_imports_only_what_its_folder_may():
    wrong = []
    for module, path in _modules():
        allowed = _rule(module)
        for name in _shoal_imports(path):
            if not any(name == a or name.startswith(a + ".") for a in allowed):
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert wrong == []


def test_the_import_rules_catch_a_forbidden_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from shoal.server.rounds.service import RoundService\n")
    assert not any(n.startswith(a) for n in _shoal_imports(bad) for a in _rule("shoal.server.decoders.kmeans"))


def _top_imports() -> tuple[set[str], set[str]]:
    """(modules the package top imports when it runs, modules it names for later):
    later means under ``if TYPE_CHECKING:``, inside a function, or a module
    string of its ``_LAZY`` table (PEP 562 ``__getattr__``)."""
    tree = ast.parse((ROOT / "__init__.py").read_text())
    eager: set[str] = set()
    lazy: set[str] = set()

    def names(node: ast.AST) -> set[str]:
        if isinstance(node, ast.ImportFrom) and node.module:
            return {node.module}
        return {a.name for a in node.names} if isinstance(node, ast.Import) else set()

    for stmt in tree.body:
        deferred = isinstance(stmt, ast.FunctionDef) or (
            isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING")
        for node in ast.walk(stmt):
            (lazy if deferred else eager).update(names(node))
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in stmt.targets):
            lazy.update(c.value for c in ast.walk(stmt.value)
                        if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value.startswith("shoal."))
    return eager, lazy


def test_the_package_top_imports_nothing_eagerly_and_lazily_only_the_user_facing_side():
    eager, lazy = _top_imports()
    assert eager <= set(TOP_EAGER), eager
    shoal_lazy = {n for n in lazy if n.startswith("shoal")}
    assert shoal_lazy and all(any(n == a or n.startswith(a + ".") for a in TOP_LAZY) for n in shoal_lazy), shoal_lazy


def test_the_top_rule_catches_an_eager_import(tmp_path, monkeypatch):
    (tmp_path / "__init__.py").write_text("from shoal.deploy.notebook.estimator import PrivateKMeans\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _top_imports()[0] == {"shoal.deploy.notebook.estimator"}


def test_import_shoal_loads_no_submodule_and_no_numpy():
    out = _run("import sys, shoal\nprint(sorted(m for m in sys.modules if m.startswith(('shoal.', 'numpy'))))")
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_no_code_outside_the_kinds_switches_on_config_types():
    """The acceptance grep of issue 14, as a test."""
    out = subprocess.run(["grep", "-rnE", r"is_sketch|is_refine|isinstance\([^)]*Config", *TOP],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.stdout == ""


def test_every_folder_of_python_modules_is_a_package():
    """setup.py discovers packages by their __init__.py: a folder without one
    would be left out of the wheel, silently (issue 14: shoal.server.routers)."""
    missing = sorted(str(p.relative_to(ROOT)) for top in TOP for p in (ROOT / top).rglob("*")
                     if p.is_dir() and p.name != "__pycache__" and any(p.glob("*.py"))
                     and not (p / "__init__.py").exists())
    assert missing == []


def test_no_module_is_over_300_lines_without_saying_why():
    long = [str(path.relative_to(ROOT)) for _, path in _modules()
            if len(path.read_text().splitlines()) > 330
            and "over 300" not in (ast.get_docstring(ast.parse(path.read_text())) or "").lower()]
    assert long == []


def test_the_three_halves_of_every_kind_are_registered_under_one_name():
    assert set(config_kinds()) == set(DEVICE_KINDS) == set(SERVER_KINDS) == {"tree", "sketch", "refine", "central", "local_refine",
                                                                               "partition", "continual", "elbow"}


def test_every_encoder_the_edge_accepts_is_served_by_one_kind():
    encoders = CreateRoundIn.model_fields["encoder"].annotation.__args__
    for encoder in encoders:
        assert encoder in for_encoder(encoder).encoders
    with pytest.raises(ConfigError, match="unknown encoder 'kmeans'"):
        for_encoder("kmeans")


def test_an_unknown_kind_is_refused_with_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown round kind 'greedy'.*'refine', 'sketch', 'tree'"):
        kind_name({"kind": "greedy"})


def test_a_config_published_before_kinds_had_names_is_a_tree_config():
    from shoal.common.kinds.tree import derive_config

    data = dump_config("tree", derive_config(1000, 2, 3, 4.0))
    assert data["kind"] == "tree"
    legacy = {k: v for k, v in data.items() if k != "kind"}
    assert parse_config(legacy) == parse_config(data)


def _without(*modules: str) -> str:
    """Python source that makes ``modules`` unimportable, as on a device install."""
    return ("import sys\nclass _Block:\n    def find_spec(self, name, path=None, target=None):\n"
            f"        if name.split('.')[0] in {modules!r}:\n            raise ModuleNotFoundError(name=name)\n"
            "sys.meta_path.insert(0, _Block())\n")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))


def test_a_device_install_runs_shoal_client_without_the_server_extra():
    out = _run(_without("fastapi", "uvicorn", "starlette", "psycopg") +
               "from shoal.common.cli import main\nmain(['client', 'report', '--help'])")
    assert out.returncode == 0, out.stderr
    assert "--server-key" in out.stdout


def test_shoal_server_without_the_server_extra_names_the_extra():
    out = _run(_without("fastapi", "uvicorn", "starlette") + "from shoal.common.cli import main\nmain(['server'])")
    assert out.returncode == 1
    assert "needs the 'server' extra" in out.stderr and "pip install 'shoal[server]'" in out.stderr
    assert "Traceback" not in out.stderr


def test_shoal_version_prints_the_installed_version():
    from importlib.metadata import version

    out = subprocess.run([sys.executable, "-m", "shoal.common.cli", "--version"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"shoal {version('shoal')}"


ARCHITECTURE_PAGE = ROOT / "docs" / "concepts" / "architecture.md"


def _kind_table() -> dict[str, list[str]]:
    """The architecture page's "Round kinds" table: kind -> [config, device, server, decoders]."""
    text = ARCHITECTURE_PAGE.read_text().split("## Round kinds", 1)[1]
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0].strip("`")] = cells[1:]
        elif rows and not line.startswith("|"):
            break
    return rows


def _module_of(path: str) -> str:
    """``common/kinds/tree.py`` -> ``shoal.common.kinds.tree``; a folder ``server/decoders/tree/`` -> its package."""
    return "shoal." + path.removesuffix("/").removesuffix(".py").replace("/", ".")


def test_the_architecture_page_lists_every_kind_with_its_four_parts():
    """The one place that lists each kind's parts matches the registries it describes."""
    from importlib import import_module

    from test_import_graph import import_graph

    from shoal.client.kinds import _DEVICE_KINDS
    from shoal.common.kinds import _MODULES

    table = _kind_table()
    assert set(table) == set(_MODULES) == set(_DEVICE_KINDS) == set(SERVER_KINDS)
    graph = import_graph()
    for name, (config, device, server, decoders) in table.items():
        config, device, server = (c.strip("`") for c in (config, device, server))
        assert _MODULES[name] == _module_of(config), name
        assert _DEVICE_KINDS[name] == _module_of(device) + ":KIND", name
        assert import_module(_module_of(server)).KIND is SERVER_KINDS[name], name
        listed = [_module_of(d.strip().strip("`")) for d in decoders.split(",")]
        imported = {m for m in graph[_module_of(server)] if m.startswith("shoal.server.decoders.")}
        assert all(any(m == d or m.startswith(d + ".") for d in listed) for m in imported), (name, imported)
        assert all(any(m == d or m.startswith(d + ".") for m in imported) for d in listed), (name, listed)
