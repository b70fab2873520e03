"""A point's costs to the first k' of an ordered list of centers, and their drops.

Seed 001 (La Tour, Henzinger, Saulpic, Sec. 2, Lemma 2.5): with the centers
in the greedy's order, the cost of every k' <= k is a sum over points, so
one release of each point's k costs answers the whole elbow. Released as
successive drops (c_1 - c_2, ..., c_{k-1} - c_k, c_k) they are
non-negative and sum to c_1 <= D^z (D = 2, the unit ball's diameter): an
L1 norm of D^z for all k costs at once. The curator's elbow
(``server/decoders/central/greedy.py``) and a device's share of an
``elbow`` round (``common/kinds/elbow.py``) both start here, so this is
in ``shoal.common`` (a device imports it). Pure numpy.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

DIAMETER = 2.0  # of the unit ball, where points and centers live
Z_OF = {"kmeans": 2, "kmedian": 1}  # the objective's power of the distance
CHUNK = 65_536  # points per block of the distance table


def prefix_costs(x: NDArray[np.float64], centers: NDArray[np.float64], z: int) -> NDArray[np.float64]:
    """(n, k): each point's cost to its nearest of the first k' centers, k' = 1..k."""
    out = np.empty((x.shape[0], centers.shape[0]))
    for lo in range(0, x.shape[0], CHUNK):
        part = x[lo:lo + CHUNK]
        d2 = np.maximum((part**2).sum(1)[:, None] - 2 * part @ centers.T + (centers**2).sum(1)[None, :], 0.0)
        out[lo:lo + CHUNK] = np.minimum.accumulate(d2 if z == 2 else np.sqrt(d2), axis=1)
    # Points and centers lie in the unit ball, so no cost exceeds D^z; the clip makes the drops'
    # L1 bound hold by construction whatever the float rounding of the distances.
    return np.clip(out, 0.0, DIAMETER**z)


def point_drops(x: NDArray[np.float64], centers: NDArray[np.float64], z: int) -> NDArray[np.float64]:
    """(n, k): each point's drops c_1 - c_2, ..., c_{k-1} - c_k, c_k of its costs to the
    first k' centers: non-negative (the costs never rise), summing to c_1 <= D^z."""
    costs = prefix_costs(x, centers, z)
    return np.concatenate([costs[:, :-1] - costs[:, 1:], costs[:, -1:]], axis=1)
