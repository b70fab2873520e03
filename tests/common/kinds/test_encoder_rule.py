"""``encoder: "auto"`` (issue 15): the tree encoder is chosen from public
parameters by the measured rule of ``common/kinds/encoder_rule.py``."""

import pytest

from shoal.common.errors import ConfigError
from shoal.common.kinds.encoder_rule import AUTO_D3_SIGNAL, choose_encoder
from shoal.common.kinds.tree import config_to_dict, derive_config


@pytest.mark.parametrize("dim", [1, 2])
def test_auto_picks_nettree_in_the_plane_and_on_the_line(dim):
    for eps in (0.5, 1.0, 8.0):
        assert choose_encoder(10**6, dim, 10, eps) == "nettree"


def test_auto_in_three_dimensions_follows_the_device_signal():
    n = 100_000
    assert choose_encoder(n, 3, 8, 2.0) == "nettree"  # n eps^2 = 4e5 < 1e6
    assert choose_encoder(n, 3, 8, 4.0) == "lsh"  # 1.6e6
    assert n * 3.2**2 > AUTO_D3_SIGNAL > n * 3.1**2


@pytest.mark.parametrize("dim", [4, 7, 16, 100])
def test_auto_picks_lsh_from_four_dimensions_up(dim):
    for eps in (0.5, 1.0, 8.0):
        assert choose_encoder(10_000, dim, 10, eps) == "lsh"


@pytest.mark.parametrize(("dim", "chosen"), [(2, "nettree"), (7, "lsh")])
def test_an_auto_round_is_the_round_of_the_encoder_it_chose(dim, chosen):
    auto = derive_config(50_000, dim, 10, 2.0, seed=3)
    assert auto.encoder == chosen
    assert config_to_dict(auto) == config_to_dict(derive_config(50_000, dim, 10, 2.0, seed=3, encoder=chosen))


def test_a_shuffle_round_chooses_at_the_amplified_device_epsilon():
    # Central eps=1 for one batch of 1e5: eps0 ~ 7, so d=3 is past the signal threshold.
    cfg = derive_config(100_000, 3, 8, 1.0, model="shuffle", delta=1e-6, min_batch=100_000)
    assert cfg.epsilon > 4 and cfg.encoder == "lsh"
    assert derive_config(100_000, 3, 8, 1.0).encoder == "nettree"


def test_an_unknown_encoder_is_refused_with_its_name():
    with pytest.raises(ConfigError, match="'lattice'"):
        derive_config(1000, 2, 2, 1.0, encoder="lattice")
