"""``fit``: central-DP k-means of data you already hold, no server needed.

The library call of issue 17 for a curator (a hospital gateway with its
records, an analytics team with a table): seeds 000 and 003's private
maximum coverage (``common/kinds/central.py``), run in this process on the
rows of ``points``. The result carries the privacy statement every shoal
round carries and a verdict (``quality``, ``deploy/notebook/verdicts.py``) in the shape
of a tree round's (README, "Reading a result"). Randomness: the private draws from the OS; the public ones
(projection, grid shifts) from ``seed``, which may be published.

n is not public unless you say so: without ``n_expected``, 1% of epsilon
buys a discrete-Laplace count of the rows, and the schedule (projection
dimension, grid levels) is derived from it.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shoal.common.bounds import PublicBound, box_bound
from shoal.common.errors import ConfigError
from shoal.common.kinds.central import ALGORITHMS, DEFAULT_ALGORITHM, derive_central
from shoal.common.mechanisms.exact_sampling import discrete_laplace, laplace_scale_fraction
from shoal.deploy.notebook.verdicts import central_quality
from shoal.server.decoders.central.pipeline import central_kmeans, privacy_statement

CENSUS_SHARE = 0.01  # of epsilon, for a noisy n when n_expected is not given
CHUNK = 65536


@dataclass(frozen=True)
class CentralResult:
    centers: NDArray[np.float64]  # (k, d) in the points' units
    sizes: NDArray[np.float64]  # noisy cluster sizes
    privacy: dict[str, Any]
    bound: PublicBound
    diagnostics: dict[str, Any] = field(default_factory=dict)
    quality: dict[str, Any] = field(default_factory=dict)  # the verdict (``central_quality``)


def _bound(bound: PublicBound | float | tuple[ArrayLike, ArrayLike], dim: int) -> PublicBound:
    if isinstance(bound, PublicBound):
        out = bound
    elif isinstance(bound, int | float) and not isinstance(bound, bool):
        out = PublicBound(radius=float(bound))
    elif isinstance(bound, tuple) and len(bound) == 2:
        out = box_bound(*bound, dim)
    else:
        raise ConfigError(f"bound must be a PublicBound, a radius or a pair (low, high); got {bound!r}")
    out.check_dim(dim)
    return out


def fit(points: ArrayLike, k: int, epsilon: float, delta: float,
        bound: PublicBound | float | tuple[ArrayLike, ArrayLike],
        algorithm: str = DEFAULT_ALGORITHM, n_expected: int | None = None, seed: int | None = None,
        rng: np.random.Generator | None = None, objective: str = "kmeans") -> CentralResult:
    """k centers of the rows of ``points``, (epsilon, delta)-DP for adding or removing one row.

    ``bound``: public knowledge of the data's range (a radius, or per-feature
    (low, high)), never read from the data; rows are clipped into it.
    ``objective``: "kmeans", or "kmedian" (seed 003 unprojected, d <= d'; ``auto`` picks it).
    ``rng``: only for tests (reproducible private draws); default OS entropy."""
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise ConfigError(f"points must be a non-empty 2-D array (n, d), got shape {x.shape}")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    if algorithm != "auto" and algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown central algorithm {algorithm!r}; known: auto, {', '.join(ALGORITHMS)}")
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError(f"epsilon must be finite and > 0, got {epsilon!r}")
    if n_expected is not None and (not isinstance(n_expected, int) or n_expected < 1):
        raise ConfigError(f"n_expected must be a positive integer, got {n_expected!r}")
    b = _bound(bound, x.shape[1])
    rng = rng if rng is not None else np.random.default_rng(secrets.randbits(128))
    census = 0.0
    n = n_expected
    if n is None:
        census = CENSUS_SHARE * float(epsilon)
        t, s = laplace_scale_fraction(1, census)
        census = s / t
        n = max(1, x.shape[0] + int(discrete_laplace(t, s, 1, rng)[0]))
    spec = derive_central(algorithm, n, x.shape[1], k, float(epsilon), float(delta),
                          seed=secrets.randbits(32) if seed is None else int(seed), census_epsilon=census,
                          objective=objective)
    ball = np.empty_like(x)
    for lo in range(0, x.shape[0], CHUNK):  # clipping makes a few temporaries: chunked, memory O(n d) once
        ball[lo:lo + CHUNK] = b.to_ball(x[lo:lo + CHUNK])
    out = central_kmeans(ball, spec, rng)
    diagnostics = dict(out.diagnostics, n_used=n, seed=spec.seed)
    return CentralResult(b.from_ball(b.project_ball(out.centers)), out.sizes, privacy_statement(spec, out.lift_steps), b,
                         diagnostics, central_quality(k, float(epsilon), b, out.centers, diagnostics, spec.algorithm))


def simulate_central(points: NDArray[np.float64], k: int, epsilon: float, delta: float, bound: PublicBound,
                     algorithm: str, seed: int, as_json: bool, objective: str = "kmeans") -> int:
    """``shoal simulate --model central``: one ``fit`` with n public (as a
    round's n_expected), printed with the objectives every simulation prints."""
    import json
    import time

    from shoal.deploy.simulation.evaluation import nonprivate_objective
    from shoal.deploy.simulation.simulate import format_centers
    from shoal.server.decoders.kmeans import kmeans_cost
    from shoal.server.decoders.kmedian import kmedian_cost

    t = time.perf_counter()
    res = fit(points, k, epsilon, delta, bound, algorithm=algorithm, n_expected=len(points), seed=seed,
              objective=objective)
    seconds = time.perf_counter() - t
    ball = bound.to_ball(points)
    out = {
        "n": len(points), "d": points.shape[1], "k": k, "eps": epsilon, "delta": delta, "model": "central",
        "algorithm": res.privacy["algorithm"], "algorithm_requested": algorithm, "objective": objective,
        "seconds": seconds,
        "normalized_objective": kmeans_cost(ball, bound.to_ball(res.centers)) / len(points),
        "nonprivate_objective": nonprivate_objective(ball, k, seed),
        "trivial_objective": kmeans_cost(ball, ball.mean(0, keepdims=True)) / len(points),
        "kmedian_objective": kmedian_cost(ball, bound.to_ball(res.centers)) / len(points),
        "privacy": {key: res.privacy[key] for key in ("model", "device_epsilon", "central_epsilon", "delta")},
        "diagnostics": res.diagnostics, "quality": res.quality, "centers": res.centers.tolist(),
    }
    if as_json:
        print(json.dumps(out))
        return 0
    print(f"shoal simulate: n={out['n']} d={out['d']} k={k} eps={epsilon} delta={delta:g} model=central "
          f"algorithm={out['algorithm']}{' (auto)' if algorithm == 'auto' else ''} seed={seed}")
    print(f"  privacy: central ({out['privacy']['central_epsilon']:.4g}, {out['privacy']['delta']:.3g}) for the "
          "release; the curator sees every raw point (no local guarantee)")
    for key in ("normalized_objective", "nonprivate_objective", "trivial_objective", "kmedian_objective"):
        print(f"  {key:22s} {out[key]:.5f}")
    dg = res.diagnostics
    if "buckets_kept" in dg:  # lsh-partition: buckets under hyperplanes through the private mean
        print(f"  coreset: {dg['buckets_kept']} of {1 << dg['bits']} buckets kept (hyperplanes through the private "
              f"mean), {dg.get('lift_steps', 0)} Lloyd step(s) after them; {seconds:.2f} s")
    else:
        print(f"  coreset: {dg['proxy_points']} cells of {dg['candidates']} candidates, projected to "
              f"d'={dg['proj_dim']}, {dg.get('lift_steps', 0)} lift step(s); {seconds:.2f} s")
    print(f"  verdict: {res.quality['verdict']}")
    print("  centers (original space):")
    print(format_centers(out["centers"]))
    return 0
