"""A Lloyd step's noisy means combined with the noisy centers it started from (issue 41).

Where Lloyd has converged, the centers a private step starts from and the
noisy means it releases measure the same cluster means: replacing the one
by the other throws a measurement away, and a chain of steps that each take
a T-th of a budget ends as noisy as one release at that T-th. With gap the
squared distance between a start center (noise variance w) and its part's
noisy mean (noise variance v), E gap = |drift|^2 + w + v, so A = max(gap -
v, w) estimates |drift|^2 + w, and the start moved by lam = A / (A + v)
toward the mean is the estimator c + lam (m - c) with the least squared
error under that estimate: the inverse-variance average of the two where
the drift is 0 (with zCDP-composed releases, as precise as one release of
their whole budget), the mean where the center still travels (lam -> 1);
its variance afterwards lam v. Post-processing of released values only.
Used by the curator's shrunk Lloyd steps (``central/lift.py``) and the
shuffle model's refine chain (``refine.py``). Pure numpy.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def combine_factor(gap: NDArray[np.float64], noise: NDArray[np.float64],
                   start_var: NDArray[np.float64]) -> NDArray[np.float64]:
    """lam = A / (A + v), A = max(gap - v, w) (module docstring), per center: ``gap`` the
    squared move to the noisy mean, ``noise`` that mean's variance v, ``start_var`` the start
    center's variance w (finite)."""
    drift = np.maximum(gap - noise, start_var)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = drift / (drift + noise)
    return np.where(np.isfinite(lam), lam, 1.0)
