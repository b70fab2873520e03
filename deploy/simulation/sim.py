"""``shoal sim``: a server, optionally a shuffler, and N simulated devices on 127.0.0.1.

Starts the services as separate processes (unless ``--server-url`` is given),
creates a round, lets N devices send concurrently (``senders.py``: asyncio + aiohttp, bounded
concurrency), triggers clustering and reports accuracy and throughput. Only
loopback addresses are ever targeted.

Over 300 lines: the dataset, sending from many processes and the refine,
elbow and local refine rounds are one run's steps, kept in the order they
happen (starting and stopping the services is ``processes.py``'s).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import numpy as np

from shoal.client.kinds import device_kind
from shoal.common.cost_drops import Z_OF, prefix_costs
from shoal.common.errors import ConfigError
from shoal.common.kinds import kind_name, parse_config
from shoal.common.wire.binary import CONTENT_TYPE, messages_to_binary
from shoal.common.wire.envelope import seal
from shoal.common.wire.messages import sealed_share_parts, submission_json
from shoal.common.wire.models import DeviceMessage
from shoal.common.wire.signing import config_digest
from shoal.common.wire.transport import is_loopback_host
from shoal.deploy.simulation.datasets import (
    Dataset,
    city_locations,
    load_letter,
    load_points,
    load_uber,
    paper_mixture,
)
from shoal.deploy.simulation.evaluation import cli_bound, nonprivate_objective
from shoal.deploy.simulation.fresh_devices import split_population
from shoal.deploy.simulation.processes import Services, enrol_tokens
from shoal.deploy.simulation.senders import send_devices
from shoal.deploy.simulation.simulate import format_centers
from shoal.server.decoders.kmeans import kmeans_cost


def _dataset(args: argparse.Namespace) -> Dataset:
    name = args.dataset
    if name == "city":
        return city_locations(args.users, seed=args.seed, sample_seed=args.sample_seed)
    if name == "gauss":
        return paper_mixture(args.users, d=10, k=args.k or 5, seed=args.seed, sample_seed=args.sample_seed)
    if name in ("uber", "letter"):
        try:
            ds = (load_uber if name == "uber" else load_letter)(args.data_dir)
        except FileNotFoundError as exc:
            raise ConfigError(f"dataset {name} needs {exc.filename}: point --data-dir at the folder that holds it") from None
        idx = np.random.default_rng([args.seed] + ([args.sample_seed] if args.sample_seed is not None else [])
                                    ).permutation(ds.points.shape[0])[: args.users]
        return Dataset(ds.name, ds.points[idx], ds.k, ds.bound)
    if not Path(name).is_file():
        raise ConfigError(f"unknown dataset {name!r}: city | gauss | uber | letter | FILE.npy")
    points = load_points(name)[: args.users]
    return Dataset(Path(name).stem, points, args.k or 5, cli_bound(args.radius, args.box, points, "shoal sim"))


def _secure_sum_child(args: argparse.Namespace, ds: Dataset, rid: str, server_url: str, shuffler_url: str,
                      op: dict[str, str], shuffler_token: str, what: str, eps: float) -> tuple[dict[str, Any], Any]:
    """A round opened on the done round ``rid`` (``what``: "refine" or "elbow") whose
    devices send secure-sum shares: every device's shares (sealed one by one, one
    submission each) to the shuffler, one flush mixes them all, then the decode."""
    n = ds.points.shape[0]
    r = httpx.post(f"{server_url}/rounds/{rid}/{what}", headers=op, timeout=30,
                   json={"epsilon": eps, "delta": args.delta, "min_devices": max(16, args.min_batch),
                         "max_devices": max(n, 100 * max(16, args.min_batch))})
    r.raise_for_status()
    rnd = r.json()
    child, cfg = rnd["id"], parse_config(rnd["config"])
    key = base64.b64decode(rnd["server_public_key"])
    # Every simulated device computes its own shares (vectorised here for speed).
    shares = device_kind(kind_name(rnd["config"])).simulate(cfg, ds.points, 1).shares
    assert shares is not None, f"a {what} round's devices send secure-sum shares"
    bodies, urls, heads = _to_shuffler(_parts_bodies(shares, key, child, config_digest(rnd["config"], rnd["server_public_key"])),
                                       f"{shuffler_url}/rounds/{child}/messages", args.enrol_token)
    t = time.perf_counter()
    failures = send_devices(bodies, urls, heads, args.concurrency, args.workers, not args.json)
    send_s = time.perf_counter() - t
    f = httpx.post(f"{shuffler_url}/rounds/{child}/flush", headers={"Authorization": f"Bearer {shuffler_token}"}, timeout=600)
    f.raise_for_status()
    r = httpx.post(f"{server_url}/rounds/{child}/cluster", headers=op, timeout=600)
    r.raise_for_status()
    res = r.json()
    return {"round_id": child, "failed": failures, "send_seconds": send_s, "devices": res["diagnostics"]["devices"],
            "shares_per_device": cfg.secure_sum.shares, "privacy": res["privacy"], "centers": res["centers"]}, res


def _refine(args: argparse.Namespace, ds: Dataset, rid: str, server_url: str, shuffler_url: str,
            op: dict[str, str], shuffler_token: str, ball: np.ndarray) -> dict[str, Any]:
    """``--refine-rounds`` refine rounds (``_secure_sum_child``), each opened on the last (a chain:
    the partition stage's, ``kinds.partition_plan``), and the last one's objective; "chain" holds
    every round's id and objective."""
    chain = []
    for _ in range(max(1, args.refine_rounds)):
        out, res = _secure_sum_child(args, ds, rid, server_url, shuffler_url, op, shuffler_token, "refine", args.refine)
        out["normalized_objective"] = kmeans_cost(ball, np.asarray(res["ball_centers"])) / ds.points.shape[0]
        chain.append({"round_id": out["round_id"], "normalized_objective": out["normalized_objective"]})
        rid = out["round_id"]
    out["chain"] = chain
    return out


def _elbow(args: argparse.Namespace, ds: Dataset, rid: str, server_url: str, shuffler_url: str,
           op: dict[str, str], shuffler_token: str, ball: np.ndarray) -> dict[str, Any]:
    """The elbow round (``_secure_sum_child``) on a greedy round's ordered centers, and
    the data's own cost of the same centers beside its curve (the simulator holds the data)."""
    out, res = _secure_sum_child(args, ds, rid, server_url, shuffler_url, op, shuffler_token, "elbow", args.elbow)
    centers = np.asarray(res["ball_centers"])
    out.update(elbow=res["elbow"], data_cost=prefix_costs(ball, centers, Z_OF[res["elbow"]["objective"]]).sum(0).tolist())
    return out


def _local_refine(args: argparse.Namespace, ds: Dataset, fresh: np.ndarray, rid: str, server_url: str,
                  op: dict[str, str], ball: np.ndarray) -> dict[str, Any]:
    """The local refine round (``common/kinds/local_refine.py``) on the fresh
    devices: each sends its one codebook report directly to the server."""
    r = httpx.post(f"{server_url}/rounds/{rid}/refine", headers=op, timeout=30,
                   json={"model": "local", "epsilon": args.eps})
    r.raise_for_status()
    rnd = r.json()
    ref_id = rnd["id"]
    messages = device_kind(kind_name(rnd["config"])).simulate(parse_config(rnd["config"]), fresh, 1).messages or []
    bodies = [m.model_dump_json().encode() for m in messages]
    t = time.perf_counter()
    failures = send_devices(bodies, [f"{server_url}/rounds/{ref_id}/reports"] * len(bodies),
                            [{"content-type": "application/json"}] * len(bodies), args.concurrency, args.workers,
                            not args.json)
    send_s = time.perf_counter() - t
    r = httpx.post(f"{server_url}/rounds/{ref_id}/cluster", headers=op, timeout=600)
    r.raise_for_status()
    res = r.json()
    return {
        "round_id": ref_id, "failed": failures, "send_seconds": send_s, "devices": res["diagnostics"]["devices"],
        "privacy": res["privacy"], "centers": res["centers"], "mechanism": "local",
        "normalized_objective": kmeans_cost(ball, np.asarray(res["ball_centers"])) / ds.points.shape[0],
    }


def _to_shuffler(bodies: list[bytes], url: str, enrol_token: str) -> tuple[list[bytes], list[str], list[dict[str, str]]]:
    """Each body to the shuffler's ``url`` with an enrolled device token of its own."""
    tokens = enrol_tokens(url.split("/rounds/")[0], enrol_token, len(bodies))
    heads = [{"content-type": "application/json", "X-Device-Token": t} for t in tokens]
    return bodies, [url] * len(bodies), heads


def _parts_bodies(shares: np.ndarray, key: bytes, round_id: str, digest: str) -> list[bytes]:
    """Per device, its secure-sum shares sealed one by one, as one ``parts`` submission
    with the digest of the config the device verified."""
    return [submission_json(p, digest).encode() for p in sealed_share_parts(shares, key, round_id)]


def _device_bodies(args: argparse.Namespace, ds: Dataset, rnd: dict[str, Any], server_url: str,
                   shuffler_url: str | None) -> tuple[list[bytes], list[str], list[dict[str, str]]]:
    """Every simulated device's request (body, URL, headers); each device
    encodes its own data (vectorised here for speed)."""
    rid, key = rnd["id"], base64.b64decode(rnd["server_public_key"])
    digest = config_digest(rnd["config"], rnd["server_public_key"])

    def via_shuffler(bodies: list[bytes]) -> tuple[list[bytes], list[str], list[dict[str, str]]]:
        return _to_shuffler(bodies, f"{shuffler_url}/rounds/{rid}/messages", args.enrol_token)

    # Each device encodes its own data; vectorised here for speed, through the round kind's device half.
    config = rnd["config"]
    out = device_kind(kind_name(config)).simulate(parse_config(config), ds.points, args.records_per_device)
    if out.shares is not None:  # secure-sum shares: sealed one by one, always through the shuffler
        return via_shuffler(_parts_bodies(out.shares, key, rid, digest))
    messages = out.messages or []
    if args.via_shuffler and shuffler_url:
        return via_shuffler([json.dumps({"sealed": base64.b64encode(seal(m.model_dump_json().encode(), key, rid)).decode(),
                                         "config_digest": digest}).encode()
                             for m in messages])
    if getattr(args, "wire", "binary") == "binary" and messages and all(isinstance(m, DeviceMessage) for m in messages):
        tree = [m for m in messages if isinstance(m, DeviceMessage)]  # tree reports: 42 bytes each (wire/binary.py)
        bodies = [messages_to_binary([m]) for m in tree]
        return bodies, [f"{server_url}/rounds/{rid}/reports/binary"] * len(bodies), [{"content-type": CONTENT_TYPE}] * len(bodies)
    bodies = [m.model_dump_json().encode() for m in messages]
    return bodies, [f"{server_url}/rounds/{rid}/reports"] * len(bodies), [{"content-type": "application/json"}] * len(bodies)


def _write_round_file(path: Path, round_id: str) -> None:
    """The round's id for the devices (compose: a shared volume), written whole
    or not at all (a reader never sees half an id)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(round_id + "\n")
    os.replace(tmp, path)


def _join_round(args: argparse.Namespace, server_url: str, dim: int) -> dict[str, Any]:
    """An existing round (``--round ID``, or the id in ``--round-file``, waited
    for up to ``--wait`` seconds): its public config and key, as a device reads them."""
    rid = args.round
    if not rid:
        path, deadline = Path(args.round_file), time.monotonic() + args.wait
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if not path.exists():
            raise ConfigError(f"no round id appeared in {path} within {args.wait:g} s (--wait)")
        rid = path.read_text().strip()
    r = httpx.get(f"{server_url}/rounds/{rid}", timeout=30)
    if r.status_code == 404:
        raise ConfigError(f"the server at {server_url} has no round {rid!r}")
    r.raise_for_status()
    rnd: dict[str, Any] = r.json()
    if rnd["state"] != "open":
        raise ConfigError(f"round {rid} is {rnd['state']}: devices can join open rounds only")
    if int(rnd["config"]["dim"]) != dim:
        raise ConfigError(f"round {rid} has dimension {rnd['config']['dim']}, the dataset {dim}")
    return rnd


def run_sim(args: argparse.Namespace) -> int:
    if args.algorithm == "continual":
        from shoal.deploy.simulation.continual_sim import run_continual_sim

        return run_continual_sim(args)
    local_refine = bool(args.refine) and args.model == "local"
    if (args.model in ("shuffle", "central") or (args.refine and not local_refine)) and not args.via_shuffler:
        print("shoal sim: --model shuffle, --model central and a shuffle --refine need --via-shuffler", file=sys.stderr)
        return 2
    if local_refine and not 0 < args.refine < 1:
        print(f"shoal sim: in the local model --refine is the share of devices kept fresh for a local refine round, "
              f"in (0, 1); got {args.refine:g}", file=sys.stderr)
        return 2
    if args.elbow is not None and (args.centers != "greedy" or not args.via_shuffler or args.model == "central"):
        print("shoal sim: --elbow opens an elbow round on a greedy tree round's ordered centers through the "
              "shuffler: it needs --centers greedy and --via-shuffler (not --model central)", file=sys.stderr)
        return 2
    if args.centers == "greedy" and (args.model == "central" or args.encoder not in ("auto", "nettree")):
        print("shoal sim: --centers greedy decodes a nettree round (--encoder nettree or auto); the central "
              "model's greedy is --algorithm greedy-001", file=sys.stderr)
        return 2
    if (args.algorithm is not None and args.model != "central") or (args.model == "central" and args.encoder != "auto"):
        print("shoal sim: --algorithm belongs to --model central, which takes no --encoder", file=sys.stderr)
        return 2
    if args.records_per_device > 1 and not ((args.encoder == "sketch" and args.model == "local")
                                            or args.model == "central"):
        print("shoal sim: --records-per-device is for local-model sketch rounds and central rounds", file=sys.stderr)
        return 2
    if getattr(args, "keep", None) is not None and args.server_url:
        print(f"shoal sim: --keep {args.keep} keeps the store of the services sim starts; with --server-url "
              "the services are yours", file=sys.stderr)
        return 2
    joining = bool(args.round or args.round_file) and not args.create_only
    if (joining or args.create_only) and not args.server_url:
        print("shoal sim: --round, --round-file and --create-only work with a running server: give --server-url",
              file=sys.stderr)
        return 2
    if args.create_only and not args.round_file:
        print("shoal sim: --create-only needs --round-file (where the round's id is written)", file=sys.stderr)
        return 2
    # Devices joining a round hold their own data: scaled replicas draw other
    # devices of the same population, never a copy of one another's points.
    args.sample_seed = secrets.randbits(31) if joining else None
    ds = _dataset(args)
    n, d = ds.points.shape
    k = args.k or ds.k
    # Local refine: a random share of the devices stays fresh for the refine round (each answers one round).
    tree_rows, fresh_rows = split_population(n, args.refine, args.seed) if local_refine else (np.arange(n), None)
    first = Dataset(ds.name, ds.points[tree_rows], ds.k, ds.bound)
    services = None
    if args.server_url:
        host = urlparse(args.server_url).hostname or ""
        if not is_loopback_host(host) and not args.allow_non_loopback:
            print(f"shoal sim: only loopback servers may be targeted, not {host}", file=sys.stderr)
            return 2
        server_url, shuffler_url = args.server_url.rstrip("/"), args.shuffler_url
        op_token = os.environ.get("SHOAL_OPERATOR_TOKEN", "")
    else:
        try:
            services = Services(args.via_shuffler, args.min_batch, keep=getattr(args, "keep", None))
        except RuntimeError as exc:  # a service died at start: its own last lines, no traceback
            print(f"shoal sim: {exc}", file=sys.stderr)
            return 1
        server_url, shuffler_url = services.server_url, services.shuffler_url
        op_token = services.env["SHOAL_OPERATOR_TOKEN"]
    # The operator's enrolment credential at the shuffler (enrol_tokens): ours, or the environment's.
    args.enrol_token = services.env["SHOAL_ENROL_TOKEN"] if services else os.environ.get("SHOAL_ENROL_TOKEN", "")
    try:
        op = {"Authorization": f"Bearer {op_token}"}
        b = ds.bound
        body: dict[str, Any] = {"k": k, "dim": d, "epsilon": args.eps, "n_expected": len(tree_rows), "encoder": args.encoder,
                                **({"model": "shuffle", "delta": args.delta, "min_batch": args.min_batch}
                                   if args.model == "shuffle" else {}),
                                **({"model": "central", "delta": args.delta, "algorithm": args.algorithm or "auto",
                                    "n_expected": -(-n // args.records_per_device),
                                    "tuning": {"records_per_device": args.records_per_device}}
                                   if args.model == "central" else {}),
                                **({"tuning": {"max_devices": max(n, 100 * args.min_batch)}}
                                   if args.model == "shuffle" and args.encoder == "sketch" else {}),
                                **({"encoder": "nettree", "tuning": {"tree": {"centers": "greedy"}}}
                                   if args.centers == "greedy" else {}),
                                "bound": {"radius": b.radius, "low": list(b.low) if b.low else None,
                                          "high": list(b.high) if b.high else None}}
        if args.n_expected:
            body["n_expected"] = args.n_expected
        if joining:
            rnd = _join_round(args, server_url, d)
        else:
            r = httpx.post(server_url + "/rounds", json=body, headers=op, timeout=30)
            r.raise_for_status()
            rnd = r.json()
            if args.create_only:
                _write_round_file(Path(args.round_file), rnd["id"])
                print(f"shoal sim: created round {rnd['id']} (k={k}, d={d}, eps={args.eps}, "
                      f"n_expected={body['n_expected']}); its id is in {args.round_file}")
                return 0
        rid = rnd["id"]
        # What "auto" chose: the tree's encoder, or a central round's algorithm.
        encoder = str(rnd["config"].get("encoder", rnd["config"].get("spec", {}).get("algorithm", args.encoder)))
        bodies, urls, heads = _device_bodies(args, first, rnd, server_url, shuffler_url)
        t = time.perf_counter()
        failures = send_devices(bodies, urls, heads, args.concurrency, args.workers, not args.json)
        send_s = time.perf_counter() - t
        shuffler_token = services.env["SHOAL_SHUFFLER_TOKEN"] if services else os.environ.get("SHOAL_SHUFFLER_TOKEN", "")
        if args.via_shuffler and shuffler_url:
            # Let the forwarder drain, then flush: the remainder is released only
            # if it is itself >= min_batch (smaller tails stay in the buffer).
            time.sleep(1.0)
            # The operator's path when the server knows the shuffler (services we started); else the shuffler's own.
            flush_url, held_url, who = ((f"{server_url}/rounds/{rid}/flush", f"{server_url}/rounds/{rid}/pending", op)
                                        if services else
                                        (f"{shuffler_url}/rounds/{rid}/flush", f"{shuffler_url}/rounds/{rid}",
                                         {"Authorization": f"Bearer {shuffler_token}"}))
            httpx.post(flush_url, headers=who, timeout=600)
        received = httpx.get(server_url + f"/rounds/{rid}", timeout=10).json()["reports"]
        pending = None
        if args.via_shuffler and shuffler_url:
            held = httpx.get(held_url, headers=who, timeout=30)
            if held.status_code == 200:
                pending = held.json()
                if pending["pending"] and not args.json:
                    print(f"shoal sim: {pending['pending']} message(s) stay in the shuffler, below its batch threshold "
                          f"{pending['threshold']} (never released alone: a smaller batch would break the round's "
                          "central guarantee)", file=sys.stderr)
        if args.no_cluster:
            held_line = "" if pending is None else f", {pending['pending']} pending in the shuffler"
            print(json.dumps({"round_id": rid, "devices": len(bodies), "failed": failures, "received": received,
                              "pending_in_shuffler": None if pending is None else pending["pending"]})
                  if args.json else
                  f"shoal sim: {len(bodies)} devices sent to round {rid}, {failures} failed; the round holds "
                  f"{received} reports{held_line}; not clustered (--no-cluster)")
            return 0
        t = time.perf_counter()
        r = httpx.post(server_url + f"/rounds/{rid}/cluster", headers=op, timeout=3600,
                       json={"dask": args.dask} if getattr(args, "dask", None) else None)
        if r.status_code >= 400:
            print(f"shoal sim: clustering round {rid} failed ({r.status_code}): {r.text}", file=sys.stderr)
            return 1
        decode_s = time.perf_counter() - t
        res = r.json()
        ball = ds.bound.to_ball(ds.points)
        centers_ball = ds.bound.to_ball(np.asarray(res["centers"]))
        out = {
            "users": n, "received": received, "failed": failures, "via_shuffler": bool(args.via_shuffler),
            "dataset": ds.name, "d": d, "k": k, "eps": args.eps, "encoder": encoder, "model": args.model,
            "devices": len(bodies), "privacy": res["privacy"], "diagnostics": res["diagnostics"],
            "normalized_objective": kmeans_cost(ball, centers_ball) / n,
            "nonprivate_objective": nonprivate_objective(ball, k),
            "trivial_objective": kmeans_cost(ball, ball.mean(0, keepdims=True)) / n,
            "reports_per_second": n / send_s, "send_seconds": send_s, "decode_seconds": decode_s,
            "centers": res["centers"], "quality": res.get("quality"), "elbow": res.get("elbow"),
            "pending_in_shuffler": None if pending is None else pending["pending"],
        }
        if not args.json:  # the first round's result now, before a refine round's devices start (issue 16)
            print(f"shoal sim: {len(bodies)} devices ({n} points), dataset {ds.name}, d={d} k={k} eps={args.eps} {encoder}"
                  f"{' (auto)' if args.encoder == 'auto' else ''}, "
                  f"{'via shuffler (min batch ' + str(args.min_batch) + ')' if args.via_shuffler else 'direct'}")
            held_line = "" if pending is None else f", {pending['pending']} pending in the shuffler"
            print(f"  received {received} reports{held_line}, {failures} devices failed; "
                  f"{out['reports_per_second']:.0f} reports/s; decode {decode_s:.1f} s")
            if res.get("quality"):
                print(f"  verdict: {res['quality']['verdict']}")
            pr = res["privacy"]
            device_eps = (f"none ({'the server is the curator' if pr['model'] == 'central' else 'secure sum'})"
                          if pr["device_epsilon"] is None else f"{pr['device_epsilon']:.3f}")
            print(f"  privacy: model {pr['model']}, device eps {device_eps}, "
                  f"central ({pr['central_epsilon']:.3f}, {pr['delta']:g})")
            if args.encoder == "sketch":
                dg = res["diagnostics"]
                snr = dg["snr_estimated"]
                print(f"  sketch: m={dg['m']} r={dg['r']}, SNR {snr if snr is None else format(snr, '.3g')} "
                      f"(x m/(kd): {dg['snr_times_m_over_kd'] if snr is None else format(dg['snr_times_m_over_kd'], '.3g')}; "
                      f"success expected >= 100, seed 002 Sec. 5), sketch residual {dg['sketch_residual']:.3f}")
            if res.get("elbow"):  # greedy-001: ordered centers and the private elbow curve (issue 18)
                el = res["elbow"]
                print(f"  elbow: suggested k' = {el['suggested_k']}; cost per point of the first k' centers: "
                      + ", ".join(f"{c['k']}: {c['cost'] / n:.4g} +- {c['band'] / n:.2g}" for c in el["costs"]))
            print(f"  objective {out['normalized_objective']:.5f}  non-private {out['nonprivate_objective']:.5f}  one center {out['trivial_objective']:.5f}")
            print("  centers:")
            print(format_centers(res["centers"], precision=3), flush=True)
        if local_refine and fresh_rows is not None:
            out["refine"] = _local_refine(args, ds, ds.points[fresh_rows], rid, server_url, op, ball)
        elif args.refine and shuffler_url:
            out["refine"] = _refine(args, ds, rid, server_url, shuffler_url, op, shuffler_token, ball)
        if args.elbow and shuffler_url:
            out["elbow_round"] = _elbow(args, ds, rid, server_url, shuffler_url, op, shuffler_token, ball)
        if args.json:
            print(json.dumps(out))
        elif local_refine and "refine" in out:
            rf = out["refine"]
            print(f"  local refine round {rf['round_id']}: {rf['devices']} fresh devices at eps {args.eps:g}, "
                  f"objective {rf['normalized_objective']:.5f}; device eps {rf['privacy']['device_epsilon']:.3f} "
                  f"(each device answered one of the two rounds)")
            print(format_centers(rf["centers"], precision=3))
        elif "refine" in out:
            rf = out["refine"]
            if len(rf["chain"]) > 1:
                print("  refine chain: " + " -> ".join(f"{c['round_id']} ({c['normalized_objective']:.5f})"
                                                       for c in rf["chain"]))
            print(f"  refine round {rf['round_id']}: {rf['devices']} devices x {rf['shares_per_device']} shares, "
                  f"objective {rf['normalized_objective']:.5f}; composed central "
                  f"({rf['privacy']['central_epsilon']:.3f}, {rf['privacy']['delta']:g})")
            print(format_centers(rf["centers"], precision=3))
        if "elbow_round" in out and not args.json:
            el = out["elbow_round"]
            costs = el["elbow"]["costs"]
            inside = sum(abs(c["cost"] - t) <= c["band"] for c, t in zip(costs, el["data_cost"], strict=True))
            print(f"  elbow round {el['round_id']}: {el['devices']} devices x {el['shares_per_device']} shares; "
                  f"suggested k' = {el['elbow']['suggested_k']}; composed central "
                  f"({el['privacy']['central_epsilon']:.3f}, {el['privacy']['delta']:g}); the band covers the "
                  f"data's cost at {inside} of {len(costs)} k' ({el['elbow']['band_rule']})")
            print("  cost per point of the first k' centers, released +- band / the data's: "
                  + ", ".join(f"{c['k']}: {c['cost'] / n:.4g} +- {c['band'] / n:.2g} / {t / n:.4g}"
                              for c, t in zip(costs, el["data_cost"], strict=True)))
        if services is not None and getattr(args, "keep", None) is not None and not args.json:
            _dashboard_ending(services, rid)
        return 0
    finally:
        if services is not None:
            services.close()


def _dashboard_ending(services: Services, rid: str) -> None:
    """``--keep``'s ending (issue 39: the demo never mentioned the dashboard).
    On an interactive terminal outside CI the services stay up, the dashboard's
    URL and the operator token on screen, until Ctrl-C; unattended (CI, no
    terminal) it ends by itself, printing how to reopen the kept store."""
    token = services.env["SHOAL_OPERATOR_TOKEN"]
    if sys.stdin.isatty() and not os.environ.get("CI"):
        print(f"\nSee round {rid} in the dashboard: {services.server_url}/ui/rounds/{rid}\n"
              f"  log in with the operator token {token}\n"
              "The server and shuffler stay up until Ctrl-C.", flush=True)
        try:
            while all(p.poll() is None for p in services.procs):
                time.sleep(0.5)
            print("shoal sim: a service stopped; see its log in " + _shown(services.dir), file=sys.stderr)
        except KeyboardInterrupt:
            print("\nshoal sim: stopped", flush=True)
        return
    shoal = Path(sys.executable).with_name("shoal")
    command = _shown(shoal) if shoal.exists() else f"{_shown(Path(sys.executable))} -m shoal.common.cli"
    print(f"\nThe services have stopped; round {rid} is kept in {_shown(services.dir)}. To see it in the dashboard:\n"
          f"  SHOAL_OPERATOR_TOKEN={token} SHOAL_KEY_PATH={_shown(services.dir / 'key.pem')} {command} server "
          f"--db sqlite:///{_shown(services.dir / 'server.db')}\n"
          f"  then open http://127.0.0.1:8000/ui/rounds/{rid} and log in with the operator token {token}", flush=True)


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it (shorter to copy), else absolute."""
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else str(path)
