"""Decoding a refine round (``common/kinds/refine.py``): one Lloyd step from
the decoded sums, and, for a split round, the candidates' means reduced to
the parent's k centers by weighted k-means. A round of a refine chain (its
parent a refine round, whose result states each center's noise variance)
combines its means with the parent's centers (``combined_steps``). Pure
numpy, post-processing."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shoal.common.kinds.refine import RefineConfig, kept_buckets, refined_centers
from shoal.server.decoders.combined_steps import combine_factor
from shoal.server.decoders.kmeans import assign, reduce_weighted


@dataclass(frozen=True)
class RefineAnswer:
    """A refine round's ball centers, their noisy sizes, each center's noise variance (the
    squared error its released noise leaves, NaN: the parent's center kept, no measurement)
    and the factor each center moved by toward its noisy mean (1: a plain Lloyd step)."""

    centers: NDArray[np.float64]
    sizes: NDArray[np.float64]
    variance: NDArray[np.float64]
    lam: NDArray[np.float64]


def mean_variance(sizes: NDArray[np.float64], config: RefineConfig, parts: NDArray[np.float64] | float = 1.0
                  ) -> NDArray[np.float64]:
    """The noise variance of a mean of ``parts`` buckets' noisy sums over their noisy size: (d + 1) sd^2
    parts / size^2, sd the sum's per-coordinate noise (the sum's d coordinates, and the count's,
    which scales a mean of norm <= 1)."""
    sd = config.secure_sum.noise_std
    return np.asarray((config.dim + 1) * sd**2 * np.asarray(parts) / np.maximum(sizes, 1.0) ** 2, dtype=np.float64)


def refine_answer(total: NDArray[np.float64], config: RefineConfig, rng: np.random.Generator,
                  prior_variance: NDArray[np.float64] | None = None) -> RefineAnswer:
    """The candidates' means (``refined_centers``), reduced to ``config.keep`` centers when the
    round split its parent's; with ``prior_variance`` (the parent's centers' noise variances, a
    round of a refine chain; a split round ignores it) each found mean is combined with its
    parent center (``combined_steps.combine_factor``; a parent center with no variance, NaN, takes
    the mean whole)."""
    means, sizes = refined_centers(total, config)
    found = kept_buckets(total, config)
    if config.keep and config.keep < config.k:
        centers, weights = reduce_weighted(means, sizes, config.keep, rng)
        parts = (np.bincount(assign(means[found], centers), minlength=centers.shape[0]).astype(np.float64)
                 if found.any() else np.zeros(centers.shape[0]))
        variance = np.where(parts > 0, mean_variance(weights, config, parts), np.nan)
        return RefineAnswer(config.bound.project_ball(centers), weights, variance, np.ones(centers.shape[0]))
    noise = mean_variance(sizes, config)
    start = config.center_array
    if prior_variance is None:
        prior_variance = np.full(config.k, np.nan)
    prior = np.asarray(prior_variance, dtype=np.float64)
    if prior.shape != (config.k,):
        raise ValueError(f"prior_variance needs one value per parent center ({config.k}), got shape {prior.shape}")
    gap = ((means - start) ** 2).sum(axis=1)
    lam = np.where(found, np.where(np.isnan(prior), 1.0, combine_factor(gap, noise, np.nan_to_num(prior))), 0.0)
    centers = np.where((lam == 1.0)[:, None], means, start + lam[:, None] * (means - start))
    variance = np.where(found, lam * noise, prior)
    return RefineAnswer(config.bound.project_ball(centers), sizes, variance, lam)
