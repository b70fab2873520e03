"""COMPUTETHRESHOLD (seed 004, Alg. 2) and the built tree."""

import numpy as np

from shoal.client.encoder import encode_arrays
from shoal.common.kinds.tree import derive_config
from shoal.common.kinds.tree_nets import node_space
from shoal.common.kinds.tree_randomness import PublicRandomness
from shoal.deploy.simulation.datasets import paper_mixture
from shoal.server.decoders.tree.accumulate import LevelAccumulator
from shoal.server.decoders.tree.oracles import FrequencyOracle
from shoal.server.decoders.tree.tree import build_tree, compute_threshold, gate_z


def test_threshold_expands_everything_when_few_nodes():
    assert compute_threshold(np.array([1.0, 5.0, 9.0]), k=2, a=2, gamma_steps=5) == 3


def test_threshold_stops_when_the_rest_is_light():
    counts = np.sort(np.r_[np.zeros(40), np.full(4, 100.0)])
    assert compute_threshold(counts, k=2, a=2, gamma_steps=10) == 4


def test_threshold_is_capped_by_gamma():
    counts = np.sort(np.full(100, 10.0))
    assert compute_threshold(counts, k=1, a=1, gamma_steps=3) <= 3


def test_noise_gate_grows_with_the_number_of_queries():
    assert gate_z(2.5, 1) == 2.5
    assert gate_z(2.5, 10_000) > 4


def test_tree_finds_every_cluster_of_a_clear_mixture():
    ds = paper_mixture(200_000, d=20, k=4, seed=2)
    cfg = derive_config(ds.points.shape[0], 20, 4, 8.0, seed=2)
    acc = LevelAccumulator(cfg)
    acc.add(encode_arrays(ds.points, cfg, np.random.default_rng(0), wire=False))  # the decoder, not the wire
    space = node_space(cfg)
    tree = build_tree(space, FrequencyOracle(acc, PublicRandomness.from_config(cfg)), cfg)
    core = tree.coreset_nodes()
    assert core.size >= 4
    # The coreset holds most of the mass.
    assert tree.count[core].sum() > 0.8 * ds.points.shape[0]
