"""What the dashboard draws under a round's centers (issue 16, item 5): the
private coreset as a weighted 2-D point cloud.

The tree decoder's coreset (significant leaves, their noisy counts and noisy
mean positions) is already private output: drawing it is post-processing.
For d <= 2 the picture is the coreset itself; for d > 2 it is the coreset
projected on its two weighted principal axes, which are computed from the
coreset too (never from reports), and the page projects the centers on the
same axes. Only the heaviest ``MAX_POINTS`` nodes are kept, so a result stays
small whatever d and the tree's size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

MAX_POINTS = 400  # nodes drawn; the lightest beyond these are dropped


def coreset_picture(points: NDArray[np.float64], weights: NDArray[np.float64]) -> dict[str, Any] | None:
    """The picture of a coreset in the original space: ``axes`` (2 x d rows,
    orthonormal), ``origin`` (d), ``xy`` (the kept nodes on the axes) and their
    ``weights``; None when nothing has positive weight. For d <= 2 the origin
    is 0, so the plot's axes read in the user's units."""
    pts = np.asarray(points, dtype=np.float64)
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    keep = w > 0
    pts, w = pts[keep], w[keep]
    if w.size == 0:
        return None
    d = pts.shape[1]
    origin = (pts * w[:, None]).sum(0) / w.sum()
    if d <= 2:  # the features themselves, in the user's units
        origin = np.zeros(d)
        axes = np.eye(2, d) if d == 2 else np.array([[1.0], [0.0]])
        note = "the coreset itself" if d == 2 else "the coreset on its one feature"
    else:
        centred = (pts - origin) * np.sqrt(w / w.sum())[:, None]
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        axes = vt[:2] if vt.shape[0] >= 2 else np.vstack([vt, np.zeros((1, d))])
        note = "the coreset on its two weighted principal axes (computed from the coreset, not the reports)"
    order = np.argsort(-w, kind="stable")[:MAX_POINTS]
    xy = (pts[order] - origin) @ axes.T
    return {
        "axes": axes.tolist(),
        "origin": origin.tolist(),
        "xy": xy.tolist(),
        "weights": w[order].tolist(),
        "nodes": int(w.size),
        "note": note,
    }


def project(picture: dict[str, Any], centers: NDArray[np.float64]) -> NDArray[np.float64]:
    """Centers (original space) on the picture's axes."""
    axes = np.asarray(picture["axes"], dtype=np.float64)
    origin = np.asarray(picture["origin"], dtype=np.float64)
    return (np.asarray(centers, dtype=np.float64) - origin) @ axes.T
