"""Secure-sum rounds in-process (refine and partition rounds in ``simulate``):
every device's fixed-point vector made as on the device and summed exactly,
and the total noise of all their shares drawn at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.errors import ConfigError
from shoal.common.mechanisms.secure_sum import SecureSumParams, fixed_point
from shoal.server.decoders.elbow import noise_totals


def simulated_total_noise(devices: int, params: SecureSumParams, rng: np.random.Generator) -> NDArray[np.int64]:
    """Simulation only, never sent: the total of ``devices`` devices' noise
    shares drawn at once (``server/decoders/elbow.noise_totals``: the laws'
    exact totals, which an elbow round's band draws too). Devices draw their
    shares exactly (``secure_sum.noise_shares``); added to the exact sum of
    their ``fixed_point`` vectors, this is what ``decode_total`` would return
    times ``scale`` (no overflow is possible)."""
    return noise_totals(devices, params, (params.length,), rng)


def summed_in_process(points: NDArray[np.float64], contributions: Callable[[NDArray[np.float64], Any], NDArray[np.float64]],
                      cfg: Any, kind: str, seed: np.random.SeedSequence, chunk: int = 10_000) -> NDArray[np.float64]:
    """A secure-sum round's decoded total, in-process: every device's fixed-point
    vector made as on the device and summed exactly, the total noise of all
    their shares drawn at once (``simulated_total_noise``: the modular sum of
    the shares is exactly this total, ``tests/common/mechanisms/test_secure_sum.py``)."""
    n, params = points.shape[0], cfg.secure_sum
    if not params.min_devices <= n <= params.max_devices:
        raise ConfigError(f"{n} devices outside the {kind} round's [{params.min_devices}, {params.max_devices}]")
    rng = np.random.default_rng(seed)
    ints = np.zeros(params.length, dtype=np.int64)
    for lo in range(0, n, chunk):
        ints += fixed_point(contributions(points[lo : lo + chunk], cfg), params, rng).sum(axis=0)
    return np.asarray((ints + simulated_total_noise(n, params, rng)).astype(np.float64) / params.scale)
