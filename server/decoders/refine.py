"""Decoding a refine round (``common/kinds/refine.py``): one Lloyd step from
the decoded sums, and, for a split round, the candidates' means reduced to
the parent's k centers by weighted k-means. Pure numpy, post-processing."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shoal.common.kinds.refine import RefineConfig, refined_centers
from shoal.server.decoders.kmeans import reduce_weighted


def refine_answer(total: NDArray[np.float64], config: RefineConfig,
                  rng: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Ball centers and noisy sizes: the candidates' means (``refined_centers``),
    reduced to ``config.keep`` centers when the round split its parent's."""
    means, sizes = refined_centers(total, config)
    if not config.keep or config.keep >= config.k:
        return means, sizes
    centers, weights = reduce_weighted(means, sizes, config.keep, rng)
    return config.bound.project_ball(centers), weights
