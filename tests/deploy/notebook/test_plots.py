"""The notebook's pictures draw what was fitted (matplotlib's Agg backend, no screen)."""

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from shoal import PrivateKMeans  # noqa: E402
from shoal.deploy.notebook.center_plot import answer_title  # noqa: E402
from shoal.deploy.notebook.plots import accuracy_vs_epsilon, elbow
from shoal.deploy.simulation.datasets import city_locations  # noqa: E402

DS = city_locations(20_000, seed=1)
BOX = (DS.bound.low, DS.bound.high)


def test_plot_draws_every_center_over_the_data(tmp_path):
    km = PrivateKMeans(6, epsilon=4.0, bounds=BOX, random_state=0).fit(DS.points)
    ax = km.plot(DS.points)
    centers = ax.collections[1].get_offsets()
    assert np.allclose(centers, km.cluster_centers_)  # 2-D: drawn in X's own units
    assert len(ax.texts) == 6 and ax.get_title().endswith(answer_title(km.quality_, 6))
    ax.figure.savefig(tmp_path / "centers.png")
    assert (tmp_path / "centers.png").stat().st_size > 10_000


def test_high_dimensional_data_is_drawn_on_its_principal_axes():
    rng = np.random.default_rng(0)
    x = np.clip(rng.standard_normal((5000, 6)) * 0.2, -1, 1)
    km = PrivateKMeans(3, epsilon=8.0, bounds=(-1.0, 1.0), random_state=0).fit(x)
    ax = km.plot(x)
    assert ax.get_xlabel() == "principal axis 1" and len(ax.collections[1].get_offsets()) == 3


def test_accuracy_improves_with_epsilon_and_beats_one_center():
    _, curve = accuracy_vs_epsilon(DS.points, 6, [1.0, 8.0], bounds=BOX, random_state=0)
    assert curve["cost"][1] < curve["cost"][0]
    assert curve["cost"][1] < curve["one_center"][0]


def test_elbow_has_one_point_per_k():
    ax, curve = elbow(DS.points, [1, 3, 6], 8.0, bounds=BOX, random_state=0)
    assert curve["k"] == [1.0, 3.0, 6.0] and len(ax.lines[0].get_xdata()) == 3
    assert curve["cost"][2] < curve["cost"][0]


def test_a_central_private_mean_is_titled_private_mean_not_clusters():
    x = np.random.default_rng(0).uniform(-1, 1, (200, 8))
    km = PrivateKMeans(10, epsilon=0.5, model="central", radius=3.0, random_state=0).fit(x)
    assert km.quality_["answer"] == "private mean"
    title = km.plot(x).get_title()
    assert title.endswith("central model: private mean") and "clusters" not in title


def test_titles_name_the_answer_of_every_verdict():
    assert answer_title({"answer": "mean-only round", "distinct_centers": 1}, 5) == "private mean (mean-only round)"
    assert answer_title({"answer": "private mean", "distinct_centers": 1}, 5) == "private mean"
    assert answer_title({"answer": "private mean", "distinct_centers": 5}, 5) == "private mean (+ 4 uncertified guesses)"
    assert answer_title({"answer": "clusters", "distinct_centers": 4}, 10) == "4 distinct centers of 10"
    assert answer_title({"answer": "clusters", "distinct_centers": 10}, 10) == "10 clusters"
    assert answer_title({"answer": "clusters", "distinct_centers": 3, "certified": False}, 3) == "3 clusters (not certified)"
    assert answer_title({"answer": "unreliable sketch", "distinct_centers": 3}, 3) == "unreliable sketch"
    assert answer_title(None, 3) == "no verdict"
