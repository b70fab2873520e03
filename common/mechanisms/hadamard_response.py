"""The 1-bit Hadamard mechanism, kept as the measured alternative to OLH.

Seed 004, Thm. 12 family (Bassily et al. 2020): a device with item column c
draws a uniform row r of the m x m Hadamard matrix and sends r and the bit
H[r, c] through randomised response with keep probability e^eps/(1+e^eps).
The server sums the debiased bits per row and recovers every column's count
with one FWHT. Near-optimal at eps <= 1, but each report carries one bit,
so the error stalls near sqrt(n) as eps grows (DESIGN.md; measured in
``shoal bench``, where OLH is the default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.exact_sampling import DYADIC_ONE, bernoulli_dyadic, grr_keep_numerator
from shoal.common.mechanisms.hadamard import fwht, hadamard_sign


@dataclass(frozen=True)
class HadamardResponseParams:
    epsilon: float
    log2_columns: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise ConfigError(f"Hadamard epsilon must be finite and > 0, got {self.epsilon}")
        if not 1 <= self.log2_columns <= 24:
            raise ConfigError(f"Hadamard log2_columns must be in [1, 24], got {self.log2_columns}")

    @property
    def keep_numerator(self) -> int:
        """Keep with probability exactly A / 2^32, A (1) / (2^32 - A) <= e^eps."""
        return grr_keep_numerator(self.epsilon, 2)

    @property
    def keep_probability(self) -> float:
        return self.keep_numerator / DYADIC_ONE


def randomise_signs(
    rows: NDArray[np.int64], cols: NDArray[np.int64], params: HadamardResponseParams, rng: np.random.Generator
) -> NDArray[np.int64]:
    """+-1 answers: H[r, c] kept with probability e^eps / (1 + e^eps), else flipped."""
    truth = hadamard_sign(rows, cols)
    keep = bernoulli_dyadic(params.keep_numerator, rows.shape[0], rng)
    return np.where(keep, truth, -truth).astype(np.int64)


def estimate_all_counts(
    rows: NDArray[np.int64], signs: NDArray[np.int64], params: HadamardResponseParams
) -> NDArray[np.float64]:
    """Unbiased counts of every column: FWHT of the debiased per-row sums."""
    m = 1 << params.log2_columns
    per_row = np.bincount(rows, weights=signs.astype(np.float64), minlength=m)  # float64, as the weights
    scale = 1.0 / (2 * params.keep_probability - 1)
    # numpy's stub types bincount as intp whatever the weights (numpy 2.4): weighted, it is float64
    return fwht(per_row) * scale  # type: ignore[arg-type]
