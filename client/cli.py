"""``shoal client``: the device's commands (DESIGN.md, "Layout": the client
installs and runs without the server extra, so this imports only
``shoal.client`` and ``shoal.common``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from shoal.common.errors import ShoalError


def build_parser(verb: str = "client") -> argparse.ArgumentParser:
    cl = argparse.ArgumentParser(prog="shoal client", description="device-side commands")
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
    rep.add_argument("--insecure", action="store_true",
                     help="allow plain http:// to a server or shuffler that is not on this machine (a private "
                          "network of your own); otherwise use https:// (docs/how-to/tls.md)")
    led = clsub.add_parser("ledger", help="what this device has spent, round by round, against its cap")
    led.add_argument("--ledger", default=str(Path.home() / ".shoal" / "ledger.json"))
    led.add_argument("--cap", type=float, default=None, help="the cap to compare with (default: the ledger's own)")
    led.add_argument("--json", action="store_true")
    return cl


def _ledger(args: argparse.Namespace) -> int:
    """Print the device's privacy spend (issue 16: nothing showed a device its budget)."""
    from shoal.client.ledger import Ledger

    path = Path(args.ledger)
    stored_cap = json.loads(path.read_text()).get("cap") if path.exists() else None
    cap = args.cap if args.cap is not None else float(stored_cap or 10.0)
    ledger = Ledger(path, cap)
    rounds = [{"round": rid, "guarantee": e.get("guarantee", "local"), "epsilon": e["epsilon"],
               "central_epsilon": e.get("central_epsilon"), "delta": e.get("delta"), "note": e.get("note", "")}
              for rid, e in ledger.entries.items()]
    spent = ledger.spent
    if args.json:
        print(json.dumps({"ledger": str(path), "cap": cap, "spent": spent, "left": max(cap - spent, 0.0),
                          "rounds": rounds}))
        return 0
    print(f"shoal client ledger: {path}: spent local eps {spent:g} of cap {cap:g} ({max(cap - spent, 0.0):g} left), "
          f"{len(rounds)} round(s)")
    for r in rounds:
        extra = "" if r["central_epsilon"] is None else f", central ({r['central_epsilon']:g}, {r['delta']:g})"
        cost = f"local eps {r['epsilon']:g}" if r["guarantee"] == "local" else "no local guarantee (secure sum)"
        print(f"  {r['round']}: {cost}{extra}{' - ' + r['note'] if r['note'] else ''}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.client_verb == "ledger":
        return _ledger(args)
    from shoal.client.device import Device

    try:
        point = [float(v) for v in args.point.split(",")]
    except ValueError:
        print(f"shoal client report: --point must be comma-separated numbers, got {args.point!r}", file=sys.stderr)
        return 2
    from shoal.common.wire.transport import check_url

    try:  # a URL refused is a usage error (exit 2), before anything is read or charged
        check_url(args.server, "the server URL", args.insecure, flag="--insecure")
        if args.shuffler_url:
            check_url(args.shuffler_url, "the shuffler URL", args.insecure, flag="--insecure")
    except ShoalError as exc:
        print(f"shoal client report: {exc}", file=sys.stderr)
        return 2
    try:
        out = Device(args.server, args.ledger, cap=args.cap, shuffler_url=args.shuffler_url,
                     device_token=args.device_token or os.environ.get("SHOAL_DEVICE_TOKEN"), server_key=args.server_key,
                     allow_no_local_guarantee=args.allow_no_local_guarantee,
                     insecure=args.insecure).participate(args.round, point)
    except ShoalError as exc:  # a refused config, a spent budget, an unreachable server: one clear line
        print(f"shoal client report: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0
