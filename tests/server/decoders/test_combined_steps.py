"""A Lloyd step combined with its start (server/decoders/combined_steps.py): where the
move is what the two noises explain, the inverse-variance weights; where it is far
beyond them, the new mean; never outside [0, 1]."""

from __future__ import annotations

import numpy as np

from shoal.server.decoders.combined_steps import combine_factor


def test_a_move_the_noises_explain_gives_the_inverse_variance_weights():
    w, v = np.array([1.0, 1.0, 3.0]), np.array([1.0, 3.0, 1.0])
    lam = combine_factor(w + v, v, w)  # E gap = w + v when the true drift is 0
    assert np.allclose(lam, w / (w + v))  # 1/2, 1/4, 3/4: the smaller variance weighs more


def test_a_far_move_takes_the_new_mean():
    lam = combine_factor(np.array([1e4]), np.array([1.0]), np.array([1.0]))
    assert lam[0] > 0.999


def test_a_start_without_noise_and_a_small_move_stays_put():
    lam = combine_factor(np.array([0.5]), np.array([1.0]), np.array([0.0]))
    assert lam[0] == 0.0


def test_the_factor_is_in_the_unit_interval_everywhere():
    rng = np.random.default_rng(0)
    lam = combine_factor(rng.exponential(size=1000), rng.exponential(size=1000), rng.exponential(size=1000))
    assert np.all((lam >= 0) & (lam <= 1))
