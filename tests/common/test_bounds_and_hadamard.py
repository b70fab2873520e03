import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.mechanisms.hadamard import fwht, fwht_in_place, hadamard_sign


def test_box_maps_into_the_unit_ball_and_back():
    b = PublicBound(low=(0.0, -1.0), high=(4.0, 1.0))
    x = np.array([[0.0, -1.0], [4.0, 1.0], [2.0, 0.0], [9.0, 0.0]])
    y = b.to_ball(x)
    assert np.all(np.linalg.norm(y, axis=1) <= 1 + 1e-12)
    assert np.allclose(b.from_ball(y[:3]), x[:3])
    assert np.allclose(b.from_ball(y[3:]), [[4.0, 0.0]])  # clipped to the box, not rescaled


def test_centers_are_projected_into_the_box_and_no_point_gets_farther():
    b = PublicBound(low=(0.0, 0.0, -1.0), high=(100.0, 10.0, 1.0))
    rng = np.random.default_rng(0)
    pts = b.to_ball(rng.uniform((0, 0, -1), (100, 10, 1), size=(500, 3)))
    centers = rng.standard_normal((40, 3))
    projected = b.project_ball(centers)
    back = b.from_ball(projected)
    assert np.all(back >= np.array(b.low) - 1e-9) and np.all(back <= np.array(b.high) + 1e-9)
    before = np.linalg.norm(pts[:, None] - np.asarray(centers)[None], axis=2)
    after = np.linalg.norm(pts[:, None] - projected[None], axis=2)
    assert np.all(after <= before + 1e-12)
    inside = b.to_ball(np.array([[50.0, 5.0, 0.0]]))
    assert np.allclose(b.project_ball(inside), inside)  # centers inside are unchanged


def test_radius_clips_points_outside():
    y = PublicBound(radius=2.0).to_ball(np.array([[6.0, 8.0]]))
    assert np.allclose(y, [[0.6, 0.8]])


def test_rejects_nan_points():
    with pytest.raises(ConfigError, match="NaN"):
        PublicBound(radius=1.0).to_ball(np.array([[np.nan, 0.0]]))


def test_fwht_equals_the_hadamard_matrix_product():
    m = 16
    rows, cols = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
    h = hadamard_sign(rows.ravel(), cols.ravel()).reshape(m, m)
    a = np.random.default_rng(0).standard_normal((m, 3))
    assert np.allclose(fwht(a), h @ a)
    assert np.allclose(h @ h.T, m * np.eye(m))


@pytest.mark.parametrize("bound", [PublicBound(radius=0.5), PublicBound(low=(-1.0, -1.0), high=(1.0, 1.0))])
@pytest.mark.parametrize("raw", [[1e308, 0.0], [-1e308, 1e308], [1e308, 1e308], [5e-324, 0.0], [-1e308, -1e-300]])
def test_extreme_finite_inputs_map_into_the_ball_without_inf_or_nan(bound, raw):
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow to subnormals is fine
        y = bound.to_ball(np.array([raw]))
    assert np.all(np.isfinite(y))
    assert np.linalg.norm(y) <= 1 + 1e-12


def test_a_point_far_outside_a_radius_lands_on_the_boundary_in_its_direction():
    y = PublicBound(radius=0.5).to_ball(np.array([[3e307, -4e307]]))
    assert np.allclose(y, [[0.6, -0.8]])


def test_parse_box_reads_one_number_per_feature_or_one_for_all():
    from shoal.common.bounds import PublicBound, parse_box

    assert parse_box("0,1:2,3", 2) == PublicBound(low=(0.0, 1.0), high=(2.0, 3.0))
    assert parse_box("-1:1", 3) == PublicBound(low=(-1.0,) * 3, high=(1.0,) * 3)


def test_parse_box_rejects_text_without_a_colon():
    import pytest

    from shoal.common.bounds import parse_box
    from shoal.common.errors import ConfigError

    with pytest.raises(ConfigError, match="a box is LOW"):
        parse_box("0,100", 2)


def test_parse_box_rejects_an_empty_bound():
    import pytest

    from shoal.common.bounds import parse_box
    from shoal.common.errors import ConfigError

    with pytest.raises(ConfigError, match="need finite low < high"):
        parse_box("1:1", 2)


def test_outside_marks_points_a_bound_would_move():
    import numpy as np

    from shoal.common.bounds import PublicBound

    x = np.array([[0.5, 0.5], [1.5, 0.0], [0.0, -0.1]])
    assert PublicBound(low=(0.0, 0.0), high=(1.0, 1.0)).outside(x).tolist() == [False, True, True]
    assert PublicBound(radius=1.0).outside(x).tolist() == [False, True, False]


def test_fwht_in_place_overwrites_its_input_with_the_same_transform():
    a = np.random.default_rng(0).normal(size=(64, 3))
    b = a.copy()
    out = fwht_in_place(b)
    assert out is b and np.array_equal(b, fwht(a))
    with pytest.raises(ValueError, match="contiguous float64"):
        fwht_in_place(np.zeros((8, 3), dtype=np.float32))


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
    from shoal.common.bounds import block_rows, clip_to_ball

    x = np.vstack([_boundary_rows(10, 1.0, seed=s) for s in range(block_rows(10) // 1000 + 2)])
    assert x.shape[0] > block_rows(10)
    assert clip_to_ball(x).tobytes() == _defined_clip(x).tobytes()


def test_without_its_margin_the_shortcut_would_change_bits_on_these_rows(monkeypatch):
    # The rows above are adversarial: certifying "inside" from the sum of
    # squares with no margin keeps some row the defined clip moves.
    import shoal.common.bounds as bounds

    monkeypatch.setattr(bounds, "INSIDE_MARGIN", 0.0)
    rows = [_boundary_rows(d, 1.0, seed=d) for d in (2, 3, 100, 1000)]
    assert any(bounds.clip_to_ball(x).tobytes() != _defined_clip(x).tobytes() for x in rows)
