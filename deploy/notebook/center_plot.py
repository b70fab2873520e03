"""One fitted model's centers over the data it was fitted on, for a notebook
(``PrivateKMeans.plot``; issue 16, item 6).

matplotlib is an optional extra (``pip install 'shoal[plot]'``), imported
when a picture is drawn (``pyplot``). For d > 2 the data and centers are
drawn on the data's first two principal axes (computed from X, which the
caller holds; nothing is published).

A title names the answer the verdict gives (``answer_title``): "private
mean" when every center is the private mean, "N distinct centers of k"
when centers coincide, never "clusters" for either.

Apart from ``plots.py`` (whose curves fit new models) so that the estimator
draws itself without importing the module that imports it.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, NDArray


class Fitted(Protocol):
    """What a picture reads of a fitted ``PrivateKMeans``."""

    k: int
    epsilon: float
    model: str
    cluster_centers_: NDArray[np.float64]
    quality_: dict[str, Any] | None


def pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ModuleNotFoundError:
        raise ModuleNotFoundError("shoal's plots need matplotlib: pip install 'shoal[plot]'") from None
    return plt


def _axes2(x: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64], tuple[str, str]]:
    """(origin, 2 x d axes, labels): the features themselves for d <= 2, else X's principal axes."""
    d = x.shape[1]
    if d <= 2:
        return np.zeros(d), np.eye(2, d), ("feature 0", "feature 1" if d == 2 else "")
    origin = x.mean(0)
    _, _, vt = np.linalg.svd(x[:: max(1, x.shape[0] // 20_000)] - origin, full_matrices=False)
    return origin, vt[:2], ("principal axis 1", "principal axis 2")


def answer_title(quality: dict[str, Any] | None, k: int) -> str:
    """What a fitted model's centers are, in a few words, from its verdict: "private
    mean" (the certificate kept the mean, or a mean-only round), "N distinct
    centers of k" when fewer than k differ, else "k clusters" ("not
    certified" when nothing tested them against the mean), or the verdict's
    own answer ("unreliable sketch", "nothing released")."""
    q = quality or {}
    answer, distinct = q.get("answer"), q.get("distinct_centers")
    if answer == "mean-only round":
        return "private mean (mean-only round)"
    if answer == "private mean":
        return "private mean" if distinct in (None, 1) else f"private mean (+ {distinct - 1} uncertified guesses)"
    if answer in ("clusters", "one bucket"):
        shown = "" if q.get("certified", True) else " (not certified)"
        if distinct is not None and distinct < k:
            return f"{distinct} distinct center{'' if distinct == 1 else 's'} of {k}{shown}"
        return f"{k} clusters{shown}"
    return str(answer) if answer else "no verdict"


def plot_centers(X: ArrayLike, model: Fitted, ax: Any = None, max_points: int = 5000) -> Any:
    """The fitted centers (numbered crosses) over a sample of X, with the
    verdict in the title. Returns the matplotlib Axes."""
    plt = pyplot()
    x = np.asarray(X, dtype=np.float64)
    centers = model.cluster_centers_
    origin, axes, labels = _axes2(x)
    sample = x[np.random.default_rng(0).permutation(x.shape[0])[:max_points]]
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 5))
    xy, cxy = (sample - origin) @ axes.T, (centers - origin) @ axes.T
    ax.scatter(xy[:, 0], xy[:, 1], s=4, alpha=0.3, color="0.45", label=f"X ({len(sample)} of {x.shape[0]} rows)")
    ax.scatter(cxy[:, 0], cxy[:, 1], marker="x", s=90, linewidths=3, color="#d0202a", label="private centers")
    for i, (a, b) in enumerate(cxy):
        ax.annotate(str(i), (a, b), xytext=(5, 5), textcoords="offset points", color="#d0202a", weight="bold")
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.set_title(f"k={model.k}, eps={model.epsilon}, {model.model} model: {answer_title(model.quality_, model.k)}")
    ax.legend(loc="best", fontsize=8)
    return ax
