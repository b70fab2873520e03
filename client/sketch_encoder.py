"""The ``sketch`` encoder on devices (seed 002, Def. 3; ``common/kinds/sketch.py``).

Local model: a device maps its n0 records into the unit ball with the
round's public bound and sends one scrambled sketch (``sketch.scramble``:
masked feature mean plus Laplace noise, eps-DP per record) and n0.
Shuffle model: a one-record device feeds its 2m feature reals into the
secure sum (``secure_sum.encode_devices``: fixed point, noise share,
split into shares mod q); only the sum of all devices, with central noise,
is ever decoded. Batch-first: ``sketch_messages`` encodes many devices at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from shoal.client.encoder import device_rng
from shoal.common.errors import ConfigError
from shoal.common.kinds.sketch import SketchRoundConfig
from shoal.common.mechanisms.secure_sum import encode_devices
from shoal.common.mechanisms.sketch import record_features, scramble
from shoal.common.wire.binary import encode_sketch, sketch_units
from shoal.common.wire.fields import new_message_id

if TYPE_CHECKING:
    from shoal.common.wire.models import SketchMessage


def sketch_messages(
    points: NDArray[np.float64], n0: NDArray[np.int64], config: SketchRoundConfig, rng: np.random.Generator | None = None
) -> list[SketchMessage]:
    """Local model: one message per device; device l holds the next n0[l] rows of ``points`` (raw space)."""
    from shoal.common.wire.models import SketchMessage

    flat = _scrambled(points, n0, config, rng)
    return [SketchMessage(round_id=config.round_id, message_id=new_message_id(), sketch=row.tolist(), n0=int(c))
            for row, c in zip(flat, np.asarray(n0).tolist(), strict=True)]


def sketch_body(records: NDArray[np.float64], config: SketchRoundConfig, rng: np.random.Generator | None = None) -> bytes:
    """Local model, one device holding the rows of ``records``: its report in the
    binary form (``wire.binary.encode_sketch``: the 2m grid integers, 8 m + 28
    bytes, instead of ~34 bytes a complex entry of JSON)."""
    x = np.asarray(records, dtype=np.float64).reshape(-1, config.dim)
    n0 = x.shape[0]
    units, exponent = sketch_units(_scrambled(x, np.array([n0]), config, rng)[0], n0, config.sketch)
    return encode_sketch(units, n0, exponent, new_message_id())


def _scrambled(points: NDArray[np.float64], n0: NDArray[np.int64], config: SketchRoundConfig,
               rng: np.random.Generator | None) -> NDArray[np.float64]:
    """Each device's scrambled sketch as 2m reals (real parts, then imaginary parts)."""
    if config.model != "local":
        raise ConfigError(f"round {config.round_id} is a {config.model}-model sketch round: use sketch_shares")
    rng = rng if rng is not None else device_rng()
    x = config.bound.to_ball(np.asarray(points, dtype=np.float64))
    s = scramble(x, np.asarray(n0, dtype=np.int64), config.sketch, config.omega(), rng)
    return np.concatenate([s.real, s.imag], axis=1)


def sketch_shares(
    points: NDArray[np.float64], config: SketchRoundConfig, rng: np.random.Generator | None = None
) -> NDArray[np.uint64]:
    """Shuffle model: each one-record device's secure-sum shares (n, s, 2m + 1) of its features."""
    if config.secure_sum is None:
        raise ConfigError(f"round {config.round_id} is a local-model sketch round: use sketch_messages")
    rng = rng if rng is not None else device_rng()
    x = config.bound.to_ball(np.asarray(points, dtype=np.float64))
    if x.ndim != 2 or x.shape[1] != config.dim:
        raise ConfigError(f"points must have shape (n, {config.dim}), got {x.shape}")
    return encode_devices(record_features(x, config.omega()), config.secure_sum, rng)
