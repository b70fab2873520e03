"""Does a tree round's elbow band cover what it claims to? (issue 18, the
shuffle-model elbow; ``shoal bench --greedy --model shuffle``.)

A tree round's elbow (``server/decoders/tree/greedy_centers.py``) is the
cost of the greedy's first k' centers over the released coreset: each
coreset node at its lattice point, weighted by its private count, in the
projected space, with a band of two standard deviations of the counts'
noise. Holding the data, a benchmark can compute the same curve on the
nodes' exact counts (the non-private curve of the same estimator: how
many points each node holds, by the same public paths the devices walk),
and the data's own cost in the projected space for the same centers
(which adds what the coreset leaves out: every point's offset from its
node, and the points outside the coreset's nodes). The band is a claim
about the first; the second says how far the coreset curve is from the
data's cost.

Chunks of 10^5 points: paths and keys per chunk, never all levels of all
n points at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from shoal.common.cost_drops import prefix_costs
from shoal.common.errors import ConfigError
from shoal.common.kinds.tree import RoundConfig
from shoal.common.kinds.tree_nets import LatticeNet, node_space
from shoal.server.decoders.greedy_order import coreset_elbow
from shoal.server.decoders.tree.greedy_centers import Coreset

CHUNK = 100_000


def exact_curves(cfg: RoundConfig, x_ball: np.ndarray, core: Coreset) -> dict[str, Any]:
    """The released curve (from ``core``), the same curve on exact node counts, the data's
    projected cost of the same centers, and at how many k' the band covers each."""
    space = node_space(cfg)
    if not isinstance(space, LatticeNet):
        raise ConfigError(f"the greedy's elbow is a nettree round's; round {cfg.round_id!r} is {cfg.encoder}")
    exact = np.zeros(core.keys.size)
    levels = np.unique(core.level).tolist()
    order = {j: np.flatnonzero(core.level == j) for j in levels}
    order = {j: idx[np.argsort(core.keys[idx])] for j, idx in order.items()}
    sorted_keys = {j: core.keys[idx] for j, idx in order.items()}
    data_cost = np.zeros(core.centers.shape[0])
    for lo in range(0, x_ball.shape[0], CHUNK):
        part = x_ball[lo:lo + CHUNK]
        paths = space.paths(part)
        for j in levels:
            keys = space.keys(j, paths[j])
            at = np.searchsorted(sorted_keys[j], keys)
            hit = at < sorted_keys[j].size
            hit[hit] = sorted_keys[j][at[hit]] == keys[hit]
            np.add.at(exact, order[j][at[hit]], 1.0)
        data_cost += prefix_costs(space.project(part), core.centers, 2).sum(0)
    # The decoder's own curve and band (``coreset_elbow``), and the same curve on exact counts.
    curve, _ = coreset_elbow(core.pos, core.weights, core.variances, core.centers)
    released, band = np.array([c["cost"] for c in curve]), np.array([c["band"] for c in curve])
    on_counts = np.array([c["cost"] for c in coreset_elbow(core.pos, exact, np.zeros_like(exact), core.centers)[0]])
    return {"released": released.tolist(), "band": band.tolist(), "exact_counts": on_counts.tolist(),
            "data_projected": data_cost.tolist(),
            "covers_exact_counts": int((np.abs(released - on_counts) <= band).sum()),
            "covers_data": int((np.abs(released - data_cost) <= band).sum()),
            "coreset_share": float(exact.sum() / x_ball.shape[0])}


def plot_elbows(panels: list[dict[str, Any]], path: Path, ylabel: str) -> None:
    """One panel per run: the released cost of k' = 1..k with its band (shaded) and the
    data's exact cost of the same centers (dots), the suggested k' marked; a log y axis
    (costs span decades), symlog where a band reaches below 0 (noisy costs past the knee)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, p in zip(axes[0], panels, strict=True):
        ks = np.arange(1, len(p["cost"]) + 1)
        cost, band = np.asarray(p["cost"]), np.asarray(p["band"])
        ax.fill_between(ks, cost - band, cost + band, alpha=0.3, label="band")
        ax.plot(ks, cost, "-", label="released cost")
        ax.plot(ks, p["truth"], "k.", label="data's cost")
        ax.axvline(p["suggested"], color="r", ls=":", label=f"suggested k' = {p['suggested']}")
        if float((cost - band).min()) > 0:
            ax.set_yscale("log")
        else:
            ax.set_yscale("symlog", linthresh=max(float(band.max()), 1e-12))
        ax.set_xlabel("k'")
        ax.set_title(p["title"], fontsize=9)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel(ylabel)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
