"""MkDocs hooks: the reference pages that are generated from the code at build
time, and the benchmark results served from where the benchmarks write them.

Nothing generated here is committed, so nothing can go stale:

- ``<!-- shoal:rest server -->`` / ``<!-- shoal:rest shuffler -->``: every
  path, method, status and summary of the services' OpenAPI specs (the apps
  are built in a temporary folder, as in the tests);
- ``<!-- shoal:cli -->``: each verb's ``--help``, from the parser its module
  builds (``shoal.common.cli.VERBS``, ``build_parser(verb)``);
- ``<!-- shoal:settings -->``: the services' ``SHOAL_*`` variables from their
  pydantic-settings classes, with types and defaults, and the docstring
  that says what each means;
- ``tests/bench/results/*`` are added to the site as
  ``benchmarks/results/*`` (MkDocs only serves files under ``docs/``).

``tests/test_docs_site.py`` calls these functions directly.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import os
import re
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "tests" / "bench" / "results"
RESULT_SUFFIXES = (".md", ".png", ".txt", ".json")
MARKER = re.compile(r"<!-- shoal:(rest|cli|settings)(?: (\w+))? -->")


# ---------------------------------------------------------------- REST
def _server_spec() -> dict[str, Any]:
    from shoal.server.edge.app import create_app
    from shoal.server.edge.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(db_url=f"sqlite:///{tmp}/docs.db", key_path=f"{tmp}/key.pem",
                            operator_token="o" * 16, shuffler_token="s" * 16)
        return create_app(settings).openapi()


def _shuffler_spec() -> dict[str, Any]:
    from shoal.shuffler.app import ShufflerSettings, create_app

    with tempfile.TemporaryDirectory() as tmp:
        settings = ShufflerSettings(server_url="http://127.0.0.1:8000", token="s" * 16, enrol_token="e" * 16,
                                    db_path=f"{tmp}/shuffler.db", insecure_no_pin=True)
        return create_app(settings).openapi()


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render_rest(which: str) -> str:
    """A table per path: method, who may call it, statuses, summary, the first
    paragraph of its description."""
    spec = _server_spec() if which == "server" else _shuffler_spec()
    lines = []
    for path, methods in spec["paths"].items():
        lines += [f"### `{path}`", "", "| method | security scheme | statuses | summary |", "|---|---|---|---|"]
        for method, op in methods.items():
            auth = ", ".join(k for s in op.get("security", []) for k in s) or "none"
            statuses = ", ".join(s for s in op.get("responses", {}) if s != "default")
            summary = op.get("summary", "")
            desc = (op.get("description") or "").strip().split("\n\n")[0]
            text = f"**{summary}**" + (f": {desc}" if desc else "")
            lines.append(f"| `{method.upper()}` | {auth} | {statuses} | {_cell(text)} |")
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------- CLI
def render_cli() -> str:
    from shoal.common.cli import VERBS, component

    out = []
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps at $COLUMNS: the page must not depend on the terminal
    try:
        for verb, (_, help_, extra) in VERBS.items():
            parser = component(verb).build_parser(verb)
            parser.prog = f"shoal {verb}"
            needs = f" Needs the `{extra}` extra." if extra else ""
            out += [f"## `shoal {verb}`", "", f"{help_[0].upper()}{help_[1:]}.{needs}", "",
                    "```text", parser.format_help().rstrip(), "```", ""]
            for action in parser._actions:  # sub-commands (``shoal client report``): each its own help
                if isinstance(action, argparse._SubParsersAction):
                    for name, sub in action.choices.items():
                        out += [f"### `shoal {verb} {name}`", "", "```text", sub.format_help().rstrip(), "```", ""]
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(out)


# ---------------------------------------------------------------- settings
def _env_table(cls: Any) -> list[str]:
    lines = ["| variable | type | default |", "|---|---|---|"]
    for name, field in cls.model_fields.items():
        ann = getattr(field.annotation, "__name__", str(field.annotation))
        default = field.default
        shown = "unset" if default == "" else f"`{default!r}`"
        lines.append(f"| `SHOAL_{name.upper()}` | {ann} | {shown} |")
    return lines


def render_settings() -> str:
    from shoal.server.edge import settings as server_settings
    from shoal.shuffler.app import ShufflerEnvironment

    doc = inspect.getdoc(server_settings) or ""
    out = ["## Server (`shoal server`)", "",
           "Read once at start by `ServerEnvironment` (`server/edge/settings.py`).", ""]
    out += _env_table(server_settings.ServerEnvironment)
    out += ["", "What each means (the module's docstring):", "", *("> " + ln if ln else ">" for ln in doc.splitlines()),
            "", "## Shuffler (`shoal shuffler`)", "",
            "Read once at start by `ShufflerEnvironment` (`shuffler/app.py`); every other shuffler setting "
            "is a command-line option ([CLI reference](cli.md#shoal-shuffler)).", ""]
    out += _env_table(ShufflerEnvironment)
    return "\n".join(out)


# ---------------------------------------------------------------- MkDocs events
TOP = ("common", "client", "server", "shuffler", "deploy")
SOURCE_TREE = ROOT / "build" / "docs-src"


def on_startup(command: str, dirty: bool) -> None:
    """Make the source tree before any plugin reads its config: mkdocstrings
    drops a search path that does not exist yet, so on a fresh clone (no
    ``build/``) ``on_config`` alone came too late and the first build failed."""
    _source_tree()


def on_config(config: Any) -> Any:
    _source_tree()
    return config


def _source_tree() -> None:
    """The ``shoal`` package as a folder for mkdocstrings (griffe) to read.

    The source folders are mapped into the ``shoal`` namespace by setup.py
    (``package_dir={"shoal": "."}``), which a static reader cannot follow, so
    ``build/docs-src/shoal/`` holds a link to each of them and to the
    repository's ``__init__.py`` (an empty one when there is none)."""
    pkg = SOURCE_TREE / "shoal"
    pkg.mkdir(parents=True, exist_ok=True)
    for name in (*TOP, "__init__.py"):
        link, target = pkg / name, ROOT / name
        if link.is_symlink() or link.exists():
            link.unlink()
        if target.exists():
            link.symlink_to(target)
    if not (pkg / "__init__.py").exists():  # a regular package, so no other ``shoal`` on sys.path is merged in
        (pkg / "__init__.py").write_text("")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def generate(m: re.Match[str]) -> str:
        what, arg = m.group(1), m.group(2)
        with contextlib.redirect_stdout(io.StringIO()):
            if what == "rest":
                return render_rest(arg or "server")
            if what == "cli":
                return render_cli()
            return render_settings()

    return MARKER.sub(generate, markdown)


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path in sorted(RESULTS.iterdir()):
        if path.suffix in RESULT_SUFFIXES:
            files.append(File.generated(config, f"benchmarks/results/{path.name}", abs_src_path=str(path)))
    return files
