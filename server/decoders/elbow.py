"""Decoding an elbow round (``common/kinds/elbow.py``): every k' cost of an
ordered answer from the released drops, a band that covers all of them at
once, and the suggested k'. Pure numpy, post-processing of the noisy total
and of public parameters.

- cost(k') is the sum of the released drops from k' on (seed 001, Lemma
  2.5: costs are sums over points). Its noise is the sum of k - k' + 1
  coordinates' noise, independent and symmetric, each the total of every
  device's noise share: sd_{k'} = sqrt(k - k' + 1) sigma_m, with sigma_m
  one coordinate's noise sd for the m devices decoded (``coordinate_sd``;
  m is released by the check coordinate, public once decoded).
- The band is simultaneous: +-z sd_{k'} with z the BAND_LEVEL quantile of
  max over k' of |noise of cost(k')| / sd_{k'}, drawn (BAND_DRAWS times,
  public seed) from the exact law of the noise totals (``noise_totals``).
  So the curve's band covers the cost of every k' at once with
  probability BAND_LEVEL (up to the draws' error, about +-0.003), for any
  data: the claim a reader of an elbow makes ("the true curve lies in
  the band"), where a band of two sds per k' holds at every k' in 0.79
  of curves at k = 16 (0.88 at k = 4; fresh draws, 1,300 devices).
- The suggested k' is the curator elbow's rule (``suggest_k``): the
  largest k' whose drop cost(k' - 1) - cost(k') is at least ELBOW_RATIO
  of cost(k') and GAIN_SDS noise deviations of one drop.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from shoal.common.mechanisms.secure_sum import SecureSumParams

ELBOW_RATIO = 0.5  # suggested k': its drop is at least this share of cost(k') ...
GAIN_SDS = 3.0  # ... and this many standard deviations of the drop's noise
BAND_LEVEL = 0.95  # the band covers every k' at once with this probability
BAND_DRAWS = 20_000
BAND_BLOCK = 2_000
BAND_SEED = 20261125  # public: the band is a function of public parameters only


def suggest_k(drops: NDArray[np.float64], tail: NDArray[np.float64], sd: float) -> int:
    """The largest k' whose released drop into it (``drops[k' - 2]``) is at least
    ELBOW_RATIO of cost(k') (``tail[k' - 1]``) and GAIN_SDS drop noise sds; 1 if none."""
    suggested = 1
    for j in range(1, tail.size):
        gain = float(drops[j - 1])
        if gain > ELBOW_RATIO * max(float(tail[j]), 0.0) and gain > GAIN_SDS * sd:
            suggested = j + 1
    return suggested


def coordinate_sd(params: SecureSumParams, devices: int) -> float:
    """One coordinate's total noise sd, in real units, over ``devices`` devices
    (``noise_std`` is the same at min_devices): the Laplace law's total is a
    difference of two NB(m / n_min, 1 - alpha); the Gaussian law's a sum of m
    discrete Gaussians, each of variance below S (so this is an upper bound)."""
    if params.noise == "gaussian":
        return math.sqrt(devices * params.sigma_sq) / params.scale
    r, a = devices / params.min_devices, params.alpha
    return math.sqrt(2 * r * a) / (1 - a) / params.scale


def noise_totals(devices: int, params: SecureSumParams, shape: tuple[int, ...],
                 rng: np.random.Generator) -> NDArray[np.int64]:
    """Draws of the total of ``devices`` devices' noise shares, integer units:
    Laplace law, NB(m / n_min) differences (sums of NB add their shapes);
    Gaussian law, a rounded normal of variance m S, which the sum of m >> 1
    discrete Gaussians matches to within KLS's tau. For public post-processing
    (the band) and simulation only: never sent (devices draw their shares
    exactly, ``secure_sum.noise_shares``)."""
    if params.noise == "gaussian":
        return np.rint(rng.normal(0.0, math.sqrt(devices * params.sigma_sq), size=shape)).astype(np.int64)
    r, p = devices / params.min_devices, 1.0 - params.alpha
    return (rng.negative_binomial(r, p, size=shape) - rng.negative_binomial(r, p, size=shape)).astype(np.int64)


def band_quantile(k: int, params: SecureSumParams, devices: int) -> float:
    """z such that |noise of cost(k')| <= z sd_{k'} for every k' at once with
    probability BAND_LEVEL (module docstring), from BAND_DRAWS public draws."""
    rng = np.random.default_rng([BAND_SEED, k, devices, params.min_devices])
    sd = coordinate_sd(params, devices) * np.sqrt(np.arange(k, 0, -1, dtype=np.float64))
    worst = np.empty(BAND_DRAWS)
    for lo in range(0, BAND_DRAWS, BAND_BLOCK):  # a block of draws at a time: k up to 1000 in ~16 MB
        rows = min(BAND_BLOCK, BAND_DRAWS - lo)
        draws = noise_totals(devices, params, (rows, k), rng).astype(np.float64) / params.scale
        tails = np.cumsum(draws[:, ::-1], axis=1)[:, ::-1]
        worst[lo:lo + rows] = np.abs(tails / sd).max(axis=1)
    return float(np.quantile(worst, BAND_LEVEL))


def elbow_from_drops(drops: NDArray[np.float64], params: SecureSumParams,
                     devices: int) -> tuple[list[dict[str, float]], int, dict[str, float]]:
    """The curve (k', cost, band) for k' = 1..k, the suggested k', and the band's terms."""
    drops = np.asarray(drops, dtype=np.float64)
    k = drops.size
    tail = np.cumsum(drops[::-1])[::-1]
    sd = coordinate_sd(params, devices)
    z = band_quantile(k, params, devices)
    band = z * sd * np.sqrt(np.arange(k, 0, -1, dtype=np.float64))
    curve = [{"k": j + 1, "cost": float(tail[j]), "band": float(band[j])} for j in range(k)]
    return curve, suggest_k(drops, tail, sd), {"drop_sd": sd, "band_z": z, "band_level": BAND_LEVEL}
