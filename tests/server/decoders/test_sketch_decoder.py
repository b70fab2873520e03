"""SketchDecoder behind the Decoder interface: local and shuffle-model
rounds decoded from accumulated reports, merge = one pass, SNR reported,
privacy statements built from the event records."""

import numpy as np
import pytest

from shoal.client.sketch_encoder import sketch_messages, sketch_shares
from shoal.common.bounds import PublicBound
from shoal.common.errors import DecodeError
from shoal.common.kinds.sketch import derive_sketch_round
from shoal.common.mechanisms.sketch import exact_sketch, noise_variance
from shoal.common.wire.models import sketch_rows
from shoal.server.decoders.kmeans import kmeans_cost, weighted_kmeans
from shoal.server.decoders.result import Decoder
from shoal.server.decoders.sketch.decoder import SketchAccumulator, SketchDecoder


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    mu = np.array([[2.0, 0.0, 0.0], [-1.0, 2.0, 0.0], [0.0, -2.0, 1.5]])
    return mu[rng.integers(0, 3, n)] + 0.3 * rng.standard_normal((n, 3))


def _relative(x, centers):
    lloyd = weighted_kmeans(x, np.ones(len(x)), 3, np.random.default_rng(0), restarts=2)
    return kmeans_cost(x, centers) / kmeans_cost(x, lloyd)


def test_sketch_decoder_follows_the_decoder_interface():
    decoder: Decoder[SketchAccumulator] = SketchDecoder(seed=0)
    assert callable(decoder.decode)


def test_local_round_of_devices_with_many_records_is_decoded():
    x = _data(50_000)
    cfg = derive_sketch_round(50_000, 3, 3, 1.0, bound=PublicBound(radius=5.0), seed=2)
    acc = SketchAccumulator(cfg)
    acc.add_sketches(sketch_rows(sketch_messages(x, np.full(50, 1000), cfg, np.random.default_rng(1)), cfg.sketch))
    res = SketchDecoder(seed=0).decode(acc)
    assert res.centers.shape == (3, 3) and res.sizes.sum() == pytest.approx(50_000)
    assert _relative(x, res.centers) < 1.2
    dg = res.diagnostics
    assert dg["devices"] == 50 and dg["records"] == 50_000
    z2 = float(np.sum(np.abs(exact_sketch(cfg.bound.to_ball(x), cfg.omega())) ** 2))
    predicted = z2 / noise_variance(cfg.sketch, np.full(50, 1000), z2)  # seed 002, Eq. 6 with the true ||z||^2
    assert dg["snr_estimated"] == pytest.approx(predicted, rel=0.3)
    assert res.privacy["device_epsilon"] == 1.0 and res.privacy["model"] == "local"


def test_accumulators_merge_like_one_pass():
    x = _data(2000)
    cfg = derive_sketch_round(2000, 3, 3, 1.0, bound=PublicBound(radius=5.0), seed=2)
    rows = sketch_rows(sketch_messages(x, np.full(20, 100), cfg, np.random.default_rng(1)), cfg.sketch)
    one, a, b = SketchAccumulator(cfg), SketchAccumulator(cfg), SketchAccumulator(cfg)
    one.add_sketches(rows)
    a.add_sketches(rows[:7])
    b.add_sketches(rows[7:])
    a.merge(b)
    assert np.allclose(a.weighted, one.weighted) and np.array_equal(a.counts(), one.counts())
    assert a.messages == one.messages == 20


def test_shuffle_round_is_decoded_from_shares_with_central_noise():
    """20,000 one-record devices at central eps = 1: near the non-private
    answer, where the same devices' local sketches are noise."""
    x = _data(20_000, seed=3)
    kw = dict(bound=PublicBound(radius=5.0), seed=2)
    cfg = derive_sketch_round(20_000, 3, 3, 1.0, model="shuffle", delta=1e-6, min_devices=5000, **kw)
    acc = SketchAccumulator(cfg)
    shares = sketch_shares(x, cfg, np.random.default_rng(4))
    acc.add_shares(shares[: 10_000])
    acc.add_shares(shares[10_000:])
    res = SketchDecoder(seed=0).decode(acc)
    assert res.diagnostics["devices"] == 20_000
    assert res.privacy["device_epsilon"] is None and res.privacy["central_epsilon"] == 1.0
    shuffle_rel = _relative(x, res.centers)
    assert shuffle_rel < 1.5
    local = derive_sketch_round(20_000, 3, 3, 1.0, **kw)
    lacc = SketchAccumulator(local)
    lacc.add_sketches(sketch_rows(sketch_messages(x, np.ones(20_000, dtype=np.int64), local, np.random.default_rng(5)),
                                  local.sketch))
    lres = SketchDecoder(seed=0).decode(lacc)
    assert lres.diagnostics["snr_estimated"] < 1 < res.diagnostics["snr_estimated"]
    assert _relative(x, lres.centers) > 2 * shuffle_rel


def test_a_round_without_reports_is_refused():
    cfg = derive_sketch_round(100, 3, 3, 1.0, bound=PublicBound(radius=5.0), seed=2)
    with pytest.raises(DecodeError, match="no reports"):
        SketchDecoder(seed=0).decode(SketchAccumulator(cfg))


def test_missing_shares_fail_loudly():
    x = _data(3000)
    cfg = derive_sketch_round(3000, 3, 3, 1.0, bound=PublicBound(radius=5.0), seed=2, model="shuffle",
                              delta=1e-6, min_devices=1000)
    acc = SketchAccumulator(cfg)
    acc.add_shares(sketch_shares(x, cfg, np.random.default_rng(4)).reshape(-1, 2 * cfg.sketch.size + 1)[1:])
    with pytest.raises(DecodeError, match="missing"):
        SketchDecoder(seed=0).decode(acc)


def test_a_sketch_verdict_follows_its_snr():
    """Many records per device: SNR high, the verdict says clusters. One
    record per device at eps=0.1: SNR x m/(kd) far below 50, and the verdict
    says the centers are likely noise instead of returning them silently."""
    x = _data(50_000)
    cfg = derive_sketch_round(50_000, 3, 3, 1.0, bound=PublicBound(radius=5.0), seed=2)
    acc = SketchAccumulator(cfg)
    acc.add_sketches(sketch_rows(sketch_messages(x, np.full(50, 1000), cfg, np.random.default_rng(1)), cfg.sketch))
    good = SketchDecoder(seed=0).decode(acc).quality
    assert good["answer"] == "clusters" and good["snr_times_m_over_kd"] >= 50
    weak_cfg = derive_sketch_round(2000, 3, 3, 0.1, bound=PublicBound(radius=5.0), seed=2)
    weak = SketchAccumulator(weak_cfg)
    weak.add_sketches(sketch_rows(sketch_messages(x[:2000], np.ones(2000, dtype=int), weak_cfg,
                                                  np.random.default_rng(1)), weak_cfg.sketch))
    bad = SketchDecoder(seed=0).decode(weak).quality
    assert bad["snr_times_m_over_kd"] < 50
    assert bad["answer"] == "unreliable sketch" and not bad["clusters_found"] and "likely noise" in bad["verdict"]
