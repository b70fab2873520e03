"""Central rounds' public parameters (common/kinds/central.py): what is derived
from public numbers, the event record, and one test per invalid parameter."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError, PrivacyError
from shoal.common.kinds.central import (
    ALGORITHMS,
    PARTITION_MIN_BITS,
    STAGE_UNITS,
    CuratorEvent,
    PartitionStage,
    central_from_dict,
    central_to_dict,
    choose_algorithm,
    curator_guarantee,
    derive_central,
    derive_central_round,
    grid_sides,
    partition_bits,
    projection_dim,
    su_iterations,
)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize(("n", "dim"), [(10_000, 2), (20_000, 16), (1_000_000, 100)])
def test_a_central_run_spends_exactly_its_budget(algorithm, n, dim):
    spec = derive_central(algorithm, n, dim, 8, 1.0, 1e-6)
    eps, delta = curator_guarantee(spec.event())
    assert eps <= 1.0 + 1e-12 and eps > 0.99  # the count's exact rational scale may leave a sliver
    assert delta <= 1e-6 * (1 + 1e-12)


def test_a_census_is_part_of_the_budget():
    spec = derive_central("maxcover-000", 50_000, 20, 5, 2.0, 1e-6, census_epsilon=0.02)
    assert spec.event().census_epsilon == 0.02
    assert curator_guarantee(spec.event())[0] <= 2.0 + 1e-12


def test_the_greedy_uses_seed_003s_lemma_6_step():
    spec = derive_central("maxcover-003", 10_000, 2, 4, 1.0, 1e-6)
    c = spec.cover
    assert c.rule == "seed003-lemma6"
    assert c.beta == pytest.approx(c.epsilon / (2 * math.log(math.e / c.delta)))


def test_seed_003_unprojected_ends_with_su_et_al_s_count_of_lloyd_steps_for_kmeans():
    """Su et al.'s rule: eps / eps_m clamped to [2, 7] (the overlapping set n = 23,000, d = 6,
    k = 5: eps_m = 0.204, so 2 steps at eps 0.5, 4 at eps 1, 7 at eps 4); half of eps to the lift."""
    spec = derive_central("maxcover-003", 10_000, 2, 4, 1.0, 1e-6)
    assert spec.proj_dim == 2 and spec.lift_steps == 7
    assert spec.cover.epsilon == pytest.approx(0.3)
    assert spec.count_epsilon == pytest.approx(0.2, rel=1e-3) and spec.lift_epsilon == pytest.approx(0.5, rel=1e-3)
    steps = [derive_central("maxcover-003", 23_000, 6, 5, eps, 1e-6).lift_steps for eps in (0.5, 1.0, 4.0)]
    assert steps == [2, 4, 7]
    assert su_iterations(23_000, 6, 5, 0.05) == 2 and su_iterations(23_000, 6, 5, 40.0) == 7


def test_a_projected_run_takes_as_many_lift_steps_as_one_release_s_noise_allows():
    """Each step's release must still find the clusters: at eps 0.5 on 10,000 points in
    d = 100 one step's noise is all there is room for; more budget or more points, more steps."""
    assert [derive_central("gridhist", 10_000, 100, 8, eps, 1e-6).lift_steps for eps in (0.5, 1.0, 4.0)] == [1, 2, 2]
    assert derive_central("gridhist", 100_000, 100, 8, 0.5, 1e-6).lift_steps == 2
    assert derive_central("gridhist", 50_000, 100, 64, 1.0, 1e-6).lift_steps == 1
    assert derive_central("greedy-001", 100_000, 100, 8, 4.0, 1e-6).lift_steps == 1


def test_a_run_s_record_holds_one_lift_entry_over_all_its_steps():
    spec = derive_central("gridhist", 10_000, 100, 8, 4.0, 1e-6)
    event = spec.event()
    assert event.lift_steps == 2 and event.lift_epsilons == (spec.lift_epsilon,)
    assert event.lift_deltas == (spec.lift_delta,)


@pytest.mark.parametrize("eps,deltas,steps", [((0.1, 0.1), (1e-7, 1e-7), 2), ((0.1,), (1e-7,), 0), ((), (), 1)])
def test_a_curator_record_refuses_a_lift_that_is_not_one_entry_over_its_steps(eps, deltas, steps):
    with pytest.raises(PrivacyError, match="one \\(eps, delta\\) over its"):
        CuratorEvent("gridhist", "threshold-gaussian", 0.1, 1e-7, 0.1, eps, deltas, lift_steps=steps)


def test_seed_003_unprojected_kmedian_spends_half_on_the_greedy_and_half_on_the_counts():
    spec = derive_central("maxcover-003", 10_000, 2, 4, 1.0, 1e-6, objective="kmedian")
    assert spec.proj_dim == 2 and spec.lift_steps == 0
    assert spec.cover.epsilon == pytest.approx(0.5) and spec.count_epsilon == pytest.approx(0.5, rel=1e-3)


def test_projection_follows_seed_000s_experiments_and_never_raises_the_dimension():
    assert projection_dim(1_000_000, 100) == 7  # ceil(ln(1e6) / 2)
    assert projection_dim(10_000, 100) == 5
    assert projection_dim(1_000_000, 3) == 3


def test_grids_run_fine_to_coarse_from_radius_about_one_over_n_to_the_whole_ball():
    sides = grid_sides(10_000, 5)
    assert sides[-1] == 2.0 and all(a < b for a, b in zip(sides, sides[1:], strict=False))
    assert sides[0] * math.sqrt(5) / 2 <= 2 / 10_000


def test_auto_runs_seed_003_unprojected_in_low_dimension_and_the_partition_stage_above_it():
    assert choose_algorithm(100_000, 2) == "maxcover-003"
    assert choose_algorithm(100_000, 16) == "lsh-partition"
    assert derive_central("auto", 100_000, 16, 26, 1.0, 1e-6).algorithm == "lsh-partition"


def test_auto_takes_the_partition_stage_for_k_means_above_two_dimensions_projected_or_not():
    # d = 6 <= d' = ceil(ln(23,000) / 2) = 6: nothing would be projected; the partition stage never
    # projects (issue 41: the overlapping clusters 0.0801 -> 0.0773 at eps 0.5, letter 0.0570 -> 0.0456).
    assert projection_dim(23_000, 6) == 6
    assert choose_algorithm(23_000, 6) == "lsh-partition"
    assert choose_algorithm(23_000, 3) == "lsh-partition"
    assert choose_algorithm(23_000, 32) == "lsh-partition"
    assert choose_algorithm(1_000_000, 100) == choose_algorithm(23_000, 33) == "gridhist"  # above PARTITION_AUTO_MAX_DIM
    spec = derive_central("auto", 23_000, 6, 5, 0.5, 1e-6)
    assert spec.algorithm == "lsh-partition" and spec.proj_dim == 6 and spec.partition is not None


def test_auto_keeps_seed_003_for_k_median_wherever_nothing_is_projected():
    assert choose_algorithm(23_000, 6, "kmedian") == "maxcover-003"
    spec = derive_central("auto", 23_000, 6, 5, 1.0, 1e-6, objective="kmedian")
    assert spec.algorithm == "maxcover-003" and spec.lift_steps == 0
    assert choose_algorithm(100_000, 16, "kmedian") == "gridhist"  # projected: k-median is refused there


def test_a_central_config_parses_back_to_itself():
    cfg = derive_central_round(5000, 12, 3, 1.0, 1e-6, PublicBound(low=(0.0,) * 12, high=(1.0,) * 12), seed=9)
    assert central_from_dict(central_to_dict(cfg)) == cfg


def test_a_partition_run_is_one_noisy_average_budget_of_units():
    """The mean, the partition and the Lloyd steps take units of one budget: the record's lift is
    the whole (eps, delta) over all the units, cover and counts spend nothing."""
    spec = derive_central("lsh-partition", 23_000, 6, 5, 1.0, 1e-6, seed=4)
    stage = spec.partition
    assert stage is not None and stage.bits >= PARTITION_MIN_BITS
    assert (stage.mean_units, stage.partition_units) == STAGE_UNITS[:2]
    assert stage.steps == su_iterations(23_000, 6, 5, 1.0) == spec.lift_steps
    assert stage.units == STAGE_UNITS[0] + STAGE_UNITS[1] + stage.steps * round(STAGE_UNITS[2] / stage.steps)
    event = spec.event()
    assert event.lift_steps == stage.units and event.cover_epsilon == event.cover_delta == event.count_epsilon == 0
    assert curator_guarantee(event) == (1.0, 1e-6)


def test_a_partition_run_with_a_census_spends_what_the_census_leaves():
    spec = derive_central("lsh-partition", 23_000, 6, 5, 1.0, 1e-6, census_epsilon=0.02)
    eps, delta = curator_guarantee(spec.event())
    assert eps <= 1.0 and delta <= 1e-6 and spec.lift_epsilon <= 0.98


def test_a_partition_config_parses_back_to_itself_and_others_publish_no_stage():
    bound = PublicBound(low=(0.0,) * 6, high=(1.0,) * 6)
    cfg = derive_central_round(23_000, 6, 5, 1.0, 1e-6, bound, algorithm="lsh-partition", seed=2)
    assert central_from_dict(central_to_dict(cfg)) == cfg
    assert central_to_dict(cfg)["spec"]["partition"]["bits"] == cfg.spec.partition.bits
    assert "partition" not in central_to_dict(derive_central_round(23_000, 6, 5, 1.0, 1e-6, bound,
                                                                  algorithm="gridhist"))["spec"]


def test_partition_bits_keep_at_least_64_buckets_and_two_per_cluster():
    assert partition_bits(1000, 5, 500.0) == PARTITION_MIN_BITS
    assert partition_bits(1000, 200, 500.0) == 9  # ceil(log2 200) + 1
    assert partition_bits(10**9, 5, 1.0) == 10  # the noise allows more, the cap stops it


@pytest.mark.parametrize("field,value", [("bits", 0), ("bits", 11), ("mean_units", 0), ("partition_units", 0),
                                         ("step_units", 0), ("steps", 0), ("steps", 1.0), ("bits", True)])
def test_a_partition_stage_refuses_invalid_parameter(field, value):
    good = {"bits": 6, "mean_units": 1, "partition_units": 9, "step_units": 15, "steps": 2}
    with pytest.raises(ConfigError, match=f"{field} must be|bits must be in"):
        PartitionStage(**{**good, field: value})


def test_a_partition_stage_goes_with_the_partition_algorithm_only():
    spec = derive_central("lsh-partition", 23_000, 6, 5, 1.0, 1e-6)
    with pytest.raises(ConfigError, match="goes with the lsh-partition algorithm only"):
        replace(spec, algorithm="gridhist")
    with pytest.raises(ConfigError, match="goes with the lsh-partition algorithm only"):
        replace(spec, partition=None)


def test_a_partition_spec_refuses_a_cover_or_counts_of_its_own():
    spec = derive_central("lsh-partition", 23_000, 6, 5, 1.0, 1e-6)
    with pytest.raises(ConfigError, match="releases are all its lift's"):
        replace(spec, count_epsilon=0.1)
    with pytest.raises(ConfigError, match="releases are all its lift's"):
        replace(spec, cover=replace(spec.cover, epsilon=0.1))
    with pytest.raises(ConfigError, match="takes its stage's 4 Lloyd steps"):
        replace(spec, lift_steps=3)


def test_derive_refuses_the_partition_algorithm_for_k_median_or_a_projection():
    with pytest.raises(ConfigError, match="unprojected k-means"):
        derive_central("lsh-partition", 23_000, 6, 5, 1.0, 1e-6, objective="kmedian")
    with pytest.raises(ConfigError, match="unprojected k-means"):
        derive_central("lsh-partition", 23_000, 6, 5, 1.0, 1e-6, proj_dim=3)


def test_a_partition_record_that_spends_on_a_cover_has_no_guarantee():
    with pytest.raises(PrivacyError, match="spends only its lift's budget"):
        curator_guarantee(CuratorEvent("lsh-partition", "lift-units", 0.1, 0.0, 0.0, (0.9,), (1e-6,), lift_steps=42))


def test_an_unknown_greedy_rule_has_no_guarantee():
    with pytest.raises(PrivacyError, match="no privacy rule"):
        curator_guarantee(CuratorEvent("maxcover-000", "made-up", 0.1, 1e-7, 0.1, (), ()))


def test_a_spec_refuses_a_record_of_other_lift_steps_than_it_was_derived_for():
    spec = derive_central("maxcover-000", 10_000, 20, 4, 1.0, 1e-6, lift_steps=2)
    with pytest.raises(PrivacyError, match="takes 2 lift steps, not 1"):
        spec.event(1)


def test_derive_refuses_an_unknown_algorithm():
    with pytest.raises(ConfigError, match="unknown central algorithm 'kmeans'"):
        derive_central("kmeans", 1000, 2, 2, 1.0, 1e-6)


def test_derive_refuses_a_non_positive_epsilon():
    with pytest.raises(ConfigError, match="epsilon must be finite and > 0, got 0"):
        derive_central("maxcover-000", 1000, 2, 2, 0.0, 1e-6)


def test_derive_refuses_delta_outside_zero_one():
    with pytest.raises(ConfigError, match="delta must be in \\(0, 1\\), got 1"):
        derive_central("maxcover-000", 1000, 2, 2, 1.0, 1.0)


def test_derive_refuses_k_zero():
    with pytest.raises(ConfigError, match="k=0"):
        derive_central("maxcover-000", 1000, 2, 0, 1.0, 1e-6)


def test_derive_refuses_a_projection_dimension_above_the_data_dimension():
    with pytest.raises(ConfigError, match=r"projection dimension must be in \[1, dim = 3\], got 4"):
        derive_central("greedy-001", 1000, 3, 2, 1.0, 1e-6, proj_dim=4)


def test_an_unprojected_greedy_run_needs_no_lift():
    spec = derive_central("greedy-001", 10_000, 100, 8, 1.0, 1e-6, proj_dim=100)
    assert spec.proj_dim == 100 and spec.lift_steps == 0 and spec.lift_epsilon == 0.0


def test_derive_refuses_a_census_that_takes_the_whole_budget():
    with pytest.raises(ConfigError, match="census epsilon must be in \\[0, epsilon\\), got 1.0 of 1.0"):
        derive_central("maxcover-000", 1000, 2, 2, 1.0, 1e-6, census_epsilon=1.0)


def test_derive_refuses_a_split_that_does_not_sum_to_one():
    with pytest.raises(ConfigError, match="budget split"):
        derive_central("maxcover-000", 1000, 20, 2, 1.0, 1e-6, split=(0.5, 0.5, 0.5))


def test_a_projected_run_needs_a_lift():
    with pytest.raises(ConfigError, match="needs a lift step"):
        derive_central("maxcover-000", 100_000, 50, 2, 1.0, 1e-6, lift_steps=0)


def test_a_round_refuses_a_spec_for_another_k():
    cfg = derive_central_round(5000, 3, 3, 1.0, 1e-6, PublicBound(radius=1.0))
    with pytest.raises(ConfigError, match="spec is for k=3"):
        type(cfg)(cfg.round_id, 4, 3, 5000, cfg.bound, cfg.spec)


def test_derive_refuses_an_unknown_objective():
    with pytest.raises(ConfigError, match="unknown objective 'kcenter'"):
        derive_central("maxcover-003", 1000, 2, 2, 1.0, 1e-6, objective="kcenter")


def test_gridhist_sets_its_cover_so_an_average_cluster_clears_the_threshold():
    from shoal.common.kinds.central import HIST_GAP

    for n, k, eps in [(10_000, 8, 1.0), (50_000, 64, 1.0), (20_000, 26, 4.0)]:
        spec = derive_central("gridhist", n, 100, k, eps, 1e-6)
        share = spec.cover.epsilon / eps
        assert 0.1 <= share <= 0.5
        assert spec.cover.histogram is not None
        if 0.1 < share < 0.5:  # the least share (to 0.01) whose threshold is at most n / (HIST_GAP k)
            assert spec.cover.histogram.threshold <= n / (HIST_GAP * k)
            less = derive_central("gridhist", n, 100, k, eps, 1e-6,
                                  split=(share - 0.01, 0.05, 1 - share + 0.01 - 0.05))
            assert less.cover.histogram is not None and less.cover.histogram.threshold > n / (HIST_GAP * k)


def test_a_histogram_record_whose_noise_overspends_its_delta_has_no_guarantee():
    spec = derive_central("gridhist", 10_000, 20, 4, 1.0, 1e-6)
    noise = spec.cover.histogram
    assert noise is not None
    weak = replace(spec.event(), cover_histogram=replace(noise, threshold=noise.threshold // 2))
    with pytest.raises(PrivacyError, match="gives delta"):
        curator_guarantee(weak)


def test_a_histogram_rule_without_its_noise_has_no_guarantee():
    spec = derive_central("gridhist", 10_000, 20, 4, 1.0, 1e-6)
    with pytest.raises(PrivacyError, match="no privacy rule"):
        curator_guarantee(replace(spec.event(), cover_histogram=None))


def test_a_cover_refuses_a_histogram_rule_without_noise_and_noise_without_the_rule():
    spec = derive_central("gridhist", 10_000, 20, 4, 1.0, 1e-6)
    with pytest.raises(ConfigError, match="do not go together"):
        replace(spec.cover, histogram=None)
    with pytest.raises(ConfigError, match="do not go together"):
        replace(spec.cover, rule="seed003-lemma6")


def test_a_cover_refuses_noise_for_another_number_of_levels():
    spec = derive_central("gridhist", 10_000, 20, 4, 1.0, 1e-6)
    with pytest.raises(ConfigError, match="levels for"):
        replace(spec.cover, sides=spec.cover.sides[1:])


@pytest.mark.parametrize("records", [0, 65, 2.5])
def test_a_central_round_refuses_records_per_device_outside_one_to_64(records):
    cfg = derive_central_round(5000, 12, 3, 1.0, 1e-6, PublicBound(radius=1.0))
    with pytest.raises(ConfigError, match="records_per_device must be"):
        replace(cfg, records_per_device=records)


def test_a_devices_records_together_get_the_group_privacy_guarantee():
    one = derive_central_round(5000, 12, 3, 1.0, 1e-6, PublicBound(radius=1.0))
    four = derive_central_round(5000, 12, 3, 1.0, 1e-6, PublicBound(radius=1.0), records_per_device=4)
    eps, delta = curator_guarantee(four.event)
    assert one.device_guarantee() == curator_guarantee(one.event)
    assert four.device_guarantee() == pytest.approx((4 * eps, 4 * math.exp(3 * eps) * delta))
    assert four.spec.cover.sides == one.spec.cover.sides  # the grid schedule is for n_expected x records
    assert four.decode_bytes() == 4 * one.decode_bytes()
