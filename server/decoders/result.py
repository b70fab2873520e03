"""What every decoder returns, and the one-method interface decoders share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray


@dataclass
class ClusteringResult:
    """Centers in the original space and in the unit ball, sizes, privacy,
    diagnostics, and the verdict in words and fields (``quality``)."""

    centers: NDArray[np.float64]
    ball_centers: NDArray[np.float64]
    sizes: NDArray[np.float64]
    privacy: dict[str, Any]
    diagnostics: dict[str, Any] = field(default_factory=dict)
    quality: dict[str, Any] = field(default_factory=dict)
    picture: dict[str, Any] | None = None  # the coreset to draw under the centers (``common/picture.py``)


A = TypeVar("A", contravariant=True)


class Decoder(Protocol[A]):
    """What every decoder offers: the round's accumulated reports in, a result out
    (``TreeDecoder`` takes a ``LevelAccumulator``, ``SketchDecoder`` a ``SketchAccumulator``)."""

    def decode(self, accumulator: A) -> ClusteringResult: ...
