"""How far apart two populations of the same device law land in the browser round (issue 40, item 3).

``tests/clients/js/test_browser_round.py`` compares, per model, the mean decoded objective of
chromium devices over three seeds with that of Python devices on the same points and the same
public seed, and fails outside a band. This script measures the band's false-alarm rate: it runs
the test's rounds in this process with the Python encoder on the exact wire values
(``encode_arrays(wire=True)``, OS randomness, a fresh decoder each round) ``--draws`` times per
seed and model, the same points (``clients/js/scripts/browser-round.mjs``'s mixture, reproduced
bit for bit), config (``derive_config`` of the round the script creates) and, in the shuffle model,
about as many reports as the shuffler releases; then it draws pairs of populations from those
rounds and prints the quantiles of the test's statistic (ratio of the 3-seed means) and how often
each band fails by chance. With ``--wrong-eps E`` it also measures the power: devices whose
histogram randomiser keeps the true bucket with eps E's probability while the round says 8.

Usage: ``python tests/bench/browser_round_spread.py [--draws 400] [--wrong-eps 7 7.5 4]``
(400 draws per seed and model: about 8 minutes on one core).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import time

import numpy as np
from numpy.typing import NDArray

from shoal.client.encoder import encode_arrays
from shoal.common.bounds import PublicBound
from shoal.common.kinds.tree import RoundConfig, derive_config
from shoal.server.decoders.tree.accumulate import LevelAccumulator
from shoal.server.decoders.tree.decoder import TreeDecoder

CENTERS = np.array([[-5.0, -5.0], [5.0, 0.0], [0.0, 6.0]])
N = 1500  # devices per model and seed, as the test runs the script
HELD = N // 10 - 1  # the shuffler holds back up to min_batch - 1 messages (min_batch = n / 10)
SEEDS = (1, 2, 3)
BANDS = (0.10, 0.20, 0.25, 0.30)


def mixture(seed: int, n: int) -> NDArray[np.float64]:
    """browser-round.mjs's points: an LCG (a = 1664525, c = 1013904223, mod 2^32) drives
    Box-Muller, two draws per coordinate. The LCG's k-th state is a^k s + c (a^(k-1) + ... + 1),
    computed for all k at once (uint64 products wrap mod 2^64, whose low 32 bits are mod 2^32)."""
    a, c = np.uint64(1664525), np.uint64(1013904223)
    with np.errstate(over="ignore"):
        powers = np.cumprod(np.full(4 * n, a, dtype=np.uint64), dtype=np.uint64)
        sums = np.cumsum(np.concatenate([np.ones(1, dtype=np.uint64), powers[:-1]]), dtype=np.uint64)
        states = np.bitwise_and(powers * np.uint64(seed & 0xFFFFFFFF) + c * sums, np.uint64(0xFFFFFFFF))
    u = (states.astype(np.float64) / 2**32).reshape(n, 2, 2)
    gauss = np.sqrt(-2 * np.log(1 - u[:, :, 0])) * np.cos(2 * np.pi * u[:, :, 1])
    return CENTERS[np.arange(n) % 3] + 0.8 * gauss


def config(model: str, seed: int) -> RoundConfig:
    """The round browser-round.mjs creates for this model and seed."""
    bound = PublicBound(radius=10.0)
    if model == "local":
        return derive_config(N, 2, 3, 8.0, encoder="nettree", bound=bound, seed=2 * seed)
    return derive_config(N, 2, 3, 8.0, encoder="nettree", bound=bound, seed=2 * seed + 1, model="shuffle",
                         delta=1e-6, min_batch=N // 10)


def objectives(model: str, seed: int, draws: int, wrong_eps: float | None = None) -> NDArray[np.float64]:
    """Decoded objective (mean squared distance of the points to the centers) of ``draws`` rounds."""
    points = mixture(seed, N)
    cfg = config(model, seed)
    device = cfg if wrong_eps is None else dataclasses.replace(cfg, eps_hist=wrong_eps)
    out = np.empty(draws)
    for i in range(draws):
        rng = np.random.default_rng()
        taking_part = points if model == "local" else points[rng.permutation(N)[: N - HELD // 2]]
        acc = LevelAccumulator(cfg)
        acc.add(encode_arrays(taking_part, device, rng, wire=True))
        centers = TreeDecoder(np.random.default_rng()).decode(acc, consume=True).centers
        out[i] = np.min(((points[:, None, :] - centers[None]) ** 2).sum(-1), axis=1).mean()
    return out


def ratios(a: NDArray[np.float64], b: NDArray[np.float64], pairs: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """The test's statistic for ``pairs`` pairs of populations: one round per seed each, drawn from
    the measured rounds (rows: seeds), ratio of the two populations' means over the seeds."""
    rows = np.arange(a.shape[0])[:, None]
    first = a[rows, rng.integers(0, a.shape[1], (a.shape[0], pairs))].mean(0)
    second = b[rows, rng.integers(0, b.shape[1], (b.shape[0], pairs))].mean(0)
    return np.asarray(first / second)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--pairs", type=int, default=200_000)
    ap.add_argument("--wrong-eps", type=float, nargs="*", default=[])
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"n = {N} per model and seed, d = 2, k = 3, eps 8 (shuffle: delta 1e-6, min_batch {N // 10}, "
          f"{N - HELD // 2} reports), seeds {SEEDS}, {a.draws} rounds per seed and model, {a.pairs} pairs; "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, numpy {np.__version__}", flush=True)
    null: dict[str, NDArray[np.float64]] = {}
    for model in ("local", "shuffle"):
        t = time.perf_counter()
        null[model] = np.stack([objectives(model, s, a.draws) for s in SEEDS])
        spread = null[model].std(1) / np.median(null[model], 1)
        worst = null[model].max(1) / np.median(null[model], 1)
        print(f"{model}: per-seed median objective {np.round(np.median(null[model], 1), 4).tolist()}, "
              f"sd/median {np.round(spread, 3).tolist()}, worst/median {np.round(worst, 3).tolist()} "
              f"({time.perf_counter() - t:.0f} s)", flush=True)
        s = ratios(null[model], null[model], a.pairs, rng)
        q = np.quantile(s, [0.001, 0.005, 0.995, 0.999])
        chance = ", ".join(f"+-{b:.0%}: {np.mean(np.abs(s - 1) > b):.2e}" for b in BANDS)
        print(f"  same law: ratio of 3-seed means, quantiles 0.1% {q[0]:.3f}, 0.5% {q[1]:.3f}, 99.5% {q[2]:.3f}, "
              f"99.9% {q[3]:.3f}; fails by chance at {chance}", flush=True)
    for eps in a.wrong_eps:
        off = np.stack([objectives("local", s, max(a.draws // 5, 20), wrong_eps=eps) for s in SEEDS])
        s = ratios(off, null["local"], a.pairs, rng)
        caught = ", ".join(f"+-{b:.0%}: {np.mean(np.abs(s - 1) > b):.3f}" for b in BANDS)
        print(f"local, devices keeping the bucket at eps {eps} (the round says 8): median ratio {np.median(s):.3f}; "
              f"caught at {caught}", flush=True)


if __name__ == "__main__":
    main()
