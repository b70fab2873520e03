"""The thresholded histogram cover (``gridhist``): step 2 without a greedy.

At each grid side, fine to coarse, every non-empty cell of each shifted grid
counts the points no finer level covered; the cells whose count plus exact
discrete Gaussian noise reaches the threshold are the level's candidates
and cover their points. The noise, the threshold and the privacy argument
are in ``common/mechanisms/threshold_histogram.py``. One noise draw per non-empty cell
(a whole-array call), no loop per cell or point. Pure numpy.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.exact_sampling import discrete_gaussian
from shoal.common.mechanisms.threshold_histogram import HistogramNoise
from shoal.server.decoders.central.grids import cells, shifted_grids


def released(counts: NDArray[np.int64], noise: HistogramNoise, rng: np.random.Generator) -> NDArray[np.bool_]:
    """Which cells pass: count + sum of ``shares`` truncated N_Z(0, sigma_sq) >= threshold.
    The noisy counts themselves never leave this function."""
    counts = np.asarray(counts)
    if counts.ndim != 1 or (counts.size and counts.min() < 0):
        raise ConfigError(f"histogram cover: counts must be a 1-D array of non-negative integers, got {counts!r}")
    return np.asarray(noisy_sums(counts, noise, rng) >= noise.threshold)


def noisy_sums(sums: NDArray[np.int64], noise: HistogramNoise, rng: np.random.Generator) -> NDArray[np.int64]:
    """sum + the sum of ``shares`` truncated N_Z(0, sigma_sq) draws, per cell (exact); gridhist
    keeps only which cells pass, seed 001's greedy (``greedy.py``) releases the passing values."""
    total = np.asarray(sums, dtype=np.int64).copy()
    for _ in range(noise.shares):
        total += discrete_gaussian(noise.sigma_sq, noise.clip, total.size, rng)
    return total


def histogram_level(y: NDArray[np.float64], alive: NDArray[np.int64], side: float, noise: HistogramNoise,
                    public: np.random.Generator, rng: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """One grid side: the released cells' centers and the points (of ``alive``) they cover."""
    grids = shifted_grids(side, y.shape[1], noise.shifts, public)
    sub = y[alive]
    covered = np.zeros(alive.size, dtype=bool)
    picks = []
    for g in grids:
        rows, inverse = cells(g.index(sub))
        ok = released(np.bincount(inverse, minlength=rows.shape[0]), noise, rng)
        picks.append(g.centers(rows[ok]))
        covered |= ok[inverse]
    return np.concatenate(picks), alive[covered]
