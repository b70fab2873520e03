"""Public input bounds: how raw points enter the unit ball, and how centers leave it.

DESIGN.md: clip, never rescale by data. A bound is either an L2 radius R
(x -> clip(x / R)) or a per-feature box [low, high] (clip each feature to the
box, then x -> (x - mid) / rho with rho the box's half-diagonal). One scale for
all features keeps the k-means geometry of the original space.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shoal.common.clipping import beyond, clip_in_place, clip_to_ball, row_blocks
from shoal.common.errors import ConfigError


@dataclass(frozen=True)
class PublicBound:
    """An L2 radius, or a per-feature box; published in the round config."""

    radius: float | None = None
    low: tuple[float, ...] | None = None
    high: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if (self.radius is None) == (self.low is None or self.high is None):
            raise ConfigError(
                f"give either radius or both low and high (radius={self.radius}, "
                f"low={self.low}, high={self.high})"
            )
        if self.radius is not None:
            if not (math.isfinite(self.radius) and self.radius > 0):
                raise ConfigError(f"radius must be finite and > 0, got {self.radius}")
        else:
            assert self.low is not None and self.high is not None
            if len(self.low) != len(self.high):
                raise ConfigError(
                    f"box low has {len(self.low)} features, high has {len(self.high)}"
                )
            for i, (lo, hi) in enumerate(zip(self.low, self.high, strict=True)):
                if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
                    raise ConfigError(f"box feature {i}: need finite low < high, got {lo}, {hi}")

    def check_dim(self, dim: int) -> None:
        if self.low is not None and len(self.low) != dim:
            raise ConfigError(f"box has {len(self.low)} features, the round has dim {dim}")

    @property
    def scale(self) -> float:
        """Length in the original space of one unit in the ball."""
        if self.radius is not None:
            return float(self.radius)
        assert self.low is not None and self.high is not None
        half = (np.asarray(self.high) - np.asarray(self.low)) / 2
        return float(np.linalg.norm(half))

    def _mid(self, dim: int) -> NDArray[np.float64]:
        if self.radius is not None:
            return np.zeros(dim)
        return (np.asarray(self.low, dtype=np.float64) + np.asarray(self.high, dtype=np.float64)) / 2

    def to_ball(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Map raw points (n, d) into the unit ball (clipping, never data scaling).

        Block by block into one output: besides it, only (block x d)
        temporaries (issue 42: five full n x d ones held 2.2 GB at 1e6 x 100).
        Each row's result depends on that row alone, so blocking changes no bit."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2:
            raise ConfigError(f"points must be a 2-D array (n, d), got shape {x.shape}")
        out = np.empty(x.shape)
        for lo, hi in row_blocks(x):
            out[lo:hi] = self._block_to_ball(x[lo:hi])
        return out

    def ball_blocks(self, x: NDArray[np.float64], rows: int | None = None) -> Iterator[NDArray[np.float64]]:
        """``to_ball`` of consecutive row blocks of ``x`` (about ``rows`` each),
        for evaluations that stream over the points instead of holding an
        n x d image of them."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2:
            raise ConfigError(f"points must be a 2-D array (n, d), got shape {x.shape}")
        for lo, hi in row_blocks(x, rows):
            yield self._block_to_ball(x[lo:hi])

    def _block_to_ball(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        if not np.all(np.isfinite(x)):
            raise ConfigError("points contain NaN or infinite values")
        if self.low is not None and self.high is not None:
            y = np.clip(x, np.asarray(self.low), np.asarray(self.high))
            y -= self._mid(x.shape[1])
            y /= self.scale
            return clip_in_place(y, 1.0)
        # Clip in the original units first: x / R cannot overflow once |x| <= R
        # (1e308 with R = 0.5 used to become inf, then NaN; issue 12, item 8).
        y = clip_in_place(x.copy(), self.scale)
        y /= self.scale
        return clip_in_place(y, 1.0)

    def outside(self, x: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Which raw points (n, d) ``to_ball`` moves: outside the box, or
        beyond the radius. A device knows this of its own point; a
        simulation of the user's own data may report the fraction (issue 16:
        silent clipping misled a user); a server never sees it.

        A row-norm reduction by blocks (the norm ``clip_to_ball`` tests, free
        of overflow): one boolean per row and no n x d temporary (issue 42)."""
        x = np.asarray(x, dtype=np.float64)
        out = np.empty(x.shape[0], dtype=bool)
        for lo, hi in row_blocks(x):
            b = x[lo:hi]
            if self.low is not None and self.high is not None:
                out[lo:hi] = np.any((b < np.asarray(self.low)) | (b > np.asarray(self.high)), axis=1)
            else:
                out[lo:hi] = beyond(b, float(self.radius or 0.0))
        return out

    def project_ball(self, y: NDArray[np.float64]) -> NDArray[np.float64]:
        """Project unit-ball centers onto the image of the bound's domain: the
        ball, or the box's image (a box inside the ball, clipped coordinate
        by coordinate). Every point lies there, and projecting a center onto
        a convex set that holds every point moves it no farther from any of
        them, so this post-processing never raises any point's cost. Issue
        16: a demo center came out at x = -4.98 in the public box [0, 100]."""
        y = clip_to_ball(np.asarray(y, dtype=np.float64))
        if self.low is None or self.high is None:
            return y
        mid = self._mid(y.shape[1])
        return np.clip(y, (np.asarray(self.low) - mid) / self.scale, (np.asarray(self.high) - mid) / self.scale)

    def from_ball(self, y: NDArray[np.float64]) -> NDArray[np.float64]:
        """Map unit-ball points (centers) back to the original space."""
        y = np.asarray(y, dtype=np.float64)
        return y * self.scale + self._mid(y.shape[1])


def box_bound(low: Any, high: Any, dim: int) -> PublicBound:
    """A box from per-feature (low, high), each a number or one per feature."""
    ends = []
    for name, end in (("low", low), ("high", high)):
        b = np.asarray(end, dtype=np.float64)
        if b.shape not in ((), (dim,)):
            raise ConfigError(f"box has {b.size} features at its {name} end, the data have {dim}")
        ends.append(tuple(np.broadcast_to(b, (dim,)).tolist()))
    return PublicBound(low=ends[0], high=ends[1])


def parse_box(text: str, dim: int) -> PublicBound:
    """A box from the command line: ``LOW,..:HIGH,..`` with one number per
    feature, or one number on a side for every feature (``0:100``)."""
    try:
        low_s, high_s = text.split(":")
        low = [float(v) for v in low_s.split(",")]
        high = [float(v) for v in high_s.split(",")]
    except ValueError:
        raise ConfigError(f"a box is LOW,..:HIGH,.. (or LOW:HIGH for every feature), got {text!r}") from None
    if len(low) == 1:
        low = low * dim
    if len(high) == 1:
        high = high * dim
    if len(low) != dim or len(high) != dim:
        raise ConfigError(f"the box has {len(low)} low and {len(high)} high values; the data has {dim} features")
    return PublicBound(low=tuple(low), high=tuple(high))


def bound_to_dict(bound: PublicBound) -> dict[str, object]:
    """The JSON form published in round configs (tuples as lists)."""
    return {"radius": bound.radius, "low": list(bound.low) if bound.low is not None else None,
            "high": list(bound.high) if bound.high is not None else None}


def bound_from_dict(b: dict[str, object]) -> PublicBound:
    """Inverse of ``bound_to_dict``; validates again."""
    low, high, radius = b.get("low"), b.get("high"), b.get("radius")
    return PublicBound(
        radius=float(radius) if isinstance(radius, int | float) else None,
        low=tuple(low) if isinstance(low, list | tuple) else None,
        high=tuple(high) if isinstance(high, list | tuple) else None,
    )


def published(config: Any, kind: str) -> dict[str, Any]:
    """A round config (a dataclass with a ``bound``) as published: every field,
    its ``kind`` and the bound as ``bound_to_dict`` writes it."""
    out: dict[str, Any] = asdict(config)
    out["kind"] = kind
    out["bound"] = bound_to_dict(config.bound)
    return out


def unpublished(data: dict[str, Any]) -> tuple[dict[str, Any], PublicBound]:
    """Inverse of ``published`` up to the config's own nested fields: the other
    fields, and the bound validated again. The protocol version is checked
    and removed by the registry (``kinds.check_protocol``), never here."""
    fields = {k: v for k, v in data.items() if k not in ("kind", "protocol")}
    return fields, bound_from_dict(fields.pop("bound"))
