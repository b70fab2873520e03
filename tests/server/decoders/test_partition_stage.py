"""The central partition stage's bucket gate (server/decoders/central/partition_stage.py): a bucket
keeps its mean only with as many noisy points as NOISE_GATE sds of the stage's reference size noise
(kinds.central.reference_size_sd) ask, even where the released size's own noise is smaller."""

import math

import numpy as np

from shoal.common.kinds.central import reference_size_sd
from shoal.common.kinds.partition import NOISE_GATE
from shoal.server.decoders.central.noisy_average import calibrate
from shoal.server.decoders.central.partition_stage import _kept


def test_a_bucket_needs_the_points_the_reference_gate_asks_though_its_size_is_less_noisy():
    avg = calibrate(6, 0.5, 1e-6, releases=40)
    own = NOISE_GATE * math.sqrt(avg.size_var_at(9))
    reference = NOISE_GATE * reference_size_sd(0.5, 9, 40)
    assert own < reference / 2  # the sizes are a coordinate of the Gaussian sum: far less noisy
    sizes = np.array([(own + reference) / 2, reference * 1.01, reference * 1.01])
    means = np.zeros((3, 6))
    means[2] = np.nan  # no mean (noisy size below one when released)
    assert _kept(means, sizes, avg, 9).tolist() == [False, True, False]
