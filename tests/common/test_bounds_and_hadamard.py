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

