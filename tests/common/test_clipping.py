"""``common/clipping.py``: the fast clip gives the defined clip's bits (issue 42)."""

import numpy as np
import pytest

from shoal.common import clipping
from shoal.common.bounds import PublicBound
from shoal.common.clipping import block_rows, clip_to_ball


# The clip as defined (the device's arithmetic before issue 42's shortcut):
# each row divided by its largest |entry|, its norm compared with the radius,
# rows beyond it scaled onto the sphere; to_ball(radius R) is clip(clip(x, R) / R).
def _defined_clip(y: np.ndarray, radius: float = 1.0) -> np.ndarray:
    big = np.max(np.abs(y), axis=1)
    unit = y / np.where(big > 0, big, 1.0)[:, None]
    norm = np.linalg.norm(unit, axis=1)
    with np.errstate(over="ignore"):
        outside = norm * big > radius
    out = y.copy()
    out[outside] = unit[outside] / norm[outside][:, None] * radius
    return out


def _defined_outside(y: np.ndarray, radius: float) -> np.ndarray:
    big = np.max(np.abs(y), axis=1)
    with np.errstate(over="ignore"):
        return np.linalg.norm(y / np.where(big > 0, big, 1.0)[:, None], axis=1) * big > radius


def _boundary_rows(d: int, radius: float, seed: int) -> np.ndarray:
    """Rows at the radius give or take a few ulps, at the certificate's margin
    (2^-20 relative in the square) and either side of it, far inside and
    outside, zero, subnormal and huge: where a shortcut would differ."""
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal((40, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    scales = [1 + k * 2.0**-52 for k in range(-16, 17)] + [1 - 2.0**-21, 1 - 2.0**-21 - 2.0**-30, 1 - 2.0**-22,
                                                          1 - 2.0**-19, 1 + 2.0**-21, 0.5, 2.0, 1e-5]
    rows = [direction * radius * s for s in scales]
    rows.append(np.zeros((1, d)))
    rows.append(np.full((1, d), 5e-324))
    rows.append(np.full((1, d), 1e300))
    rows.append(np.eye(d)[:1] * radius)
    return np.vstack(rows)


@pytest.mark.parametrize("radius", [1.0, 0.3, 7.77, 100.0, 1e-80, 1e80, 2.0**-300, 2.0**-301, 1e-200, 1e200])
@pytest.mark.parametrize("d", [1, 2, 3, 100, 1000])
def test_radius_to_ball_gives_the_bits_of_the_defined_clip(radius, d):
    x = _boundary_rows(d, radius, seed=d)
    expected = _defined_clip(_defined_clip(x, radius) / radius)
    got = PublicBound(radius=radius).to_ball(x)
    assert got.tobytes() == expected.tobytes()
    assert PublicBound(radius=radius).outside(x).tolist() == _defined_outside(x, radius).tolist()


@pytest.mark.parametrize("d", [1, 2, 100])
def test_box_to_ball_gives_the_bits_of_the_defined_clip(d):
    rng = np.random.default_rng(d)
    low, high = -rng.uniform(1, 5, d), rng.uniform(1, 5, d)
    bound = PublicBound(low=tuple(low), high=tuple(high))
    corners = np.where(rng.random((200, d)) < 0.5, low, high)  # on the ball's boundary after scaling
    x = np.vstack([corners, corners * (1 + 2.0**-52), rng.uniform(low * 2, high * 2, (200, d))])
    y = (np.clip(x, low, high) - (low + high) / 2) / bound.scale
    assert bound.to_ball(x).tobytes() == _defined_clip(y).tobytes()


def test_clip_to_ball_gives_the_bits_of_the_defined_clip_on_blocks_of_many_rows():
    x = np.vstack([_boundary_rows(10, 1.0, seed=s) for s in range(block_rows(10) // 1000 + 2)])
    assert x.shape[0] > block_rows(10)
    assert clip_to_ball(x).tobytes() == _defined_clip(x).tobytes()


def test_without_its_margin_the_shortcut_would_change_bits_on_these_rows(monkeypatch):
    # The rows above are adversarial: certifying "inside" from the sum of
    # squares with no margin keeps some row the defined clip moves.
    monkeypatch.setattr(clipping, "INSIDE_MARGIN", 0.0)
    rows = [_boundary_rows(d, 1.0, seed=d) for d in (2, 3, 100, 1000)]
    assert any(clipping.clip_to_ball(x).tobytes() != _defined_clip(x).tobytes() for x in rows)
