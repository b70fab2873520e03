"""``shoal server``: run the aggregation server (its settings come from the
environment, ``settings.py``; a bad one is one line on stderr and exit 2)."""

from __future__ import annotations

import argparse
import sys


def build_parser(verb: str = "server") -> argparse.ArgumentParser:
    sv = argparse.ArgumentParser(prog="shoal server", description="run the aggregation server (needs shoal[server])")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--db", default=None, help="sqlite:///PATH or postgresql://... (default $SHOAL_DB_URL)")
    sv.add_argument("--dask", default=None, metavar="tcp://HOST:PORT",
                    help="sum decodes' reports on this Dask scheduler (default $SHOAL_DASK_SCHEDULER; unset: in-process)")
    sv.add_argument("--log-level", default="info",
                    help="info: request lines, round events, decode timings; warning: problems only (SHOAL_LOG_JSON=1 for JSON)")
    return sv


def run(args: argparse.Namespace) -> int:
    from shoal.common.errors import ShoalError
    from shoal.common.http_edge import serve
    from shoal.common.signing import identity_path, load_or_create_signing_key
    from shoal.server.edge.app import create_app
    from shoal.server.edge.settings import load_settings

    try:
        settings = load_settings(host=args.host, db_url=args.db, dask=args.dask)
    except ShoalError as exc:  # a bad setting: one line, no traceback
        print(f"shoal server: {exc}", file=sys.stderr)
        return 2
    identity = load_or_create_signing_key(identity_path(settings.key_path))
    print(f"shoal server: identity {identity.fingerprint} (pin it on devices and the shuffler: SHOAL_SERVER_KEY)",
          flush=True)
    if settings.generated_tokens:
        print(f"shoal server: generated tokens (set SHOAL_OPERATOR_TOKEN/SHOAL_SHUFFLER_TOKEN to choose them)\n"
              f"  operator: {settings.operator_token}\n  shuffler: {settings.shuffler_token}", flush=True)
    serve(create_app(settings), host=args.host, port=args.port, log_level=args.log_level,
          header_seconds=settings.header_seconds)
    return 0
