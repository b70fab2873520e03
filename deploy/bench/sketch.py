"""``shoal bench --encoder sketch``: the compressive path against pycle.

For each dataset (Schellekens et al.'s Gaussian mixture, k = d = 10, mapped
into the unit ball by a public radius; Uber; the paper generator projected
to d' = 10 by a public Gaussian map), with m = 10 k d and r = m:
(a) the non-private sketch, decoded by shoal and by pycle's CLOMP_CKM on the
    *same* sketch and frequencies (pycle's starts: uniform in the public box
    [-1, 1]^d of the unit ball);
(b) DP sketches of L devices holding n0 records, (L, n0) in
    {(1, n), (100, n / 100), (n, 1)}, at each eps;
(c) the shuffle-model sketch (one-record devices, secure sum with central
    noise, ``sketch.secure_sum_params``) at each eps, delta = 1e-6;
(d) pycle on its own terms: frequencies from ``estimate_Sigma`` on the data
    (not private) and its central DP sketch ``computeSketch_DP`` at each eps.
Every DP sketch is decoded with its noise variance estimated from the
sketch itself (``signal_power``), as the server does. shoal's decoder runs
once per sketch here (restarts = 1), like pycle's ``fit_once``; both under
one BLAS thread (``clompr.py``, "BLAS threads"). Relative SSE is to Lloyd (k-means++, 3 restarts) on the true data; SNR is
the estimate from the sketch (``estimated_snr``) next to the prediction of
Eq. (6) with the true ||z||^2.

pycle is imported only if installed (the benchmark environment; never a
dependency of shoal): ``pip install pycle`` beside shoal. The shuffle-model
rows add the secure-sum total directly (sum of the devices' fixed-point
vectors plus one discrete Laplace draw per coordinate, the exact law of
the sum of the noise shares before clipping, tests/common/mechanisms/test_secure_sum.py);
splitting into shares is the identity mod q and is exercised end to end
in the services tests.
"""

from __future__ import annotations

import argparse
import math
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from threadpoolctl import threadpool_limits

from shoal.common.bounds import PublicBound
from shoal.common.mechanisms.secure_sum import SecureSumParams, decode_total, fixed_point
from shoal.common.mechanisms.sketch import (
    SketchParams,
    default_scales,
    default_size,
    estimated_snr,
    exact_sketch,
    frequencies,
    noise_variance,
    record_features,
    scramble,
    secure_sum_params,
    shuffle_noise_variance,
    signal_power,
    sketch_from_sum,
)
from shoal.deploy.bench.results import machine, write_results
from shoal.deploy.simulation.datasets import Dataset, load_uber, paper_mixture
from shoal.server.decoders.kmeans import kmeans_cost, weighted_kmeans
from shoal.server.decoders.sketch.clompr import clompr

DELTA = 1e-6
DEVICE_CHUNK = 5000


def schellekens_mixture(n: int, k: int = 10, d: int = 10, seed: int = 0) -> Dataset:
    """Seed 002, Sec. 5: means ~ N(0, (1.5 k^(1/d))^2 I), unit-variance clusters;
    public radius: the 99.99% quantile of ||x|| under the generating law."""
    rng = np.random.default_rng(seed)
    mu = rng.standard_normal((k, d)) * 1.5 * k ** (1 / d)
    x = mu[rng.integers(0, k, n)] + rng.standard_normal((n, d))
    radius = math.sqrt(d * ((1.5 * k ** (1 / d)) ** 2 + 1)) * 2.0
    return Dataset(f"schellekens-n{n}-k{k}-d{d}", x, k, PublicBound(radius=radius))


def projected_paper(n: int, d_out: int = 10, seed: int = 0) -> Dataset:
    """The paper generator (n, d = 100, k = 8) through a public Gaussian map to d' = 10."""
    ds = paper_mixture(n, seed=seed)
    g = np.random.default_rng(1234).standard_normal((ds.points.shape[1], d_out)) / math.sqrt(d_out)
    return Dataset(f"paper-proj{d_out}-n{n}", ds.points @ g, ds.k, PublicBound(radius=2.0))


def _shuffle_total(xb: NDArray[np.float64], omega: NDArray[np.float64], sp: SecureSumParams,
                   rng: np.random.Generator) -> tuple[NDArray[np.float64], int]:
    total = np.zeros(sp.length + 1, dtype=np.int64)
    for lo in range(0, xb.shape[0], DEVICE_CHUNK):
        ints = fixed_point(record_features(xb[lo : lo + DEVICE_CHUNK], omega), sp, rng)
        total[:-1] += ints.sum(axis=0)
        total[-1] += ints.shape[0]
    p = 1 - sp.alpha
    total[:-1] += rng.geometric(p, sp.length) - rng.geometric(p, sp.length)
    q = np.uint64(sp.modulus - 1)
    return decode_total(total.astype(np.uint64) & q, int(total[-1]) * sp.shares, sp)


def _local_sketch(xb: NDArray[np.float64], devices: int, p: SketchParams, omega: NDArray[np.float64],
                  rng: np.random.Generator) -> tuple[NDArray[np.complex128], NDArray[np.int64]]:
    n = xb.shape[0]
    n0 = np.full(devices, n // devices)
    n0[: n - n0.sum()] += 1
    per_chunk = max(1, DEVICE_CHUNK // int(n0.max()))
    acc = np.zeros(p.size, dtype=np.complex128)
    start = 0
    for lo in range(0, devices, per_chunk):
        cnt = n0[lo : lo + per_chunk]
        s = scramble(xb[start : start + cnt.sum()], cnt, p, omega, rng)
        acc += (cnt[:, None] * s).sum(axis=0)
        start += int(cnt.sum())
    return acc / n, n0


def _pycle_decode(z: NDArray[np.complex128], omega: NDArray[np.float64], k: int) -> tuple[NDArray[np.float64], float] | None:
    try:
        import pycle.compressive_learning as cl
        import pycle.sketching as sk
    except ImportError:
        return None
    d, m = omega.shape
    phi = sk.SimpleFeatureMap("ComplexExponential", omega, c_norm=1 / math.sqrt(m))
    bounds = np.array([-np.ones(d), np.ones(d)])
    t = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):  # the same BLAS threads as shoal's decoder
        solver = cl.CLOMP_CKM(phi, k, bounds, z)
        solver.fit_once()
    return np.asarray(solver.get_centroids()), time.perf_counter() - t


def _pycle_own(xb: NDArray[np.float64], k: int, m: int, eps: float | None, seed: int) -> tuple[NDArray[np.float64], float] | None:
    try:
        import pycle.compressive_learning as cl
        import pycle.sketching as sk
    except ImportError:
        return None
    np.random.seed(seed)  # noqa: NPY002 -- pycle draws from numpy's global generator
    d = xb.shape[1]
    sigma = sk.estimate_Sigma(xb, m, c=20, n0=min(5000, xb.shape[0]))
    omega = sk.drawFrequencies("FoldedGaussian", d, m, sigma)
    phi = sk.SimpleFeatureMap("ComplexExponential", omega)
    z = sk.computeSketch(xb, phi) if eps is None else sk.computeSketch_DP(xb, phi, eps)
    bounds = np.array([xb.min(axis=0), xb.max(axis=0)])
    t = time.perf_counter()
    with threadpool_limits(limits=1, user_api="blas"):
        solver = cl.CLOMP_CKM(phi, k, bounds, z)
        solver.fit_once()
    return np.asarray(solver.get_centroids()), time.perf_counter() - t


def run_dataset(ds: Dataset, epss: list[float], seed: int = 0, restarts: int = 2) -> list[dict[str, Any]]:
    x = ds.points
    n, d = x.shape
    k = ds.k
    xb = ds.bound.to_ball(x)
    lloyd = kmeans_cost(x, weighted_kmeans(x, np.ones(n), k, np.random.default_rng(seed), restarts=3))
    m = default_size(d, k)
    lo, hi = default_scales(d, k)
    rows: list[dict[str, Any]] = []

    def row(variant: str, eps: float | None, ball_centers: NDArray[np.float64], seconds: float, **extra: Any) -> None:
        rel = kmeans_cost(x, ds.bound.from_ball(ball_centers)) / lloyd
        r = {"dataset": ds.name, "n": n, "d": d, "k": k, "m": m, "variant": variant, "eps": eps,
             "relative_sse": rel, "decode_seconds": seconds, **extra}
        rows.append(r)
        snr = f" snr_est={r['snr_estimated']:.3g} snr_pred={r['snr_predicted']:.3g}" if "snr_estimated" in r else ""
        print(f"  {ds.name:22s} {variant:26s} eps={eps if eps is not None else '-'!s:5s} rel_SSE={rel:8.4g} "
              f"decode={seconds:6.1f}s{snr}", flush=True)

    p0 = SketchParams(d, m, m, 1.0, seed, lo, hi)
    omega = frequencies(p0)
    z = exact_sketch(xb, omega)
    z2 = float(np.sum(np.abs(z) ** 2))
    res = clompr(z, omega, k, restarts=restarts, seed=seed)
    row("non-private shoal", None, res.centroids, res.seconds, residual=res.residual)
    pyc = _pycle_decode(z, omega, k)
    if pyc is not None:
        row("non-private pycle (same sketch)", None, np.clip(pyc[0], -1, 1), pyc[1])
        own = _pycle_own(xb, k, m, None, seed)
        if own is not None:
            row("non-private pycle (own Sigma)", None, own[0], own[1])
    rng = np.random.default_rng(seed + 1)
    for eps in epss:
        p = SketchParams(d, m, m, eps, seed, lo, hi)
        for devices in (1, 100, n):
            s, n0 = _local_sketch(xb, devices, p, omega, rng)
            est = signal_power(s, partial(noise_variance, p, n0))  # as the server does
            res = clompr(s, omega, k, restarts=restarts, seed=seed, noise_variance=noise_variance(p, n0, est))
            row(f"local L={devices} n0={n // devices}", eps, res.centroids, res.seconds,
                snr_estimated=estimated_snr(s, p, n0), snr_predicted=z2 / noise_variance(p, n0, z2))
        sp = secure_sum_params(p, eps, DELTA, min_devices=n, max_devices=n)
        total, devices = _shuffle_total(xb, omega, sp, rng)
        s = sketch_from_sum(total, devices)
        var = shuffle_noise_variance(sp, devices, z2)
        est = signal_power(s, partial(shuffle_noise_variance, sp, devices))
        res = clompr(s, omega, k, restarts=restarts, seed=seed, noise_variance=shuffle_noise_variance(sp, devices, est))
        row("shuffle (secure sum)", eps, res.centroids, res.seconds, snr_estimated=max(float(np.sum(np.abs(s) ** 2)) - var, 0) / var,
            snr_predicted=z2 / var, shares=sp.shares, modulus_bits=sp.bits)
        own = _pycle_own(xb, k, m, eps, seed)
        if own is not None:
            row("pycle central DP (own Sigma)", eps, own[0], own[1])
    return rows


def _plot(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    pts = [r for r in rows if "snr_predicted" in r]
    for name in sorted({r["dataset"] for r in pts}):
        sel = [r for r in pts if r["dataset"] == name]
        snr = np.array([r["snr_predicted"] * r["m"] / (r["k"] * r["d"]) for r in sel])
        ax.scatter(snr, [min(r["relative_sse"], 100) for r in sel], label=name, s=14)
    ax.axvline(100, color="grey", ls="--", lw=0.8)
    ax.axhline(1.2, color="grey", ls=":", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("SNR x m / (k d)  (seed 002, Eq. 6; success expected >= 100)")
    ax.set_ylabel("relative SSE (to Lloyd), capped at 100")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "sketch_snr.png", dpi=120)


def run_sketch_bench(args: argparse.Namespace) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    epss = [float(e) for e in args.eps.split(",")] if args.eps else [0.01, 0.1, 1.0]
    if args.smoke:  # CI: the whole path on a small mixture, seconds not minutes
        datasets = [schellekens_mixture(3000, k=3, d=3)]
    else:
        n = 1_000_000
        datasets = [schellekens_mixture(n), projected_paper(n)]
        try:
            datasets.append(load_uber(args.data_dir))
        except FileNotFoundError:
            print(f"shoal bench: uber not found under {args.data_dir}: skipped")
    try:
        import pycle  # noqa: F401

        peer = "pycle installed: compared side by side"
    except ImportError:
        peer = "pycle not installed: its rows are skipped (pip install pycle in the benchmark environment)"
    header = f"machine: {machine()}; seed 0; m = 10 k d, r = m; delta = {DELTA:g} (shuffle); {peer}"
    print("shoal bench --encoder sketch:", header, flush=True)
    rows: list[dict[str, Any]] = []
    for ds in datasets:
        rows.extend(run_dataset(ds, [1.0] if args.smoke else epss, restarts=1))
    if args.smoke:
        return 0
    lines = [f"# shoal bench --encoder sketch\n\n{header}\n",
             "| dataset | n | d | k | m | variant | eps | relative SSE | decode s | SNR est. | SNR pred. |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        eps = "-" if r["eps"] is None else f"{r['eps']:g}"
        snr_e = f"{r['snr_estimated']:.3g}" if "snr_estimated" in r else ""
        snr_p = f"{r['snr_predicted']:.3g}" if "snr_predicted" in r else ""
        lines.append(f"| {r['dataset']} | {r['n']} | {r['d']} | {r['k']} | {r['m']} | {r['variant']} | {eps} | "
                     f"{r['relative_sse']:.4g} | {r['decode_seconds']:.1f} | {snr_e} | {snr_p} |")
    write_results(out, "sketch", "\n".join(lines) + "\n", {"rows": rows})
    _plot(rows, out)
    print(f"shoal bench: wrote {out / 'sketch.md'}, sketch.json and sketch_snr.png")
    return 0
