"""The ``shoal`` command.

Verbs: ``simulate`` (one in-process round on a .npy file) and ``bench``
(the accuracy and oracle sweeps). Both run server-side code, imported only
when the verb runs, so a device install never loads it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


def _simulate(args: argparse.Namespace) -> int:
    from shoal.common.bounds import PublicBound
    from shoal.server.simulate import format_centers, simulate

    points = np.load(args.data)
    if points.ndim != 2:
        print(f"shoal simulate: {args.data} must hold an (n, d) array, got shape {points.shape}", file=sys.stderr)
        return 2
    result = simulate(
        points,
        k=args.k,
        epsilon=args.eps,
        encoder=args.encoder,
        bound=PublicBound(radius=args.radius),
        seed=args.seed,
    )
    keys = (
        "normalized_objective nonprivate_objective trivial_objective n d k eps encoder "
        "encode_seconds decode_seconds peak_rss_mb centers"
    ).split()
    out: dict[str, Any] = {key: result[key] for key in keys}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"shoal simulate: n={out['n']} d={out['d']} k={out['k']} eps={out['eps']} encoder={out['encoder']} seed={args.seed}")
    for key in keys[:3]:
        print(f"  {key:22s} {out[key]:.5f}")
    print(f"  {'ratio to trivial':22s} {out['normalized_objective'] / out['trivial_objective']:.3f}")
    print(f"  encode {out['encode_seconds']:.2f} s, decode {out['decode_seconds']:.2f} s, peak RSS {out['peak_rss_mb']:.0f} MB")
    print("  centers (original space):")
    print(format_centers(out["centers"]))
    return 0


def _bench(args: argparse.Namespace) -> int:
    if args.services:
        from shoal.server.service_bench import run_services_bench

        return run_services_bench(args)
    if args.encoder == "sketch":
        from shoal.server.sketch_bench import run_sketch_bench

        return run_sketch_bench(args)
    if args.model == "shuffle":
        from shoal.server.shuffle_bench import run_shuffle_bench

        return run_shuffle_bench(args)
    from shoal.server.bench import run_bench

    return run_bench(args)


def _server(args: argparse.Namespace) -> int:
    from shoal.common.errors import ShoalError
    from shoal.common.http_edge import serve
    from shoal.common.signing import identity_path, load_or_create_signing_key
    from shoal.server.app import create_app
    from shoal.server.settings import load_settings

    try:
        settings = load_settings(host=args.host, db_url=args.db)
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


def _client_report(args: argparse.Namespace) -> int:
    from shoal.client.device import Device

    try:
        point = [float(v) for v in args.point.split(",")]
    except ValueError:
        print(f"shoal client report: --point must be comma-separated numbers, got {args.point!r}", file=sys.stderr)
        return 2
    import os

    from shoal.common.errors import ShoalError

    try:
        out = Device(args.server, args.ledger, cap=args.cap, shuffler_url=args.shuffler_url,
                     device_token=args.device_token or os.environ.get("SHOAL_DEVICE_TOKEN"), server_key=args.server_key,
                     allow_no_local_guarantee=args.allow_no_local_guarantee).participate(args.round, point)
    except ShoalError as exc:  # a refused config, a spent budget, an unreachable server: one clear line
        print(f"shoal client report: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


def _shuffler(args: argparse.Namespace) -> int:
    import os

    from shoal.common.http_edge import serve
    from shoal.server.settings import env_number
    from shoal.shuffler.app import ShufflerSettings, create_app

    token = os.environ.get("SHOAL_SHUFFLER_TOKEN", "")
    if not token:
        print("shoal shuffler: set SHOAL_SHUFFLER_TOKEN to the server's shuffler token", file=sys.stderr)
        return 2
    import secrets

    from shoal.common.signing import pinned_key

    enrol = os.environ.get("SHOAL_ENROL_TOKEN", "")
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
                                    header_seconds=env_number(os.environ, "SHOAL_HEADER_SECONDS", "10", float),
                                    body_seconds=env_number(os.environ, "SHOAL_BODY_SECONDS", "30", float))
    except ValueError as exc:
        print(f"shoal shuffler: {exc}", file=sys.stderr)
        return 2
    if settings.server_key is None:
        print("shoal shuffler: WARNING no server key pinned (--server-key / SHOAL_SERVER_KEY): configs are not "
              "verified, so a hostile server could equivocate on min_batch", file=sys.stderr, flush=True)
    serve(create_app(settings), host=args.host, port=args.port, log_level=args.log_level,
          header_seconds=settings.header_seconds)
    return 0


def _sim(args: argparse.Namespace) -> int:
    from shoal.server.sim import run_sim

    return run_sim(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shoal", description="Federated k-means with local differential privacy")
    sub = p.add_subparsers(dest="verb", required=True)
    s = sub.add_parser("simulate", help="encode every device and decode in-process")
    s.add_argument("--data", required=True, type=Path, help=".npy file with raw points (n x d)")
    s.add_argument("--k", required=True, type=int)
    s.add_argument("--eps", required=True, type=float)
    s.add_argument("--encoder", choices=("lsh", "nettree"), default="lsh")
    s.add_argument("--radius", type=float, default=1.0, help="public L2 bound of the raw points")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=_simulate)
    cl = sub.add_parser("client", help="device-side commands")
    clsub = cl.add_subparsers(dest="client_verb", required=True)
    rep = clsub.add_parser("report", help="encode one point for a round and send it")
    rep.add_argument("--server", required=True)
    rep.add_argument("--round", required=True)
    rep.add_argument("--point", required=True, help="comma-separated coordinates")
    rep.add_argument("--ledger", default=str(Path.home() / ".shoal" / "ledger.json"))
    rep.add_argument("--cap", type=float, default=10.0, help="this device's total epsilon cap")
    rep.add_argument("--shuffler-url", default=None, help="the shuffler, for shuffle-model and secure-sum rounds")
    rep.add_argument("--device-token", default=None,
                     help="this device's token enrolled at the shuffler (or SHOAL_DEVICE_TOKEN)")
    rep.add_argument("--server-key", default=None, help="the server identity fingerprint to pin (or SHOAL_SERVER_KEY)")
    rep.add_argument("--allow-no-local-guarantee", action="store_true",
                     help="consent to secure-sum rounds (refine, shuffle-model sketches): their shares carry no "
                          "local DP guarantee, only a central one if the shuffler does not collude")
    rep.set_defaults(func=_client_report)
    sv = sub.add_parser("server", help="run the aggregation server (needs shoal[server])")
    sv.add_argument("--host", default="127.0.0.1")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--db", default=None, help="sqlite:///PATH or postgresql://... (default $SHOAL_DB_URL)")
    sv.add_argument("--log-level", default="warning")
    sv.set_defaults(func=_server)
    sh = sub.add_parser("shuffler", help="run the shuffler (needs shoal[server])")
    sh.add_argument("--server-url", required=True)
    sh.add_argument("--min-batch", type=int, default=100)
    sh.add_argument("--host", default="127.0.0.1")
    sh.add_argument("--port", type=int, default=8001)
    sh.add_argument("--db", default="shoal-shuffler.db")
    sh.add_argument("--log-level", default="warning")
    sh.add_argument("--server-key", default=None,
                    help="the server identity fingerprint (sha256:...) to verify round configs against; or SHOAL_SERVER_KEY")
    sh.add_argument("--round-check-seconds", type=float, default=60.0,
                    help="how often buffered rounds are checked at the server (deleted rounds are forgotten)")
    sh.add_argument("--max-round-age-hours", type=float, default=168.0,
                    help="buffered messages of a round are dropped this long after its first one")
    sh.set_defaults(func=_shuffler)
    sm = sub.add_parser("sim", help="server, shuffler and N simulated devices on 127.0.0.1")
    sm.add_argument("--users", type=int, default=5000)
    sm.add_argument("--via-shuffler", action="store_true")
    sm.add_argument("--dataset", default="city", help="city | gauss | uber | letter | FILE.npy")
    sm.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    sm.add_argument("--k", type=int, default=None)
    sm.add_argument("--eps", type=float, default=4.0)
    sm.add_argument("--encoder", choices=("lsh", "nettree", "sketch"), default="nettree",
                    help="sketch: scrambled compressive sketches (local model) or secure-sum sketches (--model shuffle)")
    sm.add_argument("--records-per-device", type=int, default=1,
                    help="sketch, local model: each device sketches this many consecutive points (the paper's n0)")
    sm.add_argument("--radius", type=float, default=1.0)
    sm.add_argument("--concurrency", type=int, default=50)
    sm.add_argument("--workers", type=int, default=2, help="device processes (httpx clients) sharing --concurrency")
    sm.add_argument("--min-batch", type=int, default=100,
                    help="shuffler batch threshold (and, with --model shuffle, the batch the guarantee assumes)")
    sm.add_argument("--model", choices=("local", "shuffle"), default="local",
                    help="shuffle: --eps/--delta are the central target; devices randomise at the amplified eps0")
    sm.add_argument("--delta", type=float, default=1e-6)
    sm.add_argument("--refine", type=float, default=None, metavar="EPS",
                    help="after the round, a refine round at central EPS (delta --delta, at least --min-batch devices) "
                         "through secure summation; needs --via-shuffler")
    sm.add_argument("--server-url", default=None)
    sm.add_argument("--shuffler-url", default=None)
    sm.add_argument("--seed", type=int, default=0)
    sm.add_argument("--allow-non-loopback", action="store_true",
                    help="only inside a container network of your own (docker compose); never needed here")
    sm.add_argument("--json", action="store_true")
    sm.set_defaults(func=_sim)
    b = sub.add_parser("bench", help="accuracy sweep and frequency-oracle benchmark")
    b.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    b.add_argument("--out", type=Path, default=Path("tests/bench/results"))
    b.add_argument("--ns", default="10000,100000,1000000")
    b.add_argument("--eps", default="1,2,4,8")
    b.add_argument("--seeds", type=int, default=3)
    b.add_argument("--encoders", default="lsh,nettree")
    b.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    b.add_argument("--ablation", action="store_true", help="decoder before/after table instead of the sweep")
    b.add_argument("--oracle", action="store_true", help="only the frequency-oracle benchmark")
    b.add_argument("--perf", action="store_true", help="time encode/ingest/decode of 1e6 devices instead of the sweep")
    b.add_argument("--services", action="store_true",
                   help="ingestion throughput/latency of the real server and `shoal sim` timings")
    b.add_argument("--model", choices=("local", "shuffle"), default="local",
                   help="shuffle: local vs shuffle vs shuffle+refine at equal central eps (paper n=1e6 and Uber)")
    b.add_argument("--encoder", choices=("tree", "sketch"), default="tree",
                   help="sketch: the compressive path (local, shuffle) side by side with pycle if installed")
    b.set_defaults(func=_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rc: int = args.func(args)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
