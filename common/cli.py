"""The ``shoal`` command: a thin dispatcher.

Each component owns its verbs and their argument parsing (``shoal.client.cli``,
``shoal.server.edge.cli``, ``shoal.shuffler.cli``, ``shoal.deploy.cli``); this
module only knows which module serves which verb and imports it when the verb
runs, so a device install (no server extra) runs ``shoal client ...`` without
loading FastAPI, and ``shoal server`` on such an install says which extra is
missing instead of a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from shoal.common.errors import ShoalError

# verb -> (module that owns it, one-line help, the extra it needs)
VERBS: dict[str, tuple[str, str, str]] = {
    "client": ("shoal.client.cli", "device-side commands (report one point for a round)", ""),
    "server": ("shoal.server.edge.cli", "run the aggregation server", "server"),
    "shuffler": ("shoal.shuffler.cli", "run the shuffler", "server"),
    "sim": ("shoal.deploy.cli", "a server, optionally a shuffler, and N simulated devices on 127.0.0.1", "server"),
    "simulate": ("shoal.deploy.cli", "encode every device and decode in-process", "server"),
    "bench": ("shoal.deploy.cli", "accuracy, oracle and services benchmarks", "server"),
    "demo": ("shoal.deploy.cli", "one in-process round on generated data, printed", "server"),
}


def shoal_version() -> str:
    try:
        return version("shoal")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown (not installed)"


def _top_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shoal", description="Federated k-means with differential privacy")
    p.add_argument("--version", action="version", version=f"shoal {shoal_version()}")
    sub = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb, (_, help_, _) in VERBS.items():
        sub.add_parser(verb, help=help_, add_help=False)
    return p


def component(verb: str) -> Any:
    """The module that owns ``verb``."""
    with _extra_for(verb):
        return importlib.import_module(VERBS[verb][0])


@contextlib.contextmanager
def _extra_for(verb: str) -> Iterator[None]:
    """A library of the verb's extra that is not installed: one line naming
    the extra (exit 1), not a traceback."""
    extra = VERBS[verb][2]
    try:
        yield
    except ModuleNotFoundError as exc:
        if extra and exc.name and not exc.name.startswith("shoal"):
            raise SystemExit(f"shoal {verb}: needs the '{extra}' extra ({exc.name} is not installed): "
                             f"pip install 'shoal[{extra}]'") from None
        raise


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse a whole command line (the verb's own options included), as ``main`` would."""
    top = _top_parser()
    if not argv or argv[0] not in VERBS:
        top.parse_args(argv)  # prints usage or --version and exits
    mod = component(argv[0])
    args: argparse.Namespace = mod.build_parser(argv[0]).parse_args(argv[1:])
    args.verb = argv[0]
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    try:
        with _extra_for(args.verb):
            rc: int = component(args.verb).run(args)
    except ShoalError as exc:
        # A user's mistake (bad parameter, unreadable file, refused round): one
        # line and exit 2, never a traceback. Library errors are mapped here,
        # once, for every verb.
        print(f"shoal {args.verb}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (``shoal simulate ... | head``): not an error of
        # ours, and no traceback. Python's documented recipe: point stdout at
        # devnull so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for such a pipeline
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
