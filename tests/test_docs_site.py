"""The documentation site's own checks (issue 39) that need no MkDocs build:
the README stays short, every SHOAL_* variable the code reads is on the
settings page, and the generated reference sections render from the code.

The build itself (``make docs``: ``mkdocs build --strict``, links and anchors
checked) runs in CI after the suite."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".venv", "build", ".git", "node_modules", "shoal.egg-info"}
VAR = re.compile(r"SHOAL_[A-Z0-9_]*[A-Z0-9]")


def _hooks():
    spec = importlib.util.spec_from_file_location("shoal_docs_hooks", ROOT / "docs" / "hooks.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _code_files():
    for folder, dirs, files in os.walk(ROOT):
        here = Path(folder)
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not (here == ROOT and d == "docs")]
        for name in files:
            path = here / name
            if path.suffix in {".py", ".yml", ".yaml", ".sh"} or name in {"Dockerfile", "Makefile", "Caddyfile"} \
                    or here.name == ".ci":
                yield path


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; the details belong in docs/"


def test_readme_links_to_docs_exist():
    text = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(((?:docs|tests)/[^)#]+)", text)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing


def test_every_shoal_variable_is_on_the_settings_page():
    pytest.importorskip("pydantic_settings")
    used = set()
    for path in _code_files():
        used |= set(VAR.findall(path.read_text(errors="replace")))
    assert "SHOAL_DB_URL" in used  # the scan found the code
    page = (ROOT / "docs" / "reference" / "settings.md").read_text() + _hooks().render_settings()
    missing = sorted(v for v in used if not re.search(rf"\b{v}\b", page))
    assert not missing, f"SHOAL_* variables read by the code but not on docs/reference/settings.md: {missing}"


def test_generated_reference_renders():
    pytest.importorskip("fastapi")
    hooks = _hooks()
    rest = hooks.render_rest("server")
    assert "### `/rounds/{round_id}/cluster`" in rest and "`POST`" in rest
    assert "### `/enrol`" in hooks.render_rest("shuffler")
    cli = hooks.render_cli()
    for verb in ("client", "server", "shuffler", "sim", "simulate", "bench", "demo"):
        assert f"## `shoal {verb}`" in cli
    assert "### `shoal client report`" in cli


def test_every_nav_page_exists():
    yaml = pytest.importorskip("yaml")

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)  # mkdocs.yml's !!python tags, if any
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)["nav"]

    def pages(items):
        for item in items:
            if isinstance(item, str):
                yield item
            else:
                for value in item.values():
                    yield from ([value] if isinstance(value, str) else pages(value))

    missing = [p for p in pages(nav) if not (ROOT / "docs" / p).exists()]
    assert not missing, missing


def test_every_table_on_a_page_has_its_header_separator():
    # A table whose |---| row was lost renders as one run-on paragraph, which mkdocs --strict does not flag
    # (docs/benchmarks/central.md's results table did, 2026-11-28).
    broken = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        lines = page.read_text().splitlines()
        for i, line in enumerate(lines):
            starts = line.startswith("| ") and (i == 0 or not lines[i - 1].startswith("|"))
            if starts and not (i + 1 < len(lines) and re.match(r"^\|\s*:?-{3,}", lines[i + 1])):
                broken.append(f"{page.relative_to(ROOT)}:{i + 1}")
            if starts and i + 1 < len(lines) and lines[i + 1].startswith("|-"):
                head, sep = line.strip().strip("|").split("|"), lines[i + 1].strip().strip("|").split("|")
                if len(head) != len(sep):
                    broken.append(f"{page.relative_to(ROOT)}:{i + 1} ({len(head)} columns, separator {len(sep)})")
    assert not broken, broken
