"""The generated data sets: reproducible from their seed, inside their public bound, and
shaped as their docstrings say."""

import numpy as np

from shoal.deploy.simulation.datasets import overlapping_mixture


def test_the_overlapping_mixture_is_reproducible_and_inside_its_public_box():
    a, b = overlapping_mixture(2000, seed=3), overlapping_mixture(2000, seed=3)
    assert np.array_equal(a.points, b.points) and a.bound == b.bound
    assert a.points.shape == (2000, 6) and a.k == 5
    assert (a.points >= 0).all() and (a.points <= np.array(a.bound.high)).all()
    assert not np.array_equal(a.points, overlapping_mixture(2000, seed=4).points)


def test_the_overlapping_mixtures_box_comes_from_another_sample_not_the_data():
    """The box is the same whatever n: it is read from a reference sample of the generator."""
    assert overlapping_mixture(500, seed=1).bound == overlapping_mixture(5000, seed=1).bound


def test_the_overlapping_mixtures_clusters_are_as_wide_as_the_gaps_between_them():
    """Broad and overlapping (issue 41): a one-center cost less than twice the k-means optimum's
    neighbourhood, where well-separated clusters would give many times more."""
    from sklearn.cluster import KMeans

    ds = overlapping_mixture(5000, seed=0)
    x = ds.points
    one = ((x - x.mean(0)) ** 2).sum(1).mean()
    best = KMeans(ds.k, n_init=3, random_state=0).fit(x).inertia_ / len(x)
    assert one < 2.5 * best, (one, best)
