"""Decoding a sketch round (``common/kinds/sketch.py``): the global sketch,
its SNR, CL-OMPR, and the privacy statement.

``SketchAccumulator`` holds what the reports add up to (linear, so it can
be filled in any order and merged): in the local model the n0-weighted sum
of device sketches and the n0 of every device (seed 002, Def. 4 with
unequal n0); in the shuffle model the modular total of the secure-sum
shares. ``SketchDecoder`` implements the shared ``Decoder`` interface
(``decode(accumulator) -> ClusteringResult``): the mean sketch, the SNR of
Sec. 5 (estimated from the sketch, Eq. 6), and ``clompr`` with the sketch's
known noise variance (per-frequency gains, ``clompr.frequency_gains``).
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.bounds import bound_to_dict
from shoal.common.errors import DecodeError
from shoal.common.kinds.sketch import SketchRoundConfig
from shoal.common.mechanisms.secure_sum import add_shares, decode_total
from shoal.common.mechanisms.sketch import (
    noise_variance,
    shuffle_noise_variance,
    signal_power,
    sketch_from_sum,
)
from shoal.common.privacy.accounting import central_guarantee
from shoal.common.privacy.events import local_epsilon
from shoal.common.privacy.threats import local_guarantee, secure_sum_guarantee
from shoal.server.decoders.quality import sketch_quality
from shoal.server.decoders.result import ClusteringResult
from shoal.server.decoders.sketch.clompr import clompr

TYPICAL_Z2 = 0.35  # seed 002, Sec. 5: ||z||^2 of a typical Gaussian mixture, for the a-priori SNR


class SketchAccumulator:
    """Running sums of a sketch round's reports (vectorised over reports)."""

    def __init__(self, config: SketchRoundConfig) -> None:
        self.config = config
        m = config.sketch.size
        self.weighted = np.zeros(m, dtype=np.complex128)  # sum_l n0_l s_l (local model)
        self.n0: list[NDArray[np.float64]] = []
        self.total = np.zeros(2 * m + 1, dtype=np.uint64)  # shares mod q (shuffle model)
        self.messages = 0

    def add(self, rows: NDArray[Any]) -> None:
        """A round's stored rows: sketches (local model) or shares (shuffle model)."""
        if self.config.secure_sum is None:
            self.add_sketches(rows)
        else:
            self.add_shares(rows)

    def add_sketches(self, rows: NDArray[np.float64]) -> None:
        """Local model: rows (n, 2m + 1) of sketch reals then n0 (``messages.sketch_rows``)."""
        m = self.config.sketch.size
        if self.config.model != "local" or rows.ndim != 2 or rows.shape[1] != 2 * m + 1:
            raise DecodeError(f"expected local-model sketch rows of width {2 * m + 1}, got {rows.shape}")
        n0 = rows[:, -1]
        self.weighted += n0 @ (rows[:, :m] + 1j * rows[:, m : 2 * m])
        self.n0.append(n0)
        self.messages += rows.shape[0]

    def add_shares(self, shares: NDArray[np.uint64]) -> None:
        """Shuffle model: secure-sum shares (n, 2m + 1), added mod q."""
        params = self.config.secure_sum
        if params is None:
            raise DecodeError("a local-model sketch round has no shares")
        mask = np.uint64(params.modulus - 1)
        self.total = (self.total + add_shares(shares, params)) & mask
        self.messages += shares.reshape(-1, params.length + 1).shape[0]

    def counts(self) -> NDArray[np.float64]:
        """n0 of every local-model report so far."""
        return np.concatenate(self.n0) if self.n0 else np.zeros(0)

    def merge(self, other: SketchAccumulator) -> None:
        self.weighted += other.weighted
        self.n0.extend(other.n0)
        if self.config.secure_sum is not None:
            self.total = (self.total + other.total) & np.uint64(self.config.secure_sum.modulus - 1)
        self.messages += other.messages


def sketch_privacy_statement(config: SketchRoundConfig) -> dict[str, Any]:
    """Machine-readable privacy of a sketch round, from its event record."""
    event = config.event
    eps, delta = central_guarantee(event)
    if config.secure_sum is None:
        return {
            "model": "local",
            "mechanism": "scrambled sketch (Schellekens et al. 2019, Def. 3) with exact discrete Laplace noise on a "
                         "public grid; Prop. 1 with sqrt(alpha)",
            "device_epsilon": local_epsilon(event),
            "device_epsilon_note": "per record; a device whose n0 records all belong to one user gives that user "
                                   "n0 x eps (device ledgers charge that)",
            "guarantees": [local_guarantee(local_epsilon(event))],
            "central_epsilon": eps,
            "delta": delta,
            "neighbouring": "replace one record of one device; each device's record count n0 is public",
            "reports": [type(event).__name__],
        }
    s = config.secure_sum
    return {
        "model": "shuffle",
        "mechanism": "secure summation (split-and-mix) of one-record sketches with distributed discrete Laplace "
                     "noise calibrated to the central sensitivity sqrt(2 m) of the sum, not to each device",
        "central_epsilon": eps,
        "delta": delta,
        "device_epsilon": None,
        "device_epsilon_note": "no local guarantee: the privacy relies on the shuffler not colluding with the server "
                               f"and on at least {s.min_devices} devices adding their noise shares",
        "min_devices": s.min_devices,
        "shares_per_device": s.shares,
        "guarantees": [secure_sum_guarantee(eps, delta, s.min_devices)],
        "reports": [type(event).__name__],
    }


class SketchDecoder:
    """Mean sketch, SNR and CL-OMPR (``Decoder`` interface)."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed = secrets.randbits(32) if seed is None else seed

    def decode(self, accumulator: SketchAccumulator) -> ClusteringResult:
        cfg = accumulator.config
        t = time.perf_counter()
        z, variance, devices, records = self._mean_sketch(accumulator)
        z2 = signal_power(z, variance)
        noise = variance(z2)
        res = clompr(z, cfg.omega(), cfg.k, restarts=cfg.restarts, seed=self.seed, noise_variance=noise)
        weights = res.weights / max(float(res.weights.sum()), 1e-12)
        order = np.argsort(-weights)
        ball = res.centroids[order]
        snr = z2 / noise if noise > 0 else math.inf
        diagnostics: dict[str, Any] = {
            "encoder": "sketch",
            "devices": devices,
            "records": records,
            "m": cfg.sketch.size,
            "r": cfg.sketch.measurements,
            "snr_estimated": snr if math.isfinite(snr) else None,
            "snr_times_m_over_kd": snr * cfg.sketch.size / (cfg.k * cfg.dim) if math.isfinite(snr) else None,
            "snr_predicted_typical": TYPICAL_Z2 / variance(TYPICAL_Z2),
            "noise_variance": noise,
            "sketch_residual": res.residual,
            "restart_residuals": list(res.restart_residuals),
            "spreads": res.spreads[order].tolist(),
            "weights": weights[order].tolist(),
            "clompr_seconds": res.seconds,
            "decode_seconds": time.perf_counter() - t,
        }
        ball = cfg.bound.project_ball(ball)
        return ClusteringResult(
            centers=cfg.bound.from_ball(ball),
            ball_centers=ball,
            sizes=weights[order] * records,
            privacy=sketch_privacy_statement(cfg),
            diagnostics=diagnostics,
            quality=sketch_quality(cfg.k, bound_to_dict(cfg.bound), diagnostics, ball),
        )

    @staticmethod
    def _mean_sketch(acc: SketchAccumulator) -> tuple[NDArray[np.complex128], Callable[[float], float], int, int]:
        """The global sketch, its noise variance as a function of ||z||^2, devices and records."""
        cfg = acc.config
        if acc.messages == 0:
            raise DecodeError(f"sketch round {cfg.round_id} has no reports")
        if cfg.secure_sum is None:
            n0 = acc.counts()
            total = float(n0.sum())
            z = np.asarray(acc.weighted / total, dtype=np.complex128)
            return z, lambda v: noise_variance(cfg.sketch, n0, v), int(n0.size), int(total)
        params = cfg.secure_sum
        sums, devices = decode_total(acc.total, acc.messages, params)
        z = sketch_from_sum(sums, devices)
        return z, lambda v: shuffle_noise_variance(params, devices, v), devices, devices

