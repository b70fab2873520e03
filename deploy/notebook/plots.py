"""Pictures of a user's own run in a notebook (issue 16, item 6): accuracy
against epsilon, and a simulated elbow curve (the centers over the data, one
fitted model's picture, are ``center_plot.py``'s).

matplotlib is an optional extra (``pip install 'shoal[plot]'``), imported
when a function is called. Every function here evaluates shoal on data the
caller already holds, in-process, to choose parameters before a deployment:
``accuracy_vs_epsilon`` and ``elbow`` run one simulated round per point of
the curve, which in a deployment would each spend their own budget (k
rounds at eps cost k x eps by basic composition). A private elbow curve
from one round is seed 001's greedy (a round kind of its own).

"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from shoal.deploy.notebook.center_plot import pyplot
from shoal.deploy.notebook.estimator import PrivateKMeans
from shoal.server.decoders.kmeans import kmeans_cost


def accuracy_vs_epsilon(X: ArrayLike, k: int, epsilons: Sequence[float], ax: Any = None,
                        **estimator: Any) -> tuple[Any, dict[str, list[float]]]:
    """k-means cost per row of the private centers at each eps (one simulated
    round each, ``PrivateKMeans(**estimator)``), beside the one-center cost.
    Returns (Axes, the numbers drawn)."""
    plt = pyplot()
    x = np.asarray(X, dtype=np.float64)
    n = x.shape[0]
    costs = [kmeans_cost(x, PrivateKMeans(k, epsilon=float(e), **estimator).fit(x).cluster_centers_) / n
             for e in epsilons]
    one = kmeans_cost(x, x.mean(0, keepdims=True)) / n
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    ax.plot(list(epsilons), costs, "o-", label="shoal (private)")
    ax.axhline(one, color="0.5", linestyle="--", label="one center (the mean)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("k-means cost per row (X's units squared)")
    ax.set_title(f"accuracy vs epsilon, k={k}, n={n}")
    ax.legend(fontsize=8)
    return ax, {"epsilon": [float(e) for e in epsilons], "cost": costs, "one_center": [one]}


def elbow(X: ArrayLike, ks: Sequence[int], epsilon: float, ax: Any = None,
          **estimator: Any) -> tuple[Any, dict[str, list[float]]]:
    """Cost per row of the private centers for each k (one simulated round per
    k; module docstring on what that would cost in a deployment)."""
    plt = pyplot()
    x = np.asarray(X, dtype=np.float64)
    n = x.shape[0]
    costs = [kmeans_cost(x, PrivateKMeans(int(k), epsilon=epsilon, **estimator).fit(x).cluster_centers_) / n
             for k in ks]
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    ax.plot(list(ks), costs, "o-")
    ax.set_xlabel("k")
    ax.set_ylabel("k-means cost per row (X's units squared)")
    ax.set_title(f"simulated elbow, eps={epsilon} per round, n={n}")
    return ax, {"k": [float(k) for k in ks], "cost": costs}
