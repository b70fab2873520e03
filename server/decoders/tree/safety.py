"""The decoder's safety net (step 5 of ``decoder.py``): never worse than the
private mean by more than noise, shown from the decoder's own estimates.

``certify`` keeps an answer only if its estimated cost gain over the private
mean reaches CERTIFICATE_Z standard deviations of its noise; otherwise the
mean replaces its lightest center (never costlier than the mean alone). ``lattice_safety_net`` is the James-Stein shrinkage and
the certificate for identity nettree, whose centers are lattice points
weighted by noisy counts (issue 15: without it, d = 7 data with clipped
tails gave 1.3-1.6x the one-center cost).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.clipping import clip_to_ball
from shoal.server.decoders.kmeans import assign
from shoal.server.decoders.tree.consistency import tree_blue
from shoal.server.decoders.tree.oracles import VectorOracle
from shoal.server.decoders.tree.tree import NetTree

# How many standard deviations of its own noise the answer's estimated gain
# over the private mean must reach (``certify``).
CERTIFICATE_Z = 1.0


def lattice_safety_net(
    pos_var: NDArray[np.float64], tree: NetTree, vo: VectorOracle, leaf_ids: NDArray[np.int64], lab: NDArray[np.int64],
    pos: NDArray[np.float64], weights: NDArray[np.float64], ball: NDArray[np.float64],
    mass: NDArray[np.float64], n: float, diag: dict[str, Any],
    counts: NDArray[np.float64], enabled: bool = True,
) -> NDArray[np.float64]:
    """Step 5 for identity nettree: its centers are count-weighted lattice
    points, so their noise is the count noise of their cells:
    Var(center_c) ~ sum_u Var(n_u) |pos_u - center_c|^2 / n_c^2 (delta method).
    ``counts``: every node's consistent count (the certificate charges every
    device, through the built tree's leaves)."""
    kk, dim = ball.shape
    v0, s0 = vo.sums(0, tree.keys[:1])
    mean = clip_to_ball(v0 / n)[0]
    e0 = dim * float(s0) / n**2
    var_u = np.nan_to_num(tree.count_var[leaf_ids], nan=0.0, posinf=1e30)
    spread = ((pos[leaf_ids] - ball[lab]) ** 2).sum(1)
    err = np.zeros(kk)
    np.add.at(err, lab, var_u * spread)
    err /= np.maximum(mass, 1.0) ** 2
    gap = ((ball - mean) ** 2).sum(1)
    with np.errstate(over="ignore"):
        shrink = np.clip(1 - (err + e0) / np.maximum(gap, 1e-300), 0.0, 1.0)
    shrink[mass <= 0] = 0.0
    if not enabled:
        shrink = np.where(mass > 0, 1.0, 0.0)
    out = mean + shrink[:, None] * (ball - mean)
    delta = out - mean
    # The certificate's groups are the built tree's leaves (its non-expanded nodes), which hold every
    # device, not only the coreset's: a device outside the coreset goes to the answer's nearest center
    # too, not to the mean (issue 41: city data, 20,000 devices, eps 1, answered 1.33x the one-center
    # cost with the certificate counting only the 6,900 devices of its two coreset leaves). Each leaf
    # sits at its position with its consistent count; L = sum_u a_u n_u is linear in the raw counts
    # through the consistency step's projection, so Var(L) is exact (``leaf_sum_variance``).
    groups = np.flatnonzero(~tree.expanded)
    group_count = counts[groups]
    g_lab = assign(pos[groups], out)
    cert_mass = np.zeros(kk)
    np.add.at(cert_mass, g_lab, group_count)
    centered = np.zeros((kk, dim))
    np.add.at(centered, g_lab, (pos[groups] - mean) * group_count[:, None])
    coef = np.zeros(tree.size)
    coef[groups] = (delta[g_lab] ** 2).sum(1) - 2 * np.einsum("ij,ij->i", delta[g_lab], pos[groups] - mean)
    # A leaf's devices are not at its position: their offsets have mean 0 over the public shifts and
    # variance ``pos_var`` per direction (the lattice's ``rounding_sd``, or a placed node's,
    # ``placement.py``); counted as noise of S_c, leaf by leaf.
    rounding = (np.maximum(group_count, 0.0) ** 2 * pos_var[groups] * (delta[g_lab] ** 2).sum(1)).sum()
    proj_var = np.zeros(kk)  # ``certify`` reads sd = 2 sqrt(sum proj_var): Var(L) / 4 in one entry
    proj_var[0] = leaf_sum_variance(tree, coef) / 4 + float(rounding)
    diag.update(shrink=shrink.tolist(), center_noise=err.tolist(), mean_noise=e0)
    return certify(out, mean, cert_mass, centered, proj_var, np.zeros(kk), diag, enabled)


def leaf_sum_variance(tree: NetTree, coef: NDArray[np.float64]) -> float:
    """Var(sum_u coef_u x_u) where x = ``tree_blue`` of the raw counts y, whose
    noise is independent with variances S = ``tree.count_var``. x = P y with P
    the BLUE's projection onto "parent = sum of children", orthogonal in the
    S^-1 inner product, so P S = S P' and P P = P: Var = coef' P S P' coef =
    coef' P S coef, one more pass of the consistency step (on S coef), O(tree)."""
    s = np.clip(np.nan_to_num(tree.count_var, nan=1e30, posinf=1e30), 1e-12, 1e30)  # as ``tree_blue`` clips
    projected, _ = tree_blue(tree.parent, tree.level, tree.expanded, s * coef, tree.count_var)
    return float(coef @ projected)

def certify(
    ball: NDArray[np.float64], mean: NDArray[np.float64], mass: NDArray[np.float64],
    centered: NDArray[np.float64], proj_var: NDArray[np.float64], stein: NDArray[np.float64],
    diag: dict[str, Any], enabled: bool = True,
) -> NDArray[np.float64]:
    """Keep the answer only if its estimated cost is below the private mean's.

    Assigning each group c of the tree's partition (n_c devices, sum S_c)
    to its center instead of the mean m changes the cost by
    L = sum_c n_c |d_c|^2 - 2 d_c . (S_c - n_c m), d_c = center_c - m;
    the answer's true cost (nearest center) is at most that. L is
    estimated from the noisy S_c and n_c, plus the Stein term (the centers
    were made from the same S_c), with standard deviation
    sqrt(sum_c 4 Var(d_c . (S_c - n_c m))). Gain = -L; the answer stands
    when the estimated gain is at least CERTIFICATE_Z standard deviations
    (it is shown to be better than the mean). An answer worse than the
    mean passes with probability below P(N(0, 1) > z) = 16%, and then by
    at most noise.

    Otherwise the private mean replaces the lightest center and the other
    k - 1 stay. Every point's nearest center is then at most as far as the
    mean, so this answer's cost is at most the mean-only answer's, for any
    data and any noise: "never worse than the private mean" holds by
    construction, and what the tree found still lowers the cost (issue 15:
    two of 216 benchmark runs that answered k copies of the mean missed
    the one-center bound by 0.4-1%; issue 16: k identical centers)."""
    delta = ball - mean
    loss = float(np.sum(mass * (delta**2).sum(1) - 2 * np.einsum("ij,ij->i", delta, centered)) + stein.sum())
    sd = float(2 * np.sqrt(np.sum(np.maximum(proj_var, 0.0))))
    keep = (-loss >= CERTIFICATE_Z * sd and bool(np.any(delta != 0))) or not enabled
    diag["certificate"] = {"gain": -loss, "gain_sd": sd, "z": CERTIFICATE_Z,
                           "answer": "clusters" if keep else "private mean"}
    if keep:
        return ball
    out = ball.copy()
    lightest = int(np.argmin(mass))
    out[lightest] = mean
    diag["certificate"]["fallback"] = (f"center {lightest} (the lightest) is the private mean; the other "
                                       f"{ball.shape[0] - 1} are the tree's, which can only lower the cost")
    diag["certificate"]["mean_center"] = lightest
    return out
