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
        if self.low is not None and self.high is not None:
            if not np.all(np.isfinite(x)):
                raise ConfigError("points contain NaN or infinite values")
            y = np.clip(x, np.asarray(self.low), np.asarray(self.high))
            y -= self._mid(x.shape[1])
            y /= self.scale
            return _clip_in_place(y, 1.0)
        # Defined as clip_to_ball(clip_to_ball(x, R) / R): clip in the original
        # units first, so x / R cannot overflow once |x| <= R (1e308 with R = 0.5
        # used to become inf, then NaN; issue 12, item 8). Rows certainly inside
        # R are only divided (both clips would copy them, see ``_certainly_inside``),
        # so only the rest pay for the two exact clips; the same bits, in one
        # pass of squares and one division instead of fourteen passes (issue 42).
        radius = self.scale
        sq = _row_squares(x)
        if not np.all(np.isfinite(sq)) and not np.all(np.isfinite(x)):  # a finite sum of squares has finite terms
            raise ConfigError("points contain NaN or infinite values")
        with np.errstate(over="ignore"):  # a row that overflows here is not certified: it is overwritten
            out = x / radius
        rest = np.flatnonzero(~_certainly_inside(sq, radius, x.shape[1]))
        if rest.size:
            out[rest] = _clip_exact(_clip_exact(x[rest], radius) / radius, 1.0)
        return out

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
                radius = float(self.radius or 0.0)
                moved = ~_certainly_inside(_row_squares(b), radius, b.shape[1])
                rest = np.flatnonzero(moved)
                if rest.size:
                    _, norm, big = _scaled_norms(b[rest])
                    with np.errstate(over="ignore"):
                        moved[rest] = norm * big > radius
                out[lo:hi] = moved
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


BLOCK_BYTES = 1 << 22
"""Bytes of one (block x d) float64 temporary: 4 MB, small against any data
set worth blocking and large enough that the per-block overhead vanishes."""


def block_rows(d: int) -> int:
    """Rows of a block of ``d`` float64 features: about ``BLOCK_BYTES``."""
    return max(256, BLOCK_BYTES // (8 * max(1, d)))


def row_blocks(x: NDArray[Any], rows: int | None = None) -> Iterator[tuple[int, int]]:
    """Consecutive (lo, hi) row ranges of ``x``, ``rows`` each (default
    ``block_rows`` of its width)."""
    n = x.shape[0]
    step = rows if rows is not None else block_rows(x.shape[1] if x.ndim > 1 else 1)
    for lo in range(0, n, step):
        yield lo, min(n, lo + step)


def _scaled_norms(
    y: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Per row: unit = y / big, ||unit|| and big, its largest |entry| (a zero
    row is divided by 1), so that the row's norm is ``||unit|| * big`` and
    never squared out of range."""
    big = np.max(np.abs(y), axis=1) if y.shape[1] else np.zeros(y.shape[0])
    unit = y / np.where(big > 0, big, 1.0)[:, None]
    return unit, np.linalg.norm(unit, axis=1), big


def clip_to_ball(y: NDArray[np.float64], radius: float = 1.0) -> NDArray[np.float64]:
    """Project rows onto the L2 ball of ``radius`` (rows inside are unchanged).

    Overflow-free for every finite input: each row is first divided by its
    largest |entry|, so a norm is never squared out of range, and a row far
    outside lands on the boundary in its own direction (never inf or NaN,
    so whether a device sends anything never depends on its data).

    Returns a new array; it is built by blocks of rows, so the temporaries
    are (block x d), never n x d (issue 42)."""
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] <= block_rows(y.shape[1]):
        return _clip_block(y, radius)
    out = np.empty(y.shape)
    for lo, hi in row_blocks(y):
        out[lo:hi] = _clip_block(y[lo:hi], radius)
    return out


INSIDE_MARGIN = 2.0**-20
"""Relative margin below radius^2 within which a row's sum of squares
certifies that ``_clip_exact``'s test keeps it (``_certainly_inside``)."""

FAST_MAX_DIM = 1 << 26
"""Widest row the certificate covers: its rounding bound grows with d."""

FAST_RADII = (2.0**-300, 2.0**300)
"""Radii the certificate covers: radius^2 neither underflows nor overflows,
and squares that underflow are negligible against it."""


def _row_squares(y: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per row, the sum of squared entries (inf where it overflows, NaN where
    an entry is): one pass, no (rows x d) temporary."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.einsum("ij,ij->i", y, y)


def _certainly_inside(sq: NDArray[np.float64], radius: float, d: int) -> NDArray[np.bool_]:
    """Rows (by their ``_row_squares``) that ``_clip_exact``'s test certainly
    keeps, whatever the rounding: sq <= radius^2 (1 - 2^-20).

    Why that suffices (u = 2^-53, d <= 2^26, radius in ``FAST_RADII``): sq is
    a sum of d rounded squares, so the true |y|^2 <= sq (1 + d u) plus under
    d 2^-1074 for squares that underflow, which is below 2^-396 radius^2;
    hence |y| <= radius (1 - 2^-21 + 2^-26). The exact test computes
    |y / big| * big with a relative error under (d + 6) u <= 2^-26 (a rounded
    division per entry, d - 1 additions of positive terms, a square root and a
    product), so it finds |y| <= radius (1 - 2^-21 + 2^-25) < radius and keeps
    the row. Divided by radius, the row still has norm < 1 - 2^-22 after
    rounding, so a second clip to the unit ball keeps it too. Rows not
    certified (near or beyond the radius, non-finite sums, radii or widths
    outside the range) take the exact test: every output bit is the exact
    procedure's, only faster where nothing moves (issue 42)."""
    if d > FAST_MAX_DIM or not FAST_RADII[0] <= radius <= FAST_RADII[1]:
        return np.zeros(sq.shape, dtype=bool)
    return sq <= radius * radius * (1.0 - INSIDE_MARGIN)


def _clip_in_place(y: NDArray[np.float64], radius: float) -> NDArray[np.float64]:
    """``_clip_exact`` written into ``y``, the exact test run only on the rows
    ``_certainly_inside`` does not certify (the same bits)."""
    rest = np.flatnonzero(~_certainly_inside(_row_squares(y), radius, y.shape[1]))
    if rest.size:
        y[rest] = _clip_exact(y[rest], radius)
    return y


def _clip_block(y: NDArray[np.float64], radius: float) -> NDArray[np.float64]:
    return _clip_in_place(y.copy(), radius)


def _clip_exact(y: NDArray[np.float64], radius: float) -> NDArray[np.float64]:
    """The projection onto the ball as defined: each row divided by its
    largest |entry|, its norm compared with ``radius``, the rows beyond it
    scaled onto the sphere; a new array."""
    unit, unit_norm, big = _scaled_norms(y)
    with np.errstate(over="ignore"):
        outside = unit_norm * big > radius
    if not np.any(outside):
        return y.copy()
    unit /= np.where(unit_norm > 0, unit_norm, 1.0)[:, None]  # in place: the rows' directions
    unit *= radius
    np.copyto(unit, y, where=~outside[:, None])
    return unit
