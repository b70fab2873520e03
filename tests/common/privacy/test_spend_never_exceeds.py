"""Issue 41, Build 1: a composed spend never exceeds the request, not even by 1e-8.

A property test over a grid of (n, d, k, eps, delta, model, refine). Every
cell derives its rounds' configs the way the product does (``shoal
simulate``'s split and derive calls, the service's ``derive_*`` and
``deploy.notebook.central.fit``'s census), without encoding a device, then composes
the published statement with the product's own functions
(``central_guarantee`` on the round events, ``RoundsEvent`` for a family,
``curator_guarantee`` / ``privacy_statement`` for a curator,
``local_refine_statement``, ``partition_statement``) and compares it with
the request using ``<=``: no tolerance. Whatever the mechanisms spend inside
a round but the statement does not show (a secure sum's or a lift's delta
terms) is compared with the round's stated delta the same way.

A cell the product refuses to derive (``ConfigError``: a secure sum's modulus
too large for 100 n devices, local refine blocks over the cap) spends
nothing; refusals are counted, and most cells must derive.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from shoal.common.bounds import PublicBound
from shoal.common.errors import ConfigError
from shoal.common.kinds.central import curator_guarantee, derive_central, derive_central_round
from shoal.common.kinds.elbow import derive_elbow, elbow_budget
from shoal.common.kinds.local_refine import derive_local_refine
from shoal.common.kinds.partition import REFINE_SPLIT, derive_partition
from shoal.common.kinds.partition_plan import plan_partition_stage, plan_refine_chain
from shoal.common.kinds.refine import derive_refine, first_round
from shoal.common.kinds.tree import derive_config
from shoal.common.mechanisms.exact_sampling import laplace_scale_fraction
from shoal.common.mechanisms.secure_sum import DEFAULT_LAW
from shoal.common.privacy.accounting import central_guarantee
from shoal.common.privacy.events import RoundsEvent
from shoal.deploy.notebook.central import CENSUS_SHARE
from shoal.deploy.simulation.simulate import refine_epsilon, refine_share_of_devices, round_budget
from shoal.server.decoders.central.noisy_average import calibrate, spent_delta
from shoal.server.decoders.central.pipeline import privacy_statement as curator_statement
from shoal.server.decoders.local_refine import local_refine_statement
from shoal.server.decoders.partition import partition_statement
from shoal.server.decoders.tree.decoder import privacy_statement as tree_statement

NS = (1_000, 10_000, 100_000, 1_000_000)
DS = (2, 10, 100)
KS = (2, 8, 16)
EPSILONS = (0.1, 0.5, 1.0, 1.3, 2.0, 4.0, 8.0, 1 / 3, 0.7, 2.9)
DELTAS = (1e-6, 1e-8, 1e-5 / 3)
REFINES = ("none", "auto", "explicit")
EXPLICIT_SHARE = 0.3  # "explicit": this share of eps (shuffle), of the devices (local), or 3 lift steps (central)
BOUND = PublicBound(radius=1.0)
# (what, eps, delta) against the request, or (what, eps, delta, eps cap, delta cap) against a round's own claim
Part = tuple[Any, ...]


def shape(n: int, d: int) -> np.ndarray:
    """An (n, d) array that holds no memory: the derive paths read only its shape."""
    return np.broadcast_to(np.zeros(1), (n, d))


def parent_centers(k: int, d: int) -> np.ndarray:
    """A parent round's k ball centers (their values spend nothing)."""
    return np.zeros((k, d))


def local_cell(n: int, d: int, k: int, eps: float, delta: float, refine: str) -> list[Part]:
    """``shoal simulate --model local``: a tree round, or with a refine a tree on
    1 - share of the devices and a local refine round on the rest (``fresh_devices``)."""
    share = 0.0 if refine == "none" else refine_share_of_devices("auto" if refine == "auto" else EXPLICIT_SHARE,
                                                                  shape(n, d), k, eps)
    tree = derive_config(max(1, n - int(share * n)), d, k, eps, seed=0)
    stmt = tree_statement(tree)
    out = [("tree round", *central_guarantee(tree.round_event)), ("tree statement", stmt["central_epsilon"],
                                                                  stmt["delta"])]
    if share:
        ref = derive_local_refine("parent", parent_centers(k, d), BOUND, eps, seed=0)
        family = local_refine_statement(ref, stmt)
        out.append(("local refine family", family["central_epsilon"], family["delta"]))
    return out


def secure_sum_inside(what: str, params: Any) -> Part:
    """The delta a secure sum's clip and sigma really spend, against its stated delta."""
    return (f"{what}: delta its noise spends", 0.0, params.delta_used, 0.0, params.delta)


def shuffle_cell(n: int, d: int, k: int, eps: float, delta: float, refine: str) -> list[Part]:
    """``shoal simulate --model shuffle`` (``simulate_rounds``): the split, then a
    tree or partition first round and a refine round (a partition stage: its
    chain, ``plan_refine_chain``), composed as simulate prints it and as the
    service's family statement composes it."""
    law = DEFAULT_LAW
    r = 0.0 if refine == "none" else refine_epsilon("auto" if refine == "auto" else EXPLICIT_SHARE * eps,
                                                    shape(n, d), k, eps, delta, None)
    (tree_eps, tree_delta), (ref_eps, ref_delta) = round_budget(eps, delta, r)
    out: list[Part] = []
    refines = [(ref_eps, ref_delta, law, 1)]
    if first_round(n, d, k, tree_delta, n) == "partition":
        # ``partition_in_process`` at ``plan_partition_stage``'s budgets: a one-bit mean round, then the
        # partition round through its mean (and the refine chain below), composed in zCDP or by basic composition
        plan = (plan_refine_chain(eps, (tree_eps, tree_delta), (ref_eps, ref_delta), d, k, n, n, max(n, 100 * n)) if r
                else plan_partition_stage(eps, (tree_eps, tree_delta), None, d, n, max(n, 100 * n)))
        m, p = plan.mean, plan.partition
        mean = derive_partition(n, d, k, m.epsilon, m.delta, BOUND, min_devices=n, max_devices=max(n, 100 * n),
                                bits=1, law=m.law)
        part = derive_partition(n, d, k, p.epsilon, p.delta, BOUND, min_devices=n, max_devices=max(n, 100 * n),
                                center=np.full(d, 0.1 / np.sqrt(d)), law=p.law)
        stmt, events = partition_statement(part, mean), [mean.event, part.event]
        refines = [(b.epsilon, b.delta, b.law, REFINE_SPLIT if i == 0 else 1) for i, b in enumerate(plan.refines)]
        out.append(secure_sum_inside("mean round", mean.secure_sum))
        out.append(secure_sum_inside("partition round", part.secure_sum))
    else:
        tree = derive_config(n, d, k, tree_eps, model="shuffle", delta=tree_delta, min_batch=n, seed=0)
        stmt, events = tree_statement(tree), [tree.round_event]
    out.append(("first round statement", stmt["central_epsilon"], stmt["delta"]))
    if not r:
        return out
    refs = [derive_refine("parent", parent_centers(k, d), BOUND, e, dl, n, max_devices=max(n, 100 * n), split=split,
                          law=lw) for e, dl, lw, split in refines]
    for i, ref in enumerate(refs):
        out.append(secure_sum_inside(f"refine round {i + 1} of {len(refs)}", ref.secure_sum))
    family = central_guarantee(RoundsEvent((*events, *(ref.event for ref in refs))))
    if len(events) == 2:  # ``simulate_rounds``: the stage's rounds as one RoundsEvent
        out.append(("simulate's composed", *family))
    else:
        e2, d2 = central_guarantee(refs[0].event)
        out.append(("simulate's composed", stmt["central_epsilon"] + e2, stmt["delta"] + d2))
    out.append(("family (RoundsEvent)", *family))
    return out


def central_cell(n: int, d: int, k: int, eps: float, delta: float, refine: str,
                 algorithm: str) -> list[Part]:
    """The central model: the service's ``derive_central_round`` (n public);
    "auto": ``deploy.notebook.central.fit`` without n_expected (a census of n first);
    "explicit": three lift steps."""
    if refine == "auto":
        t, s = laplace_scale_fraction(1, CENSUS_SHARE * eps)  # deploy.notebook.central.fit's census
        spec = derive_central(algorithm, n, d, k, eps, delta, seed=0, census_epsilon=s / t)
    else:
        spec = derive_central_round(n, d, k, eps, delta, BOUND, algorithm=algorithm,
                                    lift_steps=3 if refine == "explicit" else None).spec
    stmt = curator_statement(spec)
    out = [("curator event", *curator_guarantee(spec.event())), ("curator statement", stmt["central_epsilon"],
                                                                 stmt["delta"])]
    event = spec.event()
    for e, dl in zip(event.lift_epsilons, event.lift_deltas, strict=True):
        # the pipeline calibrates one noise spec for all the lift's steps (``pipeline.central_kmeans``)
        noise = calibrate(spec.dim, e, dl, releases=event.lift_steps)
        out.append(("lift: delta its noise spends over its steps", 0.0, spent_delta(noise), 0.0, dl))
    return out


CENTRAL_ALGORITHMS = ("auto", "maxcover-000", "maxcover-003", "gridhist", "greedy-001", "lsh-partition")


def cells(model: str, refine: str) -> Iterator[tuple[tuple[Any, ...], Callable[[], list[Part]]]]:
    i = 0
    for n in NS:
        for d in DS:
            for k in KS:
                for eps in EPSILONS:
                    for delta in DELTAS[:1] if model == "local" else DELTAS:  # no delta in the local model
                        if model == "local":
                            yield (n, d, k, eps, delta), lambda a=(n, d, k, eps, delta): local_cell(*a, refine)
                        elif model == "shuffle":
                            yield (n, d, k, eps, delta), lambda a=(n, d, k, eps, delta): shuffle_cell(*a, refine)
                        else:
                            # every algorithm's split in turn (each cell one: the whole grid stays fast)
                            alg = CENTRAL_ALGORITHMS[i % len(CENTRAL_ALGORITHMS)]
                            if alg == "maxcover-003" and d > 8 and refine != "explicit":
                                alg = "auto"
                            i += 1
                            yield ((n, d, k, eps, delta, alg),
                                   lambda a=(n, d, k, eps, delta), alg=alg: central_cell(*a, refine, alg))


@pytest.mark.parametrize("refine", REFINES)
@pytest.mark.parametrize("model", ("local", "shuffle", "central"))
def test_composed_spend_never_exceeds_the_request(model: str, refine: str) -> None:
    start = time.perf_counter()
    over: list[str] = []
    derived = refused = 0
    for cell, run in cells(model, refine):
        eps, delta = cell[3], cell[4]
        try:
            parts = run()
        except ConfigError:
            refused += 1
            continue
        derived += 1
        for what, e, dl, *cap in parts:
            cap_eps, cap_delta = cap or (eps, delta if model != "local" else 0.0)
            if not (e <= cap_eps and dl <= cap_delta):
                over.append(f"{cell}: {what} ({e!r}, {dl!r}) > ({cap_eps!r}, {cap_delta!r})")
    seconds = time.perf_counter() - start
    print(f"{model}/{refine}: {derived} cells derived, {refused} refused, {len(over)} over, {seconds:.1f} s")
    assert derived >= 0.9 * (derived + refused), f"{refused} of {derived + refused} cells refused"
    assert not over, f"{len(over)} spends above the request:\n" + "\n".join(over[:40])


@pytest.mark.parametrize("n", NS)
def test_an_elbow_round_and_its_tree_stay_within_the_total(n: int) -> None:
    """``elbow_budget`` (``shoal bench --greedy --model shuffle``): a greedy tree
    round and an elbow round on its ordered centers, composed as the service's
    family statement does."""
    over = []
    for eps in EPSILONS:
        for delta in DELTAS:
            (tree_eps, tree_delta), (el_eps, el_delta) = elbow_budget(eps, delta)
            tree = derive_config(n, 10, 8, tree_eps, model="shuffle", delta=tree_delta, min_batch=n, seed=0,
                                 encoder="nettree")
            elbow = derive_elbow("parent", parent_centers(8, 10), BOUND, "kmeans", el_eps, el_delta, n)
            e, dl = central_guarantee(RoundsEvent((tree.round_event, elbow.event)))
            if not (e <= eps and dl <= delta and elbow.secure_sum.delta_used <= el_delta):
                over.append(f"n={n} eps={eps!r} delta={delta!r}: ({e!r}, {dl!r}), elbow's noise "
                            f"{elbow.secure_sum.delta_used!r} of {el_delta!r}")
    assert not over, "\n".join(over)
