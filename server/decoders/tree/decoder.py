"""Decoding a round: private coreset, clustering, lifting (seed 004, Alg. 4).

``TreeDecoder`` implements the shared ``Decoder`` interface (``decoders/result.py``) (one method,
``decode(accumulator) -> ClusteringResult``), like Flower's strategies, so
the sketch and central decoders of later issues slot in beside it.

Steps, with what this decoder adds to the paper:
1. Build the net tree from the frequency oracle (Alg. 1-2, noise gate).
2. Make counts and vector sums consistent across levels (``consistency``):
   every level's reports about a cluster are combined by inverse variance
   and parent = sum of children holds. Nodes whose count is below the noise
   gate get the count-informed estimate "vector sum ~ 0" (|V| <= count).
3. Cluster the coreset (significant leaves, weighted by count): lattice
   points for nettree (an expanded leaf at its children's count-weighted
   points, ``placement.py``), estimated leaf means for lsh; or, with the round's
   ``tree.centers = "greedy"`` (nettree), seed 001's greedy on the tree's
   significant nodes, whose centers come in order (``greedy_centers.py``).
4. Lift (Alg. 4 lines 7-17): each center's sum and count are those of the
   maximal tree nodes whose significant leaves all went to it; nodes with
   no significant leaf follow their parent.
5. Never worse than the private mean by more than noise, by construction:
   the private mean comes from the root devices (PrivUnit at the full eps,
   sized in ``derive_config`` to within 3x the eps-LDP mean error). Each
   center is shrunk toward it by the positive-part James-Stein factor
   1 - noise / |center - mean|^2 (noise: vector-sum noise, or for identity
   nettree the count noise of its lattice cells), so a center made of noise
   collapses onto the mean. Then the answer must earn its place
   (``safety.certify``): from its own sums, counts and their noise variances the
   decoder estimates how much lower the answer's cost is than the mean's,
   corrected for the answer's dependence on the same noise. When that
   estimate is not shown positive, the mean replaces the lightest center:
   with the mean among the centers, no point is farther from its nearest
   center than from the mean, so the answer never costs more than the
   mean alone. The result says which, with the estimate and its standard
   deviation.

Over 300 lines: these steps are one pass from the accumulated reports to
the centers, each reading the previous one's arrays; split, the order and
the noise bookkeeping between them would have to be read across files.
"""

from __future__ import annotations

import time
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from shoal.common.clipping import clip_to_ball
from shoal.common.errors import DecodeError
from shoal.common.kinds.tree import RoundConfig
from shoal.common.kinds.tree_nets import LatticeNet, node_space
from shoal.common.kinds.tree_randomness import PublicRandomness
from shoal.common.picture import coreset_picture
from shoal.common.privacy.accounting import central_guarantee
from shoal.common.privacy.events import ComposedEvent, local_epsilon
from shoal.common.privacy.threats import local_guarantee, shuffled_guarantee
from shoal.server.decoders.kmeans import assign, weighted_kmeans
from shoal.server.decoders.quality import tree_quality
from shoal.server.decoders.result import ClusteringResult
from shoal.server.decoders.tree.accumulate import LevelAccumulator
from shoal.server.decoders.tree.consistency import tree_blue
from shoal.server.decoders.tree.greedy_centers import Coreset, coreset_of, ordered_centers
from shoal.server.decoders.tree.oracles import FrequencyOracle, VectorOracle
from shoal.server.decoders.tree.placement import place_coreset
from shoal.server.decoders.tree.safety import certify, lattice_safety_net
from shoal.server.decoders.tree.tree import NetTree, build_tree


def privacy_statement(config: RoundConfig) -> dict[str, Any]:
    """Machine-readable privacy of a round, built from the event records.

    ``device_epsilon`` is the local guarantee (what the server could learn
    if the shuffler colluded with it); ``central_epsilon``/``delta`` is the
    guarantee of the server's view, equal to it in the local model."""
    event = config.privacy_event
    *tree_options, root_option = event.options
    assert all(isinstance(o, ComposedEvent) for o in event.options)
    tree_events = [e for o in tree_options for e in cast(ComposedEvent, o).events]
    central_eps, delta = central_guarantee(config.round_event)
    one = len(tree_options) > 1
    out: dict[str, Any] = {
        "model": config.model,
        "device_epsilon": local_epsilon(event),
        "central_epsilon": central_eps,
        "delta": delta,
        "reports": [type(e).__name__ for e in tree_events],
        "report_epsilons": [local_epsilon(e) for e in tree_events],
        "root_report": {"event": [type(e).__name__ for e in cast(ComposedEvent, root_option).events],
                        "epsilon": local_epsilon(root_option), "share": config.root_share},
        "hist_only_share": config.hist_only_share,
        "composition": ("one report per device: a tree device sends its histogram report alone (a hist_only_share of "
                        "them) or its vector report alone; a root device sends only its root report") if one else
                       "basic within the tree's reports; a root device sends only its root report",
    }
    out["guarantees"] = [local_guarantee(out["device_epsilon"])]
    if config.model == "shuffle":
        out.update(batch_size_assumed=config.min_batch, amplification_bound=config.amplification_bound,
                   neighbouring="replace one device's input (FMT'21)")
        out["guarantees"].insert(0, shuffled_guarantee(central_eps, delta, config.min_batch))
    return out


class TreeDecoder:
    """Decoder for the ``lsh`` and ``nettree`` encoders."""

    def __init__(
        self,
        rng: np.random.Generator | None = None,
        restarts: int = 5,
        consistency: bool = True,
        shrink: bool = True,
        keep_coreset: bool = False,
        placement: bool = True,
    ) -> None:
        """``consistency``, ``placement`` and ``shrink`` switch off step 2, step 3's placement
        and step 5 (for ablations only);
        ``keep_coreset``: the last decode's coreset stays in ``coreset`` (benchmarks)."""
        self.rng = rng if rng is not None else np.random.default_rng()
        self.keep_coreset = keep_coreset
        self.coreset: Coreset | None = None
        self.restarts = restarts
        self.consistency = consistency
        self.shrink = shrink
        self.placement = placement

    def decode(self, accumulator: LevelAccumulator, consume: bool = False) -> ClusteringResult:
        """``consume``: overwrite the accumulator's vector table (one table in memory, not two)."""
        cfg = accumulator.config
        if accumulator.n_devices == 0:
            raise DecodeError(f"round {cfg.round_id!r} has no reports")
        t0 = time.perf_counter()
        public = PublicRandomness.from_config(cfg)
        space = node_space(cfg)
        vo = VectorOracle(accumulator, in_place=consume)
        n = float(accumulator.n_devices)
        root_key = space.keys(0, space.root())
        diag: dict[str, Any] = {"n_devices": int(n)}
        if cfg.levels == 0:
            v0, s0 = vo.sums(0, root_key)
            mean = clip_to_ball(v0 / n)
            centers = np.repeat(mean, cfg.k, axis=0)
            diag.update(tree_nodes=1, coreset_points=0, note="levels=0: private mean only",
                        mean_noise=cfg.dim * float(np.asarray(s0).ravel()[0]) / n**2)
            return self._result(cfg, centers, np.full(cfg.k, n / cfg.k), diag, t0)

        fo = FrequencyOracle(accumulator, public)
        tree = build_tree(space, fo, cfg)
        if self.consistency:
            counts, count_post = tree_blue(tree.parent, tree.level, tree.expanded, tree.count, tree.count_var)
        else:
            counts, count_post = tree.count.copy(), tree.count_var.copy()
        diag.update(
            tree_nodes=tree.size,
            nodes_per_level=np.bincount(tree.level).tolist(),
            count_noise_sd=[float(np.sqrt(tree.count_var[tree.level == j][0])) for j in range(1, cfg.levels + 1) if np.any(tree.level == j)],
        )
        core = tree.coreset_nodes()
        core = core[counts[core] > 0]
        if core.size == 0:
            core = np.zeros(1, dtype=np.int64)  # only the root: one cluster, the mean

        vec_sums = vec_q = None
        if vo.available and cfg.vec_params is not None:
            vec_sums, vec_q = self._vector_blue(tree, vo, counts, count_post)

        # Coreset positions.
        weights = np.maximum(counts, 0.0)
        pos_var: NDArray[np.float64] | None = None  # nettree: how far a position may be from its devices
        if isinstance(space, LatticeNet):
            pos = np.zeros((tree.size, space.dim))
            for j in range(cfg.levels + 1):
                sl = tree.level_slice(j)
                pos[sl] = space.position(j, tree.coords[j])
            # A node's devices lie in the unit ball (projected points are clipped into it) while a
            # coarse lattice point can sit up to ``space.reach(j)`` per axis outside it: the ball's
            # nearest point is closer to every point of the ball (it is convex), so to their mean.
            pos = clip_to_ball(pos)
            pos, pos_var = place_coreset(tree, space, core, pos, enabled=self.placement)
        else:
            assert vec_sums is not None and vec_q is not None
            if self.shrink:
                pos = self._leaf_means(tree, vec_sums, vec_q, weights, cfg.dim)
            else:
                pos = clip_to_ball(vec_sums / np.maximum(weights, 1.0)[:, None])
        diag["coreset_points"] = int(core.size)
        # The picture is drawn in the data's space: a projected nettree's lattice points live in the
        # d'-dim projection, so there the coreset is drawn at its nodes' vector means (as lsh's is).
        shown = pos
        if pos.shape[1] != cfg.dim:
            assert vec_sums is not None and vec_q is not None  # a projected nettree sends vector reports
            shown = self._leaf_means(tree, vec_sums, vec_q, weights, cfg.dim)
        # Lattice cells of the ball can lie outside a box's image: drawn inside the public domain, as centers are.
        picture = coreset_picture(cfg.bound.from_ball(cfg.bound.project_ball(shown[core])), weights[core])
        if cfg.tree.centers != "kmeans":  # seed 001 on the tree's nodes: ordered centers (``greedy_centers.py``)
            c_core, found = ordered_centers(tree.level, tree.significant, pos, weights, core, count_post, cfg)
            diag.update(found)
        else:
            c_core = weighted_kmeans(pos[core], weights[core], cfg.k, self.rng, restarts=self.restarts)
        if self.keep_coreset:
            self.coreset = coreset_of(tree, space, core, pos, weights, count_post, c_core)
        labels_core = assign(pos[core], c_core)
        kk = c_core.shape[0]
        labels, pure_top = self._propagate(tree, core, labels_core, kk)

        if vec_sums is not None and vec_q is not None:
            mean = clip_to_ball(vec_sums[:1] / n)[0]
            e0 = cfg.dim * float(vec_q[0]) / n**2
            sums = np.zeros((kk, cfg.dim))
            mass = np.zeros(kk)
            qsum = np.zeros(kk)
            np.add.at(sums, labels[pure_top], vec_sums[pure_top])
            # Unclamped consistent counts: clamping many quiet nodes at 0 would add up noise.
            np.add.at(mass, labels[pure_top], counts[pure_top])
            # Noise of the center: the subtrees that hold its significant nodes.
            # Nodes below the gate carry the |V| <= count bound, not noise.
            loud = pure_top[tree.significant[pure_top]]
            np.add.at(qsum, labels[loud], vec_q[loud])
            raw = sums / np.maximum(mass, 1.0)[:, None]
            err = cfg.dim * qsum / np.maximum(mass, 1.0) ** 2
            gap = ((raw - mean) ** 2).sum(1)
            with np.errstate(over="ignore"):  # a zero gap means "shrink fully"
                shrink = np.clip(1 - (err + e0) / np.maximum(gap, 1e-300), 0.0, 1.0)
            shrink[mass <= 0] = 0.0
            if not self.shrink:
                shrink = np.where(mass > 0, 1.0, 0.0)
            ball = mean + shrink[:, None] * (raw - mean)
            mass_var = np.zeros(kk)
            np.add.at(mass_var, labels[pure_top], tree.count_var[pure_top])
            delta = ball - mean
            # Centered sums S_c - n_c m and the noise of their projection on delta_c.
            centered = sums - mass[:, None] * mean
            proj_var = qsum * (delta**2).sum(1) + mass_var * ((delta * mean).sum(1)) ** 2
            # delta_c = shrink_c (S_c / n_c - m) reuses S_c's noise: E[delta_c . xi_c] = shrink_c d q_c / n_c.
            stein = 2 * shrink * cfg.dim * qsum / np.maximum(mass, 1.0)
            diag.update(shrink=shrink.tolist(), center_noise=err.tolist(), mean_noise=e0)
            ball = certify(ball, mean, mass, centered, proj_var, stein, diag, enabled=self.shrink)
        else:
            # Identity nettree: lattice points are positions in the ball.
            sums = np.zeros((kk, cfg.dim))
            mass = np.zeros(kk)
            leaf_ids = core
            lab = labels[leaf_ids]
            np.add.at(sums, lab, pos[leaf_ids] * weights[leaf_ids][:, None])
            np.add.at(mass, lab, weights[leaf_ids])
            overall = (pos[leaf_ids] * weights[leaf_ids][:, None]).sum(0) / max(weights[leaf_ids].sum(), 1e-300)
            ball = np.where(mass[:, None] > 0, sums / np.maximum(mass, 1e-300)[:, None], overall)
            if vo.available and cfg.root_params is not None:
                assert pos_var is not None
                ball = lattice_safety_net(pos_var, tree, vo, leaf_ids, lab, pos, weights, ball, mass, n, diag,
                                         counts=counts, enabled=self.shrink)
        if kk < cfg.k:
            fill = ball[np.argmax(mass)] if np.any(mass > 0) else np.zeros(cfg.dim)
            ball = np.vstack([ball, np.repeat(fill[None, :], cfg.k - kk, axis=0)])
            mass = np.concatenate([mass, np.zeros(cfg.k - kk)])
        return self._result(cfg, ball, mass, diag, t0, picture)

    def _vector_blue(
        self, tree: NetTree, vo: VectorOracle, counts: NDArray[np.float64], count_post: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Vector sums of every tree node, made consistent (module doc, step 2).

        A quiet node (count below the gate) gets the prior V ~ N(0, E[n_v^2] / d)
        per coordinate, since |V| <= n_v: E[n_v^2] = max(c, 0)^2 + P with c and
        P the consistent count and its error variance. The prior matters most
        for the empty siblings along a cluster's path: the parent's sum is
        child + sibling, so each sibling's variance adds to the center's noise.
        Issue 15: the earlier high-probability bound (c + 2 raw sd)^2 was ~4x
        the posterior second moment and roughly doubled the centers' noise on
        the paper generator (n=1e6, d=100, k=8, eps=1, lsh: center noise
        0.31-0.45 against 0.19-0.32; objective 0.233 against 0.197, seed 0).
        """
        y = np.zeros((tree.size, vo.dim))
        s = np.zeros(tree.size)
        for j in range(int(tree.level.max()) + 1):
            sl = tree.level_slice(j)
            y[sl], s[sl] = vo.sums(j, tree.keys[sl])
        if not self.consistency:
            return y, s
        # Count-informed estimate for nodes below the noise gate: |V| <= count.
        quiet = ~tree.significant
        second = np.maximum(counts, 0.0) ** 2 + np.maximum(count_post, 0.0)
        prior = np.clip(np.nan_to_num(second, nan=1e30, posinf=1e30), 1e-18, 1e30) / vo.dim
        s_q = np.clip(s[quiet], 1e-12, 1e30)
        y[quiet] *= (prior[quiet] / (prior[quiet] + s_q))[:, None]
        s[quiet] = prior[quiet] * s_q / (prior[quiet] + s_q)
        return tree_blue(tree.parent, tree.level, tree.expanded, y, s)

    @staticmethod
    def _leaf_means(
        tree: NetTree,
        sums: NDArray[np.float64],
        q: NDArray[np.float64],
        weights: NDArray[np.float64],
        dim: int,
    ) -> NDArray[np.float64]:
        """Node means V/n, each shrunk toward its parent's (James-Stein, top-down).

        A small fragment of a cluster has a noisy mean (variance d q / n^2);
        shrinking it toward its parent keeps such fragments from pulling
        centers of the coreset clustering far from the data.
        """
        raw = clip_to_ball(sums / np.maximum(weights, 1.0)[:, None])
        noise = dim * q / np.maximum(weights, 1.0) ** 2
        pos = raw.copy()
        for lev in range(1, int(tree.level.max()) + 1):
            kids = np.flatnonzero(tree.level == lev)
            base = pos[tree.parent[kids]]
            gap = ((raw[kids] - base) ** 2).sum(1)
            lam = np.clip(1 - noise[kids] / np.maximum(gap, 1e-300), 0.0, 1.0)
            pos[kids] = base + lam[:, None] * (raw[kids] - base)
        return pos

    @staticmethod
    def _propagate(
        tree: NetTree, core: NDArray[np.int64], labels_core: NDArray[np.int64], kk: int
    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Labels for every node and the maximal pure nodes (see module doc, step 4)."""
        n = tree.size
        w = np.zeros((n, kk))
        w[core, labels_core] = 1.0
        top = int(tree.level.max())
        for lev in range(top, 0, -1):
            kids = np.flatnonzero(tree.level == lev)
            np.add.at(w, tree.parent[kids], w[kids])
        labels = np.full(n, -1, dtype=np.int64)
        has = w.sum(1) > 0
        labels[has] = w[has].argmax(1)
        if labels[0] < 0:
            labels[0] = 0
        for lev in range(1, top + 1):
            kids = np.flatnonzero(tree.level == lev)
            nolab = kids[labels[kids] < 0]
            labels[nolab] = labels[tree.parent[nolab]]
        pure = (w > 0).sum(1) <= 1
        parent_pure = np.zeros(n, dtype=bool)
        parent_pure[1:] = pure[tree.parent[1:]]
        pure_top = np.flatnonzero(pure & ~parent_pure)
        return labels, pure_top

    def _result(
        self,
        cfg: RoundConfig,
        ball: NDArray[np.float64],
        sizes: NDArray[np.float64],
        diag: dict[str, Any],
        t0: float,
        picture: dict[str, Any] | None = None,
    ) -> ClusteringResult:
        ball = cfg.bound.project_ball(ball)  # into the public domain (also the unit ball), before the finiteness check
        if not (np.isfinite(ball).all() and np.isfinite(sizes).all()):
            raise DecodeError(f"round {cfg.round_id!r}: decoding produced non-finite centers (too few reports?)")
        diag["decode_seconds"] = time.perf_counter() - t0
        return ClusteringResult(
            centers=cfg.bound.from_ball(ball),
            ball_centers=ball,
            sizes=sizes,
            privacy=privacy_statement(cfg),
            diagnostics=diag,
            quality=tree_quality(cfg, ball, diag),
            picture=picture,
        )
