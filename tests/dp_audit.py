"""Empirical DP audit: is there statistical evidence that a likelihood ratio exceeds e^eps?

Sample a randomiser many times on two inputs, histogram the outputs over a
partition, and bound each bin's probability with Clopper-Pearson intervals.
The audit statistic is the largest *lower confidence bound* of
log(P1(bin) / P2(bin)) over bins (both directions): it exceeds eps only if
the data prove a violation at the chosen confidence, so a correct
mechanism passes and a mis-calibrated one (tested too) fails.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def max_log_ratio_lower_bound(c1: np.ndarray, c2: np.ndarray, alpha: float = 1e-4) -> float:
    n1, n2 = c1.sum(), c2.sum()
    best = -np.inf
    for a, na, b, nb in ((c1, n1, c2, n2), (c2, n2, c1, n1)):
        lo_a = stats.beta.ppf(alpha, np.maximum(a, 1e-9), na - a + 1)
        lo_a = np.where(a > 0, lo_a, 0.0)
        hi_b = stats.beta.ppf(1 - alpha, b + 1, np.maximum(nb - b, 1e-9))
        hi_b = np.where(b < nb, hi_b, 1.0)
        with np.errstate(divide="ignore"):
            r = np.log(lo_a) - np.log(hi_b)
        best = max(best, float(np.max(r)))
    return best


def simultaneous_lower_bound(c1: np.ndarray, c2: np.ndarray, confidence: float = 0.95) -> float:
    """A lower bound on the largest log likelihood ratio over all bins and both
    directions that holds with ``confidence`` for all of them at once
    (Bonferroni): the "95% lower bound" the bit-level audits compare with eps."""
    c1, c2 = np.asarray(c1), np.asarray(c2)
    return max_log_ratio_lower_bound(c1, c2, alpha=(1 - confidence) / (2 * c1.size))


def joint_counts(codes1: np.ndarray, codes2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Histograms of two samples of integer bin codes over their common support."""
    size = int(max(codes1.max(), codes2.max())) + 1
    return np.bincount(codes1, minlength=size), np.bincount(codes2, minlength=size)


def delta_lower_bound(s1: np.ndarray, s2: np.ndarray, epsilon: float, confidence: float = 0.95,
                      thresholds: int = 200) -> float:
    """A lower bound, holding with ``confidence`` for every event at once (Bonferroni),
    on max_A P1(A) - e^eps P2(A) over the events A = {s >= t} and {s < t} of a scalar
    statistic and both directions: above delta, the samples prove that an (eps, delta)
    claim fails. Upper sets of the likelihood ratio hold the worst case, so the
    statistic should be (monotone in) the log likelihood ratio."""
    ts = np.quantile(np.concatenate([s1, s2]), np.linspace(0, 1, thresholds))
    alpha = (1 - confidence) / (4 * ts.size)
    worst = -np.inf
    for a, b in ((s1, s2), (s2, s1)):
        sa, sb = np.sort(a), np.sort(b)
        for upper in (True, False):
            if upper:
                ha = sa.size - np.searchsorted(sa, ts, side="left")
                hb = sb.size - np.searchsorted(sb, ts, side="left")
            else:
                ha, hb = np.searchsorted(sa, ts, side="left"), np.searchsorted(sb, ts, side="left")
            lo = np.where(ha > 0, stats.beta.ppf(alpha, np.maximum(ha, 1e-9), sa.size - ha + 1), 0.0)
            hi = np.where(hb < sb.size, stats.beta.ppf(1 - alpha, hb + 1, np.maximum(sb.size - hb, 1e-9)), 1.0)
            worst = max(worst, float(np.max(lo - np.exp(epsilon) * hi)))
    return worst
