"""``shoal shuffler``: run the shuffler (its credentials come from the
environment: SHOAL_SHUFFLER_TOKEN, SHOAL_ENROL_TOKEN, SHOAL_SERVER_KEY)."""

from __future__ import annotations

import argparse
import sys

from shoal.common.services.access_log import ID, Route, access_summary

# Every device's sealed message and health/metrics polls: one line of counts per
# --access-summary-seconds, not one line each (issue 39).
DEVICE_ROUTES = (
    Route("POST", rf"/rounds/{ID}/messages", "/rounds/{id}/messages"),
    Route("GET", r"/healthz", "/healthz"),
    Route("GET", r"/metrics", "/metrics"),
)


def build_parser(verb: str = "shuffler") -> argparse.ArgumentParser:
    sh = argparse.ArgumentParser(prog="shoal shuffler", description="run the shuffler (needs shoal[server])")
    sh.add_argument("--server-url", required=True)
    sh.add_argument("--min-batch", type=int, default=100)
    sh.add_argument("--host", default="127.0.0.1")
    sh.add_argument("--port", type=int, default=8001)
    sh.add_argument("--db", default="shoal-shuffler.db")
    sh.add_argument("--log-level", default="info",
                    help="info: the operator's request lines, a summary of devices' messages, released batches; "
                         "debug: also a line per device request; warning: problems only (SHOAL_LOG_JSON=1 for JSON)")
    sh.add_argument("--access-summary-seconds", type=float, default=10.0,
                    help="devices' messages and health checks are logged as one line of counts per route and "
                         "status this often")
    sh.add_argument("--server-key", default=None,
                    help="the server identity fingerprint (sha256:...) to verify round configs against; or SHOAL_SERVER_KEY")
    sh.add_argument("--round-check-seconds", type=float, default=60.0,
                    help="how often buffered rounds are checked at the server (deleted rounds are forgotten)")
    sh.add_argument("--insecure", action="store_true",
                    help="allow a plain http:// --server-url that is not on this machine (a private network of "
                         "your own, e.g. compose's); otherwise use https:// (docs/how-to/tls.md)")
    sh.add_argument("--max-round-age-hours", type=float, default=168.0,
                    help="buffered messages of a round are dropped this long after its first one (also those of a "
                         "round the server answered 404 for, kept until then)")
    sh.add_argument("--pin-first-use", action="store_true",
                    help="without --server-key: read the server's identity at first start and keep it in --db "
                         "(a later identity is refused; covers a server that changes identity, not one hostile "
                         "from the start)")
    sh.add_argument("--insecure-no-pin", action="store_true",
                    help="run without a pinned server key, configs unverified; only for a server on this machine "
                         "(tests). Distinct from --insecure, which is about plain http")
    return sh


def run(args: argparse.Namespace) -> int:
    if not args.access_summary_seconds > 0:
        print(f"shoal shuffler: --access-summary-seconds must be positive, got {args.access_summary_seconds:g}",
              file=sys.stderr)
        return 2
    from shoal.common.services.device_cors import parse_origins
    from shoal.common.services.environment import read_environment
    from shoal.common.services.http_edge import serve
    from shoal.shuffler.app import ShufflerEnvironment, ShufflerSettings, create_app

    try:
        env = read_environment(ShufflerEnvironment)
    except ValueError as exc:  # ConfigError: a malformed SHOAL_* value, named
        print(f"shoal shuffler: {exc}", file=sys.stderr)
        return 2
    token = env.shuffler_token
    if not token:
        print("shoal shuffler: set SHOAL_SHUFFLER_TOKEN to the server's shuffler token", file=sys.stderr)
        return 2
    import secrets

    from shoal.common.wire.signing import pinned_key

    enrol = env.enrol_token
    if not enrol:
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print("shoal shuffler: set SHOAL_ENROL_TOKEN (the operator's credential for POST /enrol)", file=sys.stderr)
            return 2
        enrol = secrets.token_urlsafe(24)
        print(f"shoal shuffler: generated enrolment token (set SHOAL_ENROL_TOKEN to choose it): {enrol}", flush=True)
    try:
        settings = ShufflerSettings(server_url=args.server_url.rstrip("/"), token=token, db_path=args.db,
                                    min_batch=args.min_batch, server_key=pinned_key(args.server_key),
                                    enrol_token=enrol, round_check_seconds=args.round_check_seconds,
                                    max_round_age_seconds=args.max_round_age_hours * 3600,
                                    header_seconds=env.header_seconds, body_seconds=env.body_seconds,
                                    insecure=args.insecure, pin_first_use=args.pin_first_use,
                                    insecure_no_pin=args.insecure_no_pin,
                                    device_origins=parse_origins(env.device_origins))
    except ValueError as exc:
        print(f"shoal shuffler: {exc}", file=sys.stderr)
        return 2
    if settings.insecure_no_pin:
        print("shoal shuffler: WARNING --insecure-no-pin: configs are not verified, so a hostile server could "
              "equivocate on min_batch", file=sys.stderr, flush=True)
    with access_summary(DEVICE_ROUTES, every=args.access_summary_seconds) as summary:
        try:
            app = create_app(settings)
        except ValueError as exc:  # ConfigError: --pin-first-use could not read the server's identity
            print(f"shoal shuffler: {exc}", file=sys.stderr)
            return 2
        summary.flush_at_shutdown(app)
        serve(app, host=args.host, port=args.port, log_level=args.log_level, header_seconds=settings.header_seconds)
    return 0
