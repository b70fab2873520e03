"""In-process simulation of a round: every device encodes, the server decodes.

This wraps the pure math (client encoder, server accumulator and decoder)
and measures what a user of shoal wants to know: the k-means objective of
the private centers against the non-private and trivial answers, all in
the unit-ball scale, plus time and memory.

Memory (issue 42): besides the input, the simulator holds the accumulator's
tables and (block x d) temporaries, never an n x d one. Devices are encoded
by blocks of ``encode_rows(d)``, the spent accumulator is released after the
decode, and the objectives stream over blocks of the ball image. Points
opened with ``open_points`` are a read-only mapping of the .npy file whose
pages each pass gives back once read (``blocks``), so the input need not be
resident at all; the non-private reference (only when asked) holds one
n x d image, after the accumulator is gone.

Over 300 lines because it runs every first round the products run (tree,
partition) and every refine round after one (shuffle and local), with the
budget split between them (``round_budget``: never more than asked); the
points and objectives are in ``evaluation.py``.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from shoal.client.encoder import encode_arrays
from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.kinds.local_refine import refine_devices
from shoal.common.kinds.partition import REFINE_SPLIT as PARTITION_REFINE_SPLIT
from shoal.common.kinds.partition import contributions as partition_contributions
from shoal.common.kinds.partition import derive_partition, mean_of
from shoal.common.kinds.partition_plan import PartitionPlan, plan_partition_stage, plan_refine_chain
from shoal.common.kinds.refine import (
    REFINE_DELTA_SHARE,
    contributions,
    derive_refine,
    first_round,
    refine_share,
)
from shoal.common.kinds.tree import EncoderChoice, derive_config
from shoal.common.mechanisms.secure_sum import DEFAULT_LAW, SumLaw
from shoal.common.privacy.accounting import central_guarantee, spend_left, split_spend
from shoal.common.privacy.events import RoundsEvent
from shoal.deploy.simulation.evaluation import (
    blocks,
    evaluate,
    nonprivate_objective,
    reference_objective,
)
from shoal.deploy.simulation.fresh_devices import split_population, with_local_refine
from shoal.deploy.simulation.progress import bar
from shoal.deploy.simulation.summed import summed_in_process
from shoal.server.decoders.kmeans import kmeans_cost
from shoal.server.decoders.partition import partition_centers, partition_statement
from shoal.server.decoders.refine import refine_answer
from shoal.server.decoders.tree.accumulate import LevelAccumulator
from shoal.server.decoders.tree.decoder import TreeDecoder

ENCODE_BYTES = 1 << 24
"""Input bytes of one encoded block: the encoder holds about ten temporaries
of a block's size (1.5 GB at 250,000 x 100, issue 42); at 16 MB each the
per-call overhead is still invisible (2e5 x 100: 2.4 s by 16k rows, 4.5 s by 200k)."""
REFINE_SEED_STEP = 7919  # refine round i of a chain simulates with seed + i * this (its own streams)


def encode_rows(d: int) -> int:
    """Devices per encoded block at dimension ``d`` (``ENCODE_BYTES`` of input)."""
    return max(1024, ENCODE_BYTES // (8 * max(1, d)))


def format_centers(centers: list[list[float]], precision: int = 4) -> str:
    """Centers as indented lines, for the CLI verbs."""
    return "\n".join(
        "    " + np.array2string(np.asarray(c), precision=precision, max_line_width=120) for c in centers
    )


def peak_rss_mb() -> float:
    """This process image's peak RSS in MB: VmHWM (which an exec resets, and
    ``clear_refs`` can reset), else ru_maxrss (which Linux carries over from
    a forking parent)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def simulate(
    points: NDArray[np.float64],
    k: int,
    epsilon: float,
    encoder: EncoderChoice = "auto",
    bound: PublicBound | None = None,
    seed: int = 0,
    decoder_options: dict[str, Any] | None = None,
    nonprivate: float | None = None,
    progress: bool = False,
    reference: bool = True,
    **overrides: Any,
) -> dict[str, Any]:
    """Run one round in-process; returns the fields of ``shoal simulate --json``.
    ``nonprivate``: the reference objective when the caller has it already
    (a sweep computes it once per dataset, not once per encoder and eps);
    ``reference=False`` with none given: no reference (``nonprivate_objective``
    None), which at 1e6 x 100 was two thirds of the run (issue 42)."""
    points = np.asarray(points, dtype=np.float64)
    n, d = points.shape
    bound = bound if bound is not None else PublicBound(radius=1.0)
    cfg = derive_config(n, d, k, epsilon, encoder=encoder, bound=bound, seed=seed, **overrides)
    device_rng = np.random.default_rng(np.random.SeedSequence([seed, 7]))
    acc = LevelAccumulator(cfg)
    t = time.perf_counter()
    enc = 0.0
    shown = bar(n, "devices encoded", unit="device") if progress else None
    for _, block in blocks(points, encode_rows(d)):
        t1 = time.perf_counter()
        batch = encode_arrays(block, cfg, device_rng, wire=False)
        enc += time.perf_counter() - t1
        acc.add(batch)
        del batch
        if shown is not None:
            shown.update(block.shape[0])
    if shown is not None:
        shown.close()
    ingest = time.perf_counter() - t - enc
    t = time.perf_counter()
    result = TreeDecoder(rng=np.random.default_rng(seed), **(decoder_options or {})).decode(acc, consume=True)
    dec = time.perf_counter() - t + ingest
    del acc  # the spent tables (700 MB at 1e6 x 100) are not held through the evaluation
    (objective,), trivial = evaluate(points, bound, [result.ball_centers])
    if nonprivate is None and reference:
        nonprivate = reference_objective(points, bound, k, seed)
    return {
        "normalized_objective": objective,
        "nonprivate_objective": None if nonprivate is None else float(nonprivate),
        "trivial_objective": trivial,
        "n": n,
        "d": d,
        "k": k,
        "eps": float(epsilon),
        "encoder": cfg.encoder,
        "encoder_requested": encoder,
        "encode_seconds": enc,
        "decode_seconds": dec,
        "peak_rss_mb": peak_rss_mb(),
        "centers": result.centers.tolist(),
        "ball_centers": result.ball_centers.tolist(),
        "diagnostics": result.diagnostics,
        "quality": result.quality,
        "privacy": result.privacy,
        "config": {
            "levels": cfg.levels,
            "proj_dim": cfg.proj_dim,
            "eps_hist": cfg.eps_hist,
            "eps_vec": cfg.eps_vec,
            "root_share": cfg.root_share,
            "hist_only_share": cfg.hist_only_share,
        },
    }


def refine_epsilon(refine: float | str | None, points: NDArray[np.float64], k: int, epsilon: float, delta: float,
                   min_batch: int | None) -> float:
    """The refine round's eps: ``None`` none, a number that much, ``"auto"``
    the share ``kinds.refine.refine_share`` picks from public parameters."""
    if refine == "auto":
        return epsilon * refine_share(points.shape[0], points.shape[1], k, epsilon, delta, min_batch)
    try:
        return float(refine or 0.0)
    except ValueError:
        raise ConfigError(f"--refine takes an epsilon or 'auto', got {refine!r}") from None


def refine_share_of_devices(refine: float | str | None, points: NDArray[np.float64], k: int, epsilon: float) -> float:
    """The local model's refine: ``None`` none, a number that share of the
    devices, ``"auto"`` ``kinds.local_refine.refine_devices``' rule."""
    if refine == "auto":
        return refine_devices(points.shape[0], points.shape[1], k, epsilon)
    try:
        return float(refine or 0.0)
    except ValueError:
        raise ConfigError(f"--refine takes a share of the devices (0-1) or 'auto' in the local model, got {refine!r}") from None


def refine_in_process(
    points: NDArray[np.float64],
    parent_ball_centers: NDArray[np.float64],
    bound: PublicBound,
    epsilon: float,
    delta: float,
    min_devices: int,
    seed: int = 0,
    chunk: int = 10_000,
    split: int = 1,
    law: SumLaw = DEFAULT_LAW,
    prior_variance: NDArray[np.float64] | None = None,
) -> dict[str, Any]:
    """Run a ``refine`` round in-process (``summed_in_process``); returns the
    refined ball centers, each one's noise variance and timings. ``split``:
    candidates per parent center; ``law``: the secure sum's calibration (a
    partition plan's); ``prior_variance``: the parent centers' noise variances
    (a refine chain's later round, ``decoders.refine.refine_answer``)."""
    points = np.asarray(points, dtype=np.float64)
    n = points.shape[0]
    cfg = derive_refine("parent", parent_ball_centers, bound, epsilon, delta, min_devices,
                        max_devices=max(n, 100 * min_devices), split=split, seed=seed, law=law)
    params = cfg.secure_sum
    t = time.perf_counter()
    sums = summed_in_process(points, contributions, cfg, "refine", np.random.SeedSequence([seed, 11]), chunk)
    enc = time.perf_counter() - t
    answer = refine_answer(sums, cfg, np.random.default_rng([seed, 13]), prior_variance)
    return {
        "ball_centers": answer.centers,
        "sizes": answer.sizes,
        "center_variance": answer.variance,
        "devices": n,
        "shares_per_device": params.shares,
        "modulus_bits": params.bits,
        "noise": params.noise,
        "noise_std": params.noise_std,
        "seconds": enc,
        "event": cfg.event,
    }


def partition_in_process(points: NDArray[np.float64], k: int, bound: PublicBound, plan: PartitionPlan,
                         min_devices: int, seed: int = 0, chunk: int = 10_000) -> dict[str, Any]:
    """Run a partition stage in-process (``summed_in_process``): the one-bit mean round, then
    the ``partition`` round through its released mean (``kinds/partition.py``), at the
    plan's budgets (``kinds/partition_plan.py``); "round_events" holds both rounds' events."""
    points = np.asarray(points, dtype=np.float64)
    n = points.shape[0]
    big = max(n, 100 * min_devices)
    t = time.perf_counter()
    m, p = plan.mean, plan.partition
    first = derive_partition(n, points.shape[1], k, bound=bound, epsilon=m.epsilon, delta=m.delta,
                             min_devices=min_devices, max_devices=big, seed=seed, round_id="mean", bits=1, law=m.law)
    center = mean_of(summed_in_process(points, partition_contributions, first, "partition",
                                       np.random.SeedSequence([seed, 17]), chunk), first)
    cfg = derive_partition(n, points.shape[1], k, bound=bound, epsilon=p.epsilon, delta=p.delta, min_devices=min_devices,
                           max_devices=big, seed=seed, center=center, law=p.law)
    params = cfg.secure_sum
    sums = summed_in_process(points, partition_contributions, cfg, "partition", np.random.SeedSequence([seed, 13]),
                             chunk)
    enc = time.perf_counter() - t
    t = time.perf_counter()
    centers, sizes, kept = partition_centers(sums, cfg, np.random.default_rng(seed))
    dec = time.perf_counter() - t
    centers = bound.project_ball(centers)
    (objective,), trivial = evaluate(points, bound, [centers])
    return {
        "normalized_objective": objective,
        "trivial_objective": trivial,
        "n": n, "d": points.shape[1], "k": k, "eps": float(p.epsilon), "encoder": "partition",
        "encoder_requested": "partition", "ball_centers": centers.tolist(),
        "centers": bound.from_ball(centers).tolist(), "sizes": sizes.tolist(),
        "privacy": partition_statement(cfg, first),
        "round_events": (first.event, cfg.event),
        "encode_seconds": enc, "decode_seconds": dec, "peak_rss_mb": peak_rss_mb(),
        "diagnostics": {"buckets": cfg.buckets, "buckets_kept": kept, "noise_std": params.noise_std,
                        "shares_per_device": params.shares,
                        "ball_center": None if center is None else center.tolist()},
        "quality": None,
        "config": {"bits": cfg.bits, "eps": float(p.epsilon), "composition": plan.composition},
    }


def round_budget(epsilon: float, delta: float, refine_epsilon: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """((tree eps, tree delta), (refine eps, refine delta)) of a total (epsilon,
    delta): the refine round gets ``refine_epsilon`` and ``REFINE_DELTA_SHARE``
    of delta (none without a refine), the tree round what is left, rounded
    toward less spend (``accounting.spend_left``: eps - refine may round up, and
    the composed tree + refine would then exceed eps)."""
    if not refine_epsilon:
        return (epsilon, delta), (0.0, 0.0)
    tree_delta, refine_delta = split_spend(delta, REFINE_DELTA_SHARE)
    return (spend_left(epsilon, refine_epsilon), tree_delta), (refine_epsilon, refine_delta)


def simulate_rounds(
    points: NDArray[np.float64],
    k: int,
    epsilon: float,
    encoder: EncoderChoice | Literal["partition"] = "auto",
    bound: PublicBound | None = None,
    seed: int = 0,
    model: str = "local",
    delta: float = 0.0,
    min_batch: int | None = None,
    refine_epsilon: float = 0.0,
    nonprivate: float | None = None,
    progress: bool = False,
    refine_devices: float = 0.0,
    reference: bool = True,
) -> dict[str, Any]:
    """``shoal simulate`` in every model: a tree round, optionally followed by a
    refine round (one Lloyd step through secure summation, central model of
    the shuffler), within one total (epsilon, delta) by basic composition; a
    partition stage (mean round, partition round, a chain of
    ``partition_plan.plan_refine_chain``'s refine rounds: all secure sums) at
    ``kinds.partition_plan``'s budgets, in zCDP where its sums are Gaussian.

    Shuffle model: ``epsilon``/``delta`` are central; devices randomise at the
    amplified eps0 for batches of ``min_batch`` (default: all n devices in one
    batch). ``refine_epsilon`` > 0 gives that much of ``epsilon`` (and 1% of
    ``delta``) to the refine round; the tree round gets the rest. The refine
    round needs a trusted-shuffler setting, so it needs ``model='shuffle'``.

    Local model: ``refine_devices`` in (0, 1) keeps that share of the devices
    fresh for a local refine round at the same eps (each answers one round).

    ``reference=False``: no non-private reference unless ``nonprivate`` gives it
    (``nonprivate_objective`` None in the result)."""
    points = np.asarray(points, dtype=np.float64)
    n = points.shape[0]
    bound = bound if bound is not None else PublicBound(radius=1.0)
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"epsilon must be finite and > 0, got {epsilon}")
    if refine_devices:  # the local model's refine on fresh devices (``deploy/simulation/fresh_devices.py``)
        skip = nonprivate is None and not reference
        out = tree_then_local_refine(points, k, epsilon, encoder, bound, seed, refine_devices,
                                     float("nan") if skip else nonprivate, progress,
                                     model=model, refine_epsilon=refine_epsilon)
        if skip:
            out["nonprivate_objective"] = None
        return out
    if refine_epsilon and model != "shuffle":
        raise ConfigError("a refine round runs through the shuffler: it needs model='shuffle'")
    if not 0 <= refine_epsilon < epsilon:
        raise ConfigError(f"refine_epsilon must be in [0, epsilon={epsilon}), got {refine_epsilon}")
    (tree_eps, tree_delta), (refine_epsilon, refine_delta) = round_budget(epsilon, delta, refine_epsilon)
    shuffle: dict[str, Any] = {}
    if model == "shuffle":
        shuffle = dict(model="shuffle", delta=tree_delta, min_batch=int(min_batch or n))
    if encoder == "auto" and model == "shuffle":  # the tree, or a partition round where the tree locates nothing
        if first_round(n, points.shape[1], k, tree_delta, min_batch) == "partition":
            encoder = "partition"
    plan: PartitionPlan | None = None
    events: tuple[object, ...] = ()  # a partition stage's round events, composed with its refine round's
    if encoder == "partition":  # a first round with central noise: secure sums over a public partition
        if model != "shuffle":
            raise ConfigError("a partition round sums shares through the shuffler: it needs model='shuffle'")
        batch = int(min_batch or n)
        stage, dim, most = (tree_eps, tree_delta), points.shape[1], max(n, 100 * batch)
        plan = (plan_refine_chain(epsilon, stage, (refine_epsilon, refine_delta), dim, k, n, batch, most)
                if refine_epsilon else plan_partition_stage(epsilon, stage, None, dim, batch, most))
        out = partition_in_process(points, k, bound, plan, batch, seed=seed)
        events = out.pop("round_events")
        if nonprivate is None and reference:
            nonprivate = reference_objective(points, bound, k, seed)
        out["nonprivate_objective"] = None if nonprivate is None else float(nonprivate)
    else:
        out = simulate(points, k, tree_eps, encoder, bound=bound, seed=seed, nonprivate=nonprivate,
                       progress=progress, reference=reference, **shuffle)
    out["model"] = model
    if not refine_epsilon:
        return out
    share, composition = refine_epsilon / epsilon, "basic"
    # The refine rounds: one at the tree's split, or the partition plan's chain (the first splits each
    # center in two, the later ones are plain Lloyd steps on the last one's centers).
    chain = ([(refine_epsilon, refine_delta, DEFAULT_LAW, 1)] if plan is None else
             [(b.epsilon, b.delta, b.law, PARTITION_REFINE_SPLIT if i == 0 else 1) for i, b in enumerate(plan.refines)])
    if plan is not None:
        composition = plan.composition
    centers, refs = np.asarray(out["ball_centers"]), list[dict[str, Any]]()
    for i, (eps_i, delta_i, law, split) in enumerate(chain):  # each later round combined with the last one's centers
        refs.append(refine_in_process(points, centers, bound, eps_i, delta_i, min_devices=int(min_batch or n),
                                      seed=seed + i * REFINE_SEED_STEP, split=split, law=law,
                                      prior_variance=refs[-1]["center_variance"] if refs else None))
        centers = np.asarray(refs[-1]["ball_centers"])
    e2, d2 = central_guarantee(RoundsEvent(tuple(r["event"] for r in refs)) if len(refs) > 1 else refs[0]["event"])
    composed = (central_guarantee(RoundsEvent((*events, *(r["event"] for r in refs)))) if events else
                (out["privacy"]["central_epsilon"] + e2, out["privacy"]["delta"] + d2))
    (refined,), _ = evaluate(points, bound, [centers])
    out.update(
        tree_objective=out["normalized_objective"],
        normalized_objective=refined,
        ball_centers=centers.tolist(),
        centers=bound.from_ball(centers).tolist(),
        refine={"epsilon": e2, "delta": d2, "shares_per_device": max(r["shares_per_device"] for r in refs),
                "seconds": sum(r["seconds"] for r in refs), "noise": refs[0]["noise"],
                "noise_sd": max(r["noise_std"] for r in refs), "share": share, "composition": composition,
                "rounds": len(refs)},
        composed={"epsilon": composed[0], "delta": composed[1]},
    )
    return out


def tree_then_local_refine(points: NDArray[np.float64], k: int, epsilon: float, encoder: Any, bound: PublicBound,
                           seed: int, share: float, nonprivate: float | None, progress: bool, model: str = "local",
                           refine_epsilon: float = 0.0) -> dict[str, Any]:
    """``simulate_rounds`` in the local model with a refine round: the tree round
    on a random 1 - ``share`` of the devices, the refine on the rest; the
    objectives are on all of them."""
    if model != "local" or refine_epsilon:
        raise ConfigError("refine_devices is the local model's refine (fresh devices at the same eps); "
                          "the shuffle model's refine takes refine_epsilon")
    if not 0 < share < 1:
        raise ConfigError(f"refine_devices must be in (0, 1), got {share}")

    n = points.shape[0]
    ball = bound.to_ball(points)
    tree_rows, fresh_rows = split_population(n, share, seed)
    out = simulate(points[tree_rows], k, epsilon, encoder, bound=bound, seed=seed, progress=progress,
                   nonprivate=nonprivate_objective(ball, k, seed) if nonprivate is None else float(nonprivate))
    out.update(model="local", n=n, trivial_objective=kmeans_cost(ball, ball.mean(axis=0, keepdims=True)) / n)
    return with_local_refine(out, points, points[fresh_rows], bound, epsilon, seed)
