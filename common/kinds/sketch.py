"""The ``sketch`` round: the compressive path as a service round.

Public parameters of a round whose devices send scrambled sketches
(``sketch.py``; seed 002, Def. 3) instead of tree reports:
- local model: every device sends its own eps-DP sketch of its n0 records
  and n0 (``ScrambledSketchEvent``); the server takes the n0-weighted mean
  (Def. 4) and decodes it with CL-OMPR;
- shuffle model: one-record devices add their 2m feature reals through the
  split-and-mix secure summation (``secure_sum.py``) with distributed
  discrete Laplace noise calibrated to the *central* sensitivity of the sum
  (``sketch.secure_sum_params``), so the mean sketch carries the noise of a
  centralised sketch (``SecureSumEvent``: central (eps, delta) for at least
  ``min_devices`` devices and a shuffler that does not collude with the
  server; no local guarantee).

The frequencies are a function of ``sketch`` (its seed and bandwidths, from
public quantities only). A published config carries ``kind = "sketch"``.
Pure math, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.bounds import PublicBound, published, unpublished
from shoal.common.errors import ConfigError
from shoal.common.kinds.base import (
    ConfigKind,
    Mixing,
    decode_chunk_rows,
    secure_sum_event,
    secure_sum_mixing,
)
from shoal.common.kinds.tree import MODELS, Model, checked_model
from shoal.common.mechanisms.secure_sum import SecureSumParams
from shoal.common.mechanisms.sketch import (
    SketchParams,
    default_scales,
    default_size,
    frequencies,
    secure_sum_params,
)
from shoal.common.privacy.events import ScrambledSketchEvent, SecureSumEvent

NAME = "sketch"
MAX_DEVICE_RECORDS = 10**9  # n0 bound on the wire


@dataclass(frozen=True)
class SketchRoundConfig:
    """A sketch round's public parameters; validated on construction.

    ``sketch.epsilon`` is the device's local eps (local model) or the
    central eps of the secure sum (shuffle model, equal to
    ``secure_sum.epsilon``)."""

    round_id: str
    k: int
    dim: int
    bound: PublicBound
    model: Model
    sketch: SketchParams
    n_expected: int
    secure_sum: SecureSumParams | None = None
    restarts: int = 3

    def decode_bytes(self, devices: int | None = None) -> int:
        """Memory a decode needs, in bytes: one chunk of stored rows (a sketch
        of 2m reals or a secure-sum share of L + 1 words; ``decode_chunk_rows``), the
        devices' n0 (8 bytes each), CL-OMPR's frequencies (m x d) and its
        m x k atom matrix (complex)."""
        n0 = self.n_expected if devices is None else devices
        m, d = self.sketch.size, self.dim
        row = 2 * m + 1 if self.secure_sum is None else self.secure_sum.length + 1
        rows = n0 if self.secure_sum is None else n0 * self.secure_sum.shares
        return 8 * (min(rows, decode_chunk_rows(8 * row)) * row + n0 + 2 * m * d + 4 * m * self.k)

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ConfigError(f"sketch round k must be >= 1, got {self.k}")
        if self.dim != self.sketch.dim:
            raise ConfigError(f"sketch round dim {self.dim} != sketch dim {self.sketch.dim}")
        if self.model not in MODELS:
            raise ConfigError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.n_expected < 1:
            raise ConfigError(f"n_expected must be >= 1, got {self.n_expected}")
        if not 1 <= self.restarts <= 20:
            raise ConfigError(f"restarts must be in [1, 20], got {self.restarts}")
        self.bound.check_dim(self.dim)
        s = self.secure_sum
        if self.model == "local":
            if s is not None:
                raise ConfigError("a local-model sketch round has no secure sum")
            return
        if s is None:
            raise ConfigError("a shuffle-model sketch round needs its secure-sum parameters")
        m = self.sketch.size
        if s.length != 2 * m:
            raise ConfigError(f"secure sum length {s.length} != 2 m = {2 * m}")
        if s.l1_norm < math.sqrt(2 * m) or s.max_abs < 1 / math.sqrt(m) or s.max_nonzero < 2 * m:
            raise ConfigError(
                f"secure sum bounds (l1 {s.l1_norm}, max_abs {s.max_abs}, non-zeros {s.max_nonzero}) "
                f"do not cover one record's features (l1 sqrt(2 m), entries 1 / sqrt(m), {2 * m} non-zeros)"
            )
        if s.epsilon != self.sketch.epsilon:
            raise ConfigError(f"secure sum epsilon {s.epsilon} != sketch epsilon {self.sketch.epsilon}")
        if self.sketch.measurements != m:
            raise ConfigError("a shuffle-model sketch keeps every entry (r = m): masks only serve the local model")

    @property
    def event(self) -> ScrambledSketchEvent | SecureSumEvent:
        """The record of what the server's view is (``events.py``)."""
        if self.secure_sum is not None:
            return secure_sum_event(self.secure_sum)
        return ScrambledSketchEvent(self.sketch.epsilon, self.sketch.size, self.sketch.measurements)

    def omega(self) -> NDArray[np.float64]:
        """The public frequency matrix (d, m)."""
        return frequencies(self.sketch)


def derive_sketch_round(
    n_expected: int,
    dim: int,
    k: int,
    epsilon: float,
    *,
    bound: PublicBound,
    seed: int,
    model: Model = "local",
    delta: float = 0.0,
    min_devices: int = 0,
    max_devices: int | None = None,
    round_id: str = "sketch",
    size: int | None = None,
    measurements: int | None = None,
    restarts: int = 3,
) -> SketchRoundConfig:
    """Fill a sketch round from (n, d, k, eps): m = 10 k d (``default_size``),
    r = m (no masking: at r < m the sampling noise grows as 1 / alpha for the
    same privacy), bandwidths from the unit ball (``default_scales``). Shuffle
    model: ``epsilon``/``delta`` are the central guarantee for at least
    ``min_devices`` one-record devices (at most ``max_devices``, default
    100 x min, which sizes the modulus)."""
    if n_expected < 1 or dim < 1 or k < 1:
        raise ConfigError(f"sketch round needs n_expected, dim, k >= 1, got {n_expected}, {dim}, {k}")
    m = size if size is not None else default_size(dim, k)
    lo, hi = default_scales(dim, k)
    params = SketchParams(dim, m, measurements if measurements is not None else m, epsilon, seed, lo, hi)
    secure = None
    model = checked_model(model)
    if model == "shuffle":
        if min_devices < 2:
            raise ConfigError(f"a shuffle-model sketch round needs min_devices >= 2, got {min_devices}")
        secure = secure_sum_params(params, epsilon, delta, min_devices, max_devices)
    elif delta or min_devices:
        raise ConfigError(f"delta={delta} and min_devices={min_devices} belong to shuffle rounds")
    return SketchRoundConfig(round_id, k, dim, bound, model, params, n_expected, secure, restarts)


def sketch_round_to_dict(config: SketchRoundConfig) -> dict[str, Any]:
    """The published config (``kind`` tells it from tree and refine rounds)."""
    return published(config, NAME)


def sketch_round_from_dict(data: dict[str, Any]) -> SketchRoundConfig:
    """Inverse of ``sketch_round_to_dict``; validates everything again (devices call it)."""
    try:
        fields, bound = unpublished(data)
        sketch = SketchParams(**fields.pop("sketch"))
        secure = fields.pop("secure_sum", None)
        return SketchRoundConfig(bound=bound, sketch=sketch,
                                 secure_sum=SecureSumParams(**secure) if secure is not None else None, **fields)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"not a sketch round config: {exc}") from exc


# The shared half of the sketch kind (``common/kinds/__init__.py``).
KIND = ConfigKind(
    NAME, parse=lambda data: sketch_round_from_dict(dict(data)), dump=sketch_round_to_dict,
    event=lambda config: config.event,
    mixing=lambda config: (Mixing(0, True, 1) if config.secure_sum is None
                           else secure_sum_mixing(config.secure_sum.min_devices, config.secure_sum.shares)),
)

