"""The coreset picture under the dashboard's centers: post-processing of the
decoder's private coreset, small whatever d, in the user's units."""

import numpy as np

from shoal.common.picture import MAX_POINTS, coreset_picture, project


def test_picture_of_2d_coreset_is_the_coreset_in_user_units():
    pts = np.array([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]])
    pic = coreset_picture(pts, np.array([3.0, 1.0, 2.0]))
    assert np.allclose(pic["xy"], pts[[0, 2, 1]])  # heaviest first
    assert pic["weights"] == [3.0, 2.0, 1.0]
    assert np.allclose(project(pic, pts), pts)


def test_picture_in_high_dimension_uses_orthonormal_principal_axes():
    rng = np.random.default_rng(0)
    pts = rng.standard_normal((500, 20)) * np.r_[5.0, 3.0, np.full(18, 0.1)]
    pic = coreset_picture(pts, np.ones(500))
    axes = np.asarray(pic["axes"])
    assert axes.shape == (2, 20) and np.allclose(axes @ axes.T, np.eye(2), atol=1e-12)
    assert abs(axes[0, 0]) > 0.99 and abs(axes[1, 1]) > 0.99  # the two wide features


def test_picture_keeps_only_the_heaviest_nodes_and_drops_empty_ones():
    rng = np.random.default_rng(1)
    w = rng.uniform(0, 1, 3 * MAX_POINTS)
    w[:10] = -1.0  # noisy counts below zero are not drawn
    pic = coreset_picture(rng.standard_normal((w.size, 4)), w)
    assert len(pic["xy"]) == MAX_POINTS and pic["nodes"] == w.size - 10
    assert min(pic["weights"]) >= np.sort(w)[-MAX_POINTS]


def test_picture_of_nothing_is_none():
    assert coreset_picture(np.zeros((3, 2)), np.zeros(3)) is None
