"""The notebook estimator (issue 16, item 6; issue 39): scikit-learn's names
and protocol over the in-process pipeline, loud about the public bound, with
a verdict in every model. scikit-learn itself is tested against it in
test_estimator_sklearn.py; nothing here needs it."""

import pickle

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.deploy.notebook.estimator import NotFittedError, PrivateKMeans
from shoal.deploy.notebook.verdicts import central_quality, partition_quality

TRUTH = np.array([[20.0, 20.0], [80.0, 30.0], [50.0, 85.0]])
BOX = ([0, 0], [100, 100])
VERDICT_FIELDS = {"k", "answer", "distinct_centers", "verdict", "center_errors", "mean_error", "bound", "units",
                  "clusters_found"}


def _blobs(n=60_000, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(c, 3.0, (n // 3, 2)) for c in TRUTH])


def _err(centers):
    return np.linalg.norm(centers[:, None, :] - TRUTH[None], axis=2).min(axis=0).max()


def test_fit_finds_separated_clusters_in_the_users_units_with_a_verdict():
    x = _blobs()
    km = PrivateKMeans(3, epsilon=8.0, bounds=BOX, random_state=1).fit(x)
    assert km.cluster_centers_.shape == (3, 2) and _err(km.cluster_centers_) < 5.0, km.cluster_centers_
    assert km.quality_["answer"] == "clusters" and km.quality_["distinct_centers"] == 3
    assert km.privacy_["device_epsilon"] == pytest.approx(8.0) and km.encoder_ == "nettree"
    assert km.bound_ == PublicBound(low=(0.0, 0.0), high=(100.0, 100.0)) and km.clipped_fraction_ == 0.0
    labels = km.predict(x)
    assert labels.dtype == np.int64 and set(np.unique(labels)) <= {0, 1, 2}
    assert np.array_equal(km.labels_, labels)
    assert km.score(x) < 0


def test_the_parameter_is_k_as_in_the_rest_api_and_the_cli():
    assert PrivateKMeans(k=3).get_params()["k"] == 3
    with pytest.raises(TypeError, match="n_clusters"):
        PrivateKMeans(n_clusters=3)


def test_get_params_returns_every_init_argument_unchanged():
    bounds = (np.zeros(2), np.ones(2))
    km = PrivateKMeans(4, epsilon=2, model="shuffle", bounds=bounds, refine="auto", random_state=7)
    params = km.get_params()
    assert params == {"k": 4, "epsilon": 2, "model": "shuffle", "delta": 1e-6, "encoder": "auto",
                      "bounds": bounds, "radius": None, "refine": "auto", "min_batch": None, "random_state": 7}
    assert params["bounds"] is bounds


def test_a_copy_from_get_params_is_an_unfitted_estimator_with_the_same_parameters():
    km = PrivateKMeans(3, epsilon=1, bounds=(0, 1)).fit(np.random.default_rng(0).uniform(size=(50, 2)))
    copy = type(km)(**km.get_params())
    assert copy.get_params() == km.get_params() and not hasattr(copy, "cluster_centers_")


def test_init_stores_bad_values_and_fit_refuses_them():
    km = PrivateKMeans(k=-1, epsilon="lots", model="curator")  # no validation in __init__ (clone's contract)
    assert km.k == -1
    with pytest.raises(ValueError, match="k must be a positive integer, got -1"):
        km.fit(np.zeros((10, 2)))


def test_set_params_sets_and_returns_the_estimator():
    km = PrivateKMeans()
    assert km.set_params(k=5, epsilon=2.0) is km and (km.k, km.epsilon) == (5, 2.0)


def test_set_params_refuses_an_unknown_name():
    with pytest.raises(ValueError, match="no parameter 'n_clusters' .*parameters: k, epsilon"):
        PrivateKMeans().set_params(n_clusters=3)


def test_repr_shows_the_arguments_that_differ_from_the_defaults():
    assert repr(PrivateKMeans(k=3, epsilon=1, bounds=(0, 1))) == "PrivateKMeans(k=3, epsilon=1, bounds=(0, 1))"
    assert repr(PrivateKMeans()) == "PrivateKMeans()"


def test_random_state_makes_every_model_reproducible():
    x = _blobs(3000)
    for model in ("local", "shuffle", "central"):
        a = PrivateKMeans(3, epsilon=4.0, model=model, bounds=BOX, random_state=5).fit(x).cluster_centers_
        b = PrivateKMeans(3, epsilon=4.0, model=model, bounds=BOX, random_state=5).fit(x).cluster_centers_
        assert np.array_equal(a, b), model


def test_transform_gives_each_rows_distance_to_every_center():
    x = _blobs(3000)
    km = PrivateKMeans(3, epsilon=4.0, bounds=BOX, random_state=0).fit(x)
    d = km.transform(x[:5])
    want = np.linalg.norm(x[:5, None, :] - km.cluster_centers_[None], axis=2)
    assert d.shape == (5, 3) and np.allclose(d, want)
    assert np.array_equal(d.argmin(1), km.predict(x[:5]))


def test_fit_predict_and_fit_transform_are_fit_then_predict_and_transform():
    x = _blobs(3000)
    km = PrivateKMeans(3, epsilon=4.0, bounds=BOX, random_state=0)
    assert np.array_equal(km.fit_predict(x), km.predict(x))
    assert np.allclose(km.fit_transform(x), km.transform(x))


def test_a_fitted_estimator_pickles():
    km = PrivateKMeans(3, epsilon=4.0, bounds=BOX, random_state=0).fit(_blobs(3000))
    again = pickle.loads(pickle.dumps(km))
    assert np.array_equal(again.cluster_centers_, km.cluster_centers_) and again.quality_ == km.quality_


def test_the_local_model_verdict_comes_from_the_tree_decoder():
    km = PrivateKMeans(3, epsilon=1.0, bounds=BOX, random_state=0).fit(_blobs(300))
    assert VERDICT_FIELDS <= set(km.quality_) and km.quality_["answer"] in ("private mean", "mean-only round")


def test_the_shuffle_model_has_a_verdict_on_a_tree_round():
    km = PrivateKMeans(3, epsilon=2.0, model="shuffle", encoder="nettree", bounds=BOX, random_state=0).fit(_blobs())
    assert VERDICT_FIELDS <= set(km.quality_) and km.quality_["k"] == 3


def test_the_shuffle_model_has_a_verdict_on_a_partition_round():
    km = PrivateKMeans(3, epsilon=1.0, model="shuffle", encoder="partition", bounds=BOX,
                       random_state=0).fit(_blobs(3000))
    q = km.quality_
    assert km.encoder_ == "partition" and VERDICT_FIELDS <= set(q)
    assert q["certified"] is False and q["center_errors"] is None and "not estimated" in q["center_errors_note"]
    assert q["distinct_centers"] == len(np.unique(km.cluster_centers_.round(9), axis=0))


def test_a_refine_round_keeps_the_first_rounds_verdict_and_counts_the_refined_centers():
    x = _blobs(20_000)
    km = PrivateKMeans(3, epsilon=1.0, model="shuffle", refine="auto", bounds=BOX, random_state=2).fit(x)
    q = km.quality_
    assert VERDICT_FIELDS <= set(q) and q["certified"] is False and "answer" in q["first_round"]
    assert q["distinct_centers"] == len(np.unique(km.cluster_centers_.round(9), axis=0))


def test_the_central_model_verdict_comes_from_the_lifts_test_against_the_mean():
    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal(5, 0.2, (3000, 2)), rng.normal(-5, 0.2, (3000, 2))])
    km = PrivateKMeans(2, epsilon=2.0, model="central", bounds=(-10, 10), random_state=1).fit(x)
    assert sorted(np.round(km.cluster_centers_[:, 0]).tolist()) == [-5.0, 5.0]
    assert VERDICT_FIELDS <= set(km.quality_) and km.quality_["distinct_centers"] == 2
    assert km.privacy_["model"] == "central" and km.privacy_["central_epsilon"] <= 2.0 + 1e-12


def test_a_central_private_mean_says_so():
    x = np.random.default_rng(0).uniform(-1, 1, (200, 8))
    km = PrivateKMeans(10, epsilon=0.5, model="central", radius=3.0, random_state=0).fit(x)
    assert km.quality_["answer"] == "private mean" and km.quality_["distinct_centers"] == 1
    assert "private mean" in km.quality_["verdict"]


def test_a_partition_round_that_kept_no_bucket_says_nothing_was_released():
    q = partition_quality(3, PublicBound(radius=1.0), np.zeros((3, 2)), {"buckets": 8, "buckets_kept": 0}, 1.0)
    assert q["answer"] == "nothing released" and q["distinct_centers"] == 1 and q["clusters_found"] is False


def test_a_central_run_without_a_test_against_the_mean_is_not_certified():
    ball = np.array([[0.5, 0.0], [-0.5, 0.0], [-0.5, 0.0]])
    q = central_quality(3, 1.0, PublicBound(radius=1.0), ball, {"proxy_points": 5}, "maxcover-003")
    assert q["answer"] == "clusters" and q["certified"] is False and "not certified" in q["verdict"]
    assert q["distinct_centers"] == 2 and "1 center(s) repeat others" in q["verdict"]


def test_shuffle_with_refine_auto_stays_within_the_total_budget():
    km = PrivateKMeans(3, epsilon=1.0, model="shuffle", refine="auto", bounds=BOX, random_state=2).fit(_blobs(20_000))
    assert 0.99 <= km.privacy_["composed"]["epsilon"] <= 1.0 + 1e-12
    assert 0.99e-6 <= km.privacy_["composed"]["delta"] <= 1e-6 * (1 + 1e-12)


def test_local_model_refine_keeps_fresh_rows_and_stays_eps_ldp():
    km = PrivateKMeans(3, epsilon=8.0, refine=0.3, bounds=BOX, random_state=3).fit(_blobs())
    assert km.privacy_["model"] == "local" and km.privacy_["device_epsilon"] == pytest.approx(8.0)
    assert "parallel" in km.privacy_["composition"] and _err(km.cluster_centers_) < 5.0


def test_without_a_bound_it_warns_with_the_fraction_it_clipped():
    with pytest.warns(UserWarning, match=r"no public bound given.*100.0% of the rows were clipped"):
        km = PrivateKMeans(3, epsilon=1.0, random_state=0).fit(_blobs(3000))
    assert km.clipped_fraction_ == 1.0 and km.bound_ == PublicBound(radius=1.0)


def test_a_dataframe_sets_feature_names_and_is_checked_by_name():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(_blobs(3000), columns=["lat", "lon"])
    km = PrivateKMeans(3, epsilon=4.0, bounds=BOX, random_state=0).fit(df)
    assert list(km.feature_names_in_) == ["lat", "lon"] and km.n_features_in_ == 2
    with pytest.warns(UserWarning, match="X does not have valid feature names, but PrivateKMeans was fitted with"):
        plain = km.predict(df.to_numpy())
    assert np.array_equal(km.predict(df), plain)


def test_a_dataframe_with_other_columns_is_refused_naming_them():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(_blobs(3000), columns=["lat", "lon"])
    km = PrivateKMeans(3, epsilon=4.0, bounds=BOX, random_state=0).fit(df)
    with pytest.raises(ValueError, match="feature names should match.*\nFeature names unseen at fit time:\n- y\n"):
        km.predict(df.rename(columns={"lat": "y"}))
    with pytest.raises(ValueError, match="must be in the same order"):
        km.predict(df[["lon", "lat"]])


def test_a_dataframe_after_fitting_an_array_warns():
    pd = pytest.importorskip("pandas")
    x = _blobs(3000)
    km = PrivateKMeans(3, epsilon=4.0, bounds=BOX, random_state=0).fit(x)
    with pytest.warns(UserWarning, match="X has feature names, but PrivateKMeans was fitted without"):
        km.predict(pd.DataFrame(x, columns=["lat", "lon"]))


# -- one test per invalid input or parameter --

def test_predict_before_fit_is_a_not_fitted_error():
    with pytest.raises(NotFittedError, match="not fitted"):
        PrivateKMeans(2).predict(np.zeros((3, 2)))


def test_predict_refuses_a_different_number_of_features():
    km = PrivateKMeans(3, epsilon=1.0, radius=150.0, random_state=0).fit(_blobs(3000))
    with pytest.raises(ValueError, match="X has 4 features, but PrivateKMeans is expecting 2 features"):
        km.predict(np.zeros((3, 4)))


def test_rejects_more_centers_than_rows():
    with pytest.raises(ValueError, match=r"k=11 is more than the rows of X \(n_samples = 10\)"):
        PrivateKMeans(11, radius=1.0).fit(np.zeros((10, 2)))


@pytest.mark.parametrize("k", [2.5, 0, True, "3"])
def test_rejects_a_k_that_is_not_a_positive_integer(k):
    with pytest.raises(ValueError, match=f"k must be a positive integer, got {k!r}"):
        PrivateKMeans(k, radius=1.0).fit(np.zeros((10, 2)))


@pytest.mark.parametrize("eps", [0, -1.0, float("inf"), float("nan"), "1"])
def test_rejects_an_epsilon_that_is_not_finite_and_positive(eps):
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        PrivateKMeans(2, epsilon=eps, radius=1.0).fit(np.zeros((10, 2)))


def test_rejects_an_unknown_model():
    with pytest.raises(ValueError, match="model must be .* got 'curator'"):
        PrivateKMeans(2, model="curator", radius=1.0).fit(np.zeros((10, 2)))


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-6])
def test_rejects_a_delta_outside_zero_one_in_the_shuffle_model(delta):
    with pytest.raises(ValueError, match=f"delta must be a number in \\(0, 1\\) in the shuffle model, got {delta!r}"):
        PrivateKMeans(2, model="shuffle", delta=delta, radius=1.0).fit(np.zeros((10, 2)))


def test_rejects_an_unknown_encoder():
    with pytest.raises(ValueError, match="encoder must be one of .* got 'kmeans'"):
        PrivateKMeans(2, encoder="kmeans", radius=1.0).fit(np.zeros((10, 2)))


def test_rejects_a_radius_that_is_not_positive():
    with pytest.raises(ValueError, match="radius must be a finite number > 0, got -2"):
        PrivateKMeans(2, radius=-2).fit(np.zeros((10, 2)))


def test_rejects_bounds_that_are_not_a_pair():
    with pytest.raises(ValueError, match=r"bounds must be a PublicBound or a pair \(low, high\), got \(0, 1, 2\)"):
        PrivateKMeans(2, bounds=(0, 1, 2)).fit(np.zeros((10, 2)))


def test_rejects_bounds_and_radius_together():
    with pytest.raises(ValueError, match="bounds or radius, not both"):
        PrivateKMeans(2, bounds=([0, 0], [1, 1]), radius=1.0).fit(np.zeros((10, 2)))


def test_a_box_of_the_wrong_width_is_refused():
    with pytest.raises(ValueError, match="features"):
        PrivateKMeans(2, bounds=(np.zeros(3), np.ones(3))).fit(np.zeros((10, 2)))


def test_rejects_a_min_batch_below_two():
    with pytest.raises(ValueError, match="min_batch must be an integer >= 2, got 1"):
        PrivateKMeans(2, model="shuffle", min_batch=1, radius=1.0).fit(np.zeros((10, 2)))


def test_rejects_a_random_state_that_is_not_an_integer():
    with pytest.raises(ValueError, match="random_state must be None or an integer, got 'seed'"):
        PrivateKMeans(2, random_state="seed", radius=1.0).fit(np.zeros((10, 2)))


def test_the_shuffle_model_refuses_a_single_row():
    with pytest.raises(ValueError, match=r"at least 2 rows \(n_samples = 1, min_batch = None\)"):
        PrivateKMeans(1, model="shuffle", encoder="nettree", radius=1.0).fit(np.zeros((1, 2)))


def test_the_shuffle_model_refuses_batches_too_small_for_its_secure_sums():
    with pytest.raises(ValueError, match=r"at least 16 rows \(n_samples = 15, .*secure sums"):
        PrivateKMeans(2, model="shuffle", radius=1.0).fit(np.zeros((15, 2)))


def test_the_central_model_refuses_an_encoder():
    with pytest.raises(ValueError, match="takes no encoder.*encoder='lsh'"):
        PrivateKMeans(2, model="central", encoder="lsh", radius=1.0).fit(np.zeros((10, 2)))


def test_rejects_one_dimensional_input():
    with pytest.raises(ValueError, match=r"2-D array .*got shape \(10,\)"):
        PrivateKMeans(2, radius=1.0).fit(np.zeros(10))


def test_rejects_input_without_rows():
    with pytest.raises(ValueError, match=r"0 sample\(s\) \(shape=\(0, 2\)\)"):
        PrivateKMeans(2, radius=1.0).fit(np.zeros((0, 2)))


def test_rejects_input_without_features():
    with pytest.raises(ValueError, match=r"0 feature\(s\) \(shape=\(10, 0\)\)"):
        PrivateKMeans(2, radius=1.0).fit(np.zeros((10, 0)))


def test_rejects_nan_naming_where_it_is():
    x = np.zeros((10, 2))
    x[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity .*row 3, column 1: nan"):
        PrivateKMeans(2, radius=1.0).fit(x)


def test_rejects_complex_input():
    with pytest.raises(ValueError, match="Complex data not supported"):
        PrivateKMeans(2, radius=1.0).fit(np.zeros((10, 2), dtype=complex))


def test_rejects_sparse_input_naming_the_fix():
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(ValueError, match=r"dense input; got sparse csr_matrix: pass X.toarray\(\)"):
        PrivateKMeans(2, radius=1.0).fit(sparse.csr_matrix(np.zeros((10, 2))))
