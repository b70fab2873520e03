"""RoundConfig: derivation, validation (one test per invalid parameter), public randomness."""

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError, PrivacyError
from shoal.common.kinds.tree import (
    RoundConfig,
    TreeParams,
    config_from_dict,
    config_to_dict,
    derive_config,
)
from shoal.common.kinds.tree_randomness import PublicRandomness
from shoal.common.privacy.events import local_epsilon


def base(**kw):
    return derive_config(100_000, 10, 4, 4.0, seed=7, **kw)


def test_derived_budget_composes_to_epsilon():
    cfg = base(hist_only_share=0.0)
    assert cfg.eps_hist + cfg.eps_vec == pytest.approx(4.0)
    assert cfg.device_epsilon == pytest.approx(4.0)


def test_local_rounds_send_one_report_per_tree_device_at_the_full_epsilon():
    cfg = base()
    assert cfg.hist_only_share == 0.5 and cfg.eps_hist == cfg.eps_vec == 4.0 and cfg.device_epsilon == 4.0


def test_wide_data_gives_the_vector_reports_three_quarters_of_the_tree_devices():
    cfg = derive_config(1_000_000, 100, 8, 1.0, seed=1)
    assert cfg.levels > 0 and cfg.hist_only_share == 0.25 and cfg.eps_hist == cfg.eps_vec == 1.0


def test_shuffle_rounds_keep_both_reports_per_tree_device():
    cfg = derive_config(1_000_000, 10, 4, 1.0, seed=1, model="shuffle", delta=1e-6, min_batch=10_000)
    assert cfg.hist_only_share == 0.0 and cfg.eps_hist + cfg.eps_vec <= cfg.epsilon


def test_a_given_vec_share_keeps_both_reports_per_tree_device():
    cfg = base(vec_share=0.75)
    assert cfg.hist_only_share == 0.0 and cfg.eps_vec == 3.0


def test_rejects_vec_share_with_a_hist_only_share():
    with pytest.raises(ConfigError, match="give one of them"):
        base(vec_share=0.75, hist_only_share=0.5)


def test_the_predicted_center_error_counts_only_the_vector_devices():
    split, both = base(), base(hist_only_share=0.0)
    assert split.predicted_center_error == pytest.approx(
        both.predicted_center_error * both.vec_params.expected_sq_norm ** -1 * split.vec_params.expected_sq_norm
        * (1 - both.root_share) / (1 - split.root_share) / 0.5)


def test_identity_nettree_spends_everything_on_the_histogram():
    cfg = derive_config(100_000, 2, 10, 4.0, encoder="nettree", seed=1)
    assert cfg.identity_projection and cfg.eps_vec == 0 and cfg.eps_hist == 4.0


def test_hopeless_rounds_estimate_only_the_mean():
    cfg = derive_config(2_000, 100, 8, 1.0, seed=1)
    assert cfg.levels == 0 and cfg.eps_vec == 0 and cfg.eps_hist == 0 and cfg.root_share == 1.0
    assert cfg.root_params is not None and cfg.root_params.epsilon == 1.0 and cfg.device_epsilon == 1.0


def test_the_private_mean_is_within_three_ldp_mean_errors_where_a_quarter_of_devices_allow():
    from shoal.common.kinds.tree import duchi_mean_variance
    for d, eps in ((7, 4.0), (100, 4.0), (2, 2.0), (100, 8.0)):
        cfg = derive_config(50_000, d, 5, eps, seed=1)
        assert 0.05 <= cfg.root_share <= 0.25
        assert cfg.mean_error <= 3 * duchi_mean_variance(d, eps) / 50_000 * (1 + 1e-9) or cfg.root_share == 0.25


def test_a_device_is_root_or_tree_and_spends_epsilon_either_way():
    from shoal.common.privacy.events import ChoiceEvent
    cfg = derive_config(100_000, 10, 4, 2.0, seed=1, hist_only_share=0.0)
    event = cfg.privacy_event
    assert isinstance(event, ChoiceEvent) and event.probabilities == (1 - cfg.root_share, cfg.root_share)
    assert [local_epsilon(o) for o in event.options] == [pytest.approx(2.0), pytest.approx(2.0)]
    assert cfg.device_epsilon == pytest.approx(2.0)


def test_a_device_is_histogram_vector_or_root_and_spends_epsilon_each_way():
    from shoal.common.privacy.events import ChoiceEvent
    cfg = derive_config(100_000, 10, 4, 2.0, seed=1)
    event = cfg.privacy_event
    r, h = cfg.root_share, cfg.hist_only_share
    assert isinstance(event, ChoiceEvent) and event.probabilities == ((1 - r) * h, (1 - r) * (1 - h), r)
    assert [local_epsilon(o) for o in event.options] == [2.0, 2.0, 2.0] and cfg.device_epsilon == 2.0


def test_identity_nettree_above_three_dimensions_sends_vector_reports():
    cfg = derive_config(100_000, 7, 10, 4.0, encoder="nettree", seed=1)
    assert cfg.identity_projection and cfg.eps_vec > 0


def test_unknown_event_raises_instead_of_guessing():
    with pytest.raises(PrivacyError):
        local_epsilon(object())


def test_same_config_gives_same_public_randomness():
    a = PublicRandomness.from_config(base(encoder="nettree"))
    b = PublicRandomness.from_config(base(encoder="nettree").with_overrides(round_id="x").with_overrides(round_id="local"))
    assert a.projection is not None and b.projection is not None
    assert np.array_equal(a.projection, b.projection)
    assert np.array_equal(a.shifts, b.shifts)
    assert np.array_equal(a.level_keys, b.level_keys)
    assert np.array_equal(a.hist_seeds, b.hist_seeds)


def test_different_seeds_give_different_public_randomness():
    a = PublicRandomness.from_config(base())
    b = PublicRandomness.from_config(base().with_overrides(seed=8))
    assert not np.array_equal(a.planes, b.planes)


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("k", 0, "k must be"),
        ("dim", 0, "dim must be"),
        ("epsilon", float("nan"), "epsilon must be"),
        ("encoder", "kd", "encoder must be"),
        ("model", "central", "model must be"),
        ("levels", 41, "levels must be"),
        ("proj_dim", 11, "proj_dim must be"),
        ("eps_hist", -1.0, "eps_hist must be"),
        ("eps_vec", 5.0, "must each be <= epsilon"),
        ("eps_hist", 4.000000001, "must each be <= epsilon"),
        ("eps_vec", 0.0, "needs levels > 0, eps_hist > 0 and eps_vec > 0"),
        ("hist_only_share", 1.0, "hist_only_share must be"),
        ("hist_only_share", -0.25, "hist_only_share must be"),
        ("hist_only_share", float("nan"), "hist_only_share must be"),
        ("hist_only_share", True, "hist_only_share must be"),
        ("root_share", -0.1, "root_share must be"),
        ("root_share", 1.0, "exactly when levels=0"),
        ("hist_buckets", 1, "hist_buckets must be"),
        ("hist_pool", 0, "hist_pool must be"),
        ("vec_columns_log2", 30, "vec_columns_log2 must be"),
        ("seed", -1, "seed must be"),
        ("n_expected", 0, "n_expected must be"),
        ("delta", 1.0, "delta must be"),
    ],
)
def test_rejects_invalid_parameter(field, value, match):
    with pytest.raises(ConfigError, match=match):
        base().with_overrides(**{field: value})


def test_rejects_tree_without_histogram_budget():
    with pytest.raises(ConfigError, match="needs eps_hist"):
        base(hist_only_share=0.0).with_overrides(eps_hist=0.0)


def test_rejects_two_reports_above_epsilon_together():
    with pytest.raises(ConfigError, match="exceeds epsilon"):
        base(hist_only_share=0.0).with_overrides(eps_vec=3.5)


def test_rejects_hist_only_share_in_a_mean_only_round():
    with pytest.raises(ConfigError, match="needs levels > 0"):
        derive_config(2_000, 100, 8, 1.0, seed=1).with_overrides(hist_only_share=0.5)


def test_rejects_box_of_wrong_dimension():
    with pytest.raises(ConfigError, match="box has 2 features"):
        base(bound=PublicBound(low=(0.0, 0.0), high=(1.0, 1.0)))


def test_rejects_bound_with_radius_and_box():
    with pytest.raises(ConfigError, match="either radius"):
        PublicBound(radius=1.0, low=(0.0,), high=(1.0,))


def test_rejects_empty_box_feature():
    with pytest.raises(ConfigError, match="feature 0"):
        PublicBound(low=(1.0,), high=(1.0,))


def test_rejects_invalid_tree_parameters():
    with pytest.raises(ConfigError, match="tree a"):
        TreeParams(a=0)


def test_config_is_immutable():
    cfg = base()
    with pytest.raises(AttributeError):
        cfg.k = 3  # type: ignore[misc]
    assert isinstance(cfg, RoundConfig)


def test_config_round_trips_through_json():
    import json

    from shoal.common.kinds.tree import config_from_dict, config_to_dict

    for cfg in (base(), base(encoder="nettree"), derive_config(1000, 2, 3, 1.0, bound=PublicBound(low=(0.0, 1.0), high=(2.0, 3.0)), seed=1)):
        back = config_from_dict(json.loads(json.dumps(config_to_dict(cfg))))
        assert back == cfg


def test_config_from_dict_rejects_garbage():
    from shoal.common.kinds.tree import config_from_dict

    with pytest.raises(ConfigError, match="not a round config"):
        config_from_dict({"k": 3})


def _shuffle_cfg(**kw):
    args = dict(model="shuffle", delta=1e-6, min_batch=100_000, seed=1) | kw
    return derive_config(1_000_000, 20, 4, 1.0, **args)


def test_shuffle_round_randomises_at_the_amplified_local_epsilon():
    from shoal.common.privacy.accounting import central_guarantee, max_local_epsilon

    cfg = _shuffle_cfg()
    assert cfg.epsilon == pytest.approx(max_local_epsilon(1.0, 1e-6, 100_000))
    assert cfg.epsilon > 5  # far less noise than a local eps=1 round
    assert cfg.eps_hist + cfg.eps_vec <= cfg.epsilon * (1 + 1e-9)
    eps, delta = central_guarantee(cfg.round_event)
    assert eps <= 1.0 + 2e-6 and delta == 1e-6


def test_a_tampered_shuffle_config_is_refused_by_whoever_loads_it():
    data = config_to_dict(_shuffle_cfg())
    data["central_epsilon"] = 0.5  # the published claim no longer follows from eps0 and min_batch
    with pytest.raises(ConfigError, match="does not give"):
        config_from_dict(data)
    data = config_to_dict(_shuffle_cfg())
    data["min_batch"] = 1000
    with pytest.raises(ConfigError, match="does not give"):
        config_from_dict(data)


@pytest.mark.parametrize("kw,match", [({"delta": 0.0}, "delta"), ({"min_batch": 1}, "min_batch"),
                                      ({"amplification_bound": "guess"}, "amplification")])
def test_rejects_invalid_shuffle_parameter(kw, match):
    with pytest.raises(ConfigError, match=match):
        _shuffle_cfg(**kw)


def test_local_round_refuses_shuffle_fields():
    with pytest.raises(ConfigError, match="shuffle rounds"):
        derive_config(1000, 4, 2, 2.0, delta=1e-6)


def test_given_report_budgets_keep_both_reports_per_tree_device():
    cfg = base(eps_hist=1.0, eps_vec=3.0)
    assert cfg.hist_only_share == 0.0 and cfg.device_epsilon == 4.0
