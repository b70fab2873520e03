"""``shoal sim``, ``shoal simulate``, ``shoal bench`` and ``shoal demo``: the
tools above the services (they import the client, the server and the
shuffler; DESIGN.md, "Layout").

Over 300 lines because it is the argument parsers of these four verbs (every
benchmark's flags included: ``docs/hooks.py`` renders the CLI reference from
them) and the thin functions that hand each verb to its module; splitting
the parsers from their dispatch would put one verb's flags and its use in
two files."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from shoal.common.kinds.central import ALGORITHMS


def build_parser(verb: str) -> argparse.ArgumentParser:
    if verb == "simulate":
        s = argparse.ArgumentParser(prog="shoal simulate", description="encode every device and decode in-process")
        s.add_argument("--data", required=True, type=Path, help=".npy file with raw points (n x d)")
        s.add_argument("--k", required=True, type=int)
        s.add_argument("--eps", required=True, type=float)
        s.add_argument("--encoder", choices=("auto", "lsh", "nettree", "partition"), default="auto",
                       help="auto: nettree or lsh by the measured rule of common/kinds/encoder_rule.py (the output says which); "
                            "partition (--model shuffle): secure sums over a public LSH partition, central noise")
        s.add_argument("--radius", type=float, default=None,
                       help="public L2 bound of the raw points (from public knowledge, never from the data)")
        s.add_argument("--box", default=None, metavar="LOW,..:HIGH,..",
                       help="public per-feature box instead of --radius (LOW:HIGH for every feature; write --box=-1:1 when LOW is negative); without "
                            "either, radius 1 is used and the fraction of points it clips is printed")
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--model", choices=("local", "shuffle", "central"), default="local",
                       help="shuffle: --eps/--delta are central; devices randomise at the amplified eps0. "
                            "central: a trusted curator holds the points (seeds 000/003, --algorithm)")
        s.add_argument("--algorithm", choices=("auto", *ALGORITHMS), default=None,
                       help="central model only: seed 000's or seed 003's private max coverage, gridhist (seed 000's "
                            "pipeline with a thresholded histogram cover), greedy-001, or lsh-partition (the shuffle "
                            "model's partition stage run by the curator: for broad, overlapping clusters); "
                            "auto: by dimension")
        s.add_argument("--objective", choices=("kmeans", "kmedian"), default="kmeans",
                       help="central model only: kmedian runs seed 003 where the proxy is the answer (d <= ln(n)/2)")
        s.add_argument("--delta", type=float, default=None, help="central delta of a shuffle or central run (default 1e-6)")
        s.add_argument("--min-batch", type=int, default=None,
                       help="shuffle batch the guarantee assumes (default: all devices in one batch)")
        s.add_argument("--refine", default=None, metavar="EPS2|SHARE|auto",
                       help="a refine round (one Lloyd step) after the first. Shuffle: spend EPS2 of --eps on it "
                            "(secure summation); local: keep SHARE (0-1) of the devices fresh for it, each at --eps "
                            "(kinds/local_refine.py). auto: the rule of kinds.refine.refine_share (shuffle) or "
                            "kinds.local_refine.refine_devices (local) from n, d, k, eps")
        s.add_argument("--reference", action="store_true",
                       help="also compute the non-private reference objective (k-means on the true points; about "
                            "twice the private run at 1e6 x 100) and keep it in the user's cache directory "
                            "($SHOAL_CACHE_DIR, else $XDG_CACHE_HOME/shoal) by the file's SHA-256, k, seed and bound; "
                            "without it a cached reference is reported, else none")
        s.add_argument("--json", action="store_true", help="print one JSON object")
        return s
    if verb == "sim":
        sm = argparse.ArgumentParser(prog="shoal sim", description="server, shuffler and N simulated devices on 127.0.0.1")
        sm.add_argument("--users", type=int, default=5000)
        sm.add_argument("--via-shuffler", action="store_true")
        sm.add_argument("--dataset", default="city", help="city | gauss | uber | letter | FILE.npy")
        sm.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
        sm.add_argument("--k", type=int, default=None)
        sm.add_argument("--eps", type=float, default=4.0)
        sm.add_argument("--encoder", choices=("auto", "lsh", "nettree", "sketch", "partition"), default="auto",
                        help="auto: nettree or lsh by the measured rule of common/kinds/encoder_rule.py; sketch: scrambled compressive sketches (local model) or secure-sum sketches (--model shuffle); partition (--model shuffle): per-bucket secure sums over a public LSH partition")
        sm.add_argument("--records-per-device", type=int, default=1,
                        help="sketch, local model: each device sketches this many consecutive points (the paper's n0); "
                             "central: each device seals this many consecutive points in its one message")
        sm.add_argument("--radius", type=float, default=None,
                        help="FILE.npy datasets: public L2 bound (default 1, with the clipped fraction printed)")
        sm.add_argument("--box", default=None, metavar="LOW,..:HIGH,..",
                        help="FILE.npy datasets: public per-feature box instead of --radius")
        sm.add_argument("--wire", choices=("binary", "json"), default="binary",
                        help="how devices sent directly send tree reports: binary (42 bytes, common/wire/binary.py) "
                             "or JSON")
        sm.add_argument("--concurrency", type=int, default=50)
        sm.add_argument("--workers", type=int, default=1, help="device processes (aiohttp clients) sharing --concurrency")
        sm.add_argument("--min-batch", type=int, default=100,
                        help="shuffler batch threshold (and, with --model shuffle, the batch the guarantee assumes)")
        sm.add_argument("--model", choices=("local", "shuffle", "central"), default="local",
                        help="shuffle: --eps/--delta are the central target; devices randomise at the amplified eps0. "
                             "central: devices seal raw points to the server, the curator (needs --via-shuffler)")
        sm.add_argument("--algorithm", choices=("auto", *ALGORITHMS, "continual"), default=None,
                        help="central model only: seed 000's or seed 003's private max coverage, seed 001's greedy, "
                             "gridhist, lsh-partition (the shuffle model's partition stage run by the curator), "
                             "or continual: a drifting 2-D stream of --users insertions (and their deletions) over "
                             "--horizon steps through the services (deploy/simulation/continual_sim.py; --delta 0: pure eps)")
        sm.add_argument("--horizon", type=int, default=64, help="--algorithm continual: steps of the stream")
        sm.add_argument("--levels", type=int, default=6, help="--algorithm continual: net levels")
        sm.add_argument("--delta", type=float, default=1e-6)
        sm.add_argument("--centers", choices=("kmeans", "greedy"), default=None,
                        help="tree rounds: greedy decodes a nettree round with seed 001's greedy (ordered centers, "
                             "the first k' answer k', a coreset elbow); default the tree's weighted k-means")
        sm.add_argument("--elbow", type=float, default=None, metavar="EPS",
                        help="with --centers greedy and --via-shuffler: an elbow round at this central eps on the "
                             "ordered centers (secure sums of every device's cost drops: the data's cost of every k')")
        sm.add_argument("--refine", type=float, default=None, metavar="EPS|SHARE",
                        help="--model shuffle: after the round, a refine round at central EPS (delta --delta, at least "
                             "--min-batch devices) through secure summation; needs --via-shuffler. --model local: keep "
                             "SHARE (0-1) of the devices fresh for a local refine round at --eps")
        sm.add_argument("--refine-rounds", type=int, default=1, metavar="T",
                        help="--model shuffle with --refine: T refine rounds, each opened on the last one's centers "
                             "at central EPS (a chain; every round's statement composes the whole family)")
        sm.add_argument("--server-url", default=None)
        sm.add_argument("--shuffler-url", default=None)
        sm.add_argument("--seed", type=int, default=0,
                        help="the dataset's population (devices joining a round draw their own sample of it)")
        sm.add_argument("--round", default=None, metavar="ID",
                        help="join this open round (with --server-url) instead of creating one")
        sm.add_argument("--round-file", default=None, metavar="PATH",
                        help="with --create-only: write the new round's id here; otherwise join the round whose id "
                             "is here (waiting for the file up to --wait seconds)")
        sm.add_argument("--create-only", action="store_true",
                        help="create the round (with --server-url), write its id to --round-file and exit")
        sm.add_argument("--wait", type=float, default=120.0, help="seconds to wait for --round-file")
        sm.add_argument("--n-expected", type=int, default=None,
                        help="devices the round expects (default --users; with replicas joining: their sum)")
        sm.add_argument("--dask", default=None, metavar="tcp://HOST:PORT",
                        help="decode the round's reports on this Dask scheduler (server/rounds/reduction.py)")
        sm.add_argument("--no-cluster", action="store_true",
                        help="send and flush, but leave clustering to the operator (devices joining a round)")
        sm.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="keep the started services' store, key and logs in DIR and end with the dashboard: "
                             "on a terminal the services stay up until Ctrl-C; unattended (CI) it says how to reopen")
        sm.add_argument("--allow-non-loopback", action="store_true",
                        help="only inside a container network of your own (docker compose); never needed here")
        sm.add_argument("--json", action="store_true")
        return sm
    if verb == "demo":
        return argparse.ArgumentParser(prog="shoal demo", description="one in-process round on generated data, printed")
    b = argparse.ArgumentParser(prog="shoal bench", description="accuracy sweep and frequency-oracle benchmark")
    b.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    b.add_argument("--out", type=Path, default=None,
                   help="where results go (default: a new temporary directory; the committed ones are "
                        "tests/bench/results, written only when named here)")
    b.add_argument("--ns", default=None, help="paper generator sizes (default 10000,100000,1000000)")
    b.add_argument("--eps", default=None, help="default 1,2,4,8 (--model central: 0.5,1,4)")
    b.add_argument("--seeds", type=int, default=3)
    b.add_argument("--draws", type=int, default=1,
                   help="--model central / shuffle: runs per data seed and cell, draw r with seed s + 1000 r "
                        "(means over seeds x draws, min-max over the runs)")
    b.add_argument("--sets", default=None,
                   help="--model central / shuffle: only these data sets (central: paper,balcan,overlap,uber,letter; "
                        "shuffle: paper,overlap,uber,letter)")
    b.add_argument("--encoders", default="lsh,nettree,auto",
                   help="auto's rows reuse the run of the encoder auto picks (same config and seeds: the same answer), "
                        "compared with the better of the others")
    b.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    b.add_argument("--ablation", action="store_true", help="decoder before/after table instead of the sweep")
    b.add_argument("--oracle", action="store_true", help="only the frequency-oracle benchmark")
    b.add_argument("--perf", action="store_true", help="time encode/ingest/decode of 1e6 devices instead of the sweep")
    b.add_argument("--decode-memory", action="store_true",
                   help="the server's decode of a stored 1e6-device tree round (d=100): whole-round read against the "
                        "chunked snapshot read, seconds and peak RSS, each in its own process")
    b.add_argument("--scale", action="store_true",
                   help="tree rounds at n = 1e5..1e7 (d=100) and 1e6, 1e8 (d=10): encode, store, decode seconds and "
                        "peak RSS per process, in-process and on Dask with 1 and 2 workers (needs shoal[scale])")
    b.add_argument("--scale-sizes", default=None, metavar="N:D,...", help="--scale: these sizes instead (e.g. 1e6:10)")
    b.add_argument("--scale-stores", default=None, metavar="DIR",
                   help="--scale: keep each size's store in DIR/nN_dD and reuse it when a later run finds it there")
    b.add_argument("--capacity", action="store_true",
                   help="one server replica's ingestion on SQLite and PostgreSQL, and two replicas on one PostgreSQL, "
                        "beside SQLite's append floor measured in the same run")
    b.add_argument("--capacity-reports", type=int, default=None, metavar="N",
                   help="--capacity: binary tree reports in the batch load (default 200,000; smoke 20,000)")
    b.add_argument("--capacity-connections", type=int, default=None, metavar="C",
                   help="--capacity: connections of the batch load (default 4)")
    b.add_argument("--greedy", action="store_true",
                   help="seed 001's greedy (central): the elbow on the paper generator (k = 2 k_true) and the "
                        "objective against gridhist")
    b.add_argument("--boost", action="store_true",
                   help="with --greedy: seed 001's boosts (Sec. 2) beside the plain curator greedy: no dimension "
                        "reduction, 2k then reduce to k, best of R runs at eps/R by their private costs")
    b.add_argument("--continual", action="store_true",
                   help="seed 001's greedy under continual observation on a drifting 2-D stream (T = 1024): "
                        "every step against the one-center answer, the last against a one-shot curator run")
    b.add_argument("--wire", action="store_true",
                   help="the bytes a device sends per round kind (JSON, binary, to the shuffler) beside its "
                        "randomiser's output, and secure-sum shares per device over n")
    b.add_argument("--device", action="store_true",
                   help="what one device report costs per round kind at d = 100 (the device's own code path, no "
                        "HTTP): bytes on the wire, ms per report, and the ratio to a floor measured in the same run "
                        "(one draw of the report's dimension + one X25519 seal); --json prints the rows")
    b.add_argument("--json", action="store_true", help="with --device: the rows as a JSON list")
    b.add_argument("--soak", action="store_true",
                   help="a steady open-loop load on one server (--single-rate single reports/s plus --batch-rate "
                        "JSON batches/s of --batch-size) for --soak-seconds: p50/p99 latency and RSS per window")
    b.add_argument("--soak-seconds", type=float, default=600.0)
    b.add_argument("--soak-window", type=float, default=30.0)
    b.add_argument("--single-rate", type=float, default=200.0)
    b.add_argument("--batch-rate", type=float, default=2.0)
    b.add_argument("--batch-size", type=int, default=1000)
    b.add_argument("--services", action="store_true",
                   help="ingestion throughput/latency of the real server and `shoal sim` timings")
    b.add_argument("--model", choices=("local", "shuffle", "central"), default="local",
                   help="shuffle: local vs shuffle vs shuffle+refine at equal central eps (paper n=1e6 and Uber); "
                        "central: shoal's central algorithms beside Google's and diffprivlib's")
    b.add_argument("--google-path", type=Path, default=None,
                   help="--model central: the learning/ folder of a google/differential-privacy checkout")
    b.add_argument("--refine-share", type=float, default=None,
                   help="--model shuffle: the refine round's share of eps (default: kinds.refine.refine_share's rule from n, d, k, eps)")
    b.add_argument("--encoder", choices=("tree", "sketch"), default="tree",
                   help="sketch: the compressive path (local, shuffle) side by side with pycle if installed")
    return b


def run(args: argparse.Namespace) -> int:
    verbs = {"simulate": _simulate, "sim": _sim, "bench": _bench, "demo": _demo}
    return verbs[args.verb](args)


def _simulate(args: argparse.Namespace) -> int:
    import numpy as np

    from shoal.common.bounds import bound_to_dict
    from shoal.common.errors import ShoalError
    from shoal.deploy.notebook.verdicts import partition_quality
    from shoal.deploy.simulation.block_memory import keep_block_buffers
    from shoal.deploy.simulation.evaluation import cli_bound, clipped_fraction, open_points
    from shoal.deploy.simulation.reference import ReferenceCache
    from shoal.deploy.simulation.simulate import (
        format_centers,
        refine_epsilon,
        refine_share_of_devices,
        simulate_rounds,
    )

    keep_block_buffers()  # this process is the simulator's: its block buffers are reused, not re-faulted
    points = open_points(args.data)  # a ConfigError becomes one line and exit 2 (common/cli.main)
    if args.model == "local" and (args.delta is not None or args.min_batch is not None):
        print("shoal simulate: --delta and --min-batch belong to --model shuffle", file=sys.stderr)
        return 2
    if (args.algorithm is not None or args.objective != "kmeans") and args.model != "central":
        print("shoal simulate: --algorithm and --objective belong to --model central", file=sys.stderr)
        return 2
    bound = cli_bound(args.radius, args.box, points, "shoal simulate")
    if args.model == "central":
        if args.min_batch is not None or args.refine or args.encoder != "auto":
            print("shoal simulate: --model central takes --algorithm, not --encoder, --min-batch or --refine",
                  file=sys.stderr)
            return 2
        from shoal.deploy.notebook.central import simulate_central

        return simulate_central(points, args.k, args.eps, 1e-6 if args.delta is None else args.delta, bound,
                                args.algorithm or "auto", args.seed, args.json, args.objective)
    delta = (1e-6 if args.delta is None else args.delta) if args.model == "shuffle" else 0.0
    cache = ReferenceCache(args.data, args.k, args.seed, bound)
    cached = cache.lookup(hash_file=args.reference)
    try:
        local = args.model == "local"
        refine_eps = 0.0 if local else refine_epsilon(args.refine, points, args.k, args.eps, delta, args.min_batch)
        fresh = refine_share_of_devices(args.refine, points, args.k, args.eps) if local else 0.0
        result = simulate_rounds(
            points, k=args.k, epsilon=args.eps, encoder=args.encoder, bound=bound,
            seed=args.seed, model=args.model, delta=delta, min_batch=args.min_batch, refine_epsilon=refine_eps,
            progress=not args.json, refine_devices=fresh, nonprivate=cached, reference=args.reference,
        )
    except ShoalError as exc:
        print(f"shoal simulate: {exc}", file=sys.stderr)
        return 2
    keys = (
        "normalized_objective nonprivate_objective trivial_objective n d k eps encoder encoder_requested model "
        "encode_seconds decode_seconds peak_rss_mb centers"
    ).split()
    out: dict[str, Any] = {key: result[key] for key in keys}
    out["reference"] = "cached" if cached is not None else "computed" if args.reference else "not asked"
    if out["reference"] == "computed" and out["nonprivate_objective"] is not None:
        cache.store(out["nonprivate_objective"])
    out["privacy"] = {key: result["privacy"][key] for key in ("model", "device_epsilon", "central_epsilon", "delta")}
    out["certificate"] = result["diagnostics"].get("certificate")
    out["quality"] = result["quality"] or partition_quality(  # a partition round's decoder gives no verdict
        args.k, bound, np.asarray(result["ball_centers"], dtype=np.float64), result["diagnostics"], args.eps)
    out["bound"] = bound_to_dict(bound)
    out["clipped_fraction"] = clipped_fraction(points, bound)
    for key in ("tree_objective", "refine", "composed"):
        if key in result:
            out[key] = result[key]
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"shoal simulate: n={out['n']} d={out['d']} k={out['k']} eps={args.eps} encoder={out['encoder']}"
          f"{' (auto)' if out['encoder_requested'] == 'auto' else ''} model={args.model} seed={args.seed}")
    p = out["privacy"]
    device = "none (secure sum)" if p["device_epsilon"] is None else f"{p['device_epsilon']:.4g}"
    print(f"  privacy: device eps {device}, server's view ({p['central_epsilon']:.4g}, {p['delta']:.3g})"
          + (f"; with the refine round{'s' if out.get('refine', {}).get('rounds', 1) > 1 else ''} "
             f"({out['composed']['epsilon']:.4g}, {out['composed']['delta']:.3g})" if "composed" in out else ""))
    if "refine" in out and out["refine"].get("mechanism") == "local":
        r = out["refine"]
        print(f"  local refine round: {r['devices']} fresh devices ({r['share']:.2g} of them"
              f"{', auto' if args.refine == 'auto' else ''}) at eps {r['epsilon']:.4g}, codebook PrivUnit in "
              f"{r['block_dim']} dimensions; each device answers one of the two rounds")
    elif "refine" in out:
        r = out["refine"]
        of = ("of the budget's zCDP rho; the rounds compose in zCDP" if r.get("composition") == "zcdp" else "of --eps")
        rounds = r.get("rounds", 1)
        chain = (f"refine rounds: {rounds} (a chain: each a Lloyd step from the last one's centers), together"
                 if rounds > 1 else "refine round:")
        print(f"  {chain} eps {r['epsilon']:.4g} ({r.get('share', r['epsilon'] / args.eps):.2g} {of}"
              f"{', auto' if args.refine == 'auto' else ''}), "
              f"distributed discrete {r['noise']} noise, sd {r['noise_sd']:.3g} per coordinate of the sums"
              f"{' (each round)' if rounds > 1 else ''}, {r['shares_per_device']} shares per device")
    if "tree_objective" in out:
        print(f"  {'first round objective':22s} {out['tree_objective']:.5f}")
    for key in keys[:3]:
        if out[key] is None:
            print(f"  {key:22s} not computed (--reference computes and caches it)")
        else:
            print(f"  {key:22s} {out[key]:.5f}{' (cached)' if key == 'nonprivate_objective' and out['reference'] == 'cached' else ''}")
    print(f"  {'ratio to trivial':22s} {out['normalized_objective'] / out['trivial_objective']:.3f}")
    print(f"  verdict: {out['quality']['verdict']}")
    print(f"  encode {out['encode_seconds']:.2f} s, decode {out['decode_seconds']:.2f} s, peak RSS {out['peak_rss_mb']:.0f} MB")
    print("  centers (original space):")
    print(format_centers(out["centers"]))
    return 0


def _bench(args: argparse.Namespace) -> int:
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="shoal-bench-"))
        print(f"shoal bench: results go to {args.out} (--out to choose)", file=sys.stderr)
    for flag, module in (("services", "services"), ("decode_memory", "decode_memory"), ("capacity", "capacity"),
                         ("scale", "scale"), ("wire", "wire"), ("device", "device"),
                         ("greedy", "greedy"), ("continual", "continual"), ("soak", "soak")):
        if getattr(args, flag, False):  # each of these benchmarks is its own module's ``run``
            return int(importlib.import_module(f"shoal.deploy.bench.{module}").run(args))
    if args.encoder == "sketch":
        from shoal.deploy.bench.sketch import run_sketch_bench

        return run_sketch_bench(args)
    if args.model == "central":
        from shoal.deploy.bench.central import run_central_bench

        return run_central_bench(args)
    if args.model == "shuffle":
        from shoal.deploy.bench.shuffle import run_shuffle_bench

        return run_shuffle_bench(args)
    from shoal.deploy.bench.accuracy import run_bench

    return run_bench(args)


def _sim(args: argparse.Namespace) -> int:
    from shoal.deploy.simulation.sim import run_sim

    return run_sim(args)


def _demo(args: argparse.Namespace) -> int:
    from shoal.deploy.demo import main

    main()
    return 0
