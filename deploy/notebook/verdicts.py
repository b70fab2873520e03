"""Verdicts for the answers whose decoders give none (issue 39): a central
run, a partition round and a refine round, in the shape of a tree round's
(``server/decoders/quality.py``; README, "Reading a result"), so that
``PrivateKMeans.quality_`` is a verdict in every model.

Every field comes from what the run released (post-processing, no privacy
cost). What a run cannot estimate honestly is said in a field, never
filled in: ``certified`` is false when nothing tested the centers against
the private mean, and ``center_errors`` is None with ``center_errors_note``
saying why.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.bounds import PublicBound, bound_to_dict
from shoal.server.decoders.quality import distinct_centers


def central_quality(k: int, epsilon: float, bound: PublicBound, ball: NDArray[np.float64], diag: dict[str, Any],
                    algorithm: str) -> dict[str, Any]:
    """The verdict of a central run, from what the run released (post-processing).

    ``answer``: "private mean" when the lift's test (``clusters_beat_the_mean``)
    kept the one-center answer; "clusters" when it showed the clusters beat
    the mean, or, uncertified (``certified`` false), when the run has no such
    test (seed 003 unprojected answers with the coreset's cell centers, moved
    by a shrunk Lloyd step; seed 001's greedy); "nothing released" when no proxy cell survived the noise.
    The per-center errors are not estimated in this model: the fields say so."""
    distinct = distinct_centers(ball)
    out: dict[str, Any] = {
        "k": k, "distinct_centers": distinct, "mean_error": None, "center_errors": None,
        "center_errors_note": f"central model ({algorithm}): the centers' errors are not estimated",
        "units": "the original space (the public bound's scale)", "bound": bound_to_dict(bound),
        "algorithm": algorithm, "certified": "answer" in diag,
    }
    gain = diag.get("estimated_gain_over_mean")
    if diag.get("proxy_points", 1) == 0:
        out.update(answer="nothing released", clusters_found=False, verdict=(
            f"nothing released: no cell's noisy count cleared the noise at eps={epsilon:.3g}, so every center is the "
            "center of the public bound, which says nothing about the data. More rows or a larger eps."))
    elif diag.get("answer") == "private mean":
        out.update(answer="private mean", clusters_found=False, verdict=(
            f"no clusters shown: the clusters' noisy sums could not be shown to cost less than one center at the "
            f"private mean (estimated gain {gain:.3g} per row, unit ball), so all {k} centers are the private mean. "
            "Treat this as a one-center answer; more rows, a larger eps or a smaller k would help."))
    elif "answer" in diag:
        out.update(answer="clusters", clusters_found=True, verdict=(
            f"{distinct} distinct centers of {k} asked, shown better than the private mean after the noise "
            f"correction (estimated gain {gain:.3g} per row, unit ball)."))
    else:
        out.update(answer="clusters", clusters_found=True, verdict=(
            f"{distinct} distinct centers of {k} asked ({algorithm}); this algorithm has no test against the "
            "private mean, so the answer is not certified."))
    if 0 < distinct < k and out["answer"] == "clusters":
        out["verdict"] += f" {k - distinct} center(s) repeat others: the data or the noise supports only {distinct}."
    return out


def partition_quality(k: int, bound: PublicBound, ball: NDArray[np.float64], diag: dict[str, Any],
                      epsilon: float) -> dict[str, Any]:
    """The verdict of a partition round (the shuffle model's first round when the
    tree would locate nothing): its centers are k-means of the public buckets
    whose noisy counts cleared the noise gate. Nothing certifies them against
    the private mean and their errors are not estimated; the verdict says so."""
    kept, distinct = int(diag.get("buckets_kept", 0)), distinct_centers(ball)
    out: dict[str, Any] = {
        "k": k, "distinct_centers": distinct, "mean_error": None, "center_errors": None,
        "center_errors_note": "partition round: the errors of the buckets' noisy means are not estimated",
        "certified": False, "units": "the original space (the public bound's scale)", "bound": bound_to_dict(bound)}
    if kept == 0:
        out.update(answer="nothing released", clusters_found=False, verdict=(
            f"nothing released: no bucket's noisy count cleared the noise at eps={epsilon:.3g}, so every center "
            "is the center of the public bound, which says nothing about the data. More rows or a larger eps."))
    else:
        out.update(answer="clusters" if distinct > 1 else "one bucket", clusters_found=distinct > 1, verdict=(
            f"{distinct} distinct centers of {k} asked, from the {kept} of {diag.get('buckets')} public buckets "
            "whose noisy counts cleared the noise; not tested against the private mean."))
    if 0 < distinct < k:
        out["verdict"] += f" {k - distinct} center(s) repeat others."
    return out


def refined_quality(first: dict[str, Any], k: int, ball: NDArray[np.float64]) -> dict[str, Any]:
    """The verdict after a refine round (a noisy Lloyd step from the first round's
    centers): the centers are counted again; the first round's verdict is kept
    under ``first_round``, since nothing certifies the refined centers."""
    distinct = distinct_centers(ball)
    mean = distinct == 1
    return {
        "k": k, "distinct_centers": distinct, "mean_error": None, "center_errors": None,
        "center_errors_note": "after a refine round the per-center errors are not estimated",
        "certified": False, "units": first.get("units"), "bound": first.get("bound"),
        "answer": "private mean" if mean else "clusters", "clusters_found": not mean,
        "verdict": (f"{distinct} distinct center(s) of {k} asked after the refine round (not tested against the "
                    f"private mean); the first round's verdict: {first.get('verdict')}"),
        "first_round": first,
    }
