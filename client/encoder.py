"""The one-round device encoder (seed 004, Alg. 3; Sec. 5 for lsh).

A device maps its raw point into the unit ball with the round's public
bound. With probability root_share it is a root device and sends only a
root report: codebook PrivUnit (``privunit.py``: a nonce and the index of
one public candidate direction) of its ball point at the full epsilon, at
level 0 (the round's private mean). Every other device computes its path
through the round's node space and sends
- a histogram report: OLH (``local_hashing.py``) on its node at a level
  drawn uniformly from 1..T, with an OLH seed drawn from the public pool;
- a vector report: codebook PrivUnit at eps_vec of its ball point
  multiplied by H[r, c(node)], the Hadamard sign of its node's column c at
  a level drawn from 1..T and a uniform row r.
With hist_only_share h > 0 a tree device sends only one of the two: the
histogram report with probability h (a second Bernoulli draw right after
the root draw), else the vector report, each at its own eps (up to the
full epsilon: ``RoundConfig``).
The root choice, levels, seed indices and rows are drawn independently of
the point, so only the randomisers' outputs depend on it; the sign binding
costs no privacy because PrivUnit is eps-DP for *every* pair of inputs in
the ball.

Everything is vectorised over devices: ``encode_arrays`` is the hot path;
``encode``/``encode_batch`` give wire messages. ``encode_arrays(...,
wire=False)`` (simulations and benchmarks only) draws the decoded vector
report from its exact distribution instead of searching each device's
codebook (``privunit.sample_decoded``); such a batch cannot be sent.
Device randomness comes from OS entropy unless a Generator is passed
(simulations pass seeded ones for reproducibility).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from shoal.common.wire.models import DeviceMessage

from shoal.common.kinds.tree import RoundConfig
from shoal.common.kinds.tree_nets import node_space
from shoal.common.kinds.tree_randomness import PublicRandomness
from shoal.common.mechanisms.hadamard import hadamard_sign
from shoal.common.mechanisms.local_hashing import randomise_buckets
from shoal.common.mechanisms.privunit import sample_decoded, select
from shoal.common.randomness import device_random
from shoal.common.randomness.hashing import bucket_hash
from shoal.common.wire.messages import ReportBatch, device_json


def device_rng() -> np.random.Generator:
    """A Generator seeded from OS entropy (never from the round's public seed);
    the replayed bytes of a conformance vector inside ``device_random.replay``."""
    return device_random.generator()


def _column(keys: NDArray[np.uint64], log2_columns: int) -> NDArray[np.int64]:
    return (keys >> np.uint64(64 - log2_columns)).astype(np.int64)


def encode_arrays(
    points: NDArray[np.float64], config: RoundConfig, rng: np.random.Generator | None = None,
    wire: bool = True,
) -> ReportBatch:
    """Encode many devices' raw points (n, d) into a columnar ReportBatch
    (with ``wire=False`` a simulation batch: decoded vectors, no codebook indices)."""
    rng = rng if rng is not None else device_rng()
    x = config.bound.to_ball(points)
    if x.shape[1] != config.dim:
        raise ValueError(f"points have dim {x.shape[1]}, the round has dim {config.dim}")
    n = int(x.shape[0])
    public = PublicRandomness.from_config(config)
    space = node_space(config)
    t = config.levels
    paths = space.paths(x) if t > 0 else None

    def keys_at(levels: NDArray[np.int64]) -> NDArray[np.uint64]:
        """Each device's node key at its level (0 where the level is -1: no report)."""
        out = np.zeros(n, dtype=np.uint64)
        assert paths is not None
        for j in np.unique(levels[levels >= 0]):
            sel = levels == j
            out[sel] = space.keys(int(j), paths[int(j)][sel])
        return out

    # Root devices: a Bernoulli(root_share) draw from the device's own randomness.
    root = rng.random(n) < config.root_share if config.root_share < 1 else np.ones(n, dtype=bool)
    tree = ~root
    hist_dev, vec_dev = tree, tree
    if config.hist_only_share > 0:  # one report per tree device: a second data-independent draw
        hist_only = np.zeros(n, dtype=bool)
        hist_only[tree] = rng.random(int(tree.sum())) < config.hist_only_share
        hist_dev, vec_dev = hist_only, tree & ~hist_only
    hist_level = np.full(n, -1, dtype=np.int64)
    hist_seed = np.zeros(n, dtype=np.int64)
    hist_bucket = np.zeros(n, dtype=np.int64)
    hp = config.hist_params
    if hp is not None:
        m = int(hist_dev.sum())
        hist_level[hist_dev] = rng.integers(1, t + 1, size=m)
        hist_seed[hist_dev] = rng.integers(0, hp.pool, size=m)
        true_bucket = bucket_hash(public.hist_seeds[hist_seed[hist_dev]], keys_at(hist_level)[hist_dev], hp.buckets)
        hist_bucket[hist_dev] = randomise_buckets(true_bucket, hp, rng)

    vec_level = np.full(n, -1, dtype=np.int64)
    vec_row = np.zeros(n, dtype=np.int64)
    vec_nonce = np.zeros(n, dtype=np.uint64)
    vec_index = np.full(n, -1, dtype=np.int64)
    vp, rp = config.vec_params, config.root_params
    sends = (root if rp is not None else np.zeros(n, dtype=bool)) | (vec_dev if vp is not None else np.zeros(n, dtype=bool))
    vec = np.zeros((n, config.dim)) if (not wire and np.any(sends)) else np.zeros((n, 0))
    if np.any(sends):
        vec_level[root] = 0
        if vp is not None and t > 0:
            vec_level[vec_dev] = rng.integers(1, t + 1, size=int(vec_dev.sum()))
        vec_row[sends] = rng.integers(0, 1 << config.vec_columns_log2, size=int(sends.sum()))
        cols = np.zeros(n, dtype=np.int64)
        cols[root] = _column(space.keys(0, space.root()), config.vec_columns_log2)[0]
        if vp is not None and t > 0:
            cols[vec_dev] = _column(keys_at(np.where(vec_dev, vec_level, -1)), config.vec_columns_log2)[vec_dev]
        signs = hadamard_sign(vec_row, cols)
        for sel, params in ((root, rp), (vec_dev, vp)):
            if params is None or not np.any(sel):
                continue
            if wire:
                vec_nonce[sel], vec_index[sel] = select(x[sel] * signs[sel, None], params, public.vec_key, rng)
            else:  # a simulation folds the signs into its sampler (no signed copy)
                vec[sel] = sample_decoded(x[sel], params, rng, row_sign=signs[sel])
    return ReportBatch(
        config.round_id, hist_level, hist_seed, hist_bucket, vec_level, vec_row, vec,
        vec_nonce, vec_index,
    )


def encode_batch(
    points: NDArray[np.float64], config: RoundConfig, rng: np.random.Generator | None = None
) -> list[DeviceMessage]:
    """One wire message per device for many devices."""
    return encode_arrays(points, config, rng).to_messages()


def encode(
    point: NDArray[np.float64] | list[float],
    config: RoundConfig,
    rng: np.random.Generator | None = None,
) -> DeviceMessage:
    """The wire message of one device."""
    return encode_batch(np.asarray(point, dtype=np.float64)[None, :], config, rng)[0]


def tree_json(batch: ReportBatch, i: int = 0) -> str:
    """Report ``i`` of a wire batch as ``DeviceMessage``'s JSON, written without
    pydantic (``messages.device_json``; the server validates it with the model)."""
    if not batch.is_wire:
        raise ValueError("a simulation batch (decoded vectors, no codebook indices) cannot be sent")
    hist = vec = None
    if batch.hist_level[i] >= 0:
        hist = {"level": int(batch.hist_level[i]), "seed_index": int(batch.hist_seed[i]),
                "bucket": int(batch.hist_bucket[i])}
    if batch.vec_level[i] >= 0:
        vec = {"level": int(batch.vec_level[i]), "row": int(batch.vec_row[i]),
               "nonce": f"{int(batch.vec_nonce[i]):016x}", "index": int(batch.vec_index[i])}
    return device_json(batch.round_id, hist=hist, vec=vec)
