"""``shoal server``: run the aggregation server (its settings come from the
environment, ``settings.py``; a bad one is one line on stderr and exit 2)."""

from __future__ import annotations

import argparse
import sys

from shoal.common.services.access_log import ID, Route, access_summary

# The requests every device makes (a report costs a round check, its config and
# the report itself) and health/metrics polls: counted in one line per
# --access-summary-seconds, not one line each (issue 39: 14,901 of a demo's 15,440 lines).
DEVICE_ROUTES = (
    Route("POST", rf"/rounds/{ID}/reports", "/rounds/{id}/reports"),
    Route("POST", rf"/rounds/{ID}/reports/binary", "/rounds/{id}/reports/binary"),
    Route("GET", rf"/rounds/{ID}/config", "/rounds/{id}/config"),
    Route("GET", rf"/rounds/{ID}", "/rounds/{id}"),
    Route("GET", r"/healthz", "/healthz"),
    Route("GET", r"/metrics", "/metrics"),
)


def build_parser(verb: str = "server") -> argparse.ArgumentParser:
    sv = argparse.ArgumentParser(prog="shoal server", description="run the aggregation server (needs shoal[server])")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--db", default=None, help="sqlite:///PATH or postgresql://... (default $SHOAL_DB_URL)")
    sv.add_argument("--dask", default=None, metavar="tcp://HOST:PORT",
                    help="sum decodes' reports on this Dask scheduler (default $SHOAL_DASK_SCHEDULER; unset: in-process)")
    sv.add_argument("--log-level", default="info",
                    help="info: the operator's request lines, a summary of devices' requests, round events, decode "
                         "timings; debug: also a line per device request; warning: problems only "
                         "(SHOAL_LOG_JSON=1 for JSON)")
    sv.add_argument("--access-summary-seconds", type=float, default=10.0,
                    help="devices' requests (reports, configs, health checks) are logged as one line of counts "
                         "per route and status this often")
    return sv


def run(args: argparse.Namespace) -> int:
    if not args.access_summary_seconds > 0:
        print(f"shoal server: --access-summary-seconds must be positive, got {args.access_summary_seconds:g}",
              file=sys.stderr)
        return 2
    from shoal.common.errors import ShoalError
    from shoal.common.services.http_edge import serve
    from shoal.common.wire.signing import identity_path, load_or_create_signing_key
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
    with access_summary(DEVICE_ROUTES, every=args.access_summary_seconds) as summary:
        app = create_app(settings)
        summary.flush_at_shutdown(app)
        serve(app, host=args.host, port=args.port, log_level=args.log_level, header_seconds=settings.header_seconds)
    return 0
