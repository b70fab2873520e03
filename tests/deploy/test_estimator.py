"""The notebook estimator (issue 16, item 6): scikit-learn's names over the
in-process pipeline, loud about the public bound, with a verdict."""

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.deploy import PrivateKMeans


def _blobs(n=60_000, seed=0):
    rng = np.random.default_rng(seed)
    truth = np.array([[20.0, 20.0], [80.0, 30.0], [50.0, 85.0]])
    return np.concatenate([rng.normal(c, 3.0, (n // 3, 2)) for c in truth]), truth


def test_fit_finds_separated_clusters_in_the_users_units_with_a_verdict():
    x, truth = _blobs()
    km = PrivateKMeans(3, epsilon=8.0, bounds=([0, 0], [100, 100]), random_state=1).fit(x)
    assert km.cluster_centers_.shape == (3, 2)
    err = np.linalg.norm(km.cluster_centers_[:, None, :] - truth[None], axis=2).min(axis=0)
    assert err.max() < 5.0, km.cluster_centers_
    assert km.quality_["answer"] == "clusters" and km.quality_["distinct_centers"] == 3
    assert km.privacy_["device_epsilon"] == pytest.approx(8.0) and km.encoder_ == "nettree"
    assert km.bound_ == PublicBound(low=(0.0, 0.0), high=(100.0, 100.0)) and km.clipped_fraction_ == 0.0
    labels = km.predict(x)
    assert labels.shape == (x.shape[0],) and set(np.unique(labels)) <= {0, 1, 2}
    assert km.score(x) < 0


def test_without_a_bound_it_warns_with_the_fraction_it_clipped():
    x, _ = _blobs(3000)
    with pytest.warns(UserWarning, match=r"no public bound given.*100.0% of the rows were clipped"):
        km = PrivateKMeans(3, epsilon=1.0, random_state=0).fit(x)
    assert km.clipped_fraction_ == 1.0 and km.bound_ == PublicBound(radius=1.0)


def test_shuffle_with_refine_auto_stays_within_the_total_budget():
    x, _ = _blobs(20_000)
    km = PrivateKMeans(3, epsilon=1.0, model="shuffle", refine="auto", bounds=([0, 0], [100, 100]),
                       random_state=2).fit(x)
    assert 0.99 <= km.privacy_["composed"]["epsilon"] <= 1.0 + 1e-12
    assert 0.99e-6 <= km.privacy_["composed"]["delta"] <= 1e-6 * (1 + 1e-12)


def test_local_model_refine_keeps_fresh_rows_and_stays_eps_ldp():
    x, truth = _blobs()
    km = PrivateKMeans(3, epsilon=8.0, refine=0.3, bounds=([0, 0], [100, 100]), random_state=3).fit(x)
    assert km.privacy_["model"] == "local" and km.privacy_["device_epsilon"] == pytest.approx(8.0)
    assert "parallel" in km.privacy_["composition"]
    err = np.linalg.norm(km.cluster_centers_[:, None, :] - truth[None], axis=2).min(axis=0)
    assert err.max() < 5.0, km.cluster_centers_


def test_predict_before_fit_is_a_clear_error():
    with pytest.raises(ConfigError, match="not fitted"):
        PrivateKMeans(2).predict(np.zeros((3, 2)))


def test_predict_refuses_a_different_number_of_features():
    x, _ = _blobs(3000)
    km = PrivateKMeans(3, epsilon=1.0, radius=150.0, random_state=0).fit(x)
    with pytest.raises(ConfigError, match=r"shape \(n, 2\)"):
        km.predict(np.zeros((3, 4)))


def test_rejects_an_unknown_model():
    with pytest.raises(ConfigError, match="model must be"):
        PrivateKMeans(2, model="curator", radius=1.0).fit(np.zeros((10, 2)))


def test_the_central_model_fits_in_this_process_as_the_curator():
    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal(5, 0.2, (3000, 2)), rng.normal(-5, 0.2, (3000, 2))])
    km = PrivateKMeans(2, epsilon=2.0, model="central", bounds=(-10, 10), random_state=1).fit(x)
    assert sorted(np.round(km.cluster_centers_[:, 0]).tolist()) == [-5.0, 5.0]
    assert km.privacy_["model"] == "central" and km.privacy_["central_epsilon"] <= 2.0 + 1e-12
    assert km.encoder_ == "maxcover-003"


def test_the_central_model_refuses_an_encoder():
    with pytest.raises(ConfigError, match="takes no encoder"):
        PrivateKMeans(2, model="central", encoder="lsh", radius=1.0).fit(np.zeros((10, 2)))


def test_rejects_bounds_and_radius_together():
    with pytest.raises(ConfigError, match="bounds or radius"):
        PrivateKMeans(2, bounds=([0, 0], [1, 1]), radius=1.0).fit(np.zeros((10, 2)))


def test_rejects_a_non_integer_number_of_clusters():
    with pytest.raises(ConfigError, match="n_clusters"):
        PrivateKMeans(2.5, radius=1.0).fit(np.zeros((10, 2)))


def test_rejects_one_dimensional_input():
    with pytest.raises(ConfigError, match="2-D"):
        PrivateKMeans(2, radius=1.0).fit(np.zeros(10))


def test_a_box_of_the_wrong_width_is_refused():
    with pytest.raises(ConfigError, match="features"):
        PrivateKMeans(2, bounds=(np.zeros(3), np.ones(3))).fit(np.zeros((10, 2)))
