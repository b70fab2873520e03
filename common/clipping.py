"""Rows onto an L2 ball: the clip every device applies to its point (and the
server to centers), exactly as defined and in few passes.

The clip as defined (``clip_exact``): each row divided by its largest |entry|
(so no norm is squared out of range, issue 12), its norm compared with the
radius, rows beyond it scaled onto the sphere. ``clip_to_ball`` gives those
bits, but runs the defined arithmetic only on rows that one sum of squares
cannot certify as inside (``certainly_inside``; issue 42: fourteen passes
over a block became four). Work goes by blocks of rows (``row_blocks``), so
temporaries are (block x d), never n x d.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import NDArray

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


def scaled_norms(
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
        return clip_in_place(y.copy(), radius)
    out = np.empty(y.shape)
    for lo, hi in row_blocks(y):
        out[lo:hi] = y[lo:hi]
        clip_in_place(out[lo:hi], radius)  # a view: the block is clipped where it lands, not copied twice
    return out


INSIDE_MARGIN = 2.0**-20
"""Relative margin below radius^2 within which a row's sum of squares
certifies that ``clip_exact``'s test keeps it (``certainly_inside``)."""

FAST_MAX_DIM = 1 << 26
"""Widest row the certificate covers: its rounding bound grows with d."""

FAST_RADII = (2.0**-300, 2.0**300)
"""Radii the certificate covers: radius^2 neither underflows nor overflows,
and squares that underflow are negligible against it."""


def row_squares(y: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per row, the sum of squared entries (inf where it overflows, NaN where
    an entry is): one pass, no (rows x d) temporary."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.einsum("ij,ij->i", y, y)


def certainly_inside(sq: NDArray[np.float64], radius: float, d: int) -> NDArray[np.bool_]:
    """Rows (by their ``row_squares``) that ``clip_exact``'s test certainly
    keeps, whatever the rounding: sq <= radius^2 (1 - 2^-20).

    Why that suffices (u = 2^-53, d <= 2^26, radius in ``FAST_RADII``): sq is
    a sum of d rounded squares, so the true |y|^2 <= sq (1 + d u) plus under
    d 2^-1074 for squares that underflow, which is below 2^-396 radius^2;
    hence |y| <= radius (1 - 2^-21 + 2^-26). The exact test computes
    |y / big| * big with a relative error under (d + 6) u <= 2^-26 (a rounded
    division per entry, d - 1 additions of positive terms, a square root and a
    product), so it finds |y| <= radius (1 - 2^-21 + 2^-25) < radius and keeps
    the row. Rows not
    certified (near or beyond the radius, non-finite sums, radii or widths
    outside the range) take the exact test: every output bit is the exact
    procedure's, only faster where nothing moves (issue 42)."""
    if d > FAST_MAX_DIM or not FAST_RADII[0] <= radius <= FAST_RADII[1]:
        return np.zeros(sq.shape, dtype=bool)
    return sq <= radius * radius * (1.0 - INSIDE_MARGIN)


def clip_in_place(y: NDArray[np.float64], radius: float) -> NDArray[np.float64]:
    """``clip_exact`` written into ``y``, the exact test run only on the rows
    ``certainly_inside`` does not certify (the same bits)."""
    rest = np.flatnonzero(~certainly_inside(row_squares(y), radius, y.shape[1]))
    if rest.size:
        y[rest] = clip_exact(y[rest], radius)
    return y


def beyond(y: NDArray[np.float64], radius: float) -> NDArray[np.bool_]:
    """Which rows the clip moves (``clip_exact``'s test), the test run only on
    the rows ``certainly_inside`` does not certify."""
    out = ~certainly_inside(row_squares(y), radius, y.shape[1])
    rest = np.flatnonzero(out)
    if rest.size:
        _, unit_norm, big = scaled_norms(y[rest])
        out[rest] = _outside(unit_norm, big, radius)
    return out


def _outside(unit_norm: NDArray[np.float64], big: NDArray[np.float64], radius: float) -> NDArray[np.bool_]:
    """The defined test: the row's norm, |y / big| * big, beyond ``radius``."""
    with np.errstate(over="ignore"):
        return unit_norm * big > radius


def clip_exact(y: NDArray[np.float64], radius: float) -> NDArray[np.float64]:
    """The projection onto the ball as defined: each row divided by its
    largest |entry|, its norm compared with ``radius``, the rows beyond it
    scaled onto the sphere; a new array."""
    unit, unit_norm, big = scaled_norms(y)
    outside = _outside(unit_norm, big, radius)
    if not np.any(outside):
        return y.copy()
    unit /= np.where(unit_norm > 0, unit_norm, 1.0)[:, None]  # in place: the rows' directions
    unit *= radius
    np.copyto(unit, y, where=~outside[:, None])
    return unit
